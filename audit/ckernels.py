"""Compiled C kernels as candidates: ``c:FILE.c:FUNCTION``.

The kernel is C source with the calling convention

    void FUNCTION(const float *x, float *y, size_t n);       /* or */
    void FUNCTION(const _Float16 *x, _Float16 *y, size_t n);

(the element type is read from the function's definition in the source).  It is compiled
at run time with the system compiler (``$CC``, default ``gcc``) as a shared object, with
``-O2`` or the flags given (``--cflags``), and cached by the SHA-256 of the source, the
flags and the compiler's version (``$ACTAUDIT_CACHE_DIR/ckernels``, written atomically, with
the object's own SHA-256 beside it: a cached object that does not match is compiled again;
with ``ACTAUDIT_NO_CACHE=1`` a temporary directory of the process).

Inputs (storage values) are converted to the kernel's type exactly: a ``float`` kernel takes
every storage format of at most 32 bits, a ``_Float16`` kernel fp16 and the fp8 formats (bf16
and fp32 values do not all fit in _Float16, and are refused).  The kernel's outputs are
rounded to the storage format to nearest, ties to even.  The kernel runs in a forked child
process, so a crash (SIGSEGV, SIGFPE, ...) is reported as one line, not a dead auditor; a
compile error, a missing symbol or a missing prototype is one line too (exit 2).
"""

from __future__ import annotations

import ctypes
import hashlib
import mmap
import os
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

import numpy as np

from .errors import ActauditError, BadOptionError, UnknownNameError
from .formats import Format

DEFAULT_CFLAGS = "-O2"
KERNEL_TIMEOUT_S = 600.0  # a kernel still running after this is stopped
TYPES = {"float": np.float32, "_Float16": np.float16}


class KernelError(ActauditError):
    """A C kernel that does not compile, lacks its symbol, or crashes."""


def parse_target(target: str) -> tuple[Path, str]:
    """'c:path/k.c:fn' -> (Path('path/k.c'), 'fn')."""
    body = target[2:] if target.startswith("c:") else target
    path, sep, func = body.rpartition(":")
    if not sep or not path or not func or not re.fullmatch(r"[A-Za-z_]\w*", func):
        raise UnknownNameError(f"'{target}' is not c:FILE.c:FUNCTION")
    return Path(path), func


def kernel_type(source: str, func: str) -> str:
    """The element type of FUNCTION's first parameter in the source: float or _Float16."""
    m = re.search(rf"\b{re.escape(func)}\s*\(\s*const\s+(float|_Float16)\s*\*", source)
    if m is None:
        raise KernelError(
            f"no definition 'void {func}(const float *x, float *y, size_t n)' "
            "(or with _Float16) in the source"
        )
    return m.group(1)


_TMP_ROOT: list = []


def cache_root() -> Path:
    """$ACTAUDIT_CACHE_DIR/ckernels; with ACTAUDIT_NO_CACHE=1 a directory of this process."""
    from .oracle import _cache_enabled, cache_dir

    if not _cache_enabled():
        if not _TMP_ROOT:
            import atexit
            import shutil
            import tempfile

            _TMP_ROOT.append(Path(tempfile.mkdtemp(prefix="actaudit-ckernels-")))
            atexit.register(shutil.rmtree, _TMP_ROOT[0], True)
        return _TMP_ROOT[0]
    return cache_dir() / "ckernels"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cached(so: Path) -> bool:
    """A shared object of the cache whose recorded SHA-256 matches (files on disk are
    untrusted: a truncated or altered one is compiled again)."""
    sig = so.with_suffix(".sha256")
    try:
        return so.is_file() and sig.read_text().strip() == _digest(so)
    except OSError:
        return False


def _compiler() -> str:
    return os.environ.get("CC", "gcc")


def _compiler_version(cc: str) -> str:
    try:
        r = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise KernelError(f"cannot run the C compiler '{cc}': {e}") from None
    return r.stdout.splitlines()[0] if r.stdout else ""


def compile_kernel(path: Path, cflags: str | None = None) -> tuple[Path, str]:
    """Compile (or find in the cache) the shared object of C file ``path``.

    Returns (shared object path, source text)."""
    try:
        src = path.read_bytes()
    except OSError as e:
        raise BadOptionError(f"cannot read C kernel '{path}': {e.strerror or e}") from None
    if len(src) > 1 << 22:
        raise BadOptionError(f"C kernel '{path}' is larger than 4 MiB")
    text = src.decode("utf-8", errors="replace")
    flags = shlex.split(DEFAULT_CFLAGS if cflags is None else cflags)
    cc = _compiler()
    key = hashlib.sha256(
        src + b"\0" + " ".join(flags).encode() + b"\0" + _compiler_version(cc).encode()
    ).hexdigest()[:32]
    root = cache_root()
    so = root / f"{key}.so"
    if not _cached(so):
        root.mkdir(parents=True, exist_ok=True)
        tmp = root / f".{key}.{os.getpid()}.so"
        cmd = [cc, "-shared", "-fPIC", *flags, "-o", str(tmp), str(path), "-lm"]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as e:
            raise KernelError(f"cannot run the C compiler '{cc}': {e}") from None
        if r.returncode != 0:
            tmp.unlink(missing_ok=True)
            lines = [ln for ln in r.stderr.splitlines() if "error" in ln] or r.stderr.splitlines()
            first = lines[0].strip() if lines else f"exit status {r.returncode}"
            raise KernelError(f"C kernel '{path}' does not compile ({' '.join(flags)}): {first}")
        sig = root / f".{key}.{os.getpid()}.sha256"
        sig.write_text(_digest(tmp))
        os.replace(tmp, so)
        os.replace(sig, so.with_suffix(".sha256"))
    return so, text


def run_kernel(so: Path, func: str, x: np.ndarray, ctype: str) -> np.ndarray:
    """y = FUNCTION(x) in a forked child process (x already of the kernel's type)."""
    dt = np.dtype(TYPES[ctype])
    x = np.ascontiguousarray(x, dtype=dt)
    n = x.size
    nbytes = max(n * dt.itemsize, 1)
    shared = mmap.mmap(-1, nbytes)  # anonymous, shared with the child
    pid = os.fork()
    if pid == 0:  # child: load, call, write, exit without running the parent's cleanup
        code = 0
        try:
            import faulthandler

            faulthandler.disable()  # a crash is reported by the parent, in one line
            lib = ctypes.CDLL(str(so))
            try:
                f = getattr(lib, func)
            except AttributeError:
                os._exit(3)
            f.restype = None
            f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
            y = np.frombuffer(shared, dtype=dt, count=n)
            f(x.ctypes.data, y.ctypes.data, ctypes.c_size_t(n))
        except BaseException:
            code = 4
        os._exit(code)
    deadline = time.monotonic() + KERNEL_TIMEOUT_S
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise KernelError(f"C kernel {func} ran longer than {KERNEL_TIMEOUT_S:.0f} s")
            time.sleep(0.0005)
    except BaseException:
        try:  # interrupted: do not leave the child behind
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        raise
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        raise KernelError(f"C kernel {func} crashed ({name}) on {n} inputs")
    code = os.WEXITSTATUS(status)
    if code == 3:
        raise KernelError(f"C kernel has no symbol '{func}' (is it static, or misspelled?)")
    if code != 0:
        raise KernelError(f"C kernel {func} could not be loaded or called (child exit {code})")
    out = np.frombuffer(shared, dtype=dt, count=n).copy()
    shared.close()
    return out


def c_candidate(target: str, reference: str | None, fmt: Format, cflags: str | None = None):
    """The candidate that runs C kernel ``target`` ('c:FILE.c:FUNCTION') on storage values."""
    from .candidates import Candidate
    from .references import get_reference

    path, func = parse_target(target)
    if reference is None:
        raise BadOptionError(f"{target}: give the kernel's reference with --reference (e.g. gelu)")
    get_reference(reference)
    so, text = compile_kernel(path, cflags)
    ctype = kernel_type(text, func)
    dt = TYPES[ctype]
    ok = fmt.bits <= 32 if ctype == "float" else fmt.name in ("fp16", "fp8_e4m3", "fp8_e5m2")
    if not ok:
        raise BadOptionError(
            f"{target}: {fmt.name} values do not all fit in {ctype} "
            f"({'formats of at most 32 bits' if ctype == 'float' else 'fp16 and the fp8 formats'})"
        )
    flags = DEFAULT_CFLAGS if cflags is None else cflags

    def fn(x, m):
        xs = np.asarray(x.a, dtype=np.float64)
        with np.errstate(all="ignore"):
            xin = xs.astype(dt)  # exact: every storage value is a value of the kernel's type
            y = run_kernel(so, func, xin.reshape(-1), ctype).reshape(xs.shape)
            return y.astype(np.float64)

    return Candidate(
        target,
        reference,
        f"{func}(x) compiled from {path} ({ctype}, {flags})",
        f"C kernel {path}, {_compiler()} {flags}",
        fn,
        compute=fmt.name,
        native=True,
    )  # its own arithmetic (float or _Float16), not a formula's
