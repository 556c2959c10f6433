"""tanh.xla and erf.xla are bit-identical to what jax compiles on this CPU (XLA's f32 tanh and
erf), at every bf16 and fp16 input (as float32) and on float32 ranges through the branch
points, clamps, subnormals and tails; jax is called directly here."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.special as jss
import numpy as np
import pytest

from audit.numbers.formats import get_format
from audit.targets.candidates import catalog
from audit.targets.compute import evaluate

F32 = get_format("fp32")


def f32_run(a: float, n: int) -> np.ndarray:
    """n consecutive float32 values from a (upwards), and their negatives."""
    start = np.float32(a).view(np.uint32)
    up = (start + np.arange(n, dtype=np.uint32)).view(np.float32)
    return np.concatenate([up, -up])


def inputs() -> dict:
    bf16 = (np.arange(65536, dtype=np.uint32) << 16).view(np.float32)
    fp16 = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    specials = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan])
    return {"bf16": bf16, "fp16": fp16, "specials": specials}


RANGES = {
    # around each branch point and clamp, 2^16 consecutive floats on each side, both signs
    "tanh.xla": [(0.0004, -(2**15)), (7.99881172180175781, -(2**15)), (9.0, -(2**12)), (2.0**-126, -(2**15))],
    "erf.xla": [(3.832506856900711, -(2**15)), (2.0**-126, -(2**15)), (1e-30, 2**14), (1.0, 2**15)],
}


def same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))


@pytest.mark.parametrize("cid,fn", [("tanh.xla", jnp.tanh), ("erf.xla", jss.erf)])
def test_bit_identical_to_jax(cid, fn):
    assert jax.devices()[0].platform == "cpu"
    cand = catalog()[cid]
    cases = dict(inputs())
    for i, (a, n) in enumerate(RANGES[cid]):
        lo = int(np.float32(a).view(np.uint32)) + min(n, 0)
        cases[f"range{i}"] = f32_run(np.uint32(lo).view(np.float32), abs(n) * 2)
    jitted = jax.jit(fn)
    for name, x in cases.items():
        got = evaluate(cand.fn, x.astype(np.float64), F32, F32, {}).astype(np.float32)
        want = np.asarray(jitted(x))
        ok = same_bits(got, want)
        assert ok.all(), (cid, name, x[~ok][:4], got[~ok][:4], want[~ok][:4])


def test_the_branches_are_exercised():
    """The ranges above really cross the branch points (a model without the small-x branch,
    the clamp or DAZ would differ there): XLA returns x itself below 0.0004, 1 at the clamp,
    and +-0 for subnormal erf inputs."""
    tiny = np.float32([1e-40, -1e-40, 3.99e-4])
    t = np.asarray(jax.jit(jnp.tanh)(tiny))
    assert t.view(np.uint32).tolist() == tiny.view(np.uint32).tolist()
    e = np.asarray(jax.jit(jss.erf)(np.float32([1e-40, -1e-40, 3.9, -3.9])))
    assert e.tolist() == [0.0, -0.0, 1.0, -1.0] and np.signbit(e[1])
    assert np.asarray(jax.jit(jnp.tanh)(np.float32(8.0))) == 1.0
