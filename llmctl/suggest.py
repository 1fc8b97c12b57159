"""The one "did you mean" rule: the closest of the valid names to a word that
is none of them (difflib's ratio, one cutoff), compared as written and then
case-insensitively, with ``-`` and ``_`` taken as the same."""

from __future__ import annotations

import difflib
from typing import Iterable, Optional

CUTOFF = 0.6  # difflib's default: close enough that the suggestion is usually the intended name


def _norm(s: str) -> str:
    return s.strip().lower().replace("-", "_")


def closest(word: str, choices: Iterable, *, cutoff: float = CUTOFF) -> Optional[str]:
    """The valid name closest to ``word`` (spelled as the choice is), or None."""
    names = [str(c) for c in choices]
    if not names or not isinstance(word, str):
        return None
    folded = {_norm(n): n for n in reversed(names)}
    if _norm(word) in folded and folded[_norm(word)] != word:
        return folded[_norm(word)]
    m = difflib.get_close_matches(word, names, n=1, cutoff=cutoff) or difflib.get_close_matches(
        _norm(word), list(folded), n=1, cutoff=cutoff)
    if not m:
        return None
    return m[0] if m[0] in names else folded[m[0]]


def phrase(name: Optional[str]) -> str:
    """`` (did you mean 'name'?)``, or ``""`` for no name."""
    return f" (did you mean '{name}'?)" if name else ""


def did_you_mean(word: str, choices: Iterable) -> str:
    """:func:`phrase` of the closest valid name."""
    return phrase(closest(word, choices))
