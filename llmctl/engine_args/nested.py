"""The keys inside dict-valued engine arguments (issue 20): each key of
``compilation_config``, ``speculative_config``, ``kv_transfer_config``, … must
be a field of the vLLM config class the mapping becomes, in the TARGET vLLM
(the table's ``configs``, :mod:`llmctl.engine_args.configs`), and each value of
that field's type; enum-like fields (``cudagraph_mode``, ``mode``, a
speculative ``method``) take the choices the class declares (``Literal``,
``Enum``). ``limit_mm_per_prompt`` maps a modality to an integer or to that
modality's options; ``hf_overrides`` and the other free-form mappings are only
checked to be mappings.

:func:`check_nested` returns every problem of one argument's value, each with
its path below the argument (``("cudagraph_mod",)``), so that ``validate``
prints ``engine_kwargs.compilation_config.cudagraph_mod`` on its own line.
A key that is no field of the target's class:

- but is one in a NEWER vLLM llmctl has a table of: a warning naming the
  release it appeared in (as for top-level keys; ``strict`` makes it an
  error, for ``gen-config``, which writes for the target);
- of a class that ignores unknown keys (``extra="ignore"``: vLLM's
  ``BaseDummyOptions``): a warning, vLLM drops it;
- else an error with the nearest field's name (and the release that had it, if
  an older one did).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional, Union

from llmctl.engine_args.scalars import _check_list, _check_scalar, _is_int, _show
from llmctl.engine_args.table import ArgSpec, ConfigSpec, Configs, FieldShape, shipped_table, shipped_versions
from llmctl.suggest import closest, phrase
from llmctl.vllm_version import parse_vllm_version

Shape = Union[ArgSpec, FieldShape]


@dataclass(frozen=True)
class NestedProblem:
    """One problem inside an argument's mapping: ``path`` below the argument,
    a one-line ``message`` (without the path), ``severity`` (error or
    warning) and the diagnostic ``code`` validate uses for top-level keys."""

    path: tuple
    message: str
    severity: str = "error"
    code: str = "bad-engine-arg"


def check_nested(spec: ArgSpec, value: Any, *, origin: Optional[str] = None,
                 strict: bool = False) -> list[NestedProblem]:
    """Problems of the keys and values inside ``value`` (an argument's
    mapping); [] for a free-form mapping or a value that is not a mapping
    (:func:`llmctl.engine_args.check_value` reports that). ``origin`` names
    the target in warnings ("vLLM 0.29.0 (Ray 2.60's pin)"); ``strict``: keys
    of a newer vLLM, and keys vLLM would ignore, are errors."""
    if spec.configs is None or not isinstance(value, Mapping):
        return []
    c = _Checker(spec, spec.configs, origin or f"vLLM {spec.configs.version}", strict)
    c.mapping(spec, value, ())
    if spec.name == "kv_transfer_config" and value.get("kv_connector") == "MultiConnector":
        # MultiConnector builds a KVTransferConfig of every entry of
        # kv_connector_extra_config.connectors (v1/multi_connector.py: KVTransferConfig(**conn_config))
        extra = value.get("kv_connector_extra_config")
        conns = extra.get("connectors") if isinstance(extra, Mapping) else None
        for i, conn in enumerate(conns if isinstance(conns, list) else []):
            if isinstance(conn, Mapping):
                c.mapping(spec, conn, ("kv_connector_extra_config", "connectors", i))
    return c.problems


class _Checker:
    def __init__(self, arg: ArgSpec, configs: Configs, origin: str, strict: bool):
        self.arg, self.configs, self.origin, self.strict = arg, configs, origin, strict
        self.problems: list[NestedProblem] = []

    def add(self, path: tuple, message: str, severity: str = "error", code: str = "bad-engine-arg") -> None:
        self.problems.append(NestedProblem(path, message, severity, code))

    def mapping(self, shape: Shape, value: Mapping, path: tuple, key: Any = None) -> None:
        """The keys of a mapping whose shape is ``shape`` (under ``key`` of its parent)."""
        cfg_key = shape.config_for(key) if key is not None else shape.config
        cfg = self.configs.classes.get(cfg_key) if cfg_key else None
        if cfg is not None:
            for k, v in value.items():
                name = str(k).replace("-", "_") if getattr(self.arg, "dashes", False) and not path else str(k)
                f = cfg.fields.get(name)
                if f is None:
                    self.unknown(cfg, path + (k,))
                else:
                    self.value(f, v, path + (k,))
        elif shape.values is not None:
            for k, v in value.items():
                self.value(shape.values, v, path + (k,), key=k)

    def value(self, f: FieldShape, v: Any, path: tuple, key: Any = None) -> None:
        if v is None:
            if not f.nullable:
                self.add(path, f"must not be null; expected {self.expected(f, key)}")
            return
        if f.shorthand and _is_int(v):
            cfg = self.configs.classes.get(f.config_for(key) or "")
            inner = cfg.fields.get(f.shorthand) if cfg is not None else None
            if inner is not None:
                self.value(inner, v, path)
            return
        if f.kind == "dict" and isinstance(v, Mapping):
            self.mapping(f, v, path, key)
            return
        problem = _check_list(f, v) if f.kind == "list" else _check_scalar(f.kind, v, f.choices, f.ignore_case)
        if problem and f.shorthand:
            problem = f"expected {self.expected(f, key)}, got {_show(v)}"
        if problem:
            self.add(path, problem)

    def expected(self, f: FieldShape, key: Any) -> str:
        if f.shorthand:
            return f"an integer ({f.shorthand}) or a mapping of {f.config_for(key)} options"
        return f.expected()

    def unknown(self, cfg: ConfigSpec, path: tuple) -> None:
        name = str(path[-1])
        where = f"vLLM {self.configs.version}'s {cfg.name}"
        newer, older = other_release_with_key(self.arg.name, path, self.configs.version)
        if newer:
            minor = newer.rpartition(".")[0]
            if self.strict:
                self.add(path, f"not a field of {where}; it exists from vLLM {minor}", code="newer-engine-arg")
            else:
                self.add(path, f"exists from vLLM {minor} ({cfg.name}); the target is {self.origin}, which refuses it "
                               "(pass --vllm-version if the replicas run a newer vLLM)", "warning", "newer-engine-arg")
            return
        near = suggest_field(name, cfg)
        hint = phrase(near)
        if cfg.extra != "forbid":
            self.add(path, f"not a field of {where}{hint}; vLLM ignores it", "error" if self.strict else "warning",
                     "ignored-engine-arg")
            return
        gone = f"; vLLM {older} had it" if older else ""
        self.add(path, f"not a field of {where}{hint}{gone}", code="unknown-engine-arg")


def suggest_field(name: str, cfg: ConfigSpec) -> Optional[str]:
    """The closest field of a config class, or None."""
    key = name.strip().replace("-", "_")
    if key in cfg.fields and key != name:
        return key
    return closest(key, cfg.fields)


def config_at(spec: ArgSpec, path: tuple) -> Optional[ConfigSpec]:
    """The config class whose field the last key of ``path`` would be, in the
    table ``spec`` is from; None if the path leads elsewhere there."""
    configs = spec.configs
    if configs is None:
        return None
    shape: Shape = spec
    key: Any = None
    for k in path[:-1]:
        cfg_key = shape.config_for(key) if key is not None else shape.config
        cfg = configs.classes.get(cfg_key) if cfg_key else None
        if cfg is not None:
            f = cfg.fields.get(str(k).replace("-", "_") if spec.dashes and shape is spec else str(k))
            if f is None:
                return None
            shape, key = f, None
        elif shape.values is not None:
            shape, key = shape.values, k
        else:
            return None
    cfg_key = shape.config_for(key) if key is not None else shape.config
    return configs.classes.get(cfg_key) if cfg_key else None


def other_release_with_key(arg: str, path: tuple, version: str) -> tuple[Optional[str], Optional[str]]:
    """(first shipped release NEWER than ``version`` whose class at ``path``
    has its last key, last shipped release OLDER than it that has it)."""
    try:
        here = parse_vllm_version(version).release
    except ValueError:
        return None, None
    name = str(path[-1]).replace("-", "_")

    def has(label: str) -> bool:
        sp = shipped_table(label).get(arg)
        cfg = config_at(sp, path) if sp is not None else None
        return cfg is not None and name in cfg.fields

    newer = next((s.label for s in shipped_versions() if s.release > here and has(s.label)), None)
    older = next((s.label for s in reversed(shipped_versions()) if s.release < here and has(s.label)), None)
    return newer, older


def path_text(name: str, path: tuple) -> str:
    """``compilation_config.pass_config.fuse_norm_quant`` (``[0]`` for list indices)."""
    out = name
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out
