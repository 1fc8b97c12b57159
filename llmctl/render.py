"""Spec -> YAML documents (from templates/) -> files on disk.

Values are emitted through ``yaml.safe_dump`` (filters ``yaml_inline`` /
``yaml_block``), never pasted as text, so any model id, path or name — quotes,
colons, ``#``, unicode — parses back to the same value. Every rendered document
is parsed back and compared with the intended data before anything is written.
Files are written atomically (temp file + rename), all or nothing, and never
over an existing file unless ``force``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Optional

import yaml

from llmctl import sizing
from llmctl.catalog import RECIPE_FEATURES
from llmctl._version import __version__
from llmctl.errors import LlmctlError, OutputExists, param
from llmctl.paths import data_dir, write_all_atomic
from llmctl.spec import (
    CPU_DTYPE,
    CPU_MIN_KV_CACHE_BYTES,
    DeploymentSpec,
    ModelSpec,
    is_bucket,
)

SERVE_IMPORT_PATH = "ray.serve.llm:build_openai_app"


# --------------------------------------------------------------------------
# Spec -> data


def cpu_kv_cache_bytes(spec: ModelSpec) -> int:
    """KV cache to reserve on CPU: room for two full-length sequences in
    float32, at least 64 MiB (the value measured to work for the tiny model)."""
    arch = spec.arch
    mml = spec.effective_max_model_len or 512
    if arch is None:
        return CPU_MIN_KV_CACHE_BYTES
    if arch.mla is not None:
        per_token = arch.num_hidden_layers * (arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim) * 4
    else:
        per_token = 2 * arch.num_hidden_layers * arch.num_key_value_heads * arch.head_dim_effective * 4
    need = 2 * per_token * mml
    mib = 1024 * 1024
    return max(CPU_MIN_KV_CACHE_BYTES, -(-need // mib) * mib)


def llm_config_dict(spec: ModelSpec) -> dict[str, Any]:
    """One LLMConfig as plain data, in the layout of Ray's docs."""
    source: Any = spec.source
    if is_bucket(source):
        source = {"bucket_uri": source}
    doc: dict[str, Any] = {"model_loading_config": {"model_id": spec.model_id, "model_source": source}}
    engine: dict[str, Any] = {"tensor_parallel_size": spec.tp}
    if spec.pp > 1:
        engine["pipeline_parallel_size"] = spec.pp
    if spec.gpu.is_cpu:
        engine.update(dtype=CPU_DTYPE, enforce_eager=True)
        engine["max_model_len"] = spec.effective_max_model_len
        engine["kv_cache_memory_bytes"] = cpu_kv_cache_bytes(spec)
        doc["placement_group_config"] = {"bundles": [{"CPU": 1} for _ in range(spec.tp * spec.pp)]}
    else:
        doc["accelerator_type"] = spec.gpu.ray_type
        if sizing.nodes_of(spec.gpu, spec.tp, spec.pp) > 1:
            # one bundle per engine worker, PACK: the pipeline stages go to other nodes (sizing.layout_problem)
            doc["placement_group_config"] = {"bundle_per_worker": {"GPU": 1}, "strategy": "PACK"}
        if spec.max_model_len is not None:
            engine["max_model_len"] = spec.max_model_len
        if spec.gpu_memory_utilization is not None:
            engine["gpu_memory_utilization"] = spec.gpu_memory_utilization
    engine.update(spec.engine_extra)  # the user's engine settings win over llmctl's CPU defaults
    if spec.lora_path:
        engine["enable_lora"] = True
        engine["max_loras"] = spec.max_loras or spec.max_lora_adapters  # Ray's guide: adapters per replica
        if spec.max_cpu_loras:
            engine["max_cpu_loras"] = spec.max_cpu_loras
        if spec.max_lora_rank:
            engine["max_lora_rank"] = spec.max_lora_rank
    doc["engine_kwargs"] = engine
    doc["deployment_config"] = deployment_config(spec)
    if spec.lora_path:
        doc["lora_config"] = {
            "dynamic_lora_loading_path": spec.lora_path,
            "max_num_adapters_per_replica": spec.max_lora_adapters,
        }
    env: dict[str, str] = {}
    if spec.hf_token_env:
        # A reference, never the value: Ray expands ${VAR} from the node's
        # environment; `llmctl up` fills it from the deploying shell.
        env["HF_TOKEN"] = "${" + spec.hf_token_env + "}"
    if spec.fast_download:
        env["HF_HUB_ENABLE_HF_TRANSFER"] = "1"
    if env:
        doc["runtime_env"] = {"env_vars": env}
    return doc


def deployment_config(spec: ModelSpec) -> dict[str, Any]:
    """Serve deployment options of one model: max_ongoing_requests next to
    autoscaling_config (where Serve reads it, not inside: ray#61439)."""
    asc: dict[str, Any] = {"min_replicas": spec.min_replicas, "max_replicas": spec.max_replicas}
    if spec.initial_replicas is not None:
        asc["initial_replicas"] = spec.initial_replicas
    if spec.target_ongoing_requests is not None:
        asc["target_ongoing_requests"] = spec.target_ongoing_requests
    if spec.upscale_delay_s is not None:
        asc["upscale_delay_s"] = spec.upscale_delay_s
    if spec.downscale_delay_s is not None:
        asc["downscale_delay_s"] = spec.downscale_delay_s
    dc: dict[str, Any] = {}
    if spec.max_ongoing_requests is not None:
        dc["max_ongoing_requests"] = spec.max_ongoing_requests
    if spec.latency_goals:
        from llmctl.latency import policy_config

        asc["policy"] = policy_config(spec.latency_goals, spec.model_id)
    dc["autoscaling_config"] = asc
    if spec.router:
        from llmctl.latency import ROUTERS, router_config

        dc["request_router_config"] = router_config(ROUTERS[spec.router])
    return dc


# The ingress restarts with every LLMConfig change (Ray's builder passes the configs to it). With Serve's
# default surge of 0 its one replica stops before the new one starts, and every request waits in the proxy
# meanwhile (36-38 s measured on a busy machine). A full surge starts the new ingress first; it costs one
# ingress replica's CPU for the roll, which `up`'s plan counts.
INGRESS_MAX_SURGE_PERCENT = 100


def ingress_config(spec: DeploymentSpec) -> Optional[dict[str, Any]]:
    out: dict[str, Any] = {"max_surge_percent": INGRESS_MAX_SURGE_PERCENT}
    if spec.ingress is not None:
        out["autoscaling_config"] = {"min_replicas": spec.ingress.min_replicas, "max_replicas": spec.ingress.max_replicas,
                                     "target_ongoing_requests": spec.ingress.target_ongoing_requests}
    return out


def serve_config_dict(spec: DeploymentSpec, model_config_paths: list[Path]) -> dict[str, Any]:
    from llmctl import patterns

    import_path = SERVE_IMPORT_PATH
    args: dict[str, Any]
    if spec.pattern == "pd":  # build_pd_openai_app: the prefill pool's LLMConfig, then the decode pool's
        import_path = patterns.PD_BUILDER
        args = {"prefill_config": str(model_config_paths[0]), "decode_config": str(model_config_paths[1])}
    elif spec.pattern == "dp":  # build_dp_openai_app: one LLMConfig whose replicas are DP ranks
        import_path = patterns.DP_BUILDER
        args = {"llm_config": str(model_config_paths[0])}
    else:
        args = {"llm_configs": [str(p) for p in model_config_paths]}
    ingress = ingress_config(spec)
    if ingress:
        args["ingress_deployment_config"] = ingress
    if spec.api_key_env:  # llmctl's API-key ingress: the key's variable, never the key
        from llmctl.builders import ingress_cls_config as apikey_ingress

        args["ingress_cls_config"] = apikey_ingress(spec.api_key_env)
    app: dict[str, Any] = {"name": spec.app_name, "route_prefix": spec.route_prefix, "import_path": import_path}
    # LoRA store settings go on the application, by reference: Serve merges them into every deployment,
    # the LLM server's (which downloads adapters) and the ingress's (whose /v1/models lists them).
    store_env = {key: "${" + var + "}" for m in spec.models for key, var in m.lora_env}
    if store_env:
        app["runtime_env"] = {"env_vars": dict(sorted(store_env.items()))}
    app["args"] = args
    return {"http_options": {"host": spec.http_host, "port": spec.http_port}, "applications": [app]}


def comment_lines(text: str, width: int = 86) -> list[str]:
    """``text`` as YAML comment lines (``# …``)."""
    import textwrap

    return ["# " + line for line in textwrap.wrap(text, width=width)] if text else []


# --------------------------------------------------------------------------
# Data -> text (templates)


def _yaml_inline(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=float("inf"))
    text = text.strip()
    if text.endswith("\n...") or text.endswith("..."):
        text = text[: -3].strip()
    return text


def _yaml_block(value: Any, indent: int = 0) -> str:
    text = yaml.safe_dump(value, default_flow_style=False, allow_unicode=True, sort_keys=False, width=100)
    pad = " " * indent
    return "\n".join(pad + line if line else line for line in text.rstrip("\n").split("\n"))


_env = None


def _jinja():
    global _env
    if _env is None:
        import jinja2

        _env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
            autoescape=False,
        )
        _env.filters["yaml_inline"] = _yaml_inline
        _env.filters["yaml_block"] = _yaml_block
    return _env


def render_template(name: str, doc: dict, **context: Any) -> str:
    text = _jinja().get_template(name).render(doc=doc, version=__version__, **context)
    if not text.endswith("\n"):
        text += "\n"
    back = yaml.safe_load(text)
    if back != doc:  # the safety net for every value a user can type
        raise LlmctlError(f"internal error: template {name} did not round-trip its data; please report this")
    return text


# --------------------------------------------------------------------------
# Files


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_filename(model_id: str) -> str:
    name = _UNSAFE.sub("_", model_id).strip("._") or "model"
    return name[:100]


@dataclass
class Rendered:
    path: Path
    text: str
    data: dict


def render_spec(spec: DeploymentSpec, output_dir: Path, *, now: Optional[datetime] = None) -> list[Rendered]:
    """All documents of a spec, with the absolute paths they will be written to."""
    out = output_dir.expanduser().resolve()
    used: set[str] = set()
    docs: list[Rendered] = []
    for m in spec.models:
        base = safe_filename(m.model_id) + (f"-{m.role}" if m.role else "")
        name, n = base, 2
        while name.lower() in used:
            name, n = f"{base}-{n}", n + 1
        used.add(name.lower())
        path = out / "model_config" / f"{name}.yaml"
        data = llm_config_dict(m)
        note = f"catalog entry {m.profile.id}" if m.profile.origin == "catalog" else f"model from {m.profile.origin}"
        scaling = m.targets.basis if m.targets is not None and m.target_ongoing_requests == m.targets.target_ongoing_requests \
            else ("target_ongoing_requests and max_ongoing_requests as given" if m.target_ongoing_requests else "")
        if m.dp > 1:
            scaling = (scaling + "; " if scaling else "") + (
                f"replicas count DP groups of {m.dp} ranks (Ray multiplies min/max_replicas by {m.dp}; a group is "
                "gang-scheduled and restarts as a unit)")
        if m.role:
            scaling = (scaling + "; " if scaling else "") + f"the {m.role} pool of a prefill/decode app"
        recipe_note = [line for f, r in m.profile.applied_recipes(m.engine_extra)
                       for line in comment_lines(f"Recipe, {RECIPE_FEATURES.get(f, f)}: {r.settings()}. Source: {r.source}.")]
        text = render_template("llm_config.yaml.j2", data, model_id=m.model_id, path=str(path), profile_note=note,
                               recipe_note=recipe_note,
                               autoscaling_note=comment_lines(f"Autoscaling: {scaling}." if scaling else ""),
                               nodes=sizing.nodes_of(m.gpu, m.tp, m.pp))
        docs.append(Rendered(path, text, data))
    stamp = (now or datetime.now()).strftime("%Y%m%d_%H%M%S")
    serve_path = out / f"serve_{stamp}.yaml"
    data = serve_config_dict(spec, [d.path for d in docs])
    ingress_note = comment_lines(f"Ingress autoscaling: {spec.ingress.basis}; Ray Serve LLM's default is one ingress "
                                 "replica, a bottleneck at high concurrency." if spec.ingress else "")
    if spec.api_key_env:
        ingress_note += comment_lines(f"API key: every request needs 'Authorization: Bearer ${spec.api_key_env}' (401 "
                                      f"without it). The replicas read ${spec.api_key_env} from their node's environment "
                                      "(export it before `llmctl up` starts a local head); `llmctl up` ships the "
                                      "ingress module (runtime_env py_modules).")
    text = render_template("serve_config.yaml.j2", data, app=data["applications"][0], path=str(serve_path),
                           ingress_note=ingress_note)
    docs.append(Rendered(serve_path, text, data))
    return docs


def write_all(docs: list[Rendered], *, force: bool = False) -> list[Path]:
    """Write every document atomically; nothing is written if any target
    exists (without ``force``) or any write fails."""
    if not force:
        existing = [d.path for d in docs if d.path.exists()]
        if existing:
            raise OutputExists(f"{existing[0]}: already exists; pass {param('force', True)} to overwrite it", param="force")
    try:
        return write_all_atomic([(d.path, d.text) for d in docs])
    except OSError as e:
        raise LlmctlError(f"{getattr(e, 'filename', '') or 'output'}: cannot write: {e.strerror or e}") from None
