"""What counts as an integer in a config a user wrote: one rule for every check.

YAML gives ``true`` as a bool, which Python counts as an int; no field llmctl
checks takes a bool for a number. Ray's schemas are pydantic models in lax
mode, which read ``2.0``, ``"2"`` and even ``true`` as integers: :func:`lax_int`
says what Ray will run, :func:`is_int` what a check accepts as written."""

from __future__ import annotations

import re
from typing import Any, Optional

_INT_TEXT = re.compile(r"\s*[+-]?[0-9]+\s*", re.ASCII)


def is_int(v: Any) -> bool:
    """An int as YAML wrote it: not a bool."""
    return isinstance(v, int) and not isinstance(v, bool)


def lax_int(v: Any) -> Optional[int]:
    """The int pydantic's lax mode reads from ``v`` (an int or a bool, an
    integral float, a string of ASCII digits with an optional sign and blanks
    around), or None when it refuses: ``2.5``, ``"two"``, ``"²"``, ``"٣"``
    (``str.isdecimal`` and ``int()`` accept the last; pydantic does not)."""
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and _INT_TEXT.fullmatch(v):
        return int(v)
    return None
