"""What a string names: a cloud bucket, a local path, an HF repo id, a token.

One definition of each, used by the catalog (resolving ``--model``), the spec
(LoRA paths, token variable names), validate and launch.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

# Schemes Ray Serve LLM downloads weights and LoRA adapters from.
CLOUD_SCHEMES = ("s3://", "gs://", "abfss://", "azure://")

_HF_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ENV_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")


def is_cloud_uri(text: str) -> bool:
    return isinstance(text, str) and text.startswith(CLOUD_SCHEMES)


def looks_local_path(text: str) -> bool:
    """A path as users type one (``/abs``, ``./rel``, ``../rel``, ``~/x``, ``.``)."""
    return isinstance(text, str) and (text in (".", "..") or text.startswith(("/", "./", "../", "~")))


def is_hf_repo_id(text: str) -> bool:
    return isinstance(text, str) and bool(_HF_REPO.match(text))


def path_probe(p: Path, test: str = "exists") -> bool:
    """``p.exists()`` / ``is_dir()`` / ``is_file()`` that answers False for a
    name the OS cannot take (too long, NUL byte) instead of raising."""
    try:
        return bool(getattr(p, test)())
    except (OSError, ValueError):
        return False


def is_env_name(text: str) -> bool:
    return isinstance(text, str) and bool(_ENV_NAME.match(text))


def env_ref(value: object) -> Optional[str]:
    """``VAR`` when ``value`` is exactly ``"${VAR}"`` (a reference, not a value)."""
    m = _ENV_REF.match(value) if isinstance(value, str) else None
    return m.group(1) if m else None


def env_ref_text(name: str) -> str:
    return "${" + name + "}"
