"""Where llmctl's shipped data lives (catalog, templates).

In a source checkout (and an editable install) they are top-level folders of
the repository; a wheel carries them under ``llmctl/_data/``.
"""

from __future__ import annotations

import os
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
