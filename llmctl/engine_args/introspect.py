"""Read vLLM's engine and frontend arguments, with their types, from an
installed vLLM. This module imports vllm (5–15 s) inside :func:`introspect`;
importing the module itself is cheap, and normal llmctl runs never call it:
:mod:`llmctl.engine_args` reads the tables it ships and introspects (in a
subprocess) only an installed vLLM that is the target and has no shipped
table. The shipped tables are written by this module too, run by
tools/build_engine_args.py in a throwaway venv per published vLLM release.

What is read, and from where (vLLM 0.32):

- the fields of ``vllm.engine.arg_utils.AsyncEngineArgs`` (which extends
  ``EngineArgs``) and of ``FrontendArgs`` (``vllm/entrypoints/launchers/
  cli_args.py``; ``vllm/entrypoints/openai/cli_args.py`` in older releases).
  Ray Serve LLM 2.60 accepts both in ``engine_kwargs`` and routes each key to
  the frontend when it is a FrontendArgs field, else to the engine
  (``ray/llm/_internal/serve/engines/vllm/vllm_models.py`` lines 211–229), so a
  name in both (``tokens_only``) is recorded as a frontend argument;
- each field's type hint (``dataclasses.fields`` + evaluation of string
  annotations, including names vLLM imports only under ``TYPE_CHECKING``);
- the CLI flag spelling and, for plain ``str`` fields whose target config
  field is a Literal (``lora_dtype``, ``offload_backend``, ``spec_method``,
  ``video_pruning_method``), the choices, from the argparse parser vLLM builds
  (``AsyncEngineArgs.add_cli_args`` / ``FrontendArgs.add_cli_args``).

Aliases resolved by hand (each checked in the vLLM source):

- ``quantization`` is ``QuantizationMethods | str | None`` where
  ``QuantizationMethods`` is ``str`` at run time (``arg_utils.py``
  ``TYPE_CHECKING`` block); ``ModelConfig`` lower-cases it
  (``config/model.py`` ``validate_quantization_before``) and rejects names not
  in ``vllm.model_executor.layers.quantization.QUANTIZATION_METHODS``
  (``_verify_quantization``). Recorded as a case-insensitive choice of that
  registry.
- Enum-typed fields are parsed from the member NAME, upper-cased
  (``MambaConfig.validate_backend_before`` in ``config/mamba.py``,
  ``AttentionConfig.validate_backend_before`` in ``config/attention.py``,
  ``MultiModalConfig._validate_mm_encoder_attn_backend`` in
  ``config/multimodal.py``): choices are the member names, case-insensitive.
  ``attention_backend`` also takes ``"auto"`` (= automatic selection).
  ``mm_encoder_attn_backend`` is typed ``AttentionBackendEnum | str`` but its
  validator accepts only member names, so it is a choice, not a free string.
  ``IntEnum`` fields (``optimization_level``) take the member values (0–3).
- A ``Literal`` together with ``str`` (``tokenizer_mode``, ``load_format``'s
  runtime alias, ``distributed_executor_backend``) is an open string: vLLM's
  CLI shows the literals as a hint only (``literal_to_kwargs`` uses
  ``metavar`` then), and plugins register more names.
- ``mm_processor_device``'s choices depend on the platform the table is built
  on (``"auto"``, ``"cpu"`` and the accelerator's device type), so it is
  recorded as a free string.
- Config dataclasses (``compilation_config``, ``kv_transfer_config``, …) are
  ``dict``: in engine_kwargs they are given as mappings, which Ray validates
  into the config class (``ray/llm/_internal/serve/engines/vllm/
  vllm_engine.py`` ``_normalize_vllm_engine_kwargs``). The classes' fields
  go into the table's ``configs`` (:mod:`llmctl.engine_args.configs`;
  :class:`RealClasses` hands it the imported classes, their source for
  validators).
- Integers vLLM's CLI reads with ``human_readable_int`` (``1k``, ``2M``) or
  ``human_readable_int_or_auto`` (also ``auto`` → -1) are marked so in
  ``cli_int``.

Run ``python -m llmctl.engine_args.introspect OUT.json`` to write the table of the
installed vLLM to OUT.json (used for the per-version cache);
``tools/build_engine_args.py`` writes the shipped tables and the introspected
reference with it.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import sys
import types
from pathlib import Path
from typing import Any

from llmctl.engine_args.configs import describe
from llmctl.engine_args.kinds import CliArg, classify, entry, flatten  # noqa: F401  (classify: public)
from llmctl.engine_args.table import TABLE_FORMAT, installed_vllm  # light: no vllm import
from llmctl.paths import write_atomic

_FRONTEND_MODULES = ("vllm.entrypoints.launchers.cli_args", "vllm.entrypoints.common.cli_args",
                     "vllm.entrypoints.openai.cli_args")


# --------------------------------------------------------------------------
# type hints


def _type_checking_names(module: types.ModuleType) -> dict[str, Any]:
    """Names a module imports only under ``if TYPE_CHECKING:`` (string
    annotations may use them), imported now where possible."""
    out: dict[str, Any] = {}
    try:
        src = Path(module.__file__ or "").read_text(encoding="utf-8")
    except OSError:
        return out
    for node in ast.parse(src).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0:
                    for alias in stmt.names:
                        try:
                            mod = __import__(stmt.module, fromlist=[alias.name])
                            out[alias.asname or alias.name] = getattr(mod, alias.name)
                        except Exception:
                            pass
    return out


def _field_hints(cls: type) -> dict[str, Any]:
    hints: dict[str, Any] = {}
    extra: dict[str, dict[str, Any]] = {}
    for f in dataclasses.fields(cls):
        tp = f.type
        if isinstance(tp, str):
            owner = next((c for c in cls.__mro__ if f.name in getattr(c, "__annotations__", {})), cls)
            mod = sys.modules[owner.__module__]
            if owner.__module__ not in extra:
                extra[owner.__module__] = _type_checking_names(mod)
            try:
                # vLLM's own annotation text, in the namespace of its module.
                tp = eval(tp, dict(vars(mod)), dict(extra[owner.__module__]))
            except Exception:
                tp = Any
        hints[f.name] = tp
    return hints


# --------------------------------------------------------------------------
# defaults


def _raw_default(f: dataclasses.Field) -> Any:
    value: Any = None
    try:
        if f.default is not dataclasses.MISSING:
            value = f.default
            if type(value).__name__ == "FieldInfo":  # pydantic Field(...)
                factory = getattr(value, "default_factory", None)
                value = factory() if factory is not None else value.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
    except Exception:
        value = None
    return value


# --------------------------------------------------------------------------
# CLI parser


def _actions(add_cli_args) -> dict[str, Any]:
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = add_cli_args(FlexibleArgumentParser(add_help=False))
    out: dict[str, Any] = {}
    for action in parser._actions:
        out.setdefault(action.dest, action)
    return out


def _type_name(action: Any) -> str | None:
    """The conversion function's name; vLLM wraps nullable types
    (``optional_type``/``parse_type``): look inside the closures."""
    fn = getattr(action, "type", None)
    name = getattr(fn, "__name__", None)
    if name == "_optional_type":
        for cell in getattr(fn, "__closure__", None) or ():
            inner = cell.cell_contents
            name = getattr(inner, "__name__", name)
            if name == "_parse_type":
                for c2 in getattr(inner, "__closure__", None) or ():
                    name = getattr(c2.cell_contents, "__name__", name)
    return name


def _cli_arg(action: Any) -> CliArg | None:
    if action is None:
        return None
    return CliArg(tuple(action.option_strings), action.default,
                  tuple(action.choices) if action.choices is not None else None, _type_name(action))


# --------------------------------------------------------------------------
# the table


def _spec(name: str, group: str, f: dataclasses.Field, hint: Any, action: Any) -> dict[str, Any]:
    methods: list[str] = []
    if name == "quantization":
        from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS

        methods = list(QUANTIZATION_METHODS)
    return entry(name, group, hint, _raw_default(f), _cli_arg(action), methods)


class RealClasses:
    """vLLM's imported classes, for :mod:`llmctl.engine_args.configs`."""

    def __init__(self):
        self._nodes: dict[type, ast.ClassDef] = {}

    def name(self, cls: type) -> tuple[str, str]:
        return cls.__name__, cls.__module__

    def init_fields(self, cls: type) -> list[tuple[str, Any, bool]]:
        hints = _field_hints(cls)
        return [(f.name, hints[f.name], _none_default(f)) for f in dataclasses.fields(cls) if f.init]

    def extra(self, cls: type) -> str:
        cfg = getattr(cls, "__pydantic_config__", None)
        if cfg is None:
            return "forbid"  # a plain dataclass: an unknown keyword is a TypeError
        return cfg.get("extra") or "ignore"

    def nodes(self, cls: type) -> list[ast.ClassDef]:
        out = []
        for c in cls.__mro__:
            if not str(getattr(c, "__module__", "")).startswith("vllm"):
                continue
            if c not in self._nodes:
                import inspect
                import textwrap

                self._nodes[c] = ast.parse(textwrap.dedent(inspect.getsource(c))).body[0]
            out.append(self._nodes[c])
        return out

    def resolve(self, module: str, name: str) -> Any:
        return getattr(sys.modules[module], name)


def _none_default(f: dataclasses.Field) -> bool:
    """The default is None (``= None``, ``field(default=None)``, ``Field(None, ...)``); a factory is not."""
    if f.default_factory is not dataclasses.MISSING:
        return False
    d = f.default
    if type(d).__name__ == "FieldInfo":
        return d.default is None and getattr(d, "default_factory", None) is None
    return d is None


def introspect() -> dict[str, Any]:
    """The table of the installed vLLM (imports vllm: slow)."""
    import importlib
    import logging

    logging.getLogger("vllm").setLevel(logging.ERROR)
    from vllm.engine.arg_utils import AsyncEngineArgs

    args: dict[str, dict[str, Any]] = {}
    engine_actions = _actions(AsyncEngineArgs.add_cli_args)
    hints = _field_hints(AsyncEngineArgs)
    for f in dataclasses.fields(AsyncEngineArgs):
        args[f.name] = _spec(f.name, "engine", f, hints[f.name], engine_actions.get(f.name))
    all_hints = dict(hints)

    frontend = None
    for modname in _FRONTEND_MODULES:
        try:
            frontend = importlib.import_module(modname).FrontendArgs
            break
        except (ImportError, AttributeError):
            continue
    if frontend is not None:
        fe_actions = _actions(frontend.add_cli_args)
        fe_hints = _field_hints(frontend)
        for f in dataclasses.fields(frontend):
            # Ray routes a key to the frontend first (vllm_models.py line 224).
            args[f.name] = _spec(f.name, "frontend", f, fe_hints[f.name], fe_actions.get(f.name))
            all_hints[f.name] = fe_hints[f.name]
    try:
        from vllm.config.multimodal import MultiModalConfig
    except ImportError:
        MultiModalConfig = None
    configs = describe(RealClasses(), AsyncEngineArgs, args, all_hints, MultiModalConfig)

    dist = installed_vllm()
    try:
        from vllm.version import __version__ as version
    except ImportError:
        version = dist[1] if dist else "unknown"
    return {
        "format": TABLE_FORMAT,
        "vllm_version": version,
        "vllm_distribution": dist[0] if dist else None,
        "frontend_class": f"{frontend.__module__}.FrontendArgs" if frontend is not None else None,
        "args": [args[k] for k in sorted(args)],
        "configs": configs,
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m llmctl.engine_args.introspect OUT.json", file=sys.stderr)
        return 2
    table = introspect()
    write_atomic(Path(argv[1]), json.dumps(table, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
