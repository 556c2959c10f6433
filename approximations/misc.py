"""logsigmoid, softsign and erf."""

from audit.targets.candidates import candidate

from .primitives import erf_as, erf_rational


@candidate(
    "logsigmoid.stable",
    reference="logsigmoid",
    formula="min(x, 0) - log1p(exp(-|x|))",
    source="torch.nn.functional.logsigmoid (ATen log_sigmoid forward)",
)
def logsigmoid_stable(x, m):
    return m.minimum(x, 0.0) - m.log1p(m.exp(-m.abs(x)))


@candidate(
    "logsigmoid.naive",
    reference="logsigmoid",
    formula="log(1 / (1 + exp(-x)))",
    source="definition as written: log of a sigmoid that underflows to 0 gives -inf",
)
def logsigmoid_naive(x, m):
    return m.log(1.0 / (1.0 + m.exp(-x)))


@candidate(
    "softsign.div",
    reference="softsign",
    formula="x / (1 + |x|)",
    source="Turian et al. 2009; torch.nn.functional.softsign",
)
def softsign_div(x, m):
    return x / (1.0 + m.abs(x))


@candidate(
    "erf.libm",
    reference="erf",
    formula="erf(x) (correctly rounded in the compute format)",
    source="C99 erff: the baseline",
)
def erf_libm(x, m):
    return m.erf(x)


@candidate(
    "erf.as",
    reference="erf",
    formula="1 - (a1 t + ... + a5 t^5) e^{-x^2}, t = 1/(1 + p|x|)",
    source="Abramowitz & Stegun 7.1.26; PyTorch ATen Vectorized<float>::erf",
)
def erf_as_(x, m):
    return erf_as(x, m)


@candidate(
    "erf.rational",
    reference="erf",
    formula="x P(x^2) / Q(x^2), x clamped to [-4, 4]",
    source="Eigen generic_fast_erf_float; XLA f32 erf",
)
def erf_rational_(x, m):
    return erf_rational(x, m)
