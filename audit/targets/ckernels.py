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
COMPILE_TIMEOUT_S = 300.0  # wall seconds a compilation may take (then its process group is killed)
MAX_SOURCE = 1 << 22  # bytes of a kernel source (and of each file it includes)
MAX_OBJECT = 1 << 26  # bytes of a compiled object
KILL_GRACE_S = 2.0  # seconds a stopped runner has to kill its kernel's descendants
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


# The flags a kernel may be compiled with: code generation only.  Anything that names an
# output (-o, --output=, -Wl,-o,PATH, -MF), changes what is compiled or written (-E,
# --preprocess, -c, --compile, -S, -save-temps, -M*, -fpreprocessed), passes words to
# another program (-Wl, -Wa, -Wp, -Xlinker), loads code (-fplugin=, -specs=) or reads and
# writes files of its own (-fprofile-*, -fdump-*, -fdiagnostics-*, -fdeps-*) is refused:
# each could hide a header from the dependency list, or overwrite a file.
_WORD = r"[A-Za-z0-9][A-Za-z0-9_+.-]*"
_ALLOWED = (
    (re.compile(r"-O([0-3sgz]|fast)?"), "optimization level"),
    (re.compile(rf"-f{_WORD}(={_WORD}(,{_WORD})*)?"), "code generation (-fNAME[=VALUE])"),
    (re.compile(rf"-m{_WORD}(={_WORD}(,{_WORD})*)?"), "target (-mNAME, -march=, -mtune=)"),
    (re.compile(r"-[DU][A-Za-z_]\w*(=.*)?", re.S), "a macro (-DNAME[=VALUE], -UNAME)"),
    (re.compile(r"-std=[a-z0-9:]+"), "the language standard"),
    (re.compile(r"-I.+", re.S), "an include directory (read only)"),
)
_F_REFUSED = (
    "plugin",
    "dump",
    "profile",
    "auto-profile",
    "opt-info",
    "save-optimization-record",
    "stack-usage",
    "callgraph-info",
    "preprocessed",
    "directives-only",
    "syntax-only",
    "compare-debug",
    "debug-prefix-map",
    "file-prefix-map",
    "macro-prefix-map",
    "profile-prefix-map",
    "working-directory",
    "deps",
    "diagnostics",
    "lto",
    "specs",
    "record",
)


def check_flag(f: str) -> str | None:
    """Why compiler flag ``f`` is refused (None: allowed)."""
    if "\0" in f:
        return "holds a NUL character"
    kind = next((what for rx, what in _ALLOWED if rx.fullmatch(f)), None)
    if kind is None:
        return (
            "is not a flag actaudit passes on (allowed: -O*, -fNAME[=VALUE], -mNAME[=VALUE], "
            "-march=/-mtune=, -DNAME[=VALUE], -UNAME, -IDIR, -std=STD)"
        )
    if f.startswith("-f"):
        name = f[2:].removeprefix("no-")
        if any(name.startswith(p) for p in _F_REFUSED):
            return "reads or writes files of its own, or changes what is compiled: not a code-generation flag"
    if f.startswith("-I"):
        d = f[2:]
        if not os.path.isdir(d):
            return f"names no directory ('{d}')"
    return None


def check_flags(flags: list[str], where: str = "--cflags") -> list[str]:
    """``flags`` (one string each), every one on the allow-list; else one line naming it."""
    for f in flags:
        why = check_flag(f)
        if why is not None:
            raise BadOptionError(f"{where}: {f!r} {why}")
    return list(flags)


def parse_cflags(cflags: str | None) -> list[str]:
    """--cflags as the compiler's arguments, split as a POSIX shell does (one line on a
    quoting error), each flag on the allow-list (:func:`check_flag`)."""
    text = DEFAULT_CFLAGS if cflags is None else cflags
    if not isinstance(text, str) or "\0" in text:
        raise BadOptionError(f"--cflags must be a string of compiler flags, got {cflags!r}")
    try:
        flags = shlex.split(text)
    except ValueError as e:
        raise BadOptionError(f"--cflags {text!r}: {e} (flags are split as a POSIX shell does)") from None
    return check_flags(flags)


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


def _run(cmd: list[str], stdin: bytes = b"", timeout: float | None = None) -> tuple[int, bytes, bytes]:
    """``cmd`` (the compiler) under its limits, in a process group of its own: after
    ``timeout`` wall seconds (default COMPILE_TIMEOUT_S; an ``#include`` of a FIFO blocks
    the compiler without using CPU time), or on SIGINT/SIGTERM, the whole group is killed,
    the driver's passes (cc1, as) with it: no orphan is left."""
    import signal

    env = {**os.environ, "LC_ALL": "C"}  # messages in one language, plain quotes
    limit = COMPILE_TIMEOUT_S if timeout is None else timeout
    try:
        proc = subprocess.Popen(
            _limited(cmd),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    except (OSError, ValueError) as e:
        raise KernelError(f"cannot run the C compiler '{cmd[0]}': {_one_line(str(e))}") from None
    try:
        out, err = proc.communicate(stdin, timeout=limit)
    except subprocess.TimeoutExpired:
        _kill_group(proc, signal.SIGKILL)
        raise KernelError(
            f"the C compiler '{cmd[0]}' did not finish within {limit:g} s (stopped; an #include "
            "of a FIFO or a device blocks it)"
        ) from None
    except BaseException:
        _kill_group(proc, signal.SIGKILL)
        raise
    return proc.returncode, out, err


def _kill_group(proc, sig) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
    with contextlib.suppress(Exception):
        proc.communicate(timeout=30)


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
        from audit.targets.identity import environment

        return {
            "cflags": list(self.flags),
            "kernel_digest": self.kernel_digest,
            "compiler": self.compiler,
            "environment": environment("c"),  # (glibc's hwcaps, a preload: libm's code)
        }


def _verified(so: Path, key: str) -> bytes | None:
    """The bytes of cached object ``so`` if its record names ``key`` and its SHA-256, else
    None (absent, truncated, altered, or copied under another key: compiled again)."""
    from audit.errors import BadFileError
    from audit.io import load_json, read_bytes

    try:
        rec = load_json(so.with_suffix(".json"), 4096, "object record", nofollow=True)
        data = read_bytes(so, MAX_OBJECT, "compiled object", nofollow=True)
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
    deps = _dependencies(path, base, unit, flags)
    if absolute not in deps:  # the kernel comes in by -include: a list without it is not the list
        raise KernelError(
            f"C kernel '{path}': the compiler's dependency list does not name the kernel "
            f"({' '.join(flags)}): refused"
        )
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


def _dependencies(path, base: list[str], unit: bytes, flags: list[str]) -> list[str]:
    """Every file the kernel's unit includes, as the compiler lists them (-M), written to a
    file of a private directory actaudit chooses (-MF, after every flag: no flag can send it
    elsewhere); an empty list is an error."""
    import tempfile

    from audit.errors import BadFileError
    from audit.io import read_bytes

    with tempfile.TemporaryDirectory(prefix="actaudit-deps-") as tmp:
        dep = os.path.join(tmp, "kernel.d")
        rc, _, err = _run(base[:-1] + ["-M", "-MT", "kernel", "-MF", dep, "-"], unit)
        if rc != 0:
            raise KernelError(
                f"C kernel '{path}' does not compile ({' '.join(flags)}): {_first_error(err, rc)}"
            )
        try:
            text = _text(read_bytes(dep, MAX_SOURCE, "dependency list", regular=True))
        except BadFileError as e:
            raise KernelError(f"C kernel '{path}': no dependency list from the compiler ({e})") from None
    deps = _depfile_paths(text)
    if not deps:
        raise KernelError(f"C kernel '{path}': the compiler's dependency list is empty ({' '.join(flags)})")
    return deps


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
    def compile_to(tmp: Path) -> None:
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

    return _cache_put(so, key, "kernel.so", "compiled object", compile_to)


def _cache_put(dest: Path, key: str, name: str, what: str, compile_to) -> bytes:
    """Build ``dest`` in the cache: ``compile_to(tmp)`` writes it as NAME in a private
    directory of this process (raising KernelError where it cannot), then the bytes and their
    record (key, sha256, cache version) go into the cache (:func:`_store`); the private
    directory goes in every case.  The bytes built."""
    from audit.io import read_bytes

    private = _private_dir(dest.parent)
    tmp = private / name
    try:
        compile_to(tmp)
        data = read_bytes(tmp, MAX_OBJECT, what, nofollow=True)
        _store(dest, key, data)
        return data
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _private_dir(root: Path) -> Path:
    """A directory of this process (mode 0700) inside the cache directory ``root``: where
    the compiler writes (``-o`` follows a symbolic link; nothing can be planted here)."""
    import tempfile

    from audit.io import cache_directory

    return Path(tempfile.mkdtemp(prefix=f".build.{os.getpid()}.", dir=cache_directory(root)))


def _store(path: Path, key: str, data: bytes) -> None:
    """The object (or runner) and its record into the cache, each written whole under a
    name of its own and renamed into place (audit.io.cache_file: links refused)."""
    from audit.io import cache_file

    with cache_file(path) as fh:
        fh.write(data)
    with cache_file(path.with_suffix(".json")) as fh:
        fh.write(json.dumps({"key": key, "sha256": _sha(data), "version": CACHE_VERSION}).encode())


# ------------------------------------------------------------------- loading
_LOADED: dict = {}  # (so, sha256) -> (fd of a memory file holding those bytes, its inode)


def object_fd(c: Compiled) -> int:
    """A memory file holding the verified bytes of ``c`` (created once per process: forked
    workers inherit it; elsewhere it is made again from the cache, verified again)."""

    def load() -> bytes:
        data = _verified(c.so, c.key)
        if data is None or _sha(data) != c.sha256:
            raise KernelError(f"the compiled object of the C kernel changed in the cache ({c.so}): run again")
        return data

    return _memory_file(_LOADED, (str(c.so), c.sha256), "actaudit-kernel", 0, load)


def _memory_file(table: dict, k, name: str, flags: int, load) -> int:
    """The memory file ``table`` holds for ``k`` while it is still the one made (the same
    inode: not closed, its number not reused), else a new one, ``name``, holding the bytes
    ``load()`` gives (os.memfd_create ``flags``)."""
    got = table.get(k)
    if got is not None:
        fd, ino = got
        with contextlib.suppress(OSError):
            if os.fstat(fd).st_ino == ino:
                return fd
    data = load()
    fd = os.memfd_create(name, flags)
    os.write(fd, data)
    table[k] = (fd, os.fstat(fd).st_ino)
    return fd


# ------------------------------------------------------------------- running
# The kernel's process is not a fork of this one: a fork of a Python process that loaded
# OpenBLAS, torch, onnxruntime... (and whose other threads may hold their locks) inherits
# their atexit handlers, destructors and locks, and a kernel calling exit() there can hang
# on one of them.  It is a fresh process running this small program (compiled once, cached
# and verified like a kernel's object), which loads nothing but the C library and the kernel.
RUNNER_SOURCE = r"""/* actaudit's C kernel runner: argv = RUNNER PARENT OBJECT_FD FUNC DATA_FD N ELEMSIZE DONE_FD RUNNER_FD
   DATA_FD (a memory file) holds the 16-byte token, then x (N elements), then y (N); the
   kernel sees descriptors 0, 1, 2, OBJECT_FD and DONE_FD only.

   The runner is a supervisor: a child subreaper (PR_SET_CHILD_SUBREAPER) that forks the
   process calling the kernel, and when that ends (or on SIGTERM: from actaudit, or as its
   parent-death signal) kills every descendant still alive -- a kernel's child that
   double-forks and calls setsid() is reparented here, not to init -- and reaps them all
   before it exits with the kernel process's status. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

typedef void (*kernel_fn)(const void *, void *, size_t);

static long num(const char *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < 0) _exit(6);
    return v;
}

static volatile pid_t kid = 0;

static void on_term(int sig) {
    (void)sig;
    if (kid > 0) kill(kid, SIGKILL);
}

/* SIGKILL to every child of this process (orphans of the tree included); their number */
static int kill_children(pid_t self) {
    int n = 0;
    DIR *d = opendir("/proc");
    if (d == NULL) return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end != '\0' || pid <= 0 || pid == (long)self) continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        FILE *f = fopen(path, "r");
        if (f == NULL) continue;
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[got] = '\0';
        char *close_paren = strrchr(buf, ')');
        long ppid = -1;
        char state;
        if (close_paren != NULL && sscanf(close_paren + 1, " %c %ld", &state, &ppid) == 2 && ppid == (long)self) {
            kill((pid_t)pid, SIGKILL);
            n++;
        }
    }
    closedir(d);
    return n;
}

static void kill_descendants(void) {
    pid_t self = getpid();
    for (;;) {
        int st;
        if (kill_children(self) > 0) {
            if (waitpid(-1, &st, 0) < 0 && errno == ECHILD) return;
            continue;
        }
        pid_t w = waitpid(-1, &st, WNOHANG);
        if (w < 0 && errno == ECHILD) return;
        if (w == 0) sched_yield(); /* a child not yet listed (reparented just now) */
    }
}

static int run_kernel(char **argv) {
    long obj = num(argv[2]), data = num(argv[4]), done = num(argv[7]);
    size_t n = (size_t)num(argv[5]), size = (size_t)num(argv[6]);
    size_t bytes = 16 + 2 * n * size;
    unsigned char *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, (int)data, 0);
    if (map == MAP_FAILED) _exit(6);
    close((int)data);
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

int main(int argc, char **argv) {
    if (argc != 9) _exit(6);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
    if ((long)getppid() != num(argv[1])) _exit(5); /* the parent died before PDEATHSIG took effect */
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    close((int)num(argv[8]));
    pid_t self = getpid();
    pid_t p = fork();
    if (p < 0) _exit(6);
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (getppid() != self) _exit(5);
        signal(SIGTERM, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        return run_kernel(argv);
    }
    kid = p;
    close((int)num(argv[4])); /* the kernel's data and report are the kernel process's */
    close((int)num(argv[7]));
    close((int)num(argv[2]));
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL); /* SIGTERM (blocked by actaudit around the start) */
    int st = 0;
    while (waitpid(p, &st, 0) < 0) {
        if (errno != EINTR) _exit(6);
    }
    kid = 0;
    kill_descendants();
    if (WIFSIGNALED(st)) {
        int sig = WTERMSIG(st);
        signal(sig, SIG_DFL);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        sigprocmask(SIG_UNBLOCK, &one, NULL);
        raise(sig);
        _exit(128 + sig);
    }
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 6);
}
"""
_RUNNER: dict = {}  # (compiler identity) -> (fd of a memory file holding the verified runner, its inode)


def runner_fd() -> int:
    """A memory file holding the verified kernel runner (compiled once per compiler, cached
    under a key of its source and the compiler's identity; made once per process)."""
    ident = compiler_identity()

    def load() -> bytes:
        key = (
            "runner-"
            + _sha(json.dumps({"v": CACHE_VERSION, "src": RUNNER_SOURCE, "cc": ident}).encode())[:40]
        )
        exe = cache_root() / key
        data = _verified(exe, key)
        if data is None:
            data = _build_runner(exe, key, ident.split(" ", 1)[0])
        return data

    return _memory_file(_RUNNER, ident, "actaudit-runner", os.MFD_CLOEXEC, load)


def _build_runner(exe: Path, key: str, cc: str) -> bytes:
    def compile_to(tmp: Path) -> None:
        rc, _, err = _run([cc, "-O2", "-x", "c", "-", "-o", str(tmp), "-ldl"], RUNNER_SOURCE.encode())
        if rc != 0:
            raise KernelError(f"cannot build actaudit's C kernel runner with {cc}: {_first_error(err, rc)}")

    return _cache_put(exe, key, "runner", "kernel runner", compile_to)


def _kill(pid: int) -> None:
    """SIGTERM to the runner (it kills every descendant of the kernel, then exits; waited
    for at most KILL_GRACE_S), SIGKILL to its process group and to it, then reap it;
    nothing if it was reaped already (its pid may belong to another process by now)."""
    try:
        exited = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return
    if not exited:  # the runner kills and reaps every descendant on SIGTERM (their subreaper)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
            pidfd = os.pidfd_open(pid)
            try:
                select.select([pidfd], [], [], KILL_GRACE_S)
            finally:
                os.close(pidfd)
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
