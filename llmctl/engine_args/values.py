"""Values of engine arguments: parse ``--engine-arg KEY=VALUE`` text, check
values loaded from YAML (see the package docstring)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Optional

from llmctl.engine_args.kinds import choices_text as _choices_text
from llmctl.engine_args.kinds import expected_text as _expected
from llmctl.engine_args.table import OWNED, ArgSpec, _unknown, engine_args, normalize_name


def _show(v: Any) -> str:
    if isinstance(v, str):
        return repr(v)
    try:
        return json.dumps(v)
    except (TypeError, ValueError):
        return repr(v)


def _choice_error(value: Any, choices: tuple) -> str:
    import difflib

    msg = f"must be one of {_choices_text(choices)}; got {_show(value)}"
    if isinstance(value, str):
        strs = [str(c) for c in choices]
        m = difflib.get_close_matches(value, strs, n=1, cutoff=0.6) or difflib.get_close_matches(value.lower(), [s.lower() for s in strs], n=1, cutoff=0.6)
        if m:
            hit = next((s for s in strs if s.lower() == m[0].lower()), m[0])
            msg += f" (did you mean '{hit}'?)"
    return msg


# --------------------------------------------------------------------------
# Choices

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


# --------------------------------------------------------------------------
# parse_value: text from the command line

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
        if hit is _MISSING and any(isinstance(c, int) and not isinstance(c, bool) for c in ch):
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


def parse_value(name: str, text: str, *, allow_owned: bool = False,
                specs: Optional[Mapping[str, ArgSpec]] = None) -> Any:
    """The typed value of ``--engine-arg NAME=TEXT``.

    int "8" → 8 (``1k``/``1K`` where vLLM's CLI takes them), float, bool
    (true/false/yes/no/on/off/1/0, any case), choice (one of the choices,
    returned in vLLM's spelling), dict (a JSON object), list (a JSON list, or
    comma-separated values converted to the element kind), str as given.
    ``None``/``null`` give None where the argument accepts None.
    NAME may use dashes (``max-num-seqs``). Raises ValueError with a one-line
    message that starts with the key; owned keys (:data:`OWNED`) are refused
    unless ``allow_owned``.
    """
    origin = None
    if specs is None:
        specs, origin = engine_args()
    key = normalize_name(name)
    sp = specs.get(key)
    if sp is None:
        raise ValueError(f"{key}: {_unknown(name, specs, origin)}")
    if not allow_owned and key in OWNED:
        raise ValueError(f"{key}: set by llmctl or Ray Serve LLM; use {OWNED[key]}")
    try:
        return _parse(sp, text)
    except ValueError as e:
        raise ValueError(f"{key}: {e}") from None


def _parse(sp: ArgSpec, text: str) -> Any:
    if not isinstance(text, str):
        raise ValueError(f"expected text, got {_show(text)}")
    t = text.strip()
    if sp.nullable and t in _NULL_TEXT and not (sp.kind == "choice" and _match_choice(t, sp.choices or (), sp.ignore_case) is not _MISSING):
        return None
    if sp.kind == "dict":
        try:
            v = json.loads(t)
        except ValueError:
            raise ValueError(f"expected a JSON object such as '{{\"key\": 1}}', got {_show(text)}") from None
        if not isinstance(v, dict):
            raise ValueError(f"expected a JSON object such as '{{\"key\": 1}}', got {_show(text)}")
        return v
    if sp.kind == "list":
        item = sp.item or "json"
        if t.startswith("["):
            try:
                v = json.loads(t)
            except ValueError:
                raise ValueError(f"expected a JSON list or comma-separated values, got {_show(text)}") from None
            problem = _check_list(sp, v)
            if problem:
                raise ValueError(problem)
            if item == "choice":
                v = [_match_choice(x, sp.choices or (), sp.ignore_case) for x in v]
            return v
        if item in ("dict", "json", "list"):
            raise ValueError(f"expected a JSON list, got {_show(text)}")
        parts = [p.strip() for p in t.split(",")] if t else []
        out = []
        for i, p in enumerate(parts):
            try:
                out.append(_parse_scalar(item, p, sp.choices, sp.ignore_case, None))
            except ValueError as e:
                raise ValueError(f"item {i + 1}: {e}") from None
        return out
    return _parse_scalar(sp.kind, text, sp.choices, sp.ignore_case, sp.cli_int)


def parse_engine_arg(item: str, *, allow_owned: bool = False,
                     specs: Optional[Mapping[str, ArgSpec]] = None) -> tuple[str, Any]:
    """``"max-num-seqs=8"`` → ``("max_num_seqs", 8)``; ValueError if malformed."""
    if "=" not in item:
        raise ValueError(f"{item.strip()}: expected KEY=VALUE")
    key, _, text = item.partition("=")
    if not key.strip():
        raise ValueError(f"{item!r}: expected KEY=VALUE")
    return normalize_name(key), parse_value(key, text, allow_owned=allow_owned, specs=specs)


# --------------------------------------------------------------------------
# check_value: values loaded from YAML


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


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


def _check_list(sp: ArgSpec, v: Any) -> Optional[str]:
    if not isinstance(v, (list, tuple)):
        return f"expected a list, got {_show(v)}"
    item = sp.item or "json"
    for i, x in enumerate(v):
        problem = _check_scalar(item, x, sp.choices, sp.ignore_case)
        if problem:
            return f"item {i + 1}: {problem}"
    return None


def check_value(name: str, value: Any, *, specs: Optional[Mapping[str, ArgSpec]] = None) -> Optional[str]:
    """None if ``engine_kwargs[name] = value`` (from YAML) has the right
    type, else a one-line reason WITHOUT the key (validate prints the field
    path). ``name`` must be the exact Python name, as Ray passes keys through
    unchanged: ``max-num-seqs`` is reported as unknown with a suggestion.
    Ownership is not judged here; see :data:`RAY_FORBIDS`, :data:`RAY_OVERRIDES`."""
    origin = None
    if specs is None:
        specs, origin = engine_args()
    sp = specs.get(name) if isinstance(name, str) else None
    if sp is None:
        return _unknown(str(name), specs, origin)
    if value is None:
        return None if sp.nullable else f"must not be null; expected {sp.expected()}"
    if sp.kind == "list":
        return _check_list(sp, value)
    return _check_scalar(sp.kind, value, sp.choices, sp.ignore_case)
