"""The options and arguments that several commands take, each declared once.

Each name below is a factory: a call gives a fresh Typer parameter with the option's names,
its usual default and help, either of which a command may give instead (``dtype()``, or
``dtype(default="fp32", help="Storage format(s).")``).  Options of one command only are
declared in that command's module.
"""

from __future__ import annotations

import math
from typing import Any

import typer

from audit.errors import BadOptionError

SEM_HELP = (
    "Machine semantics: flags joined by commas (ftz,daz,contract,saturate,round=rtz,"
    "exp=exp.u20,div=rcp,exp=bound:2, ...) or a profile (ieee, ascend_sat, cuda_fast, "
    "bf16_trunc); repeat the option to compare semantics side by side."
)


def _option(*names: str, default: Any = None, help: str = ""):
    """A factory of the option NAMES (a list default is copied for each command)."""

    def make(default: Any = default, help: str = help) -> Any:
        return typer.Option(list(default) if isinstance(default, list) else default, *names, help=help)

    return make


def _argument(default: Any = ..., help: str = ""):
    """A factory of an argument (its name: the command's parameter)."""

    def make(default: Any = default, help: str = help) -> Any:
        return typer.Argument(default, help=help)

    return make


# what to audit
targets = _argument(default=None)
reference_arg = _argument(help="Reference function (gelu, sigmoid, ...).")
dtype = _option("--dtype", "-d", default="fp16", help="Storage format(s): fp16,bf16,...")
compute = _option("--compute", "-c", help="Compute format (default: the storage format).")
out_dtype = _option("--out-dtype")
param = _option("--param", "-p", default=[])
semantics = _option("--semantics", default=[], help=SEM_HELP)
reference = _option("--reference", help="Reference of a callable or a dump (e.g. gelu).")
device = _option("--device", default="cpu", help="Device of torch: ops (cpu, cuda).")
dump = _option("--dump", help="Outputs dumped from a device (.npz, .npy, .csv or raw binary).")
dump_dtype = _option("--dump-dtype", help="Dtype of a raw binary dump (default: --dtype).")
grad = _option("--grad", default=False)
backward = _option("--backward", default=False)

# which inputs
range_ = _option("--range", "-r", help="Restrict inputs to LO:HI.")
samples = _option("--samples", help="Sample size for fp32 / fp64.")
seed = _option("--seed", default=0, help="Seed of the fp32 / fp64 sample.")
exhaustive = _option("--exhaustive", default=False)
grid = _option("--grid")
distribution = _option("--distribution")
BLOCKS, ELEMENTS, SCALE_RULE = "normal:std=1", 1 << 16, "ocp"  # block-scaled outputs' defaults
blocks = _option("--blocks", default=BLOCKS)
elements = _option(
    "--elements", default=ELEMENTS, help="Block-scaled outputs: number of seeded input elements."
)
scale_rule = _option("--scale-rule", default=SCALE_RULE)

# tolerances
max_ulp = _option("--max-ulp")
atol = _option("--atol")

# what to write
json_out = _option("--json", help="Write the JSON document to PATH, or '-' for stdout.")
json_flag = _option("--json", default=False)
report_dir = _option("--report")
out = _option("--out", "-o", default=...)
spec = _option("--spec", help="Audit spec (default: actaudit.toml or [tool.actaudit] in pyproject.toml).")


def tolerance(v, name):
    """A tolerance option's value: None, or a finite number >= 0."""
    if v is not None and not (math.isfinite(v) and v >= 0):
        raise BadOptionError(f"{name} must be a finite number >= 0, got {v}")
    return v


def positive(v, name):
    """A positive, finite number."""
    if not (v > 0 and math.isfinite(v)):
        raise BadOptionError(f"{name} must be a positive number, got {v}")
    return v


def known_params(name: str, ref, params: dict) -> dict:
    """PARAMS, refused where the reference NAME has no such parameter (lut, golden)."""
    for k in params:
        if k not in ref.params:
            raise BadOptionError(
                f"{name} has no parameter '{k}' (parameters: {', '.join(ref.params) or 'none'})"
            )
    return params
