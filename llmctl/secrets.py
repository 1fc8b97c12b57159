"""What counts as a secret: one rule for every place that asks (validate's
literal-token check, the RayService env check, and the scrubbing of values
from what llmctl prints).

- By shape (:func:`token_kind`): Hugging Face ``hf_…`` (``hf_`` and 34
  letters/digits today; 30+ tells one from a name such as ``hf_token``),
  OpenAI ``sk-…``, AWS access key ids ``AKIA…``/``ASIA…``, GitHub ``ghp_…``.
- By name (:func:`is_secret_name`): a key or variable whose last word says
  secret (``HF_TOKEN``, ``*_API_KEY``, ``*_SECRET_ACCESS_KEY``,
  ``password``, ``*_CREDENTIALS`` …). ``HF_TOKEN_PATH`` or ``max_tokens`` are
  not: the rule reads the name's last word(s), not a substring.
- A value under such a name is a literal secret (:func:`literal_secret`)
  unless it is a reference (``${VAR}``), a placeholder (``<YOUR_TOKEN>``) or
  a boolean/null word.
"""

from __future__ import annotations

import re
from typing import Optional

TOKEN_SHAPES: tuple[tuple[str, re.Pattern], ...] = (
    ("a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")),
    ("an OpenAI API key", re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_-]{32,}\b")),
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a GitHub token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b")),
)
_HF = TOKEN_SHAPES[0][1]

_SECRET_NAME = re.compile(
    r"(^|_)(hf_token|hugging_face_hub_token|token|access_token|api_?key|password|passwd|secret|secret_key|"
    r"secret_access_key|access_key|credentials?)$", re.I)
_REFERENCE = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$|^\$\([A-Za-z_][A-Za-z0-9_]*\)$")
_PLACEHOLDER = re.compile(r"^<[^<>]*>$")


def token_kind(value: str) -> Optional[str]:
    """What kind of credential ``value`` contains by its shape, or None."""
    if not isinstance(value, str):
        return None
    for what, rx in TOKEN_SHAPES:
        if rx.search(value):
            return what
    return None


def looks_like_hf_token(text: str) -> bool:
    """The whole text is a Hugging Face token (e.g. given where a variable NAME belongs)."""
    return isinstance(text, str) and bool(_HF.fullmatch(text.strip()))


def is_secret_name(name: object) -> bool:
    """A key or environment variable name that says its value is a secret."""
    return isinstance(name, str) and bool(_SECRET_NAME.search(name))


def is_reference(value: str) -> bool:
    """``${VAR}`` (Ray's runtime_env) or ``$(VAR)`` (Kubernetes): not a value."""
    return isinstance(value, str) and bool(_REFERENCE.match(value.strip()))


def literal_secret(name: object, value: object) -> Optional[str]:
    """What secret a literal ``value`` under ``name`` is (a token shape, or
    "a secret" for any real value under a secret name), or None."""
    if not isinstance(value, str):
        return None
    what = token_kind(value)
    if what:
        return what
    v = value.strip()
    if is_secret_name(name) and v and not is_reference(v) and not _PLACEHOLDER.match(v) \
            and v.lower() not in ("true", "false", "none", "null"):
        return "a secret"
    return None
