"""Does a test file kill these mutants?  A quick check while writing mutation tests.

mutmut's verdicts (``mutmut run``) are the score; this script answers the question a person
writing a test asks, without mutmut's stats run: it activates each named mutant of an
existing ``mutants/`` directory (mutmut's trampoline reads ``MUTANT_UNDER_TEST``) and runs
the given test files against it, one forked pytest per mutant::

    python benchmarks/mutmut_try.py audit.gate.check.x_compare --tests tests/test_mutants_gate_check.py
    python benchmarks/mutmut_try.py NAME NAME --mutants /path/to/mutants --tests tests/test_x.py

A name that is not a whole mutant name is a prefix: it stands for every mutant starting with
it that mutmut's last run did not kill: survived, no tests, timeout (a mutant no test
covers, or one whose tests ran past mutmut's limit, proves nothing either), ``--every`` for
all of them, killed or not.  The
test files are read from where they are (your working tree); the code under test is the
mutated copy in ``mutants/``.  Prints one line per mutant and the ones left alive; exits 1
if any is.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutmut_score import KILLED, ROOT, Sources, load_results  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="+", help="mutant names or prefixes")
    ap.add_argument("--tests", nargs="+", required=True, help="test files (or node ids) to run")
    ap.add_argument("--mutants", type=Path, default=ROOT / "mutants")
    ap.add_argument("--every", action="store_true", help="prefixes stand for every mutant, not the survivors")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per mutant")
    ap.add_argument("--diff", action="store_true", help="print the diff of each mutant left alive")
    ap.add_argument("-v", action="store_true", help="show pytest's output")
    a = ap.parse_args(argv)
    mutants = a.mutants.resolve()
    results = load_results(mutants)
    names: list[str] = []
    for n in a.names:
        if n in results:
            names.append(n)
        else:
            hits = [k for k, s in sorted(results.items()) if k.startswith(n) and (a.every or s not in KILLED)]
            if not hits:
                print(f"no mutant matches {n!r}", file=sys.stderr)
            names += hits
    if not names:
        return 2
    tests = [str(Path(t).resolve()) if "::" not in t else t for t in a.tests]
    # the mutated copy is what `import audit` finds, here and in every subprocess a test starts
    sys.path.insert(0, str(mutants))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(mutants), *filter(None, [os.environ.get("PYTHONPATH")])])
    os.environ.pop("MUTANT_UNDER_TEST", None)
    # no third-party pytest plugins (xdist, benchmark, ...): three times faster per mutant
    os.environ.setdefault("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    # a mutated module is large (blocks.py: 10 MB): compiled once into a cache of our own
    # (never into mutants/), not again in every forked pytest and every subprocess a test starts
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False
    os.environ.setdefault(
        "PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / "actaudit-mutmut-try-pycache")
    )
    sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"]
    import pytest

    import audit  # noqa: F401  (loaded once, before forking)

    assert Path(audit.__file__).resolve().is_relative_to(mutants), audit.__file__
    alive = []
    for name in names:
        pid = os.fork()
        if pid == 0:
            os.environ["MUTANT_UNDER_TEST"] = name
            if not a.v:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
            signal.alarm(a.timeout)
            # (--tb=no: a failure's traceback would make pytest parse the mutated module again)
            rc = pytest.main([*tests, "-x", "-q", "--tb=no", "-p", "no:cacheprovider", "-o", "addopts="])
            os._exit(int(rc))
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            verdict = "timeout" if os.WTERMSIG(status) == signal.SIGALRM else f"signal {os.WTERMSIG(status)}"
        else:
            rc = os.WEXITSTATUS(status)
            verdict = {0: "survived", 1: "killed", 5: "no tests ran"}.get(rc, f"error (pytest exit {rc})")
        print(f"{verdict:10} {name}", flush=True)
        if verdict != "killed":
            alive.append(name)
    print(f"\n{len(names) - len(alive)} of {len(names)} killed")
    if alive:
        sources = Sources(mutants)
        for name in alive:
            print(f"alive: {name}")
            if a.diff:
                print("\n".join(sources.diff(name)))
    return 1 if alive else 0


if __name__ == "__main__":
    sys.exit(main())
