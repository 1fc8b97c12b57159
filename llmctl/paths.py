"""Where llmctl's shipped data lives (catalog, templates), its per-user
state, and the mode of the files it writes.

In a source checkout (and an editable install) they are top-level folders of
the repository; a wheel carries them under ``llmctl/_data/``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    packaged = _PKG / "_data" / name
    if packaged.is_dir():
        return packaged
    return _PKG.parent / name


def llmctl_home() -> Path:
    """llmctl's per-user state: ``$LLMCTL_HOME``, default ``~/.llmctl`` (the
    local cluster's state file, caches)."""
    env = os.environ.get("LLMCTL_HOME")
    return Path(env).expanduser() if env else Path.home() / ".llmctl"


def file_mode(path: Path) -> int:
    """The permission bits for a file written at ``path`` (atomically, through
    a temporary file, which ``mkstemp`` creates 0600): the mode of the file it
    replaces, else what ``open()`` gives a new file, 0666 minus the umask
    (usually 0644)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mask = os.umask(0o022)  # read the umask (it can only be read by setting it) and put it back
        os.umask(mask)
        return 0o666 & ~mask


def write_atomic(path: Path, text: str | bytes, *, mode: int | None = None) -> Path:
    """Write ``text`` to ``path`` through a temporary file of a unique name in
    the same directory, then rename it over ``path``: a reader sees the old
    file or the new one, never a half-written one, and two writers at once
    never share a temporary file. ``mode`` is set before any byte is written
    (0600 for a secret); by default :func:`file_mode`. The one atomic write of
    llmctl (:func:`write_all_atomic` writes several files with it)."""
    return write_all_atomic([(Path(path), text)], mode=mode)[0]


def write_all_atomic(files: list[tuple[Path, str | bytes]], *, mode: int | None = None) -> list[Path]:
    """:func:`write_atomic` for several files at once: every temporary file is
    written before the first is renamed into place, so a failed write (disk
    full, a directory that cannot be created) leaves none of them changed."""
    import tempfile

    temps: list[tuple[str, Path]] = []
    try:
        for path, text in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            temps.append((tmp, path))
            with os.fdopen(fd, "wb") as f:
                os.fchmod(f.fileno(), file_mode(path) if mode is None else mode)
                f.write(text.encode("utf-8") if isinstance(text, str) else text)
        for tmp, path in temps:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in temps:
            Path(tmp).unlink(missing_ok=True)
        raise
    return [p for p, _ in files]
