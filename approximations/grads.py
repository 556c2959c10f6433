"""Derivatives as frameworks' backward kernels compute them.

Family ``NAME_grad`` holds the derivative candidates of family ``NAME``;
``actaudit sweep gelu.tanh --grad`` sweeps ``gelu_grad.tanh``.
"""

import math

from audit.targets.candidates import candidate

from .primitives import SQRT_2_OVER_PI, SQRT_HALF

INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@candidate(
    "gelu_grad.erf",
    reference="gelu_grad",
    formula="0.5 (1 + erf(x * RN(1/sqrt(2)))) + x (exp(-0.5 x^2) RN(1/sqrt(2 pi)))",
    source="PyTorch ATen GeluBackward (approximate='none')",
)
def gelu_grad_erf(x, m):
    cdf = 0.5 * (1.0 + m.erf(x * SQRT_HALF))
    pdf = m.exp(-0.5 * (x * x)) * INV_SQRT_2PI
    return cdf + x * pdf


@candidate(
    "gelu_grad.tanh",
    reference="gelu_grad",
    formula="0.5 (1 + t) + 0.5 x (1 - t^2) (k (1 + RN(3 * 0.044715) x^2)), "
    "t = tanh(k (x + 0.044715 x^3)), k = RN(sqrt(2/pi))",
    source="PyTorch ATen GeluBackward (approximate='tanh'); x^3 overflows in fp16 for "
    "|x| > 40.3, then inf * 0 = NaN",
)
def gelu_grad_tanh(x, m):
    x_sq = x * x
    t = m.tanh(SQRT_2_OVER_PI * (x + 0.044715 * (x_sq * x)))
    left = 0.5 * x
    right_derivative = left * (1.0 - t * t) * (SQRT_2_OVER_PI * (1.0 + 3.0 * 0.044715 * x_sq))
    return 0.5 * (1.0 + t) + right_derivative


@candidate(
    "sigmoid_grad.s1ms",
    reference="sigmoid_grad",
    formula="s (1 - s), s = 1 / (1 + exp(-x))",
    source="PyTorch ATen sigmoid_backward: grad * (1 - y) * y; cancels for x > 0",
)
def sigmoid_grad_s1ms(x, m):
    s = 1.0 / (1.0 + m.exp(-x))
    return s * (1.0 - s)


@candidate(
    "tanh_grad.one_minus_t2",
    reference="tanh_grad",
    formula="1 - t^2, t = tanh(x)",
    source="PyTorch ATen tanh_backward: grad * (1 - y^2)",
)
def tanh_grad_one_minus_t2(x, m):
    t = m.tanh(x)
    return 1.0 - t * t


@candidate(
    "silu_grad.torch",
    reference="silu_grad",
    formula="s (1 + x (1 - s)), s = 1 / (1 + exp(-x))",
    source="PyTorch ATen silu_backward",
)
def silu_grad_torch(x, m):
    s = 1.0 / (1.0 + m.exp(-x))
    return s * (1.0 + x * (1.0 - s))


@candidate(
    "softplus_grad.torch",
    reference="softplus_grad",
    formula="beta x > threshold ? 1 : z / (z + 1), z = exp(beta x)",
    source="PyTorch ATen softplus_backward; z = inf gives inf/inf = NaN below the threshold in fp16",
    beta=1.0,
    threshold=20.0,
)
def softplus_grad_torch(x, m, beta, threshold):
    bx = beta * x
    z = m.exp(bx)
    return m.where(bx > threshold, 1.0, z / (z + 1.0))


@candidate(
    "mish_grad.torch",
    reference="mish_grad",
    formula="t + x s (1 - t^2), t = tanh(log1p(exp(x))), s = 1 / (1 + exp(-x))",
    source="PyTorch ATen mish_backward",
)
def mish_grad_torch(x, m):
    s = 1.0 / (1.0 + m.exp(-x))
    t = m.tanh(m.log1p(m.exp(x)))
    return t + x * s * (1.0 - t * t)


@candidate(
    "elu_grad.torch",
    reference="elu_grad",
    formula="x > 0 ? 1 : alpha exp(x)",
    source="PyTorch ATen elu_backward (input form)",
    alpha=1.0,
)
def elu_grad_torch(x, m, alpha):
    return m.where(x > 0, 1.0, alpha * m.exp(x))
