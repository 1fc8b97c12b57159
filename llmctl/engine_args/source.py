"""Build the argument table of a vLLM release from its published source (an
unpacked sdist), without importing or installing it: the table for a vLLM
that is not installed here, such as the one Ray pins.

It reads what :mod:`llmctl.engine_args.introspect` reads from a running vLLM,
with ``ast`` (:mod:`llmctl.engine_args.source_eval`), and hands the same kind of
objects to the same rules (:mod:`llmctl.engine_args.kinds`):

- the fields of ``AsyncEngineArgs`` / ``EngineArgs`` (``vllm/engine/arg_utils.py``)
  and of ``FrontendArgs`` (``vllm/entrypoints/launchers/cli_args.py`` in
  0.29–0.32, ``vllm/entrypoints/common/cli_args.py`` from 0.33,
  ``vllm/entrypoints/openai/cli_args.py`` before), with their annotations and
  defaults; a default such as ``ModelConfig.max_model_len`` or
  ``get_field(ModelConfig, "hf_overrides")`` is read from the config class in
  ``vllm/config/``, an ``envs.VLLM_*`` default from ``vllm/envs.py``;
- the argparse actions vLLM's parser would hold (flag spelling, choices,
  default, conversion function), by running ``add_cli_args`` in a small
  interpreter (:class:`_Cli`): ``get_kwargs(SomeConfig)`` is vLLM's
  ``_compute_kwargs`` (ported below; the details that differ between releases,
  such as which integers take ``1k``, are read from each release's source),
  ``add_argument`` calls, the edits to the kwargs dicts between them, and the
  FrontendArgs loop over its own fields;
- the quantization registry, ``QUANTIZATION_METHODS`` in
  ``vllm/model_executor/layers/quantization/__init__.py``;
- the config classes dict-valued arguments become (``CompilationConfig``,
  ``SpeculativeConfig``, …), field by field (:mod:`llmctl.engine_args.configs`
  through :class:`llmctl.engine_args.source_classes.SourceClasses`).

What it cannot see, and why that is harmless, is listed in ``Table.problems``
(printed by ``scripts/build_engine_args.py``): parser calls of plugins and of
the platform (``load_general_plugins``, ``current_platform.pre_register_and_update``;
no-ops without plugins, which is also what introspection here sees).
"""

from __future__ import annotations

import ast
import dataclasses
import re
import types
import typing
from pathlib import Path
from typing import Any, Optional

from llmctl.engine_args.configs import describe
from llmctl.engine_args.kinds import CliArg, entry
from llmctl.engine_args.source_classes import SourceClasses
from llmctl.engine_args.source_eval import ConfigObject, FieldSpec, FuncRef, Module, Unknown
from llmctl.engine_args.source_exec import Interpreter

FRONTEND_MODULES = ("vllm.entrypoints.launchers.cli_args", "vllm.entrypoints.common.cli_args",
                    "vllm.entrypoints.openai.cli_args")
_NONE = type(None)


def source_version(root: Path) -> str:
    """The release an unpacked sdist holds (PKG-INFO, else vllm/_version.py)."""
    pkg = root / "PKG-INFO"
    if pkg.is_file():
        m = re.search(r"^Version:\s*(\S+)", pkg.read_text(encoding="utf-8", errors="replace"), re.M)
        if m:
            return m.group(1)
    ver = root / "vllm" / "_version.py"
    if ver.is_file():
        m = re.search(r"""(?:__version__|version)\s*(?::\s*str\s*)?=\s*['"]([^'"]+)""", ver.read_text(encoding="utf-8"))
        if m:
            return m.group(1)
    raise ValueError(f"{root}: no PKG-INFO or vllm/_version.py to read the version from")


#: What the reader cannot see and knows to be harmless: (pattern, why).
KNOWN_GAPS: tuple[tuple[str, str], ...] = (
    (r"\(--mm-processor-device\): choices= not read",
     "--mm-processor-device's choices name the platform's device type; the table records it as a free string "
     "on every platform (kinds.PLATFORM_DEPENDENT_CHOICES)"),
    (r"`current_platform\.pre_register_and_update\(parser\)`",
     "the platform's parser hook: a no-op in vLLM's Platform base class; no built-in platform changes the parser "
     "(ROCm's sets an environment variable)"),
)


@dataclasses.dataclass
class Table:
    version: str
    frontend_class: Optional[str]
    args: list[dict[str, Any]]
    configs: dict[str, dict[str, Any]]  # the config classes dict-valued arguments become (llmctl.engine_args.configs)
    problems: list[str]  # what the reader could not read, unexplained: review before shipping
    notes: list[str]  # what it could not read and why that is harmless (KNOWN_GAPS)


def build(root: Path | str) -> Table:
    """The table of the vLLM source tree at ``root`` (the directory holding ``vllm/``)."""
    root = Path(root)
    tree = cli = _Cli(root)
    arg_utils = tree.module("vllm.engine.arg_utils")
    if arg_utils is None:
        raise FileNotFoundError(f"{root}: no vllm/engine/arg_utils.py")
    engine_cls = tree.lookup(arg_utils, "AsyncEngineArgs")
    quant = tree.module("vllm.model_executor.layers.quantization")
    try:
        methods = list(tree.lookup(quant, "QUANTIZATION_METHODS")) if quant else []
    except Unknown as e:
        tree.problems.append(f"QUANTIZATION_METHODS: {e}")
        methods = []

    args: dict[str, dict[str, Any]] = {}
    hints: dict[str, Any] = {}
    actions = cli.run(engine_cls, "add_cli_args")
    for name in tree.fields(engine_cls):
        args[name], hints[name] = _row(tree, engine_cls, name, "engine", actions.get(name), methods)

    frontend, where = None, None
    for modname in FRONTEND_MODULES:
        mod = tree.module(modname)
        if mod is not None and mod.runtime.get("FrontendArgs", ("",))[0] == "class":
            frontend, where = tree.lookup(mod, "FrontendArgs"), modname
            break
    if frontend is not None:
        fe_actions = cli.run(frontend, "add_cli_args")
        for name in tree.fields(frontend):
            # Ray routes a key to the frontend first (vllm_models.py line 224).
            args[name], hints[name] = _row(tree, frontend, name, "frontend", fe_actions.get(name), methods)
    else:
        tree.problems.append("no FrontendArgs class found in " + ", ".join(FRONTEND_MODULES))
    mm = tree.module("vllm.config.multimodal")
    mm_cls = tree.lookup(mm, "MultiModalConfig") if mm is not None and "MultiModalConfig" in mm.runtime else None
    configs = describe(SourceClasses(tree), engine_cls, args, hints, mm_cls)
    problems, notes = [], []
    for p in dict.fromkeys(tree.problems):
        why = next((why for pattern, why in KNOWN_GAPS if re.search(pattern, p)), None)
        if why:
            notes.append(f"{p}: {why}")
        else:
            problems.append(p)
    return Table(source_version(root), f"{where}.FrontendArgs" if where else None,
                 [args[k] for k in sorted(args)], configs, problems, notes)


def _row(tree: Interpreter, cls: type, name: str, group: str, cli: Optional[CliArg],
         methods: list[str]) -> tuple[dict[str, Any], Any]:
    st, mod = tree.fields(cls)[name]
    try:
        hint = tree.hint(st.annotation, mod)
    except Unknown as e:
        tree.problems.append(f"{cls.__qualname__}.{name}: annotation not read ({e}); recorded as any JSON value")
        hint = Any
    try:
        raw = tree.resolve_default(tree.field_of(st.value, mod))
    except Unknown as e:
        tree.problems.append(f"{cls.__qualname__}.{name}: default not read ({e})")
        raw = None
    if raw is dataclasses.MISSING:
        raw = None
    return entry(name, group, hint, raw, cli, methods), hint


# --------------------------------------------------------------------------
# vLLM's get_kwargs (engine/arg_utils.py _compute_kwargs), on synthesised types


def _type_hints(tp: Any) -> set:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _type_hints(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return {h for a in typing.get_args(tp) for h in _type_hints(a)}
    return {tp}


def _is(th: Any, tp: Any) -> bool:
    return th is tp or typing.get_origin(th) is tp


def _has(hints: set, tp: Any) -> bool:
    return any(_is(th, tp) for th in hints)


def _get(hints: set, tp: Any) -> Any:
    return next((th for th in hints if _is(th, tp)), None)


@dataclasses.dataclass(frozen=True)
class _Named:
    """A conversion function of vLLM's parser, by name (human_readable_int)."""

    __name__: str

    def __call__(self, text: str) -> Any:  # never called; callable like the real one
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class _Wrapped:
    """``optional_type(f)`` / ``parse_type(f)``: the table looks through to f."""

    inner: Any


def _type_name(v: Any) -> Optional[str]:
    while isinstance(v, _Wrapped):
        v = v.inner
    if isinstance(v, FuncRef):
        return v.name
    return getattr(v, "__name__", None) if callable(v) else None


class _LazyKwargs(dict):
    """get_kwargs(cls): one kwargs dict per field, computed when first used."""

    def __init__(self, cli: "_Cli", cls: type):
        super().__init__()
        self._cli, self._cls = cli, cls
        self._names = list(cli.fields(cls))

    def __missing__(self, key: str) -> dict:
        if key not in self._names:
            raise KeyError(key)
        value = self._cli.field_kwargs(self._cls, key)
        self[key] = value
        return value

    def _all(self) -> None:
        for k in self._names:
            if not dict.__contains__(self, k):
                self[k]  # noqa: B018 - computes it

    def items(self):  # type: ignore[override]
        self._all()
        return [(k, dict.__getitem__(self, k)) for k in self._names if dict.__contains__(self, k)]


class _Cli(Interpreter):
    """Runs ``add_cli_args`` far enough to know each action."""

    lenient_functions = frozenset({"add_cli_args", "_customize_cli_kwargs"})

    def __init__(self, root: Path):
        super().__init__(root)
        self.actions: dict[str, CliArg] = {}
        self.features = self._features()

    def _features(self) -> dict[str, Any]:
        """What _compute_kwargs does that changed between releases."""
        mod = self.module("vllm.engine.arg_utils")
        fn = next((n for n in mod.tree.body if isinstance(n, ast.FunctionDef) and n.name == "_compute_kwargs"), None)
        if fn is None:
            raise ValueError(f"{mod.path}: no _compute_kwargs; this vLLM builds its parser another way")
        text = ast.unparse(fn)
        human: set[str] = set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "human_readable_int_args"
                                                    for t in node.targets):
                human = set(ast.literal_eval(node.value))
        auto = re.search(r"if name == '(\w+)':\s*kwargs\[name\]\['type'\] = human_readable_int_or_auto", text)
        if not auto:
            self.problems.append("_compute_kwargs: no human_readable_int_or_auto field found")
        return {"human": human, "auto": auto.group(1) if auto else None,
                "dict_subclass": "is_dict_subclass(th)" in text,
                "none_choice": None if "['choices'].append(None)" in text else "None"}

    # ------------------------------------------------------------ get_kwargs

    def field_kwargs(self, cls: type, name: str) -> dict[str, Any]:
        """vLLM's _compute_kwargs for one field of a config class."""
        st, mod = self.fields(cls)[name]
        try:
            hints = _type_hints(self.hint(st.annotation, mod))
        except Unknown as e:
            self.problems.append(f"{cls.__qualname__}.{name}: annotation not read for the parser ({e})")
            hints = {str}
        if self.features["dict_subclass"]:
            hints = {dict if isinstance(th, type) and not typing.is_typeddict(th) and issubclass(th, dict) else th
                     for th in hints}
        kw: dict[str, Any] = {"default": _LazyDefault(self, st.value, mod, f"{cls.__qualname__}.{name}"), "help": ""}
        dc = next((th for th in hints if dataclasses.is_dataclass(th)), None)
        if dc is not None:
            kw["type"] = _Named("parse_dataclass")
        elif hints == {bool, str, _NONE}:
            kw.update(type=str, nargs="?", const=True)
        elif _has(hints, bool):
            kw["action"] = "BooleanOptionalAction"
        elif _has(hints, typing.Literal):
            kw.update(self._literal(hints))
        elif _has(hints, tuple) or _has(hints, list) or _has(hints, set):
            coll = tuple if _has(hints, tuple) else list if _has(hints, list) else set
            args_ = typing.get_args(_get(hints, coll))
            elem = args_[0] if args_ else str
            if typing.get_origin(elem) in (typing.Union, types.UnionType):
                elem = str
            kw.update(type=elem, nargs="+")
        elif _has(hints, int):
            auto, human = self.features["auto"], self.features["human"]
            kw["type"] = (_Named("human_readable_int_or_auto") if name == auto else
                          _Named("human_readable_int") if name in human else int)
        elif _has(hints, float):
            kw["type"] = float
        elif _has(hints, dict) and (_has(hints, str) or any(getattr(th, "__module__", "") != "builtins" for th in hints)):
            kw["type"] = _Named("union_dict_and_str")
        elif _has(hints, dict):
            kw["type"] = _Wrapped(_Named("loads"))
        elif _has(hints, str) or any(getattr(th, "__module__", "") != "builtins" for th in hints):
            kw["type"] = str
        else:
            self.problems.append(f"{cls.__qualname__}.{name}: vLLM's parser rejects the type {hints}")
        if typing.get_origin(kw.get("type")) is typing.Literal:
            kw.update(self._literal({kw["type"]}))
        if _NONE in hints and not _has(hints, bool):
            kw["type"] = _Wrapped(kw.get("type"))
            if kw.get("choices"):
                kw["choices"].append(self.features["none_choice"])
        return kw

    @staticmethod
    def _literal(hints: set) -> dict[str, Any]:
        options = typing.get_args(_get(hints, typing.Literal))
        key = "metavar" if _has(hints, str) else "choices"
        return {"type": type(options[0]), key: sorted(options)}

    # ------------------------------------------------------------ the interpreter

    def run(self, cls: type, method: str) -> dict[str, CliArg]:
        """The actions ``cls.method(parser)`` adds, by dest."""
        self.actions = {}
        self.call(self.attr(cls, method), ["PARSER"], {})
        return self.actions

    def call_expr(self, node: ast.Call, mod: Module, local: Optional[dict] = None, prefer_tc: bool = False) -> Any:
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("add_argument_group", "add_mutually_exclusive_group"):
            return "PARSER"
        if isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            self._add_argument(node, mod, local)
            return "ACTION"
        return super().call_expr(node, mod, local, prefer_tc)

    def call(self, fn: Any, args: list, kwargs: dict) -> Any:
        if isinstance(fn, FuncRef) and fn.name == "get_kwargs":
            return _LazyKwargs(self, args[0])
        if isinstance(fn, FuncRef) and fn.name in ("optional_type", "parse_type"):
            return _Wrapped(args[0])
        return super().call(fn, args, kwargs)

    def _add_argument(self, node: ast.Call, mod: Module, env: Optional[dict]) -> None:
        """Record one action; a keyword this reader cannot evaluate is left out
        (and reported), the rest of the action still counts."""
        args: list = []
        for a in node.args:
            v = self.ev(a.value if isinstance(a, ast.Starred) else a, mod, env)
            args.extend(v if isinstance(a, ast.Starred) else [v])
        kwargs: dict = {}
        for k in node.keywords:
            try:
                v = self.ev(k.value, mod, env)
            except Exception as e:  # noqa: BLE001
                self.problems.append(f"{mod.name} line {node.lineno} ({' '.join(map(str, args))}): "
                                     f"{k.arg or '**'}= not read ({e})")
                if k.arg == "default":
                    kwargs["default"] = ConfigObject(object)  # something, not None
                continue
            if k.arg is None:
                kwargs.update(v)
            else:
                kwargs[k.arg] = v
        opts = tuple(a for a in args if isinstance(a, str))
        dest = kwargs.get("dest")
        if dest is None:
            longs = [o for o in opts if o.startswith("--")]
            dest = (longs[0] if longs else opts[0]).lstrip("-").replace("-", "_")
        if dest in self.actions:
            return  # the parser's first action of a dest is the one introspection reads
        action = kwargs.get("action")
        action_name = action if isinstance(action, str) else getattr(action, "__name__", None)
        if "default" in kwargs:
            default = kwargs["default"]
            if isinstance(default, _LazyDefault):
                default = default.value()
        else:
            default = {"store_true": False, "store_false": True}.get(action_name or "")
        if action_name == "BooleanOptionalAction":
            opts = opts + tuple("--no-" + o[2:] for o in opts if o.startswith("--"))
        choices = kwargs.get("choices")
        self.actions[dest] = CliArg(opts, default, tuple(choices) if choices is not None else None,
                                    _type_name(kwargs.get("type")))


@dataclasses.dataclass
class _LazyDefault:
    """A config field's default, read only when an action needs it."""

    tree: Interpreter
    value_node: Optional[ast.expr]
    mod: Module
    where: str

    def value(self) -> Any:
        try:
            v = self.tree.resolve_default(self.tree.field_of(self.value_node, self.mod))
        except Unknown as e:
            self.tree.problems.append(f"{self.where}: parser default not read ({e}); taken as not None")
            return ConfigObject(object)
        return None if v is dataclasses.MISSING else v


__all__ = ["FRONTEND_MODULES", "Table", "build", "source_version", "FieldSpec"]
