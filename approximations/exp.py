"""exp approximations used inside sigmoid, SiLU and softmax kernels."""

from audit.targets.candidates import candidate

from .primitives import cephes_exp, exp_u20, schraudolph_exp


@candidate(
    "exp.libm",
    reference="exp",
    formula="exp(x) (a correctly rounded exp in the compute format)",
    source="C99 expf / CUDA expf: the baseline the fast forms are measured against",
)
def exp_libm(x, m):
    return m.exp(x)


@candidate(
    "exp.schraudolph",
    reference="exp",
    formula="bits_as_float32(int(12102203 x + 1064866805))",
    source="Schraudolph 1999, 'A Fast, Compact Approximation of the Exponential "
    "Function', Neural Computation 11(4), float32 form",
    compute="fp32",
)
def exp_schraudolph(x, m):
    return schraudolph_exp(x, m)


@candidate(
    "exp.cephes",
    reference="exp",
    formula="clamp +-88.376; n = floor(x log2e + 1/2); 2^n (1 + r + r^2 P5(r))",
    source="Cephes expf (S. L. Moshier) polynomial with the clamp of sse_mathfun.h (J. Pommier)",
)
def exp_cephes(x, m):
    return cephes_exp(x, m)


@candidate(
    "exp.u20",
    reference="exp",
    formula="n = floor(x log2e + 1/2); r = x - n ln2; 2^(n-1) * 2 * P5(r) (fused); 0 below ln FLT_MIN",
    source="PyTorch ATen Vectorized<float>::exp_u20 (ported from oneDNN), 20 ULP claim",
    compute="fp32",
)
def exp_u20_(x, m):
    return exp_u20(x, m)
