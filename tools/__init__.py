"""llmctl's build tools: the scripts that write the tables the package reads
(engine-argument tables, parser registries, the model catalog). Not part of the
llmctl wheel (pyproject.toml packages only ``llmctl``); see tools/README.md.

:func:`sdist_version` is the one reader of an unpacked vLLM sdist's release,
shared by tools/build_vllm_parsers.py and tools/build_vllm_registry.py.
"""

from __future__ import annotations

import re
from pathlib import Path


def sdist_version(root: Path) -> str:
    """The release an unpacked vLLM sdist (or checkout) holds: PKG-INFO, else
    vllm/_version.py. ValueError naming the directory when neither says."""
    pkg = root / "PKG-INFO"
    if pkg.is_file():
        m = re.search(r"^Version:\s*(\S+)", pkg.read_text(encoding="utf-8", errors="replace"), re.M)
        if m:
            return m.group(1)
    ver = root / "vllm" / "_version.py"
    if ver.is_file():
        m = re.search(r"""(?:__version__|version)\s*(?::\s*str\s*)?=\s*['"]([^'"]+)""", ver.read_text(encoding="utf-8"))
        if m:
            return m.group(1)
    raise ValueError(f"{root}: no PKG-INFO or vllm/_version.py to read the version from")
