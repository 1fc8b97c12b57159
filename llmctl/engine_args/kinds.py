"""The rules that turn one vLLM argument (its type hint, its default, what
vLLM's argparse parser does with it) into one entry of the argument table.

:mod:`llmctl.engine_args.introspect` imports a vLLM and hands over real type
hints and argparse actions. No vllm import here. The resolutions are
documented in :mod:`llmctl.engine_args.introspect`.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import types
import typing
from typing import Any, Optional, Sequence

# Fields whose CLI choices depend on the platform the parser was built on.
PLATFORM_DEPENDENT_CHOICES = {"mm_processor_device"}
# Enum-or-str fields whose validator accepts only enum member names.
ENUM_NAMES_ONLY = {"mm_encoder_attn_backend"}
# Extra spellings a validator accepts besides the enum members.
EXTRA_CHOICES = {"attention_backend": ["auto"]}


@dataclasses.dataclass(frozen=True)
class CliArg:
    """The parts of one argparse action the table uses."""

    option_strings: tuple[str, ...]
    default: Any = None  # argparse's default: None when the call gave none
    choices: Optional[tuple] = None
    type_name: Optional[str] = None  # the conversion function, unwrapped (human_readable_int, int, ...)


# --------------------------------------------------------------------------
# kinds as words (used by ArgSpec.expected and the value checks)

MAX_LISTED = 40


def choices_text(choices: Sequence[Any]) -> str:
    items = [str(c) for c in choices]
    if len(items) > MAX_LISTED:
        return ", ".join(items[:MAX_LISTED]) + f", … ({len(items)} in all)"
    return ", ".join(items)


def expected_text(kind: str, choices: Optional[Sequence[Any]]) -> str:
    """What a value of this kind must be, as words: 'an integer', 'true or false', …"""
    if kind == "choice":
        return f"one of {choices_text(choices or ())}"
    return {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string",
            "dict": "a mapping (a JSON object)", "list": "a list"}.get(kind, "a JSON value")


# --------------------------------------------------------------------------
# type hints


def flatten(tp: Any) -> list[Any]:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return flatten(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(tp) for m in flatten(a)]
    if isinstance(tp, typing.TypeAliasType if hasattr(typing, "TypeAliasType") else ()):  # py3.12 `type X = ...`
        return flatten(tp.__value__)
    return [tp]


def _is_dict_like(tp: Any) -> bool:
    origin = typing.get_origin(tp) or tp
    if origin in (dict, typing.Mapping) or (isinstance(origin, type) and issubclass(origin, dict)):
        return True
    try:
        import collections.abc as cabc

        if origin in (cabc.Mapping, cabc.MutableMapping):
            return True
    except Exception:
        pass
    if typing.is_typeddict(tp) or dataclasses.is_dataclass(tp):
        return True
    try:
        from pydantic import BaseModel

        return isinstance(tp, type) and issubclass(tp, BaseModel)
    except Exception:
        return False


def _member_kind(tp: Any) -> tuple[str, list | None, bool] | None:
    """(kind, choices, ignore_case) of one union member, or None for members
    that cannot be written in YAML (classes, callables, torch.dtype)."""
    if tp is bool:
        return "bool", None, False
    if tp is int:
        return "int", None, False
    if tp is float:
        return "float", None, False
    if tp is str:
        return "str", None, False
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return "choice", list(typing.get_args(tp)), False
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        if issubclass(tp, int):
            return "choice", [int(m.value) for m in tp], False
        return "choice", list(tp.__members__), True
    if origin in (list, set, tuple, frozenset) or tp in (list, set, tuple, frozenset):
        return "list", None, False
    if _is_dict_like(tp):
        return "dict", None, False
    if tp is Any or tp is object:
        return "json", None, False
    return None  # type[...], Callable, torch.dtype, other classes


def _item_kind(tp: Any) -> tuple[str | None, list | None]:
    args = [a for a in typing.get_args(tp) if a is not Ellipsis]
    if not args:
        return "json", None
    kinds = [k for k in (_member_kind(m) for a in args for m in flatten(a)) if k is not None]
    names = {k[0] for k in kinds}
    if names == {"choice"}:
        return "choice", [c for k in kinds for c in k[1]]
    if len(names) == 1:
        return names.pop(), None
    if names == {"str", "choice"}:
        return "str", None
    if names == {"int", "float"}:
        return "float", None
    return "json", None


def classify(name: str, hint: Any) -> dict[str, Any]:
    """kind, choices, nullable, ignore_case, item of one field's type hint."""
    members = flatten(hint)
    nullable = any(m is type(None) for m in members)
    members = [m for m in members if m is not type(None)]
    parts = [(m, k) for m in members if (k := _member_kind(m)) is not None]
    kinds = {k[0] for _, k in parts}
    choices: list | None = None
    ignore_case = any(k[2] for _, k in parts)
    item = None
    if not kinds:
        kind = "json"
    elif kinds == {"choice"}:
        kind = "choice"
        choices = [c for _, k in parts for c in k[1]]
    elif kinds == {"str", "choice"}:
        if name in ENUM_NAMES_ONLY:
            kind = "choice"
            choices = [c for _, k in parts if k[0] == "choice" for c in k[1]]
        else:
            kind, ignore_case = "str", False
    elif len(kinds) == 1:
        kind = next(iter(kinds))
    elif kinds == {"int", "float"}:
        kind = "float"
    else:
        kind = "json"
    if kind == "list":
        lst = next(m for m, k in parts if k[0] == "list")
        item, item_choices = _item_kind(lst)
        if item == "choice":
            choices = item_choices
    if choices is not None:
        choices = list(dict.fromkeys(choices + EXTRA_CHOICES.get(name, [])))
    return {"kind": kind, "choices": choices, "nullable": nullable, "ignore_case": ignore_case, "item": item}


# --------------------------------------------------------------------------
# defaults


def jsonable(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return int(value.value) if isinstance(value, int) else value.name
    if isinstance(value, (set, frozenset, tuple)):
        value = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else list(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return None  # config objects, classes: "vLLM's built-in default"
    return value


# --------------------------------------------------------------------------
# the entry


def _flag(cli: Optional[CliArg]) -> Optional[str]:
    if cli is None:
        return None
    longs = [o for o in cli.option_strings if o.startswith("--") and not o.startswith("--no-")]
    return longs[0] if longs else (cli.option_strings[0] if cli.option_strings else None)


def _cli_int(cli: Optional[CliArg]) -> Optional[str]:
    name = cli.type_name if cli is not None else None
    return {"human_readable_int": "human", "human_readable_int_or_auto": "human_or_auto"}.get(name or "")


def entry(name: str, group: str, hint: Any, raw_default: Any, cli: Optional[CliArg],
          quantization_methods: Sequence[str] = ()) -> dict[str, Any]:
    """One row of the table (the keys of each ``tables/vllm-X.Y.Z.json`` entry)."""
    c = classify(name, hint)
    if (
        c["kind"] == "str"
        and cli is not None
        and cli.choices
        and name not in PLATFORM_DEPENDENT_CHOICES
        and not any(typing.get_origin(m) is typing.Literal for m in flatten(hint))
    ):
        # A plain-str EngineArgs field whose target config field is a Literal.
        # vLLM 0.29/0.30 add the string "None" to nullable choices, later ones None: both are the null.
        c["kind"], c["choices"] = "choice", [x for x in cli.choices if x is not None and x != "None"]
    if name == "quantization" and c["kind"] == "str" and quantization_methods:
        c["kind"], c["choices"], c["ignore_case"] = "choice", list(quantization_methods), True
    kind = c["kind"]
    return {
        "name": name,
        "group": group,
        "kind": kind,
        "choices": c["choices"],
        # vLLM's own default of None means None is accepted even where the
        # annotation forgot it (max_model_len: int = None); so does a CLI
        # default of None, which vLLM's parser passes on (enable_lora).
        "nullable": bool(c["nullable"] or raw_default is None or (cli is not None and cli.default is None)),
        "default": jsonable(raw_default),
        "flag": _flag(cli),
        "item": c["item"],
        "ignore_case": c["ignore_case"],
        "cli_int": _cli_int(cli) if kind == "int" else None,
    }
