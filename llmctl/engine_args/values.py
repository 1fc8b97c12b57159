"""Values of engine arguments: parse ``--engine-arg KEY=VALUE`` text, check
values loaded from YAML (see the package docstring)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Optional

from llmctl.engine_args.nested import check_nested, path_text
from llmctl.engine_args.scalars import (  # noqa: F401  (human_int: public)
    _MISSING,
    _NULL_TEXT,
    _check_list,
    _check_scalar,
    _match_choice,
    _parse_scalar,
    _show,
    human_int,
)
from llmctl.engine_args.table import OWNED, ArgSpec, _unknown, engine_args, normalize_name


# --------------------------------------------------------------------------
# parse_value: text from the command line



def parse_value(name: str, text: str, *, allow_owned: bool = False,
                specs: Optional[Mapping[str, ArgSpec]] = None) -> Any:
    """The typed value of ``--engine-arg NAME=TEXT``.

    int "8" → 8 (``1k``/``1K`` where vLLM's CLI takes them), float, bool
    (true/false/yes/no/on/off/1/0, any case), choice (one of the choices,
    returned in vLLM's spelling), dict (a JSON object), list (a JSON list, or
    comma-separated values converted to the element kind; the keys inside a
    config mapping are checked against the target's class,
    :func:`llmctl.engine_args.nested.check_nested`), str as given.
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
        value = _parse(sp, text)
    except ValueError as e:
        raise ValueError(f"{key}: {e}") from None
    if sp.kind == "dict":
        # the keys inside: gen-config writes for the target, so a key of a newer vLLM is refused too
        first = next((p for p in check_nested(sp, value, origin=origin, strict=True) if p.severity == "error"), None)
        if first is not None:
            raise ValueError(f"{path_text(key, first.path)}: {first.message}")
    return value


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
