"""Evaluate names and expressions of a vLLM source tree with ``ast``, without
importing or installing vLLM: what :mod:`llmctl.engine_args.source` reads
EngineArgs, FrontendArgs and vLLM's config classes with.

Values are Python objects, so the table rules (:mod:`llmctl.engine_args.kinds`)
see what they would see in a running vLLM:

- names resolve lazily through the module's own bindings (imports, assignments,
  classes, functions), relative imports included; a name bound only under
  ``if TYPE_CHECKING:`` is used when nothing else binds it (vllm/envs.py's
  defaults live there) and first inside string annotations, as
  ``typing.get_type_hints`` would;
- a vLLM class becomes a synthesised class of the same nature: an ``Enum`` with
  the same members and values, a dataclass (``@dataclass``, ``@config``), a
  ``TypedDict``, a ``dict`` subclass or a pydantic model, else a plain class;
  the synthesised class remembers its source (:attr:`Tree.classes`) so that
  ``ModelConfig.max_model_len`` reads the field's default;
- modules outside vLLM are imported only when they are light and side-effect
  free (:data:`REAL_MODULES`); anything else (torch, transformers, ...) is an
  opaque class, which the rules treat as "not writable in YAML", as they treat
  ``torch.dtype``;
- calls are evaluated only for constructors of plain values, typing helpers and
  ``field``/``Field``/``get_field``; anything else raises :class:`Unknown`.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import enum
import importlib
import itertools
import typing
from pathlib import Path
from typing import Any, Optional

from llmctl.engine_args.source_module import (  # noqa: F401  (re-exported for source_exec and source)
    BoundRef,
    ClassInfo,
    ConfigObject,
    FieldSpec,
    FuncRef,
    Module,
    ModuleRef,
    Unknown,
    opaque,
)

#: Modules outside vLLM that are imported for real (light, no side effects).
REAL_MODULES = {"typing", "typing_extensions", "collections", "collections.abc", "enum", "dataclasses", "pydantic",
                "pydantic.fields", "pydantic.dataclasses", "pydantic.types", "annotated_types", "ssl", "math", "json",
                "argparse", "types", "abc", "numbers", "datetime", "pathlib", "functools", "itertools"}
_SAFE_CALLS = {int, float, str, bool, list, dict, set, tuple, frozenset, sorted, len, min, max, type(None),
               itertools.permutations, itertools.product, itertools.chain}


class Tree:
    """One vLLM source tree (the directory that holds ``vllm/``)."""

    def __init__(self, root: Path | str):
        self.root = Path(root)
        if not (self.root / "vllm" / "__init__.py").is_file():
            raise FileNotFoundError(f"{self.root} holds no vllm/ package")
        self.modules: dict[str, Optional[Module]] = {}
        self.classes: dict[type, ClassInfo] = {}
        self._synth: dict[tuple[str, str], type] = {}
        self.problems: list[str] = []

    # ---------------------------------------------------------------- modules

    def module(self, name: str) -> Optional[Module]:
        if name not in self.modules:
            rel = Path(*name.split("."))
            found = None
            for path, pkg in ((self.root / rel / "__init__.py", True), (self.root / rel.with_suffix(".py"), False)):
                if path.is_file():
                    found = Module(name, path, pkg)
                    break
            self.modules[name] = found
        return self.modules[name]

    def _module_value(self, name: str) -> Any:
        if name == "vllm" or name.startswith("vllm."):
            if self.module(name) is None:
                raise Unknown(f"no module {name} in {self.root}")
            return ModuleRef(name)
        if name in REAL_MODULES:
            return importlib.import_module(name)
        return opaque(name)

    def lookup(self, mod: Module, name: str, prefer_tc: bool = False) -> Any:
        key = (name, prefer_tc)
        if key not in mod.cache:
            order = (mod.tc, mod.runtime) if prefer_tc else (mod.runtime, mod.tc)
            binding = next((d[name] for d in order if name in d), None)
            if binding is None:
                star = next((m for m in mod.stars if (sm := self.module(m)) is not None and name in sm.runtime), None)
                binding = ("from", star, name) if star else None
            if binding is None:
                if hasattr(builtins, name):
                    return getattr(builtins, name)
                raise Unknown(f"{mod.name}: name {name!r} is not bound")
            mod.cache[key] = self._binding(mod, binding)
        return mod.cache[key]

    def _binding(self, mod: Module, b: tuple) -> Any:
        if b[0] == "module":
            return self._module_value(b[1])
        if b[0] == "from":
            return self.attr(self._module_value(b[1]), b[2])
        if b[0] == "expr":
            return self.ev(b[1], mod)
        if b[0] == "class":
            return self.synth_class(mod, b[1])
        return FuncRef(mod, b[1])

    # ---------------------------------------------------------------- attributes

    def attr(self, obj: Any, name: str) -> Any:
        if isinstance(obj, ModuleRef):
            mod = self.module(obj.name)
            if mod is not None and (name in mod.runtime or name in mod.tc or mod.stars):
                try:
                    return self.lookup(mod, name)
                except Unknown:
                    if name in mod.runtime or name in mod.tc:
                        raise
            sub = f"{obj.name}.{name}"
            if self.module(sub) is not None:
                return ModuleRef(sub)
            raise Unknown(f"{obj.name} has no {name!r}")
        if isinstance(obj, type) and obj in self.classes and not name.startswith("__"):
            return self.class_attr(obj, name)
        try:
            return getattr(obj, name)
        except AttributeError:
            raise Unknown(f"{obj!r} has no attribute {name!r}") from None

    def class_attr(self, cls: type, name: str, bound: Optional[type] = None) -> Any:
        info = self.classes[cls]
        bound = bound or cls
        if info.kind == "enum" and name in cls.__members__:
            return cls.__members__[name]
        fields = self.fields(cls) if info.kind == "dataclass" else {}
        if name in fields:
            return self.resolve_default(self.field_spec(cls, name))
        for st in info.node.body:
            if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in st.targets):
                return self.ev(st.value, info.module)
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.target.id == name and st.value:
                return self.ev(st.value, info.module)
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and st.name == name:
                return BoundRef(FuncRef(info.module, st), bound, cls)
        for base in info.bases:
            try:
                return self.class_attr(base, name, bound)
            except Unknown:
                continue
        raise Unknown(f"{cls.__qualname__} has no attribute {name!r}")

    # ---------------------------------------------------------------- classes

    def synth_class(self, mod: Module, node: ast.ClassDef) -> type:
        key = (mod.name, node.name)
        if key in self._synth:
            return self._synth[key]
        bases = []
        for b in node.bases:
            try:
                v = self.ev(b, mod)
                bases.append(typing.get_origin(v) or v)  # dict[str, X] -> dict
            except Unknown as e:
                self.problems.append(f"{mod.name}.{node.name}: base {ast.unparse(b)}: {e}")
        vbases = tuple(b for b in bases if isinstance(b, type) and b in self.classes)
        decos = [d.func if isinstance(d, ast.Call) else d for d in node.decorator_list]
        is_dc = any(ast.unparse(d).split(".")[-1] in ("dataclass", "config") for d in decos)
        meta = {"__module__": mod.name, "__qualname__": node.name}
        types_ = [b for b in bases if isinstance(b, type)]
        if any(issubclass(b, enum.Enum) for b in types_):
            kind, cls = "enum", self._enum(mod, node, types_)
        elif any(typing.is_typeddict(b) or b in (typing.TypedDict,) for b in bases) or any(
                getattr(b, "__name__", "") == "TypedDict" for b in bases):
            kind, cls = "typeddict", typing.TypedDict(node.name, {})
        elif is_dc or any(self.classes.get(b, None) and self.classes[b].kind == "dataclass" for b in vbases):
            dc_bases = tuple(b for b in vbases if self.classes[b].kind == "dataclass")
            kind, cls = "dataclass", dataclasses.make_dataclass(node.name, [], bases=dc_bases, namespace=None)
        elif any(issubclass(b, dict) for b in types_):
            kind, cls = "dict", type(node.name, (dict,), dict(meta))
        elif any(_is_model(b) for b in types_):
            from pydantic import BaseModel

            kind, cls = "model", type(node.name, (BaseModel,), dict(meta))
        else:
            plain = tuple(b for b in types_ if b in (str, int, float, tuple, list) or b in vbases)
            try:
                kind, cls = "plain", type(node.name, plain, dict(meta))
            except TypeError:
                kind, cls = "plain", type(node.name, (), dict(meta))
        self._synth[key] = cls
        self.classes[cls] = ClassInfo(mod, node, kind, vbases)
        return cls

    def _enum(self, mod: Module, node: ast.ClassDef, bases: list[type]) -> type:
        members: list[tuple[str, Any]] = []
        mixin = int if any(issubclass(b, int) for b in bases) else str if any(issubclass(b, str) for b in bases) else None
        for st in node.body:
            target, value = None, None
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                target, value = st.targets[0].id, st.value
            elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
                target, value = st.target.id, st.value
            if target is None or target.startswith("_") or isinstance(value, ast.Lambda):
                continue
            try:
                v = self.ev(value, mod, dict(members))  # a member may name earlier ones: FULL_DECODE_ONLY = (FULL, NONE)
            except Unknown as e:
                self.problems.append(f"{mod.name}.{node.name}.{target}: value not read ({e})")
                v = f"<{target}>" if mixin is str else object()
            if mixin is int and isinstance(v, enum.auto):
                v = len(members) + 1
            members.append((target, v))
        base = enum.IntEnum if mixin is int else enum.Enum
        return base(node.name, members, type=str if mixin is str else None, module=mod.name)

    def fields(self, cls: type) -> dict[str, tuple[ast.AnnAssign, Module]]:
        """A dataclass's fields in definition order, bases first (dataclasses.fields)."""
        info = self.classes[cls]
        out: dict[str, tuple[ast.AnnAssign, Module]] = {}
        for base in info.bases:
            if self.classes[base].kind == "dataclass":
                out.update(self.fields(base))
        for st in info.node.body:
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                text = ast.unparse(st.annotation)
                if any(w in text for w in ("ClassVar", "InitVar", "KW_ONLY")):
                    continue
                out[st.target.id] = (st, info.module)
        return out

    def field_spec(self, cls: type, name: str) -> FieldSpec:
        st, mod = self.fields(cls)[name]
        return self.field_of(st.value, mod)

    def field_of(self, value: Optional[ast.expr], mod: Module) -> FieldSpec:
        if value is None:
            return FieldSpec()
        v = self.ev(value, mod)
        return v if isinstance(v, FieldSpec) else FieldSpec(default=v)

    def resolve_default(self, spec: FieldSpec) -> Any:
        """The value a field starts with (a factory is called)."""
        if spec.default is not dataclasses.MISSING:
            return self.resolve_default(spec.default) if isinstance(spec.default, FieldSpec) else spec.default
        if spec.factory is dataclasses.MISSING:
            return dataclasses.MISSING
        return self.call(spec.factory, [], {})

    def hint(self, ann: ast.expr, mod: Module) -> Any:
        """A field's type hint; a string annotation is evaluated with names
        imported under TYPE_CHECKING first (as introspection's eval does)."""
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            return self.ev(ast.parse(ann.value, mode="eval").body, mod, prefer_tc=True)
        return self.ev(ann, mod)

    # ---------------------------------------------------------------- expressions

    def ev(self, node: ast.expr, mod: Module, local: Optional[dict] = None, prefer_tc: bool = False) -> Any:
        ev = lambda n: self.ev(n, mod, local, prefer_tc)  # noqa: E731
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if local is not None and node.id in local:
                return local[node.id]
            return self.lookup(mod, node.id, prefer_tc)
        if isinstance(node, ast.Attribute):
            return self.attr(ev(node.value), node.attr)
        if isinstance(node, ast.Subscript):
            obj = ev(node.value)
            if obj is typing.Annotated and isinstance(node.slice, ast.Tuple):  # metadata plays no part in a kind
                return typing.Annotated[(ev(node.slice.elts[0]), *(self._metadata(e, mod) for e in node.slice.elts[1:]))]
            idx = ev(node.slice)
            try:
                return obj[idx]
            except Exception as e:  # noqa: BLE001 - typing raises what it likes
                raise Unknown(f"{ast.unparse(node)}: {e}") from None
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = [ev(e) for e in node.elts]
            return tuple(items) if isinstance(node, ast.Tuple) else set(items) if isinstance(node, ast.Set) else items
        if isinstance(node, ast.Dict):
            out = {}
            for k, v in zip(node.keys, node.values):
                if k is None:
                    out.update(ev(v))
                else:
                    out[ev(k)] = ev(v)
            return out
        if isinstance(node, ast.BinOp):
            return _binop(node.op, ev(node.left), ev(node.right), node)
        if isinstance(node, ast.UnaryOp):
            v = ev(node.operand)
            ops = {ast.USub: lambda x: -x, ast.UAdd: lambda x: +x, ast.Not: lambda x: not x, ast.Invert: lambda x: ~x}
            return ops[type(node.op)](v)
        if isinstance(node, ast.ListComp) and len(node.generators) == 1 and isinstance(node.generators[0].target, ast.Name):
            gen, out = node.generators[0], []
            for item in ev(gen.iter):
                inner = {**(local or {}), gen.target.id: item}
                if all(self.ev(c, mod, inner, prefer_tc) for c in gen.ifs):
                    out.append(self.ev(node.elt, mod, inner, prefer_tc))
            return out
        if isinstance(node, ast.Lambda):
            return FuncRef(mod, node)
        if isinstance(node, ast.Slice):
            return slice(*(ev(x) if x is not None else None for x in (node.lower, node.upper, node.step)))
        if isinstance(node, ast.Call):
            return self.call_expr(node, mod, local, prefer_tc)
        if isinstance(node, ast.BoolOp):
            vals = [ev(v) for v in node.values]
            return all(vals) if isinstance(node.op, ast.And) else any(vals)
        if isinstance(node, ast.JoinedStr):
            return "".join(str(ev(v.value)) if isinstance(v, ast.FormattedValue) else str(v.value) for v in node.values)
        if isinstance(node, ast.IfExp):
            return ev(node.body) if ev(node.test) else ev(node.orelse)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, right = ev(node.left), ev(node.comparators[0])
            ops = {ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b, ast.Eq: lambda a, b: a == b,
                   ast.NotEq: lambda a, b: a != b, ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b}
            if type(node.ops[0]) in ops:
                return ops[type(node.ops[0])](left, right)
        raise Unknown(f"cannot evaluate {ast.unparse(node)}")

    def _metadata(self, node: ast.expr, mod: Module) -> Any:
        try:
            return self.ev(node, mod)
        except Unknown:
            return opaque(ast.unparse(node))

    def call_expr(self, node: ast.Call, mod: Module, local: Optional[dict] = None, prefer_tc: bool = False) -> Any:
        ev = lambda n: self.ev(n, mod, local, prefer_tc)  # noqa: E731
        if (ast.unparse(node.func).split(".")[-1] == "LazyLoader" and len(node.args) == 3
                and isinstance(node.args[2], ast.Constant)):  # vllm.utils.import_utils.LazyLoader(name, globals(), module)
            return self._module_value(node.args[2].value)
        args: list = []
        for a in node.args:
            args.extend(ev(a.value) if isinstance(a, ast.Starred) else [ev(a)])
        kwargs: dict = {}
        for k in node.keywords:
            if k.arg is None:
                kwargs.update(ev(k.value))
            else:
                kwargs[k.arg] = ev(k.value)
        return self.call(ev(node.func), args, kwargs)

    def run_function(self, fn: Any, args: list, kwargs: dict) -> Any:
        """Run a vLLM function or method (:class:`llmctl.engine_args.source_exec.Interpreter`)."""
        raise Unknown(f"call of vLLM function {getattr(fn, 'name', fn)}()")

    def call(self, fn: Any, args: list, kwargs: dict) -> Any:
        if fn is dataclasses.field:
            return FieldSpec(kwargs.get("default", dataclasses.MISSING), kwargs.get("default_factory", dataclasses.MISSING))
        if _is_pydantic_field(fn):
            default = args[0] if args else kwargs.get("default", dataclasses.MISSING)
            if default is Ellipsis:
                default = dataclasses.MISSING
            return FieldSpec(default, kwargs.get("default_factory", dataclasses.MISSING))
        if isinstance(fn, FuncRef):
            if isinstance(fn.node, ast.Lambda):
                params = [a.arg for a in fn.node.args.args]
                return self.ev(fn.node.body, fn.module, dict(zip(params, args)))
            if fn.name == "get_field" and len(args) == 2:  # vllm/config/utils.py
                return self.field_spec(args[0], args[1])
            return self.run_function(fn, args, kwargs)
        if isinstance(fn, BoundRef):
            return self.run_function(fn, args, kwargs)
        if isinstance(fn, type) and fn in self.classes:
            kind = self.classes[fn].kind
            if kind == "enum" and args:
                return fn(args[0])
            if kind in ("dict", "typeddict") and not args and not kwargs:
                return {}  # an empty mapping, as dict subclasses start
            return ConfigObject(fn)
        if fn is enum.auto or fn in _SAFE_CALLS:
            return fn(*args, **kwargs)
        if getattr(fn, "__module__", None) in ("typing", "typing_extensions") or _bound_to_plain(fn):
            return fn(*args, **kwargs)
        raise Unknown(f"call of {getattr(fn, '__qualname__', fn)!r}")


def _binop(op: ast.operator, a: Any, b: Any, node: ast.AST) -> Any:
    ops = {ast.BitOr: lambda x, y: x | y, ast.Add: lambda x, y: x + y, ast.Sub: lambda x, y: x - y,
           ast.Mult: lambda x, y: x * y, ast.Div: lambda x, y: x / y, ast.FloorDiv: lambda x, y: x // y,
           ast.Pow: lambda x, y: x ** y, ast.Mod: lambda x, y: x % y, ast.LShift: lambda x, y: x << y}
    try:
        return ops[type(op)](a, b)
    except Exception as e:  # noqa: BLE001
        raise Unknown(f"{ast.unparse(node)}: {e}") from None


def _is_model(b: type) -> bool:
    try:
        from pydantic import BaseModel

        return issubclass(b, BaseModel)
    except TypeError:
        return False


def _is_pydantic_field(fn: Any) -> bool:
    return getattr(fn, "__name__", "") == "Field" and str(getattr(fn, "__module__", "")).startswith("pydantic")


def _bound_to_plain(fn: Any) -> bool:
    """A method of a plain value (``"a_b".replace``, ``d.pop``)."""
    return isinstance(getattr(fn, "__self__", None), (str, list, dict, set, tuple, int))
