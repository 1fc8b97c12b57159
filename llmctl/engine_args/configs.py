"""The config classes behind dict-valued engine arguments (issue 20): which
keys ``compilation_config``, ``speculative_config``, ``kv_transfer_config``, …
may hold and what type each value must have, as one more part of the argument
table (``configs``, table format 2).

The reader of vLLM (:mod:`llmctl.engine_args.introspect`) hands over its
classes through a small adapter (:class:`Classes`); the rules are here, beside
:mod:`llmctl.engine_args.kinds`. No vllm import.

Which class an argument's mapping becomes (``config`` of a row):

- the dataclass in its annotation (``compilation_config: CompilationConfig``,
  ``kv_transfer_config: KVTransferConfig | None``): Ray Serve LLM validates
  the mapping into that class (``_get_vllm_config_type`` /
  ``_normalize_vllm_engine_kwargs`` in ``ray/llm/_internal/serve/engines/
  vllm/vllm_engine.py``), as vLLM's ``EngineArgs.__post_init__`` does;
- else the class ``EngineArgs`` builds from it, ``Cls(**self.name)`` in one of
  its methods (``speculative_config: dict[str, Any] | None`` becomes
  ``SpeculativeConfig(**self.speculative_config)`` in
  ``create_speculative_config``, which first turns dashes in its keys into
  underscores: ``dashes``);
- ``limit_mm_per_prompt`` maps a modality to an integer (the ``count``) or to
  that modality's options, the classes ``MultiModalConfig._validate_limit_per_prompt``
  picks by modality (``VideoDummyOptions`` for ``video``, …, ``BaseDummyOptions``
  for any other): read from that validator (``values``, ``keyed``, ``shorthand``);
- any other mapping (``hf_overrides``, ``additional_config``,
  ``model_loader_extra_config``, …) is free-form; ``dict[str, V]`` with a
  plain ``V`` records the type of its values (``values``).

A class is described once, in ``configs`` by its name (``module.Name`` if two
classes share a name), with ``extra`` (what vLLM does with an unknown key:
``forbid``, the default of vLLM's ``@config`` classes and of plain
dataclasses, or ``ignore``, a pydantic dataclass's default) and one row per
field the constructor takes (``init=False`` fields are left out). A field row
holds ``kind``, ``choices``, ``nullable``, ``item``, ``ignore_case`` as the
top-level rows do (:func:`llmctl.engine_args.kinds.classify`), and ``config``
when its value is itself a config class (``pass_config: PassConfig``).

Enums inside config classes are validated by pydantic, not by vLLM's CLI:

- a field with a ``mode="before"`` validator that looks the enum up by name
  (``CUDAGraphMode[value.upper()]``, ``CompilationMode.__members__``) takes the
  member names in any case, the string constants that validator compares the
  value with (``"auto"``), and the members' integer values (a non-string is
  passed on to pydantic, which looks values up): ``cudagraph_mode: PIECEWISE``,
  ``mode: 3`` or ``mode: VLLM_COMPILE``;
- any other enum field takes the members' values (pydantic's rule).
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import typing
from typing import Any, Optional, Protocol, Sequence

from llmctl.engine_args.kinds import classify, flatten

#: The argument whose per-modality options are read from a validator:
#: (argument, module, class, validator).
MODALITY_LIMITS = ("limit_mm_per_prompt", "vllm.config.multimodal", "MultiModalConfig", "_validate_limit_per_prompt")


class Classes(Protocol):
    """What a reader hands over about vLLM's classes."""

    def name(self, cls: type) -> tuple[str, str]:
        """(class name, module name)."""

    def init_fields(self, cls: type) -> list[tuple[str, Any, bool]]:
        """(name, type hint, the default is None) of each field the constructor takes, in order."""

    def extra(self, cls: type) -> str:
        """forbid, ignore or allow: what an unknown key does."""

    def nodes(self, cls: type) -> list[ast.ClassDef]:
        """The class's source and its dataclass bases' (for validators)."""

    def resolve(self, module: str, name: str) -> Any:
        """A name bound in a vLLM module (a class a validator uses)."""


def dataclass_in(hint: Any) -> Optional[type]:
    """The config dataclass an annotation holds, as Ray finds it (the first dataclass member of a union)."""
    return next((m for m in flatten(hint) if isinstance(m, type) and dataclasses.is_dataclass(m)), None)


# --------------------------------------------------------------------------
# what the source says (the same AST for both readers)


def _validators(nodes: Sequence[ast.ClassDef]) -> list[tuple[list[str], ast.FunctionDef]]:
    """(field names, function) of each ``@field_validator(..., mode="before")``."""
    out = []
    for node in nodes:
        for fn in node.body:
            if not isinstance(fn, ast.FunctionDef):
                continue
            for d in fn.decorator_list:
                if (isinstance(d, ast.Call) and ast.unparse(d.func).split(".")[-1] == "field_validator"
                        and any(k.arg == "mode" and isinstance(k.value, ast.Constant) and k.value.value == "before"
                                for k in d.keywords)):
                    names = [a.value for a in d.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                    out.append((names, fn))
    return out


def names_parsed(nodes: Sequence[ast.ClassDef]) -> dict[str, list[str]]:
    """Fields whose before-validator looks an enum up by member name, with the
    string constants it compares the value with (``"auto"``)."""
    out: dict[str, list[str]] = {}
    for names, fn in _validators(nodes):
        by_name = any(
            (isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Call) and ast.unparse(n.slice).endswith(".upper()"))
            or (isinstance(n, ast.Attribute) and n.attr == "__members__")
            for n in ast.walk(fn))
        if not by_name:
            continue
        consts = [c.value for n in ast.walk(fn) if isinstance(n, ast.Compare)
                  and isinstance(n.ops[0], (ast.Eq, ast.In)) and ast.unparse(n.left).startswith("value")
                  for c in n.comparators if isinstance(c, ast.Constant) and isinstance(c.value, str)]
        for name in names:
            out[name] = consts
    return out


def constructed(node: ast.ClassDef) -> dict[str, str]:
    """``{field: class name}`` for each ``Cls(**self.field)`` (or ``Cls(**x)``
    with ``x = self.field`` earlier in the same method) in a class's methods."""
    out: dict[str, str] = {}
    for fn in node.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        alias: dict[str, str] = {}
        for n in ast.walk(fn):
            if (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                    and _self_attr(n.value)):
                alias[n.targets[0].id] = _self_attr(n.value)
        for n in ast.walk(fn):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and len(n.keywords) == 1 and not n.args:
                kw = n.keywords[0]
                src = _self_attr(kw.value) if kw.arg is None else None
                if kw.arg is None and src is None and isinstance(kw.value, ast.Name):
                    src = alias.get(kw.value.id)
                if src:
                    out.setdefault(src, n.func.id)
    return out


def dashed(node: ast.ClassDef) -> set[str]:
    """Fields whose keys a method rewrites with ``k.replace("-", "_")`` (``{k.replace(...): v for k, v in self.f.items()}``)."""
    out = set()
    for n in ast.walk(node):
        if (isinstance(n, ast.DictComp) and "replace('-', '_')" in ast.unparse(n.key)
                and isinstance(n.generators[0].iter, ast.Call) and isinstance(n.generators[0].iter.func, ast.Attribute)
                and _self_attr(n.generators[0].iter.func.value)):
            out.add(_self_attr(n.generators[0].iter.func.value))
    return out


def _self_attr(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def modality_options(fn: ast.FunctionDef) -> tuple[dict[str, str], Optional[str], Optional[str]]:
    """``({modality: class name}, class of any other modality, the field an
    integer stands for)`` from ``_validate_limit_per_prompt``::

        if isinstance(v, int): v = {"count": v}
        if k == "video": out[k] = VideoDummyOptions(**v)
        ...
        else: out[k] = BaseDummyOptions(**v)
    """
    keyed: dict[str, str] = {}
    other, shorthand = None, None
    for n in ast.walk(fn):
        if not isinstance(n, ast.If):
            continue
        test = n.test
        if isinstance(test, ast.Call) and ast.unparse(test.func) == "isinstance" and ast.unparse(test.args[1]) == "int":
            for st in n.body:
                if isinstance(st, ast.Assign) and isinstance(st.value, ast.Dict) and len(st.value.keys) == 1:
                    k = st.value.keys[0]
                    shorthand = k.value if isinstance(k, ast.Constant) else None
        elif isinstance(test, ast.Compare) and isinstance(test.ops[0], ast.Eq) and isinstance(test.comparators[0], ast.Constant):
            cls = _built(n.body)
            if cls:
                keyed.setdefault(test.comparators[0].value, cls)
            if n.orelse and not (len(n.orelse) == 1 and isinstance(n.orelse[0], ast.If)):
                other = _built(n.orelse) or other
    return keyed, other, shorthand


def _built(body: list[ast.stmt]) -> Optional[str]:
    for st in body:
        if isinstance(st, ast.Assign) and isinstance(st.value, ast.Call) and isinstance(st.value.func, ast.Name):
            return st.value.func.id
    return None


# --------------------------------------------------------------------------
# the description


class Describer:
    """Builds the ``configs`` part of a table and the nested keys of the rows."""

    def __init__(self, classes: Classes):
        self.c = classes
        self.configs: dict[str, dict[str, Any]] = {}
        self._keys: dict[Any, str] = {}

    def config_key(self, cls: type) -> str:
        """The key of a class in ``configs``, describing it (and the classes its fields hold) the first time."""
        if cls in self._keys:
            return self._keys[cls]
        name, module = self.c.name(cls)
        key = name if name not in self.configs else f"{module}.{name}"
        self._keys[cls] = key
        row: dict[str, Any] = {"module": module, "extra": self.c.extra(cls), "fields": []}
        self.configs[key] = row  # before the fields: a class may hold itself
        parsed = names_parsed(self.c.nodes(cls))
        row["fields"] = [self.field_row(n, h, none, parsed.get(n)) for n, h, none in self.c.init_fields(cls)]
        return key

    def field_row(self, name: str, hint: Any, default_none: bool, by_name: Optional[list[str]] = None) -> dict[str, Any]:
        """One field of a config class. ``by_name``: the field's validator looks
        its enum up by member name (and also takes these strings)."""
        c = classify("", hint)
        members = [m for m in flatten(hint) if m is not type(None)]
        enums = [m for m in members if isinstance(m, type) and issubclass(m, enum.Enum)]
        if enums and c["kind"] == "choice":
            choices: list = []
            for e in enums:
                ints = [m.value for m in e if isinstance(m.value, int) and not isinstance(m.value, bool)]
                if by_name is not None:
                    choices += list(e.__members__) + ints
                else:
                    choices += [m.value for m in e if isinstance(m.value, (str, int, float)) and not isinstance(m.value, bool)]
            lits = [a for m in members if typing.get_origin(m) is typing.Literal for a in typing.get_args(m)]
            c["choices"] = list(dict.fromkeys(choices + lits + (by_name or [])))
            c["ignore_case"] = by_name is not None
        row: dict[str, Any] = {"name": name, "kind": c["kind"], "choices": c["choices"],
                               "nullable": bool(c["nullable"] or default_none), "item": c["item"],
                               "ignore_case": c["ignore_case"]}
        row.update(self.nested(hint, c["kind"]))
        return row

    def nested(self, hint: Any, kind: str, built: Optional[type] = None) -> dict[str, Any]:
        """``config`` (the class a mapping becomes) or ``values`` (the shape of
        a free-keyed mapping's values) of a dict-kind value; {} if free-form."""
        if kind != "dict":
            return {}
        cls = dataclass_in(hint) or built
        if cls is not None:
            return {"config": self.config_key(cls)}
        for m in flatten(hint):
            if typing.get_origin(m) is dict and len(typing.get_args(m)) == 2:
                v = typing.get_args(m)[1]
                inner = dataclass_in(v)
                if inner is not None:
                    return {"values": {"name": "*", "kind": "dict", "choices": None, "nullable": False, "item": None,
                                       "ignore_case": False, "config": self.config_key(inner)}}
                vc = classify("", v)
                has_enum = any(isinstance(x, type) and issubclass(x, enum.Enum) for x in flatten(v))
                if vc["kind"] not in ("json", "dict") and not has_enum:
                    return {"values": {"name": "*", "kind": vc["kind"], "choices": vc["choices"], "nullable": vc["nullable"],
                                       "item": vc["item"], "ignore_case": vc["ignore_case"]}}
        return {}

    def arg_extras(self, name: str, hint: Any, kind: str, built: Optional[type], dashes: bool) -> dict[str, Any]:
        """The nested part of one argument's row."""
        out = self.nested(hint, kind, built)
        if dashes and "config" in out:
            out["dashes"] = True
        return out

    def modality_limits(self, fn: Optional[ast.FunctionDef], module: str) -> dict[str, Any]:
        """``values``/``keyed``/``shorthand`` of ``limit_mm_per_prompt`` from its validator ({} if not found)."""
        if fn is None:
            return {}
        keyed, other, shorthand = modality_options(fn)
        if other is None:
            return {}
        values: dict[str, Any] = {"name": "*", "kind": "dict", "choices": None, "nullable": False, "item": None,
                                  "ignore_case": False, "config": self.config_key(self.c.resolve(module, other))}
        if shorthand:
            values["shorthand"] = shorthand
        if keyed:
            values["keyed"] = {k: self.config_key(self.c.resolve(module, v)) for k, v in keyed.items()}
        return {"values": values}


def find_function(nodes: Sequence[ast.ClassDef], name: str) -> Optional[ast.FunctionDef]:
    return next((fn for node in nodes for fn in node.body if isinstance(fn, ast.FunctionDef) and fn.name == name), None)


def describe(classes: Classes, engine_cls: type, rows: dict[str, dict[str, Any]], hints: dict[str, Any],
             multimodal_cls: Optional[type] = None) -> dict[str, dict[str, Any]]:
    """Add the nested keys to the dict-kind ``rows`` (by name; ``hints``: their
    type hints) and return the ``configs`` they refer to, by key, sorted.
    ``engine_cls``: AsyncEngineArgs (its methods say which class a plain
    ``dict`` argument becomes); ``multimodal_cls``: MultiModalConfig."""
    d = Describer(classes)
    engine_nodes = classes.nodes(engine_cls)
    engine_module = classes.name(engine_cls)[1]
    built: dict[str, str] = {}
    dashes: set[str] = set()
    for node in engine_nodes:
        for k, v in constructed(node).items():
            built.setdefault(k, v)
        dashes |= dashed(node)
    limits_fn = find_function(classes.nodes(multimodal_cls), MODALITY_LIMITS[3]) if multimodal_cls is not None else None
    for name, row in rows.items():
        if row["kind"] != "dict":
            continue
        if name == MODALITY_LIMITS[0] and row["group"] == "engine":
            row.update(d.modality_limits(limits_fn, MODALITY_LIMITS[1]))
            continue
        cls = None
        if name in built and row["group"] == "engine":
            try:
                cls = classes.resolve(engine_module, built[name])
            except Exception:  # noqa: BLE001 - a name this reader cannot resolve: no class
                cls = None
            if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
                cls = None
        row.update(d.arg_extras(name, hints[name], row["kind"], cls, name in dashes))
    return {k: d.configs[k] for k in sorted(d.configs)}
