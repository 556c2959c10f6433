"""Compiled C kernels as candidates: ``c:FILE.c:FUNCTION``.

The kernel is C source with the calling convention

    void FUNCTION(const float *x, float *y, size_t n);       /* or */
    void FUNCTION(const _Float16 *x, _Float16 *y, size_t n);

(the element type is read from the function's definition in the source, and the whole
signature is checked by the compiler: see below).  How a kernel is compiled, cached,
verified and run is described in docs/concepts/kernel-isolation.md; in short:

* **Compiled** with the system compiler (``$CC``, default ``gcc``) as a shared object, with
  ``-O2`` or the flags given (``--cflags``, split as a POSIX shell does).  The unit compiled
  is a small checking unit that includes the kernel (``-include FILE``) and redeclares the
  expected prototype: a definition whose return type or any parameter differs (``double *y``)
  is a compile error, reported as one line.
* **Cached** under a key that covers the source, every file it includes (the compiler's own
  dependency list, ``-M``, each file's SHA-256), each flag as its own string, the function
  and its type, and the compiler's identity (resolved path, SHA-256 of the driver, its
  ``--version`` and ``-dumpfullversion``).  The object is written atomically beside a record
  of its key and SHA-256; before it is loaded, the record must name this key and the bytes
  must match (a truncated object, or one copied under another key, is compiled again).  The
  verified bytes are loaded from a private memory file, not from the cache path.
* **Run** in a child process per call, not a fork of Python but a fresh process running a
  small C runner (compiled once, cached and verified like the objects; it loads nothing but
  the C library and the kernel, so a kernel's exit() runs none of the parent's libraries'
  atexit handlers): in its own process group, killed with its parent
  (PR_SET_PDEATHSIG, and the parent kills the group on any exit: error, SIGINT, SIGTERM,
  ``--timeout``), with stdin from /dev/null and stdout/stderr captured (never mixed into the
  tool's output; the last line is quoted in an error), and it must report that FUNCTION
  returned: a kernel that exits, crashes or is killed halfway is one line, exit 2.

Inputs (storage values) are converted to the kernel's type exactly: a ``float`` kernel takes
every storage format of at most 32 bits, a ``_Float16`` kernel fp16 and the fp8 formats (bf16
and fp32 values do not all fit in _Float16, and are refused).  The kernel's outputs are
rounded to the storage format to nearest, ties to even.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from audit.errors import ActauditError, BadOptionError, UnknownNameError
from audit.numbers.formats import Format

DEFAULT_CFLAGS = "-O2"
KERNEL_TIMEOUT_S = 600.0  # a kernel call still running after this is stopped (unless --timeout)
COMPILE_TIMEOUT_S = 600.0
MAX_SOURCE = 1 << 22  # bytes of a kernel source (and of each file it includes)
MAX_OBJECT = 1 << 26  # bytes of a compiled object
MAX_OUTPUT = 4096  # bytes of a kernel's stdout/stderr kept (its last ones)
CACHE_VERSION = 2
TYPES = {"float": np.float32, "_Float16": np.float16}
_STOP = {signal.SIGINT, signal.SIGTERM}


class KernelError(ActauditError):
    """A C kernel that does not compile, lacks its symbol, has another signature, crashes,
    exits before returning, or runs past its time."""


def parse_target(target: str) -> tuple[Path, str]:
    """'c:path/k.c:fn' -> (Path('path/k.c'), 'fn')."""
    body = target[2:] if target.startswith("c:") else target
    path, sep, func = body.rpartition(":")
    if not sep or not path or not func or not re.fullmatch(r"[A-Za-z_]\w*", func):
        raise UnknownNameError(f"'{target}' is not c:FILE.c:FUNCTION")
    return Path(path), func


def parse_cflags(cflags: str | None) -> list[str]:
    """--cflags as the compiler's arguments, split as a POSIX shell does (one line on a
    quoting error)."""
    text = DEFAULT_CFLAGS if cflags is None else cflags
    if not isinstance(text, str) or "\0" in text:
        raise BadOptionError(f"--cflags must be a string of compiler flags, got {cflags!r}")
    try:
        flags = shlex.split(text)
    except ValueError as e:
        raise BadOptionError(f"--cflags {text!r}: {e} (flags are split as a POSIX shell does)") from None
    for f in flags:
        if f in ("-o", "-M", "-MM", "-MD", "-MMD", "-MF", "-E", "-S", "-c") or f.startswith("-o"):
            raise BadOptionError(f"--cflags: '{f}' is not a flag actaudit can pass on (it sets it itself)")
    return flags


def kernel_type(source: str, func: str) -> str:
    """The element type of FUNCTION's first parameter in the source: float or _Float16
    (the full signature is then checked by the compiler)."""
    m = re.search(rf"\b{re.escape(func)}\s*\(\s*const\s+(float|_Float16)\s*\*", source)
    if m is None:
        raise KernelError(
            f"no definition 'void {func}(const float *x, float *y, size_t n)' "
            "(or with _Float16) in the source"
        )
    return m.group(1)


def _prototype(func: str, ctype: str) -> str:
    return f"void {func}(const {ctype} *x, {ctype} *y, size_t n)"


def check_unit(func: str | None, ctype: str | None) -> bytes:
    """The translation unit compiled: the kernel comes in by ``-include``; this redeclares
    FUNCTION with the expected prototype (a conflicting definition is an error) and asserts
    that the two types are the same."""
    if func is None:
        return b""
    t = ctype
    return (
        "#include <stddef.h>\n"
        f"void {func}(const {t} *, {t} *, size_t);\n"
        f"_Static_assert(__builtin_types_compatible_p(__typeof__(&{func}), "
        f'void (*)(const {t} *, {t} *, size_t)), "actaudit: {func} has another signature");\n'
    ).encode()


# ----------------------------------------------------------------- the compiler
_TMP_ROOT: list = []


def cache_root() -> Path:
    """$ACTAUDIT_CACHE_DIR/ckernels; with ACTAUDIT_NO_CACHE=1 a directory of this process."""
    from audit.oracle.oracle import _cache_enabled, cache_dir

    if not _cache_enabled():
        if not _TMP_ROOT:
            import atexit
            import tempfile

            _TMP_ROOT.append(Path(tempfile.mkdtemp(prefix="actaudit-ckernels-")))
            atexit.register(shutil.rmtree, _TMP_ROOT[0], True)
        return _TMP_ROOT[0]
    return cache_dir() / "ckernels"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _compiler() -> str:
    return os.environ.get("CC", "gcc")


def _text(data: bytes) -> str:
    """Compiler output as text: any bytes (a Latin-1 message) decode, replaced if need be."""
    return data.decode("utf-8", errors="replace")


def _one_line(text: str, limit: int = 300) -> str:
    s = "".join(ch if ch.isprintable() else "?" for ch in text.strip())
    return s if len(s) <= limit else s[: limit - 3] + "..."


# The compiler runs under resource limits (``#include "/dev/zero"`` makes cc1 read, and
# grow, until the system's OOM killer acts): address space, CPU time, size of any file
# it writes.  They are set by a tiny exec wrapper (a fresh interpreter that sets them and
# execs the compiler), not by a preexec_fn: a preexec_fn runs Python in a fork of this
# process, whose other threads (an engine's) may hold locks, and triggers its at-fork hooks.
COMPILE_MEMORY = 2 << 30  # bytes of address space for the driver and each of its passes
COMPILE_CPU_S = 300  # seconds of CPU time for each of them
COMPILE_FILE = 1 << 28  # bytes of any file they write (objects, temporaries)
_LIMITED = (
    "import os, resource, sys\n"
    "m, c, f = (int(v) for v in sys.argv[1:4])\n"
    "resource.setrlimit(resource.RLIMIT_AS, (m, m))\n"
    "resource.setrlimit(resource.RLIMIT_CPU, (c, c))\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE, (f, f))\n"
    "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
    "try:\n"
    "    os.execv(sys.argv[4], sys.argv[4:])\n"
    "except OSError as e:\n"
    "    sys.stderr.write(f'error: cannot run {sys.argv[4]}: {e.strerror}\\n')\n"
    "    os._exit(127)\n"
)


def _limited(cmd: list[str]) -> list[str]:
    """``cmd`` run under the compiler's resource limits (its first element resolved on PATH)."""
    import sys

    exe = shutil.which(cmd[0]) or cmd[0]
    limits = [str(COMPILE_MEMORY), str(COMPILE_CPU_S), str(COMPILE_FILE)]
    return [sys.executable, "-I", "-S", "-c", _LIMITED, *limits, exe, *cmd[1:]]


def _run(cmd: list[str], stdin: bytes = b"", timeout: float = COMPILE_TIMEOUT_S) -> tuple[int, bytes, bytes]:
    env = {**os.environ, "LC_ALL": "C"}  # messages in one language, plain quotes
    try:
        r = subprocess.run(_limited(cmd), input=stdin, capture_output=True, timeout=timeout, env=env)
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        raise KernelError(f"cannot run the C compiler '{cmd[0]}': {_one_line(str(e))}") from None
    return r.returncode, r.stdout, r.stderr


_IDENTITY: dict = {}


def compiler_identity(cc: str | None = None) -> str:
    """'PATH VERSION sha256:DIGEST': the resolved driver, its -dumpfullversion, and the
    SHA-256 of the driver's bytes and of its --version output (computed once per process)."""
    cc = cc or _compiler()
    found = shutil.which(cc)
    if found is None:
        raise KernelError(f"cannot run the C compiler '{cc}': not found (set $CC)")
    real = os.path.realpath(found)
    st = os.stat(real)
    k = (cc, real, st.st_size, st.st_mtime_ns)
    if k not in _IDENTITY:
        _, ver, _ = _run([real, "--version"], timeout=60)
        _, full, _ = _run([real, "-dumpfullversion"], timeout=60)
        with open(real, "rb") as fh:
            h = hashlib.sha256(fh.read(1 << 28))
        h.update(b"\0" + ver + b"\0" + full)
        _IDENTITY[k] = f"{real} {_one_line(_text(full), 40) or '?'} sha256:{h.hexdigest()[:32]}"
    return _IDENTITY[k]


def _depfile_paths(text: str) -> list[str]:
    """The prerequisites of a make rule as gcc -M writes it ('\\ ' a space, '$$' a dollar)."""
    body = text.replace("\\\r\n", " ").replace("\\\n", " ")
    _, sep, deps = body.partition(": ")
    if not sep:
        return []
    out, cur, i = [], [], 0
    while i < len(deps):
        ch = deps[i]
        if ch == "\\" and i + 1 < len(deps) and deps[i + 1] in " #\\":
            cur.append(deps[i + 1])
            i += 2
            continue
        if ch == "$" and deps[i + 1 : i + 2] == "$":
            cur.append("$")
            i += 2
            continue
        if ch.isspace():
            if cur:
                out.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
        i += 1
    if cur:
        out.append("".join(cur))
    return out


def _read_dep(p: str) -> bytes:
    from audit.io import read_bytes

    return read_bytes(p, MAX_SOURCE, "file the C kernel includes")


@dataclass(frozen=True)
class Compiled:
    """A kernel's object, verified: its cache path, bytes' SHA-256, and what made it."""

    so: Path
    sha256: str
    source: str  # the kernel's source text
    key: str
    flags: list = field(default_factory=list)
    compiler: str = ""
    kernel_digest: str = ""  # SHA-256 over the source and every file it includes
    deps: tuple = ()

    def identity(self) -> dict:
        return {"cflags": list(self.flags), "kernel_digest": self.kernel_digest, "compiler": self.compiler}


def _verified(so: Path, key: str) -> bytes | None:
    """The bytes of cached object ``so`` if its record names ``key`` and its SHA-256, else
    None (absent, truncated, altered, or copied under another key: compiled again)."""
    from audit.errors import BadFileError
    from audit.io import load_json, read_bytes

    try:
        rec = load_json(so.with_suffix(".json"), 4096, "object record")
        data = read_bytes(so, MAX_OBJECT, "compiled object", regular=True)
    except BadFileError:
        return None
    if not isinstance(rec, dict) or set(rec) != {"key", "sha256", "version"}:
        return None
    if rec["version"] != CACHE_VERSION or rec["key"] != key or rec["sha256"] != _sha(data):
        return None
    return data


def compile_kernel(path: Path, cflags: str | None = None, func: str | None = None) -> Compiled:
    """Compile (or find, verified, in the cache) the shared object of C file ``path``;
    with ``func``, its signature is checked at compile time."""
    from audit.errors import BadFileError
    from audit.io import read_bytes

    flags = parse_cflags(cflags)
    try:
        src = read_bytes(path, MAX_SOURCE, "C kernel", regular=True)
    except BadFileError as e:
        raise BadOptionError(f"cannot read C kernel: {e}") from None
    text = src.decode("utf-8", errors="replace")
    ctype = kernel_type(text, func) if func is not None else None
    unit = check_unit(func, ctype)
    cc = _compiler()
    ident = compiler_identity(cc)
    real_cc = ident.split(" ", 1)[0]
    absolute = os.path.abspath(path)
    base = [real_cc, *flags, "-include", absolute, "-x", "c", "-"]
    rc, out, err = _run(base[:-1] + ["-M", "-MT", "kernel", "-"], unit)
    if rc != 0:
        raise KernelError(f"C kernel '{path}' does not compile ({' '.join(flags)}): {_first_error(err, rc)}")
    deps = _depfile_paths(_text(out))
    if absolute not in deps:
        deps.insert(0, absolute)
    digests = []
    for d in deps:
        try:
            content = src if d == absolute else _read_dep(d)
        except BadFileError as e:
            raise KernelError(f"C kernel '{path}': {e}") from None
        digests.append(_sha(content))
    kernel_digest = _sha(json.dumps(digests).encode())
    key = _sha(
        json.dumps(
            {
                "v": CACHE_VERSION,
                "deps": [[d, h] for d, h in zip(deps, digests)],
                "flags": flags,
                "compiler": ident,
                "func": func,
                "ctype": ctype,
                "unit": _sha(unit),
            },
            sort_keys=True,
        ).encode()
    )[:40]
    root = cache_root()
    so = root / f"{key}.so"
    data = _verified(so, key)
    if data is None:
        data = _build(path, base, unit, flags, so, key, func, ctype)
    return Compiled(so, _sha(data), text, key, flags, ident, kernel_digest, tuple(deps))


def _first_error(err: bytes, rc: int) -> str:
    lines = [ln for ln in _text(err).splitlines() if ln.strip()]
    pick = [ln for ln in lines if "error" in ln or "out of memory" in ln] or lines
    if not pick:
        return f"exit status {rc}"
    text = _one_line(pick[0])
    if "out of memory" in text or "Killed signal" in text or "CPU time limit" in text:
        text += (
            f" (the compiler runs with at most {COMPILE_MEMORY >> 20} MiB of address space "
            f"and {COMPILE_CPU_S} s of CPU time)"
        )
    return text


def _build(path, base, unit, flags, so: Path, key: str, func, ctype) -> bytes:
    from audit.io import read_bytes

    root = so.parent
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{key}.{os.getpid()}.so"
    rec_tmp = root / f".{key}.{os.getpid()}.json"
    try:
        rc, _, err = _run(base[:1] + ["-shared", "-fPIC"] + base[1:] + ["-o", str(tmp), "-lm"], unit)
        if rc != 0:
            text = _text(err)
            m = re.search(r"previous definition of '\w+' with type '([^']*)'", text)
            if func is not None and (m or "<stdin>" in text.split("error", 1)[0].rsplit("\n", 1)[-1]):
                have = f": the source defines '{m.group(1)}'" if m else f": {_first_error(err, rc)}"
                raise KernelError(f"C kernel '{path}': {func} is not {_prototype(func, ctype)}{have}")
            raise KernelError(
                f"C kernel '{path}' does not compile ({' '.join(flags)}): {_first_error(err, rc)}"
            )
        data = read_bytes(tmp, MAX_OBJECT, "compiled object", regular=True)
        rec_tmp.write_text(json.dumps({"key": key, "sha256": _sha(data), "version": CACHE_VERSION}))
        os.replace(tmp, so)
        os.replace(rec_tmp, so.with_suffix(".json"))
        return data
    finally:
        tmp.unlink(missing_ok=True)
        rec_tmp.unlink(missing_ok=True)


# ------------------------------------------------------------------- loading
_LOADED: dict = {}  # (so, sha256) -> (fd of a memory file holding those bytes, its inode)


def object_fd(c: Compiled) -> int:
    """A memory file holding the verified bytes of ``c`` (created once per process: forked
    workers inherit it; elsewhere it is made again from the cache, verified again)."""
    k = (str(c.so), c.sha256)
    got = _LOADED.get(k)
    if got is not None:
        fd, ino = got
        with contextlib.suppress(OSError):
            if os.fstat(fd).st_ino == ino:
                return fd
    data = _verified(c.so, c.key)
    if data is None or _sha(data) != c.sha256:
        raise KernelError(f"the compiled object of the C kernel changed in the cache ({c.so}): run again")
    fd = os.memfd_create("actaudit-kernel", 0)
    os.write(fd, data)
    _LOADED[k] = (fd, os.fstat(fd).st_ino)
    return fd


# ------------------------------------------------------------------- running
# The kernel's process is not a fork of this one: a fork of a Python process that loaded
# OpenBLAS, torch, onnxruntime... (and whose other threads may hold their locks) inherits
# their atexit handlers, destructors and locks, and a kernel calling exit() there can hang
# on one of them.  It is a fresh process running this small program (compiled once, cached
# and verified like a kernel's object), which loads nothing but the C library and the kernel.
RUNNER_SOURCE = r"""/* actaudit's C kernel runner: argv = RUNNER PARENT OBJECT_FD FUNC DATA_FD N ELEMSIZE DONE_FD RUNNER_FD
   DATA_FD (a memory file) holds the 16-byte token, then x (N elements), then y (N); the
   kernel sees descriptors 0, 1, 2, OBJECT_FD and DONE_FD only. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

typedef void (*kernel_fn)(const void *, void *, size_t);

static long num(const char *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < 0) _exit(6);
    return v;
}

int main(int argc, char **argv) {
    if (argc != 9) _exit(6);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if ((long)getppid() != num(argv[1])) _exit(5); /* the parent died before PDEATHSIG took effect */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    long obj = num(argv[2]), data = num(argv[4]), done = num(argv[7]);
    size_t n = (size_t)num(argv[5]), size = (size_t)num(argv[6]);
    size_t bytes = 16 + 2 * n * size;
    unsigned char *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, (int)data, 0);
    if (map == MAP_FAILED) _exit(6);
    close((int)data);
    close((int)num(argv[8]));
    unsigned char token[16];
    memcpy(token, map, 16);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%ld", obj);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "actaudit-runner: %s\n", dlerror());
        _exit(4);
    }
    void *sym = dlsym(lib, argv[3]);
    if (sym == NULL) _exit(3);
    kernel_fn f;
    memcpy(&f, &sym, sizeof f);
    f(map + 16, map + 16 + n * size, n);
    fflush(NULL); /* what it printed, before the report */
    if (write((int)done, token, 16) != 16) _exit(6);
    _exit(0);
}
"""
_RUNNER: dict = {}  # (compiler identity) -> (fd of a memory file holding the verified runner, its inode)


def runner_fd() -> int:
    """A memory file holding the verified kernel runner (compiled once per compiler, cached
    under a key of its source and the compiler's identity; made once per process)."""
    ident = compiler_identity()
    got = _RUNNER.get(ident)
    if got is not None:
        fd, ino = got
        with contextlib.suppress(OSError):
            if os.fstat(fd).st_ino == ino:
                return fd
    key = "runner-" + _sha(json.dumps({"v": CACHE_VERSION, "src": RUNNER_SOURCE, "cc": ident}).encode())[:40]
    exe = cache_root() / key
    data = _verified(exe, key)
    if data is None:
        data = _build_runner(exe, key, ident.split(" ", 1)[0])
    fd = os.memfd_create("actaudit-runner")
    os.write(fd, data)
    _RUNNER[ident] = (fd, os.fstat(fd).st_ino)
    return fd


def _build_runner(exe: Path, key: str, cc: str) -> bytes:
    from audit.io import read_bytes

    root = exe.parent
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{key}.{os.getpid()}"
    rec_tmp = root / f".{key}.{os.getpid()}.json"
    try:
        rc, _, err = _run([cc, "-O2", "-x", "c", "-", "-o", str(tmp), "-ldl"], RUNNER_SOURCE.encode())
        if rc != 0:
            raise KernelError(f"cannot build actaudit's C kernel runner with {cc}: {_first_error(err, rc)}")
        data = read_bytes(tmp, MAX_OBJECT, "kernel runner", regular=True)
        rec_tmp.write_text(json.dumps({"key": key, "sha256": _sha(data), "version": CACHE_VERSION}))
        os.replace(tmp, exe)
        os.replace(rec_tmp, exe.with_suffix(".json"))
        return data
    finally:
        tmp.unlink(missing_ok=True)
        rec_tmp.unlink(missing_ok=True)


def _kill(pid: int) -> None:
    """SIGKILL to the kernel's process group and to the kernel, then reap it; nothing if it
    was reaped already (its pid may belong to another process by now)."""
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(OSError):
            kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, 0)


def _drain(fd: int, buf: bytearray) -> bool:
    """Read what is there into buf (keeping the last MAX_OUTPUT bytes); False at EOF."""
    data = os.read(fd, 65536)
    if not data:
        return False
    buf += data
    del buf[:-MAX_OUTPUT]
    return True


def _said(buf: bytes) -> str:
    lines = [ln for ln in _text(bytes(buf)).splitlines() if ln.strip()]
    return f"; its last output line: '{_one_line(lines[-1], 160)}'" if lines else ""


def run_kernel(fd: int, func: str, x: np.ndarray, ctype: str, timeout: float | None = None) -> np.ndarray:
    """y = FUNCTION(x) in a child process (x already of the kernel's type; ``fd`` from
    :func:`object_fd`).  Stopped (its whole process group killed) after ``timeout`` seconds,
    on any exception in this process (KeyboardInterrupt, SIGTERM's), and with this process."""
    from audit.signals import ready

    dt = np.dtype(TYPES[ctype])
    x = np.ascontiguousarray(x, dtype=dt)
    n = x.size
    limit = KERNEL_TIMEOUT_S if timeout is None else float(timeout)
    exe = runner_fd()
    token = os.urandom(16)
    size = 16 + 2 * n * dt.itemsize
    data = os.memfd_create("actaudit-kernel-data")  # the token, x, y: shared with the kernel
    try:
        os.ftruncate(data, size)
        shared = mmap.mmap(data, size)
    except BaseException:
        os.close(data)
        raise
    shared[:16] = token
    np.frombuffer(shared, dtype=dt, count=n, offset=16)[:] = x
    done_r, done_w = os.pipe()
    out_r, out_w = os.pipe()
    argv = [f"/proc/self/fd/{exe}", str(os.getpid()), str(fd), func, str(data), str(n), str(dt.itemsize)]
    argv += [str(done_w), str(exe)]
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP)  # no handler between spawn and setpgid
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out_w,
            stderr=out_w,
            pass_fds=(exe, fd, data, done_w),
            close_fds=True,
            process_group=0,
        )
    except BaseException as e:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        for f in (done_r, done_w, out_r, out_w, data):
            os.close(f)
        shared.close()
        if isinstance(e, OSError):
            raise KernelError(f"cannot start the C kernel runner: {_one_line(str(e))}") from None
        raise
    pid = proc.pid
    proc.returncode = 0  # reaped here (by _wait or _kill), never by Popen
    try:
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)
        for f in (done_w, out_w, data):
            os.close(f)
        done_w = out_w = data = -1
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        ready("kernel")
        status, said, output = _wait(pid, done_r, out_r, time.monotonic() + limit)
        if status is None:
            _kill(pid)
            raise KernelError(
                f"C kernel {func} did not return within {limit:g} s (called on {n} inputs; --timeout)"
                + _said(output)
            )
    except BaseException:
        _kill(pid)
        shared.close()
        raise
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        for f in (done_r, done_w, out_r, out_w, data):
            if f >= 0:
                with contextlib.suppress(OSError):
                    os.close(f)
    try:
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            raise KernelError(f"C kernel {func} crashed ({name}) on {n} inputs" + _said(output))
        code = os.WEXITSTATUS(status)
        if code == 3:
            raise KernelError(f"C kernel has no symbol '{func}' (is it static, or misspelled?)")
        if code == 0 and said != token:
            raise KernelError(
                f"C kernel {func} exited (status 0) before returning, on {n} inputs: "
                "a kernel must return, not exit" + _said(output)
            )
        if code == 4 and _text(output).startswith("actaudit-runner: "):
            why = _one_line(_text(output).splitlines()[0][len("actaudit-runner: ") :], 200)
            raise KernelError(f"C kernel {func} could not be loaded ({why})")
        if code != 0:
            what = "could not be loaded or called" if code == 4 and not output else "exited before returning"
            raise KernelError(f"C kernel {func} {what} (exit status {code}, on {n} inputs)" + _said(output))
        return np.frombuffer(shared, dtype=dt, count=n, offset=16 + n * dt.itemsize).copy()
    finally:
        shared.close()


def _wait(pid: int, done_r: int, out_r: int, deadline: float):
    """(wait status or None past the deadline, the completion report read, the output)."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    said, output = bytearray(), bytearray()
    open_fds = {done_r, out_r}
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None, bytes(said), bytes(output)
            watch = list(open_fds) + ([pidfd] if pidfd is not None else [])
            r, _, _ = select.select(watch, [], [], left if pidfd is not None else min(left, 0.01))
            exited = pidfd is not None and pidfd in r
            for f in r:
                if f in open_fds:
                    if f == done_r:
                        data = os.read(f, 64)
                        said += data[: 64 - len(said)]
                        if not data:
                            open_fds.discard(f)
                    elif not _drain(f, output):
                        open_fds.discard(f)
            if pidfd is None:  # (no pidfd: has it exited? asked without reaping it)
                exited = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
            if exited:
                # anything the kernel left in its group, while the exited child (not yet
                # reaped) still holds the group's id
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
                for f in list(open_fds):  # what is left in the pipes, without blocking
                    while select.select([f], [], [], 0)[0]:
                        if f == done_r:
                            data = os.read(f, 64)
                            said += data[: 64 - len(said)]
                        else:
                            data = os.read(f, 65536)
                            output += data
                            del output[:-MAX_OUTPUT]
                        if not data:
                            break
                return status, bytes(said), bytes(output)
    finally:
        if pidfd is not None:
            os.close(pidfd)


# ----------------------------------------------------------------- candidate
def c_candidate(
    target: str, reference: str | None, fmt: Format, cflags: str | None = None, timeout: float | None = None
):
    """The candidate that runs C kernel ``target`` ('c:FILE.c:FUNCTION') on storage values;
    ``timeout``: seconds one call may take (default KERNEL_TIMEOUT_S)."""
    from audit.oracle.references import get_reference
    from audit.targets.candidates import Candidate

    path, func = parse_target(target)
    if reference is None:
        raise BadOptionError(f"{target}: give the kernel's reference with --reference (e.g. gelu)")
    get_reference(reference)
    comp = compile_kernel(path, cflags, func)
    ctype = kernel_type(comp.source, func)
    dt = TYPES[ctype]
    ok = fmt.bits <= 32 if ctype == "float" else fmt.name in ("fp16", "fp8_e4m3", "fp8_e5m2")
    if not ok:
        raise BadOptionError(
            f"{target}: {fmt.name} values do not all fit in {ctype} "
            f"({'formats of at most 32 bits' if ctype == 'float' else 'fp16 and the fp8 formats'})"
        )
    object_fd(comp)  # verified and loaded now, in the process that forks the workers
    flags = " ".join(shlex.quote(f) for f in comp.flags)

    def fn(x, m):
        xs = np.asarray(x.a, dtype=np.float64)
        with np.errstate(all="ignore"):
            xin = xs.astype(dt)  # exact: every storage value is a value of the kernel's type
        y = run_kernel(object_fd(comp), func, xin.reshape(-1), ctype, timeout).reshape(xs.shape)
        return y.astype(np.float64)

    return Candidate(
        target,
        reference,
        f"{func}(x) compiled from {path} ({ctype}, {flags})",
        f"C kernel {path}, {_compiler()} {flags}",
        fn,
        compute=fmt.name,
        native=True,  # its own arithmetic (float or _Float16), not a formula's
        identity=comp.identity(),
    )
