"""Start-up of the command line: what `import audit.cli` and the commands that compute nothing
load (speed: benchmarks/bench_first_command.py)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAVY = ("ml_dtypes", "scipy", "pandas", "matplotlib")


def _loaded(code: str, names: tuple = (*HEAVY, "numpy", "mpmath")) -> list[str]:
    """The modules of ``names`` (HEAVY, numpy, mpmath) that a fresh interpreter running CODE loaded."""
    probe = f"{code}\nimport sys\nprint(' '.join(m for m in {names!r} if m in sys.modules))\n"
    env = {**os.environ, "PYTHONPATH": ROOT, "COLUMNS": "80"}
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()[-1].split()


def test_cli_import_loads_no_numerical_library():
    # every command module registered (audit.cli imports them all), nothing numerical
    assert _loaded("import audit.cli\nassert len(audit.cli.app.registered_commands) > 10") == []


def _main(argv: list[str]) -> str:
    return (
        "import contextlib, io\nfrom audit.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        f"    assert main({argv!r}) in (0, 2)\n"
    )


def test_version_help_and_usage_errors_load_no_numerical_library():
    usage = (["nope"], ["sweep", "gelu", "--dtype"], ["sweep", "--bogus"])
    for argv in (["--version"], ["--help"], ["sweep", "--help"], ["report", "--help"], *usage):
        assert _loaded(_main(argv)) == [], argv


def test_errors_the_api_finds_load_no_scipy_nor_ml_dtypes():
    for argv in (["sweep"], ["sweep", "gelu", "--dtype", "nope"], ["sweep", "nope.nope"]):
        loaded = _loaded(_main(argv))
        assert not set(loaded) & set(HEAVY), (argv, loaded)


def test_fp16_sweep_imports_no_ml_dtypes_and_bf16_neither():
    # the first command rounds by itself: numpy's float16 and integer views, no ml_dtypes
    for dtype in ("fp16", "bf16"):
        code = (
            "import audit\n"
            f"r = audit.sweep(['gelu.tanh'], {dtype!r}, {dtype!r})\n"
            "assert r[0].summary.count > 60000, r[0].summary.count\n"
        )
        loaded = _loaded(code)
        assert "ml_dtypes" not in loaded and "pandas" not in loaded and "matplotlib" not in loaded, loaded


def test_numpy_namespace_intact_after_scipy_special():
    # a name outside the lean set imports the whole scipy.special, numpy's heavy submodules
    # hidden meanwhile: numpy's namespace is as it was before, those submodules are not
    # loaded, and they import on use
    code = (
        "import sys, math, numpy\n"
        "before = (sorted(dir(numpy)), list(numpy.__all__))\n"
        "hidden = [f'numpy.{n}' for n in ('f2py', 'testing', 'ma') if f'numpy.{n}' not in sys.modules]\n"
        "from audit.numbers.special import sc\n"
        "assert sc.log_ndtr(0.0) == -math.log(2)\n"
        "assert 'scipy.special' in sys.modules\n"
        "assert (sorted(dir(numpy)), list(numpy.__all__)) == before\n"
        "assert hidden and not [m for m in hidden if m in sys.modules], hidden\n"
        "import numpy.testing, numpy.ma\n"
    )
    assert "scipy" in _loaded(code)


def test_erf_erfc_expit_are_scipy_specials_own_without_its_package():
    # the three ufuncs the references and the compute model use come from the compiled
    # module alone (scipy.special's __init__ is not run), and they are the very objects
    # that scipy.special exports once it is imported after them, or before them
    lean = (
        "import sys, math\n"
        "from audit.numbers.special import sc\n"
        "got = [sc.erf, sc.erfc, sc.expit]\n"
        "assert abs(got[0](0.5) - math.erf(0.5)) <= 2 * math.ulp(0.5)\n"
        "assert 'scipy.special' not in sys.modules and 'numpy.ma' not in sys.modules\n"
        "import scipy.special\n"
        "assert got == [scipy.special.erf, scipy.special.erfc, scipy.special.expit]\n"
        "assert all(a is b for a, b in zip(got, [scipy.special.erf, scipy.special.erfc, scipy.special.expit]))\n"
    )
    assert "scipy" in _loaded(lean)
    full_first = (
        "import scipy.special\n"
        "from audit.numbers.special import sc\n"
        "assert sc.erf is scipy.special.erf and sc.expit is scipy.special.expit\n"
    )
    assert "scipy" in _loaded(full_first)
    # a sweep that evaluates erf (the first command's GELU) does not import the package
    sweep = (
        "import sys, audit\n"
        "r = audit.sweep(['gelu.erf'], 'fp16', 'fp16')\n"
        "assert r[0].summary.count > 60000\n"
        "assert 'scipy.special._ufuncs' in sys.modules and 'scipy.special' not in sys.modules\n"
    )
    assert "scipy" in _loaded(sweep)


def test_another_thread_importing_scipy_special_meanwhile_gets_the_real_package():
    # while the stand-in is in place another thread imports scipy.special: it waits on the
    # import system's lock of that module (the readiness signal: it is counted among the
    # lock's waiters) and, once the lean load is over, gets the real package, never the
    # stand-in
    code = (
        "import importlib, importlib._bootstrap as b, sys, threading\n"
        "real = importlib.import_module\n"
        "got = {}\n"
        "def other():\n"
        "    import scipy.special\n"
        "    got['m'] = scipy.special\n"
        "def patched(name, *a):\n"
        "    if name == 'scipy.special._ufuncs':\n"
        "        t = threading.Thread(target=other)\n"
        "        t.start()\n"
        "        lock = b._module_locks['scipy.special']()\n"
        "        while lock.waiters < 1 and t.is_alive():\n"
        "            threading.Event().wait(0.001)\n"
        "        assert lock.waiters >= 1, 'the other thread did not wait'\n"
        "        got['t'] = t\n"
        "    return real(name, *a)\n"
        "importlib.import_module = patched\n"
        "from audit.numbers.special import sc\n"
        "f = sc.erf\n"
        "got['t'].join()\n"
        "m = got['m']\n"
        "assert m is sys.modules['scipy.special'] and m.erf is f and hasattr(m, 'gammaln'), m\n"
    )
    assert "scipy" in _loaded(code)


def test_a_failed_lean_load_falls_back_to_the_whole_package():
    # a scipy whose layout differs (here: the compiled module cannot be found under the
    # stand-in): the whole package is imported, and nothing half-loaded stays behind
    code = (
        "import importlib, sys\n"
        "real = importlib.import_module\n"
        "def broken(name, *a):\n"
        "    if name == 'scipy.special._ufuncs':\n"
        "        real('scipy.special._ufuncs_cxx')\n"
        "        raise ImportError(name)\n"
        "    return real(name, *a)\n"
        "importlib.import_module = broken\n"
        "from audit.numbers.special import sc\n"
        "f = sc.erf\n"
        "importlib.import_module = real\n"
        "import scipy.special\n"
        "assert f is scipy.special.erf and 'scipy.special' in sys.modules\n"
    )
    assert "scipy" in _loaded(code)


BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def _console(argv: list[str], env_extra: dict) -> list[str]:
    """What the console script leaves behind at its exit: its OS threads, the variable
    OPENBLAS_NUM_THREADS, the collector's first threshold, numpy.ma and numpy.random
    loaded or not (printed from an atexit handler registered first, so it runs last)."""
    probe = (
        "import atexit, gc, os, sys\n"
        "def report():\n"
        "    print(len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS'),"
        " gc.get_threshold()[0], 'numpy.ma' in sys.modules, 'numpy.random' in sys.modules,"
        " file=sys.stderr)\n"
        "atexit.register(report)\n"
        f"sys.argv = ['actaudit', *{argv!r}]\n"
        "from audit.cli import console_main\nconsole_main()\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in BLAS_THREADS}
    env.update(PYTHONPATH=ROOT, COLUMNS="80", **env_extra)
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    return p.stderr.splitlines()[-1].split()


def test_the_first_command_runs_on_one_thread_and_loads_no_numpy_extras():
    # OpenBLAS's spinning threads (0.2 s of CPU), numpy.ma (np.unique imports it) and
    # numpy.random (the oracle's spot check): none in a sweep of a cached format
    threads, blas, threshold, ma, rnd = _console(["sweep", "relu", "--dtype", "fp8_e4m3"], {})
    assert (threads, blas, ma, rnd) == ("1", "1", "False", "False")
    assert int(threshold) >= 10_000
    # the user's own setting is kept, and one OpenBLAS reads below its own is not overridden
    assert _console(["sweep", "relu", "--dtype", "fp8_e4m3"], {"OPENBLAS_NUM_THREADS": "2"})[1] == "2"
    assert _console(["sweep", "relu", "--dtype", "fp8_e4m3"], {"OMP_NUM_THREADS": "2"})[1] == "None"


def test_a_sigint_during_the_exit_leaves_the_exit_code():
    # the command has ended and said so: a SIGINT during the exit (here from an atexit
    # handler, with the default action inherited) does not turn its exit code into -2
    probe = (
        "import atexit, os, signal, sys\n"
        "signal.signal(signal.SIGINT, signal.SIG_DFL)\n"
        "atexit.register(lambda: os.kill(os.getpid(), signal.SIGINT))\n"
        "sys.argv = ['actaudit', 'sweep', '--bogus']\n"
        "from audit.cli import console_main\nconsole_main()\n"
    )
    env = {**os.environ, "PYTHONPATH": ROOT, "COLUMNS": "80"}
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=ROOT)
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].startswith("actaudit: error:"), p


# a command added to the app for the test, then the console script with its arguments
_BOOM = (
    "import atexit, os, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "atexit.register(lambda: print('atexit ran', flush=True))\n"
    "from audit.cli.app import app\n"
    "@app.command('boom')\n"
    "def boom():\n"
    "{body}"
    "sys.argv = ['actaudit', 'boom']\n"
    "from audit.cli import console_main\nconsole_main()\n"
)


def _boom(tmp_path, body: str):
    """Run as ``python -m`` runs actaudit: there the interpreter's exit checks the flag of
    an unhandled KeyboardInterrupt (with -c, or a script as the console script is, a
    SystemExit ends the process before that check)."""
    (tmp_path / "boom_probe.py").write_text(
        _BOOM.format(body="".join(f"    {ln}\n" for ln in body.splitlines()))
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, str(tmp_path)]), "COLUMNS": "80"}
    cmd = [sys.executable, "-m", "boom_probe"]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=30)


def test_an_interrupt_that_passed_through_exec_still_exits_130(tmp_path):
    # CPython marks a KeyboardInterrupt unhandled once it leaves code exec() ran from a
    # string, caught or not, and its normal exit then kills itself with SIGINT: scipy's
    # array-API layer imports numpy through exec, and a Ctrl-C there exited -2 in 15% of
    # tries of tests/test_fit.py's SIGINT test (twice in CI); the atexit handlers still run
    p = _boom(tmp_path, "exec('signal.raise_signal(signal.SIGINT)\\nwhile True: pass')")
    assert p.returncode == 130, p
    assert p.stderr.strip().splitlines()[-1] == "actaudit: interrupted" and "Traceback" not in p.stderr, p
    assert p.stdout == "atexit ran\n", p


def test_an_error_a_library_made_of_an_interrupt_is_the_interrupt(tmp_path):
    # pybind11 turns a KeyboardInterrupt during a module's initialization (scipy's HiGHS,
    # imported by the first LP of fit) into 'ImportError: initialization failed'
    body = (
        "try:\n"
        "    signal.raise_signal(signal.SIGINT)\n"
        "    while True: pass\n"
        "except KeyboardInterrupt:\n"
        "    raise ImportError('initialization failed') from None"
    )
    p = _boom(tmp_path, body)
    assert p.returncode == 130 and "Traceback" not in p.stderr, p
    assert p.stderr.strip().splitlines() == ["actaudit: interrupted"], p
    # SIGTERM likewise, as terminated; and without a signal the same error is a bug: its traceback
    p = _boom(tmp_path, body.replace("SIGINT", "SIGTERM").replace("KeyboardInterrupt", "BaseException"))
    assert p.returncode == 143 and p.stderr.strip().splitlines() == ["actaudit: terminated"], p
    p = _boom(tmp_path, "raise ImportError('initialization failed')")
    assert (
        p.returncode == 1 and "Traceback" in p.stderr and "ImportError: initialization failed" in p.stderr
    ), p


# SIGINT's exception caught and dropped by a library (mpmath's choice of backend: `except:
# pass` around `import gmpy2`)
_SWALLOW = (
    "try:\n    signal.raise_signal(signal.SIGINT)\n    while True: pass\nexcept BaseException:\n    pass\n"
)


def test_an_interrupt_a_library_swallowed_still_ends_the_command(tmp_path):
    # a Ctrl-C during mpmath's import of gmpy2 was swallowed and the sweep ran to its end,
    # exit 0 (13 of 40 tries with the signal 0.1-0.3 s in): the command still exits 130
    p = _boom(tmp_path, _SWALLOW + "open('after', 'w').close()")
    assert p.returncode == 130 and p.stderr.strip().splitlines() == ["actaudit: interrupted"], p
    # and long work stops at its next step of progress (a result starts, a chunk is merged),
    # not at its end
    bar = "from audit.cli.progress import ProgressBar\nwith ProgressBar() as bar:\n"
    inside = "".join(f"    {ln}\n" for ln in _SWALLOW.splitlines())
    after = "    open('after', 'w').close()"
    for body in (
        _SWALLOW + bar + "    bar.start('x', 2)\n" + after,
        bar + "    bar.start('x', 2)\n" + inside + "    bar(1)\n" + after,
    ):
        (tmp_path / "after").unlink(missing_ok=True)
        p = _boom(tmp_path, body)
        assert p.returncode == 130 and p.stderr.strip().splitlines() == ["actaudit: interrupted"], p
        assert not (tmp_path / "after").exists(), body


def test_an_interrupt_python_dropped_is_raised_again(tmp_path):
    # JAX's gc callback (and any __del__) ran when the SIGINT's exception was raised there:
    # Python printed 'Exception ignored in' and dropped it, and `engines` went on to exit 0
    body = (
        "import gc\n"
        "def cb(phase, info):\n"
        "    if phase == 'start':\n"
        "        signal.raise_signal(signal.SIGINT)\n"
        "        for _ in range(100): pass\n"
        "gc.callbacks.append(cb)\n"
        "gc.collect()\n"
        "while True: pass"
    )
    p = _boom(tmp_path, body)  # (without: it never ends, and the timeout fails the test)
    assert p.returncode == 130 and p.stderr.strip().splitlines() == ["actaudit: interrupted"], p


def test_the_first_command_loads_no_numpy_ma_nor_the_scipy_special_package():
    # numpy.ma comes with np.unique / np.union1d (0.01 s), scipy.special's package with its
    # array-API layer (0.03-0.36 s): the first command needs neither
    names = ("numpy.ma", "scipy.special", "ml_dtypes", "pandas")
    assert _loaded(_main(["sweep", "gelu", "--dtype", "fp16"]), names) == []
