"""softplus(x) = log(1 + exp(beta x)) / beta (Dugas et al. 2001)."""

from audit.targets.candidates import candidate


@candidate(
    "softplus.naive",
    reference="softplus",
    formula="log(1 + exp(x))",
    source="definition; exp overflows to inf from x = 11.09375 in fp16",
)
def softplus_naive(x, m):
    return m.log(1.0 + m.exp(x))


@candidate(
    "softplus.log1p",
    reference="softplus",
    formula="log1p(exp(x))",
    source="definition with log1p: accurate in the negative tail, still overflows",
)
def softplus_log1p(x, m):
    return m.log1p(m.exp(x))


@candidate(
    "softplus.torch",
    reference="softplus",
    formula="beta x > threshold ? x : log1p(exp(beta x)) / beta",
    source="torch.nn.functional.softplus (beta=1, threshold=20)",
    beta=1.0,
    threshold=20.0,
)
def softplus_torch(x, m, beta, threshold):
    bx = beta * x
    return m.where(bx > threshold, x, m.log1p(m.exp(bx)) / beta)


@candidate(
    "softplus.stable",
    reference="softplus",
    formula="max(x, 0) + log1p(exp(-|x|))",
    source="the overflow-free identity (e.g. TensorFlow, JAX nn.softplus)",
)
def softplus_stable(x, m):
    return m.maximum(x, 0.0) + m.log1p(m.exp(-m.abs(x)))


@candidate(
    "softplus.cann",
    reference="softplus",
    formula="beta x <= threshold ? log(1 + exp(beta x)) / beta : x",
    source="Huawei CANN aclnnSoftplus documentation (computing formula)",
    beta=1.0,
    threshold=20.0,
)
def softplus_cann(x, m, beta, threshold):
    bx = beta * x
    return m.where(bx <= threshold, m.log(1.0 + m.exp(bx)) / beta, x)
