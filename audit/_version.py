"""The distribution's version, in a module of its own: every document records it, and
importing it loads nothing else; and how to install an extra where this copy came from."""

from __future__ import annotations

__version__ = "0.1.0"


def install_hint(extra: str) -> str:
    """The command that installs the extra EXTRA (``engines``, ``torch``, ``dask``, ...) for this
    copy of actaudit: ``pip install -e 'CHECKOUT[extra]'`` where it runs from a checkout (an
    editable install, or the source tree on PYTHONPATH), ``pip install 'DIR[extra]'`` where it
    was installed from a local directory (``pip install .``: pip's direct_url.json says so),
    else the package index's ``pip install 'actaudit[extra]'``.  actaudit is not on an index
    that a checkout's user can reach, so the index form alone would fail for them."""
    import os

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    direct_url = None
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        try:
            direct_url = distribution("actaudit").read_text("direct_url.json")
        except PackageNotFoundError:
            pass
    except Exception:  # metadata unreadable: the hint falls back to the forms that need none
        direct_url = None
    return hint_for(extra, here, direct_url, os.getcwd())


def hint_for(extra: str, source_root: str, direct_url: str | None, cwd: str) -> str:
    """install_hint's decision, from what it reads: SOURCE_ROOT, the directory above the
    running package (a checkout when it holds actaudit's pyproject.toml); DIRECT_URL, the text
    of the distribution's direct_url.json (PEP 610) or None; CWD, shown as '.'."""
    import json
    import os
    import shlex
    from urllib.parse import unquote, urlparse

    def spec(path: str, editable: bool) -> str:
        where = "." if os.path.abspath(path) == os.path.abspath(cwd) else path
        return f"pip install {'-e ' if editable else ''}{shlex.quote(f'{where}[{extra}]')}"

    if _is_checkout(source_root):
        return spec(source_root, True)
    try:
        info = json.loads(direct_url) if direct_url else None
    except ValueError:
        info = None
    if isinstance(info, dict) and isinstance(info.get("url"), str) and isinstance(info.get("dir_info"), dict):
        url = urlparse(info["url"])
        path = unquote(url.path)
        if url.scheme == "file" and _is_checkout(path):
            return spec(path, info["dir_info"].get("editable") is True)
    return f"pip install {shlex.quote(f'actaudit[{extra}]')}"


def _is_checkout(path: str) -> bool:
    """Whether PATH is a source tree of actaudit (its pyproject.toml names the project)."""
    import os

    try:
        with open(os.path.join(path, "pyproject.toml"), encoding="utf-8") as f:
            text = f.read(1 << 16)
    except (OSError, UnicodeDecodeError):
        return False
    return 'name = "actaudit"' in text
