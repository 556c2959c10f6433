"""File input and output, failing closed.

Output: :func:`atomic_path` writes a temporary file beside the target and renames it into
place when complete, with the permissions the umask gives (an existing file keeps its
mode).  A target that is not a regular file (``-``, a character device such as
/dev/null, a FIFO, /dev/fd/1, a symlink to one of them) is written directly, never
renamed over.  Temporaries left by a killed run (``.NAME.PID.XXXXXXXX.tmp`` whose process
is gone) are removed by the next write into that directory.

Input: every read is bounded by what it will decode to: :func:`read_bytes` reads at most
``limit`` bytes (``/dev/zero`` is refused, not read forever), :func:`load_npy` and
:func:`load_npz` check the declared uncompressed size of every member of an archive and
the shape and dtype in every ``.npy`` header before allocating anything, and never
unpickle.
"""

from __future__ import annotations

import contextlib
import io as _io
import json
import math
import os
import re
import stat
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

from audit.errors import BadFileError

STALE_AGE = 24 * 3600.0  # seconds after which a temporary of a live pid counts as stale too


# ------------------------------------------------------------------ output
_UMASK_LOCK = threading.Lock()


def umask() -> int:
    with _UMASK_LOCK:
        m = os.umask(0o022)
        os.umask(m)
    return m


def is_special(path) -> bool:
    """Whether writing ``path`` must go straight to it: '-' (stdout) or an existing
    target (symlinks followed) that is not a regular file or a directory."""
    if str(path) == "-" or _through_fd(path):
        return True
    try:
        st = os.stat(path)
    except OSError:
        return False
    return not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode))


_FD_DIRS = ("/dev/fd/", "/dev/stdout", "/dev/stderr", "/proc/")


def _through_fd(path) -> bool:
    """Whether ``path`` or a symlink on its way names an open file descriptor (/dev/fd/1,
    /proc/self/fd/1): whatever that is (even a regular file), it is written in place."""
    p = os.path.abspath(str(path))
    for _ in range(40):
        if p.startswith(_FD_DIRS):
            return True
        try:
            target = os.readlink(p)
        except OSError:
            return False
        p = os.path.normpath(os.path.join(os.path.dirname(p), target))
    return False


def _fifo_reader_held(path) -> int | None:
    """For a FIFO target: a write end opened without waiting, held while the output is
    written (so that a reader sees no end of file between this and the writer's own open);
    refused (BadFileError) when no process has it open to read, where opening it to write
    would wait for ever.  None for other targets."""
    import errno

    try:
        if not stat.S_ISFIFO(os.stat(path).st_mode):
            return None
        return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as e:
        if e.errno == errno.ENXIO:
            raise BadFileError(
                f"{path}: a FIFO that no process reads (its output would wait for ever)"
            ) from None
        return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, not ours
        return True
    return True


_TMP_NAME = re.compile(r"^\..+\.(\d+)\.[A-Za-z0-9_]{8}\.tmp$", re.ASCII)  # .NAME.PID.XXXXXXXX.tmp


def clean_stale(directory) -> None:
    """Remove the temporaries that atomic_path left in ``directory`` (``.NAME.PID.XXXXXXXX.tmp``,
    any NAME: a checkpoint's array file changes its name as it goes) whose process is gone,
    or that are older than a day."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            m = _TMP_NAME.match(entry.name)
            if not m:
                continue
            try:
                dead = not _pid_alive(int(m.group(1)))
                old = time.time() - entry.stat(follow_symlinks=False).st_mtime > STALE_AGE
                if (dead or old) and entry.is_file(follow_symlinks=False):
                    os.unlink(entry.path)
            except OSError:
                continue


@contextlib.contextmanager
def atomic_path(path):
    """Yield a path to write; the result appears at ``path`` only when complete.

    A regular (or new) target: a temporary file beside it, renamed onto it on success
    (a symlink to a regular file is followed: the file it names is replaced, the link
    kept), with mode 0666 & ~umask, or the existing file's mode.  On any exception
    (KeyboardInterrupt included) the temporary file is removed and ``path`` is left as
    it was.  A special target ('-', a device, a FIFO, /dev/fd/N) is yielded itself:
    written directly, never replaced.
    """
    if str(path) == "-":
        sys.stdout.flush()
        yield Path("/dev/stdout")
        return
    if not str(path):
        raise BadFileError("an output path must not be empty")
    path = Path(path)
    if is_special(path):
        held = _fifo_reader_held(path)
        try:
            yield path
        except OSError as e:
            if e.filename is None:  # (a write to it: name the user's path, /dev/full)
                raise OSError(e.errno, e.strerror, str(path)) from None
            raise
        finally:
            if held is not None:
                os.close(held)
        return
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    if path.is_dir():
        raise BadFileError(f"{path}: is a directory, not a file to write")
    directory = path.parent if str(path.parent) else Path(".")
    clean_stale(directory)
    fd = tmp = None
    try:
        # (a signal waits until the temporary file is known to the cleanup below)
        with signals_held():
            try:
                fd, tmp = tempfile.mkstemp(
                    prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=directory
                )
            except OSError as e:  # (a missing directory, one not writable: the user's path, not ours)
                raise OSError(e.errno, e.strerror, str(path)) from None
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode) & 0o777  # (never a set-id bit)
        except OSError:
            mode = 0o666 & ~umask()
        os.fchmod(fd, mode)
        os.close(fd)
        fd = None
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException as e:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if isinstance(e, OSError) and tmp is not None and e.filename in (tmp, str(tmp)):
            # name the user's path, not our temporary file
            raise OSError(e.errno, e.strerror, str(path)) from None
        raise


# ------------------------------------------------------------- the caches
def cache_directory(directory) -> Path:
    """``directory`` (a cache of actaudit's: oracle tables, compiled kernels), made with
    mode 0700 when missing (a directory that exists keeps its mode: a group-shared cache
    stays shared; the directory may be reached through a link that the user made: its
    files may not be links); refused (BadFileError) when it is not a directory."""
    d = Path(directory)
    if not d.exists() and not d.is_symlink():
        with contextlib.suppress(FileExistsError):
            os.makedirs(d, mode=0o700)
    try:
        st = os.stat(d)
    except OSError as e:
        raise BadFileError(f"{d}: cache directory unusable ({e.strerror or e})") from None
    if not stat.S_ISDIR(st.st_mode):
        raise BadFileError(f"{d}: the cache directory is not a directory (refused)")
    return d


@contextlib.contextmanager
def cache_file(path):
    """Yield an open binary file that becomes the cache file ``path`` when the block
    completes: created with O_CREAT | O_EXCL | O_NOFOLLOW (mode 0666 & ~umask) under a name of its
    own in the cache directory (checked by :func:`cache_directory`), then renamed onto
    ``path``.  A ``path`` that is a symbolic link is refused, never followed: its target
    is never written."""
    path = Path(path)
    directory = cache_directory(path.parent)
    if path.is_symlink():
        raise BadFileError(f"{path}: a symbolic link in the cache (refused: its target is never written)")
    clean_stale(directory)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    made = None
    try:
        with signals_held():  # (a signal waits until the new file is known to the cleanup below)
            for _ in range(100):
                tmp = directory / f".{path.name}.{os.getpid()}.{os.urandom(6).hex()[:8]}.tmp"
                try:
                    fd = os.open(tmp, flags, 0o666 & ~umask())
                    made = tmp
                    break
                except FileExistsError:
                    continue
            else:
                raise BadFileError(f"{directory}: cannot create a temporary cache file")
        with os.fdopen(fd, "wb") as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        if made is not None:
            with contextlib.suppress(OSError):
                os.unlink(made)
        raise


def write_text(path, text: str) -> None:
    if str(path) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    path = Path(path)
    if not is_special(path):
        path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)


# ------------------------------------------------------------------- input
@contextlib.contextmanager
def signals_held():
    """SIGINT and SIGTERM that arrive inside are acted on when it ends, as their handlers
    then say (Python runs signal handlers in the main thread, whichever thread the signal
    reached; elsewhere than the main thread this holds nothing)."""
    import signal

    got: list = []
    old = {}
    try:
        for s in (signal.SIGINT, signal.SIGTERM):
            old[s] = signal.signal(s, lambda signum, frame: got.append(signum))
    except ValueError:  # not the main thread
        for s, h in old.items():
            signal.signal(s, h)
        yield
        return
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if got:
            s = got[0]
            h = old[s]
            if callable(h):
                h(s, None)
            elif h != signal.SIG_IGN:  # the default action (or a handler set outside Python)
                os.kill(os.getpid(), s)


def import_held(name: str):
    """``importlib.import_module(name)`` with SIGINT and SIGTERM held until it returns (then
    acted on): a signal's exception raised inside an engine's C++ initialization aborted
    the process (torch's ``_c10d_init``: pybind11's error_already_set reached
    std::terminate, SIGABRT) or came out as an ImportError that read as 'not installed'.
    For the engines' own packages only: never a user's module, whose import may not end."""
    import importlib

    if sys.modules.get(name) is not None:  # (None: an import refused, as import_module says)
        return sys.modules[name]
    with signals_held():
        return importlib.import_module(name)


SET_PREFIX = ".actaudit-report-"  # the temporary directory of write_files
SET_LOCK = ".pid"  # in it: the pid of the process writing the set


def clean_stale_sets(out) -> None:
    """Remove the temporary directories that a write_files killed with SIGKILL left in
    ``out`` (``.actaudit-report-XXXX/``): those whose lock names a process that is gone,
    or that are older than a day (one without a readable lock: older than a minute)."""
    import shutil

    with contextlib.suppress(OSError):
        for entry in os.scandir(out):
            if not entry.name.startswith(SET_PREFIX) or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                pid = int(read_text(Path(entry.path) / SET_LOCK, 32, "lock", regular=True).strip())
                gone = not _pid_alive(pid)
            except (BadFileError, ValueError):  # no lock yet (being made?) or not ours
                gone = time.time() - entry.stat(follow_symlinks=False).st_mtime > 60
            old = time.time() - entry.stat(follow_symlinks=False).st_mtime > STALE_AGE
            if gone or old:
                shutil.rmtree(entry.path, ignore_errors=True)


def check_out_dir(out_dir, writes: str) -> Path:
    """The directory a command writes its set of files into, checked before any work: it
    must exist, be a directory (not a file, FIFO or device) and take a new file (probed: a
    file is created there and removed).  ``writes``: what the command puts there, for the
    message of a path that is not a directory.  BadOptionError (one line, exit 2) else."""
    from audit.errors import BadOptionError

    d = Path(out_dir)
    if not d.exists():
        raise BadOptionError(f"--out {d}: no such directory")
    if not d.is_dir():
        raise BadOptionError(f"--out {d}: not a directory ({writes})")
    _probe(d, f"--out {d}")
    return d


def _probe(d: Path, what: str) -> None:
    """Whether directory d takes a new file: one is made there and removed (BadOptionError,
    naming ``what``, where it cannot be)."""
    from audit.errors import BadOptionError

    try:
        with signals_held():  # (made and removed before a signal is acted on)
            fd, probe = tempfile.mkstemp(prefix=".actaudit-probe-", dir=d)
            os.close(fd)
            os.unlink(probe)
    except OSError as e:
        raise BadOptionError(f"{what}: cannot write there ({e.strerror or e})") from None


def check_out_files(*outputs) -> None:
    """The files a command will write, checked before its work: ``outputs`` are (option,
    path or None) pairs; '-' (stdout) and None pass.  Refused (BadOptionError, one line): a
    path that is a directory, one under a file, one whose nearest existing directory takes
    no new file (probed), and two options naming the same file (one would overwrite the
    other).  Devices and FIFOs are written directly, as before (write_text)."""
    from audit.errors import BadOptionError

    seen: dict = {}
    for option, path in outputs:
        if path is None or str(path) == "-":
            continue
        p = Path(path)
        if p.is_dir():
            raise BadOptionError(f"{option} {p}: is a directory, not a file to write")
        key = os.path.realpath(p)
        if key in seen:
            raise BadOptionError(
                f"{seen[key]} and {option} name the same file {p}: one would overwrite the other"
            )
        seen[key] = option
        if p.exists():
            continue  # (a regular file is replaced, a device written: both checked when written)
        d = p.parent
        while not d.exists() and d != d.parent:
            d = d.parent
        if not d.is_dir():
            raise BadOptionError(f"{option} {p}: {d} is not a directory")
        _probe(d, f"{option} {p}")


def write_files(out, files) -> None:
    """Write ``files`` [(name, bytes or str), ...] into directory ``out`` as a set: each is
    written in a temporary directory beside them, then all are moved in, in order (put
    index.html last), with SIGINT and SIGTERM held until the last is in place: an
    interrupted report or fit leaves the whole set or nothing, never a part."""
    from audit.errors import BadOptionError

    out = Path(out)
    for name, _ in files:  # refused before any is written: a set is whole or absent
        t = out / name
        if t.exists() and not t.is_symlink() and not t.is_file():  # (a link itself is replaced)
            raise BadOptionError(f"{t}: not a regular file: refusing to write over it")
    clean_stale_sets(out)
    import shutil

    tmp = None
    try:
        with signals_held():  # (a signal waits until the directory is known to the cleanup below)
            tmp = Path(tempfile.mkdtemp(prefix=SET_PREFIX, dir=out))
        # the lock: this process's pid, so that a later run knows when the set is stale
        fd = os.open(tmp / SET_LOCK, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, f"{os.getpid()}\n".encode())
        finally:
            os.close(fd)
        for name, data in files:
            if isinstance(data, str):
                (tmp / name).write_text(data, encoding="utf-8")
            else:
                (tmp / name).write_bytes(data)
        with signals_held():  # the set moves in whole
            for name, _ in files:
                os.replace(tmp / name, out / name)
    finally:
        if tmp is not None:
            with signals_held():  # (removed whole: a signal then acts)
                shutil.rmtree(tmp, ignore_errors=True)


def read_bytes(path, limit: int, what: str = "file", regular: bool = True, nofollow: bool = False) -> bytes:
    """The bytes of ``path``, refusing more than ``limit`` (checked while reading, so a
    device or FIFO that never ends is refused too).  The one way actaudit reads a file:
    it is opened non-blocking (a FIFO without a writer never blocks the open) and
    checked before anything is read.  ``regular`` (the default): only a regular file (a
    FIFO or a device is refused at once, never waited on); False: a FIFO or a device is
    read too (a dump on /dev/stdin).  ``nofollow``: a symbolic link is refused (files of
    the caches actaudit owns)."""
    p = Path(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if nofollow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        try:
            fd = os.open(p, flags)
        except OSError as e:
            if nofollow and os.path.islink(p):
                raise BadFileError(
                    f"{p}: a symbolic link (refused: the {what} must be a file of the cache itself)"
                ) from None
            raise e
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                raise BadFileError(f"{p}: is a directory, not a {what}")
            if regular and not stat.S_ISREG(mode):
                raise BadFileError(f"{p}: not a regular file (a {what} is read from a regular file only)")
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(limit + 1)
    except FileNotFoundError:
        raise BadFileError(f"{p}: {what} not found") from None
    except IsADirectoryError:
        raise BadFileError(f"{p}: is a directory, not a {what}") from None
    except OSError as e:
        raise BadFileError(f"{p}: cannot read ({e.strerror or e})") from None
    if len(data) > limit:
        raise BadFileError(f"{p}: over {limit} bytes, more than a {what} may hold (too large)")
    return data


def read_text(path, limit: int, what: str = "file", regular: bool = True, nofollow: bool = False) -> str:
    data = read_bytes(path, limit, what, regular, nofollow)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadFileError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


# (re.ASCII: \d is 0-9 alone; float() reads other scripts' digits too, '١' as 1.0)
_DECIMAL = re.compile(
    r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)", re.IGNORECASE | re.ASCII
)


def read_csv(data: bytes, where: str, header: bool = True) -> dict[str, list[str]]:
    """The columns of a CSV file's bytes, as text cells: {name: cells} (``header``: the first
    row names them; else one column, 'x').  Refused, in one line naming ``where``: bytes that
    are not UTF-8, a duplicate or empty column name, a row with more or fewer cells than the
    header, no rows.  (The csv module, not pandas: a row with an extra cell is not silently
    dropped or shifted, and the cells stay text until :func:`decimal_floats` reads them.)"""
    import csv

    try:
        text = data.decode("utf-8-sig")
        rows = [r for r in csv.reader(_io.StringIO(text, newline=""), strict=True) if r]
    except (UnicodeDecodeError, csv.Error) as e:
        raise BadFileError(f"{where}: unreadable CSV ({type(e).__name__}: {e})") from None
    if header:
        if not rows:
            raise BadFileError(f"{where}: an empty CSV file")
        names, rows = [c.strip() for c in rows[0]], rows[1:]
        if any(not n for n in names) or len(set(names)) != len(names):
            raise BadFileError(f"{where}: CSV column names must be distinct and not empty: {names}")
    else:
        names = ["x"]
    if not rows:
        raise BadFileError(f"{where}: a CSV file with no rows")
    for i, r in enumerate(rows):
        if len(r) != len(names):
            line = i + 1 + header
            raise BadFileError(f"{where}: CSV row {line} has {len(r)} cells, the header {len(names)}")
    return {n: [r[j].strip() for r in rows] for j, n in enumerate(names)}


def decimal_floats(cells, where: str):
    """Decimal text cells (as ``float()`` reads them: correctly rounded to float64, 'inf',
    'nan') as a float64 array; a cell of any other shape (hex, '1_000', empty) is refused."""
    import numpy as np

    out = np.empty(len(cells), dtype=np.float64)
    for i, c in enumerate(cells):
        if not _DECIMAL.fullmatch(c):
            shown = c if len(c) <= 40 else c[:40] + "..."
            raise BadFileError(f"{where} has entries that are not numbers (row {i + 1}: {shown!r})")
        out[i] = float(c)
    return out


def _npy(fh, limit: int, where: str):
    """One .npy array from a file object, its header checked first: no object dtype, at
    most ``limit`` bytes of data."""
    import numpy as np
    from numpy.lib import format as npf

    try:
        version = npf.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = npf.read_array_header_1_0(fh)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = npf.read_array_header_2_0(fh)
        else:
            raise ValueError(f"unsupported .npy version {version}")
    except ValueError as e:
        raise BadFileError(f"{where}: not a valid .npy array ({e})") from None
    if dtype.hasobject:
        raise BadFileError(f"{where}: an object array (not read: files are never unpickled)")
    if any(not isinstance(d, int) or d < 0 for d in shape):
        raise BadFileError(f"{where}: not a valid .npy array (shape {shape} has a negative dimension)")
    n = math.prod(shape)
    if n * dtype.itemsize > limit:
        raise BadFileError(
            f"{where}: declares {n * dtype.itemsize} bytes of data, more than the limit of {limit}"
        )
    data = fh.read(n * dtype.itemsize)
    if len(data) != n * dtype.itemsize:
        raise BadFileError(f"{where}: truncated ({len(data)} of {n * dtype.itemsize} bytes of data)")
    a = np.frombuffer(data, dtype=dtype).copy()
    return a.reshape(shape, order="F" if fortran else "C")


def npy_from_bytes(data: bytes, limit: int, where: str):
    """One .npy array from bytes already read (bounded), its header checked first."""
    return _npy(_io.BytesIO(data), limit, where)


def npy_header_text(data: bytes) -> str:
    """The header of a .npy file (the dict literal, and anything after it on that line),
    as text; '' if there is none."""
    if data[:6] != b"\x93NUMPY" or len(data) < 10:
        return ""
    if data[6] == 1:
        n, start = int.from_bytes(data[8:10], "little"), 10
    else:
        n, start = int.from_bytes(data[8:12], "little"), 12
    return data[start : start + n].decode("latin-1")


def load_npy(path, limit: int, what: str = "file", regular: bool = True, nofollow: bool = False):
    data = read_bytes(path, limit + 4096, what, regular, nofollow)
    return _npy(_io.BytesIO(data), limit, str(path))


def load_npz(
    path, limit: int, what: str = "file", keys=None, regular: bool = True, nofollow: bool = False
) -> dict:
    """The arrays of an ``.npz`` (``keys``: only those), never decoding more than
    ``limit`` bytes in all: each member's declared uncompressed size is checked before
    it is read, and reading stops at that size."""
    data = read_bytes(path, limit, what, regular, nofollow)
    try:
        z = zipfile.ZipFile(_io.BytesIO(data))
        infos = z.infolist()
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        raise BadFileError(f"{path}: not a valid .npz archive ({e})") from None
    out = {}
    total = 0
    for info in infos:
        name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
        if keys is not None and name not in keys:
            continue
        total += info.file_size
        if info.file_size > limit or total > limit:
            raise BadFileError(
                f"{path}: member '{name}' decompresses to {info.file_size} bytes, "
                f"more than the limit of {limit}"
            )
        try:
            with z.open(info) as fh:
                out[name] = _npy(fh, info.file_size, f"{path}: member '{name}'")
        except (zipfile.BadZipFile, ValueError, OSError, EOFError, NotImplementedError) as e:
            raise BadFileError(f"{path}: member '{name}' unreadable ({e})") from None
    return out


class _DuplicateKey(ValueError):
    pass


def _unique(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


def load_json(
    path,
    limit: int,
    what: str = "file",
    unique_keys: bool = False,
    regular: bool = True,
    nofollow: bool = False,
):
    """A JSON document of at most ``limit`` bytes (nesting bounded by the recursion limit);
    ``unique_keys``: an object that gives a key twice is refused (JSON would keep the last)."""
    text = read_text(path, limit, what, regular, nofollow)
    try:
        return json.loads(text, object_pairs_hook=_unique if unique_keys else None)
    except _DuplicateKey as e:
        raise BadFileError(
            f"{path}: key '{e.args[0]}' appears twice in one object (refused: the last copy would win)"
        ) from None
    except json.JSONDecodeError as e:
        raise BadFileError(f"{path}: corrupted JSON ({e.msg} at line {e.lineno})") from None
    except RecursionError:
        raise BadFileError(f"{path}: nested too deeply") from None
    except ValueError as e:  # an integer of more digits than Python converts (4300)
        raise BadFileError(f"{path}: corrupted JSON ({' '.join(str(e).split())})") from None


# -------------------------------------------------------------------- JSON
def json_number(v):
    """A float for JSON: NaN and infinities become the strings 'nan', 'inf', '-inf'."""
    if v is None:
        return None
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def dumps(doc) -> str:
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def format_number(v, digits: int = 3) -> str:
    """Every number a text table or message shows, in one format: ``digits`` significant
    digits (3 by default: 2040, 15.2, 0.251, 1.92e-3, 7.07e4, in at most 10 characters),
    integers below 10^5 in full, an exponent without '+' or leading zeros; '-' for missing
    or NaN, 'inf', '-inf'.  With more digits (an input x, a bound) trailing zeros are
    dropped: -11.0938, 0.5.  reports/cells.py ``num`` is this function."""
    if v is None:
        return "-"
    v = float(v)
    if math.isnan(v):
        return "-"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0:
        return "-0" if math.copysign(1.0, v) < 0 else "0"
    a = abs(v)
    if v == int(v) and a < 1e5:
        return str(int(v))
    if 1e-3 <= a < 1e5:
        decimals = max(0, digits - 1 - math.floor(math.log10(a)))
        s = f"{v:.{decimals}f}"
        if abs(float(s)) >= 1e5:  # 99999.7 rounds up to 100000
            return _exp(v, digits)
        if digits > 3 and "." in s:
            s = s.rstrip("0").rstrip(".")
        return s
    return _exp(v, digits)


def _exp(v: float, digits: int) -> str:
    m, _, e = f"{v:.{digits - 1}e}".partition("e")
    m = m.rstrip("0").rstrip(".")
    return f"{m}e{int(e)}"
