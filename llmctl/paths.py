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
