"""Backward kernels: dx = dy * f'(x) from the two stored tensors (x or y = f(x), and dy).

Family ``NAME_bwd`` approximates the bivariate reference ``NAME_bwd(x, dy) = dy f'(x)``
(:mod:`audit.oracle.backward`); ``actaudit sweep gelu.tanh --backward`` sweeps
``gelu_bwd.tanh`` over pairs (x, dy).  Each formula is PyTorch's, operation for
operation (the order of the products matters: (dy s)(1 + x (1 - s)) rounds differently
from dy (s (1 + x (1 - s)))).  PyTorch computes these in float32 for fp16 and bf16
tensors (``opmath_t``): audit that path with ``--compute fp32``.  Multiplications by the
exact constant 1 (ELU's scale and input_scale at their defaults) are left out.

``m.store(v)`` is a tensor saved in the storage format: the forward output y that
tanh_backward, sigmoid_backward and ELU's is_result path read instead of x.
"""

import math

import audit.oracle.backward  # noqa: F401  (registers the NAME_bwd references)
from audit.targets.candidates import candidate

ATEN = "PyTorch aten/src/ATen/native/cpu/"
K_BETA = math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5  # M_SQRT2 * M_2_SQRTPI * 0.5
K_ALPHA = (2.0 / math.sqrt(math.pi)) * math.sqrt(0.5) * 0.5  # M_2_SQRTPI * M_SQRT1_2 * 0.5


@candidate(
    "gelu_bwd.erf",
    reference="gelu_bwd",
    formula="dy (cdf + x pdf), cdf = 0.5 (1 + erf(x * RN(1/sqrt(2)))), pdf = kAlpha exp(x^2 * -0.5), kAlpha = RN(1/sqrt(2 pi))",
    source=ATEN + "Activation.cpp GeluBackwardKernelImpl (approximate='none')",
)
def gelu_bwd_erf(x, dy, m):
    cdf = 0.5 * (1.0 + m.erf(x * math.sqrt(0.5)))
    pdf = K_ALPHA * m.exp((x * x) * -0.5)
    return dy * (cdf + x * pdf)


@candidate(
    "gelu_bwd.tanh",
    reference="gelu_bwd",
    formula="dy (0.5 (1 + t) + 0.5 x (1 - t^2) (kBeta (1 + 3 * kKappa x^2))), t = tanh(kBeta (x + kKappa x^3)), kBeta = RN(sqrt(2/pi)), kKappa = 0.044715",
    source=ATEN + "Activation.cpp GeluBackwardKernelImpl (approximate='tanh'); x^3 "
    "overflows in fp16 for |x| > 40.3, then inf * 0 = NaN",
)
def gelu_bwd_tanh(x, dy, m):
    x_sq = x * x
    x_cube = x_sq * x
    inner = K_BETA * (x + 0.044715 * x_cube)
    tanh_inner = m.tanh(inner)
    left = 0.5 * x
    right = 1.0 + tanh_inner
    left_derivative = 0.5 * right
    tanh_derivative = 1.0 - tanh_inner * tanh_inner
    inner_derivative = K_BETA * (1.0 + (m.const(3.0) * 0.044715) * x_sq)
    right_derivative = left * tanh_derivative * inner_derivative
    return dy * (left_derivative + right_derivative)


@candidate(
    "tanh_bwd.from_output",
    reference="tanh_bwd",
    formula="dy (1 - y y), y = store(tanh(x))",
    source=ATEN + "BinaryOpsKernel.cpp tanh_backward_kernel: a * (1 - b * b), b the "
    "saved output; 1 - y^2 cancels once y is rounded near +-1",
)
def tanh_bwd_from_output(x, dy, m):
    y = m.store(m.tanh(x))
    return dy * (1.0 - y * y)


@candidate(
    "sigmoid_bwd.from_output",
    reference="sigmoid_bwd",
    formula="dy (1 - y) y, y = store(1 / (1 + exp(-x)))",
    source=ATEN + "BinaryOpsKernel.cpp sigmoid_backward_kernel: a * (1 - b) * b, b the "
    "saved output; 1 - y is 0 once y rounds to 1",
)
def sigmoid_bwd_from_output(x, dy, m):
    y = m.store(1.0 / (1.0 + m.exp(-x)))
    return dy * (1.0 - y) * y


@candidate(
    "silu_bwd.torch",
    reference="silu_bwd",
    formula="dy * s * (1 + x (1 - s)), s = 1 / (1 + exp(-x))",
    source=ATEN + "Activation.cpp silu_backward_kernel",
)
def silu_bwd_torch(x, dy, m):
    s = 1.0 / (1.0 + m.exp(-x))
    return dy * s * (1.0 + x * (1.0 - s))


@candidate(
    "softplus_bwd.torch",
    reference="softplus_bwd",
    formula="beta x > threshold ? dy : dy * z / (z + 1), z = exp(beta x)",
    source=ATEN + "Activation.cpp softplus_backward_kernel; z = inf gives inf / inf = NaN "
    "below the threshold in fp16",
    beta=1.0,
    threshold=20.0,
)
def softplus_bwd_torch(x, dy, m, beta, threshold):
    bx = x * beta
    z = m.exp(bx)
    return m.where(bx > threshold, dy, dy * z / (z + 1.0))


@candidate(
    "mish_bwd.torch",
    reference="mish_bwd",
    formula="dy (t + x s (1 - t^2)), t = tanh(log1p(exp(x))), s = 1 / (1 + exp(-x))",
    source=ATEN + "Activation.cpp mish_backward_kernel",
)
def mish_bwd_torch(x, dy, m):
    s = 1.0 / (1.0 + m.exp(-x))
    t = m.tanh(m.log1p(m.exp(x)))
    return dy * (t + x * s * (1.0 - t * t))


@candidate(
    "elu_bwd.torch",
    reference="elu_bwd",
    formula="x <= 0 ? dy * alpha * exp(x) : dy",
    source=ATEN + "Activation.cpp elu_backward_kernel (is_result=false: from the input)",
    alpha=1.0,
)
def elu_bwd_torch(x, dy, m, alpha):
    return m.where(x <= 0, dy * alpha * m.exp(x), dy)


@candidate(
    "elu_bwd.from_output",
    reference="elu_bwd",
    formula="y <= 0 ? dy (y + alpha) : dy, y = store(x > 0 ? x : alpha expm1(x))",
    source=ATEN + "Activation.cpp elu_backward_kernel (is_result=true, as for "
    "inplace ELU): y + alpha cancels once y rounds to -alpha: a dead gradient",
    alpha=1.0,
)
def elu_bwd_from_output(x, dy, m, alpha):
    y = m.store(m.where(x > 0, x, alpha * m.expm1(x)))
    return m.where(y <= 0, dy * (y + alpha), dy)
