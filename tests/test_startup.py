"""Start-up of the command line: what `import audit.cli` loads (speed: benchmarks/)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_cli_import_skips_heavy_modules_and_leaves_numpy_intact():
    code = (
        "import sys, audit.cli, numpy\n"
        "heavy = [m for m in ('numpy.f2py', 'numpy.testing', 'numpy.ma', 'numpy.random', 'pandas', 'matplotlib')"
        " if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "assert 'scipy.special' in sys.modules\n"
        # numpy's namespace is as before: the lazy submodules are listed and import on use
        "assert {'f2py', 'testing', 'ma'} <= set(dir(numpy)) and 'testing' in numpy.__all__\n"
        "import numpy.testing, numpy.ma\n"
        "import scipy.special as sc, math\n"
        # scipy's own erf, against the C library's at a few points (both within 1 ulp of erf)
        "for x in (0.1, 0.5, 1.0, 2.5):\n"
        "    assert abs(sc.erf(x) - math.erf(x)) <= 2 * math.ulp(math.erf(x))\n"
        "print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": ROOT}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr
