"""Scalar values of engine arguments and of the keys inside their mappings:
parse one from command-line text, check one loaded from YAML, and say what
was expected, in one line (:mod:`llmctl.engine_args.values`,
:mod:`llmctl.engine_args.nested`)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Optional

from llmctl.engine_args.kinds import choices_text as _choices_text
from llmctl.engine_args.kinds import expected_text as _expected
from llmctl.scalars import is_int as _is_int

def _show(v: Any) -> str:
    if isinstance(v, str):
        return repr(v)
    try:
        return json.dumps(v)
    except (TypeError, ValueError):
        return repr(v)


def _choice_error(value: Any, choices: tuple) -> str:
    from llmctl.suggest import did_you_mean

    msg = f"must be one of {_choices_text(choices)}; got {_show(value)}"
    if isinstance(value, str):
        msg += did_you_mean(value, choices)
    return msg


_MISSING = object()


def _match_choice(value: Any, choices: tuple, ignore_case: bool) -> Any:
    """The canonical choice equal to value (type-exact: True is not 1), or _MISSING."""
    for c in choices:
        if type(c) is type(value) and c == value:
            return c
    if ignore_case and isinstance(value, str):
        low = value.lower()
        for c in choices:
            if isinstance(c, str) and c.lower() == low:
                return c
    return _MISSING


_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}
_NULL_TEXT = {"None", "null"}


def human_int(text: str) -> int:
    """vLLM's human_readable_int: 1k = 1000, 1K = 1024, 25.6k = 25600 (vllm/utils/argparse_utils.py)."""
    import re

    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text)
    if not m:
        return int(text)
    number, suffix = m.groups()
    if suffix.islower():
        return int(float(number) * {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}[suffix])
    if "." in number:
        raise ValueError("decimals with binary suffixes")
    return int(number) * {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[suffix]


def _parse_scalar(kind: str, text: str, choices: Optional[tuple], ignore_case: bool, cli_int: Optional[str]) -> Any:
    """Parse one scalar; raises ValueError with the reason (no key)."""
    t = text.strip()
    if kind == "int":
        try:
            if cli_int == "human_or_auto" and t.lower() == "auto":
                return -1
            return human_int(t) if cli_int else int(t)
        except ValueError:
            hint = " (such as 8192, 8k or 8K)" if cli_int else ""
            raise ValueError(f"expected an integer{hint}, got {_show(text)}") from None
    if kind == "float":
        try:
            v = float(t)
        except ValueError:
            v = math.nan
        if not math.isfinite(v):
            raise ValueError(f"expected a number, got {_show(text)}")
        return v
    if kind == "bool":
        low = t.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ValueError(f"expected true or false, got {_show(text)}")
    if kind == "choice":
        ch = choices or ()
        hit = _match_choice(text, ch, ignore_case)
        if hit is _MISSING and t != text:
            hit = _match_choice(t, ch, ignore_case)
        if hit is _MISSING and any(_is_int(c) for c in ch):
            try:
                hit = _match_choice(int(t), ch, False)
            except ValueError:
                pass
        if hit is _MISSING:
            raise ValueError(_choice_error(text, ch))
        return hit
    if kind == "str":
        return text
    if kind == "json":
        if t[:1] and t[:1] in "{[\"":
            try:
                return json.loads(t)
            except ValueError:
                raise ValueError(f"expected JSON, got {_show(text)}") from None
        return text
    raise ValueError(f"cannot parse a value of kind {kind}")


def _check_scalar(kind: str, v: Any, choices: Optional[tuple], ignore_case: bool) -> Optional[str]:
    number = (_is_int(v) or isinstance(v, float)) and math.isfinite(v)
    ok = {
        "int": _is_int(v),
        "float": number,
        "bool": isinstance(v, bool),
        "str": isinstance(v, str),
        "dict": isinstance(v, Mapping),
        "list": isinstance(v, (list, tuple)),
        "json": isinstance(v, (str, int, float, list, tuple, Mapping)),  # bool is an int
    }
    if kind == "choice":
        if _match_choice(v, choices or (), ignore_case) is not _MISSING:
            return None
        return _choice_error(v, choices or ())
    if ok.get(kind, False):
        return None
    msg = f"expected {_expected(kind, choices)}, got {_show(v)}"
    if isinstance(v, str) and kind in ("int", "float", "bool"):
        try:
            _parse_scalar(kind, v, None, False, None)
            msg += " (a string: write it without quotes)"
        except ValueError:
            pass
    return msg


def _check_list(sp: Any, v: Any) -> Optional[str]:
    if not isinstance(v, (list, tuple)):
        return f"expected a list, got {_show(v)}"
    item = sp.item or "json"
    for i, x in enumerate(v):
        problem = _check_scalar(item, x, sp.choices, sp.ignore_case)
        if problem:
            return f"item {i + 1}: {problem}"
    return None
