"""Checks of one LLMConfig (a model config file, or an inline mapping in a
serve config): Ray's own LLMConfig, plus what Ray skips or words badly.

The rules themselves (TP, context length, replicas, fit) are the ones
gen-config applies (:mod:`llmctl.spec`, :mod:`llmctl.sizing`): a file
gen-config writes and a file validate accepts cannot disagree.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
from pathlib import Path
from typing import Any, Optional

from llmctl import quant
from llmctl.errors import ModelNotFound
from llmctl.light_imports import without_model_libraries
from llmctl.scalars import is_int
from llmctl.sources import is_cloud_uri, looks_local_path, path_probe
from llmctl.validate.deployment import ScalingHint, check_deployment_config, clean_msg, policy_function, without_policy_function
from llmctl.validate.documents import _Sink
from llmctl.validate.patterns import check_dp_layout
from llmctl.validate.reference import _suggest, ray_accelerator_types
from llmctl.validate.secrets import check_model_placeholders
from llmctl.vllm_version import VllmVersion


_clean_msg = clean_msg  # re-exported for serve_config


def check_llm_config(data: Any, sink: _Sink, *, base_dir: Path, local_node: bool = True,
                     vllm: Optional[VllmVersion] = None) -> Optional[str]:
    """All checks of one LLMConfig mapping. Returns its model_id if readable.
    ``vllm``: the vLLM the engine arguments are checked against (default: the
    one Ray pins, :func:`llmctl.vllm_version.reference_vllm`)."""
    if not isinstance(data, dict):
        sink.add((), "a model config must be a mapping (an LLMConfig)", code="not-a-config")
        return None
    model_id, source = None, None
    with sink.guard("model source", ("model_loading_config",)):
        model_id, source = _check_source(data, sink, base_dir, local_node)
    gpu, cpu_only, bundles = None, False, None
    with sink.guard("placement"):
        gpu, cpu_only, bundles = _check_placement(data, sink)
    ek = data.get("engine_kwargs", {})
    tp, pp, mml = 1, 1, None
    if ek is not None and not isinstance(ek, dict):
        sink.add(("engine_kwargs",), "must be a mapping of vLLM engine arguments")
    elif isinstance(ek, dict):
        with sink.guard("engine arguments", ("engine_kwargs",)):
            tp, pp, mml = _check_engine_kwargs(ek, sink, vllm)
        if cpu_only and isinstance(bundles, list) and len(bundles) != tp * pp and not sink.has(("engine_kwargs", "tensor_parallel_size")):
            sink.add(("placement_group_config", "bundles"),
                     f"{len(bundles)} bundles for TP {tp} x PP {pp} = {tp * pp} engine workers; give one bundle per worker",
                     code="cpu-bundles")
    ekd = ek if isinstance(ek, dict) else {}
    plan = None
    with sink.guard("model (TP, context, fit)", ("engine_kwargs",)):
        pgc = data.get("placement_group_config")
        strategy = str(pgc.get("strategy", "PACK")) if isinstance(pgc, dict) else "PACK"
        plan = _check_model_rules(source, base_dir, gpu, cpu_only, ekd, tp, pp, mml, sink, strategy)
    with sink.guard("deployment", ("deployment_config",)):
        hint = _scaling_hint(model_id, gpu, cpu_only, plan, mml, ekd)
        check_deployment_config(data.get("deployment_config", {}), sink, hint=hint)
        _check_auto_replicas(data, sink, hint)
    with sink.guard("replica placement", ("deployment_config",)):
        _check_actor_resources(data, gpu, sink)
        if cpu_only:
            _check_cpu_replicas(data, sink)
    with sink.guard("LoRA", ("lora_config",)):
        _check_lora(data, ek, model_id, sink)
    with sink.guard("classes", ()):
        _check_classes(data, sink, local_node)
    with sink.guard("request router and autoscaling policy", ("deployment_config",)):
        from llmctl.validate.latency import check_latency

        check_latency(data, sink)
    # Ray's own schema last, for what llmctl did not already explain better.
    with sink.guard("Ray LLMConfig"):
        _ray_llm_config(data, sink)
    return model_id


def _check_source(data: dict, sink: _Sink, base_dir: Path, local_node: bool) -> tuple[Optional[str], Any]:
    mlc = data.get("model_loading_config")
    if not isinstance(mlc, dict):
        sink.add(("model_loading_config",), "required: a mapping with model_id (and model_source)")
        return None, None
    model_id = mlc.get("model_id")
    if not isinstance(model_id, str) or not model_id.strip():
        sink.add(("model_loading_config", "model_id"), "required: the id clients send as \"model\"")
        model_id = None
    source = mlc.get("model_source", model_id)
    if check_model_placeholders(mlc, sink, source_is_path=isinstance(source, str) and looks_local_path(source)):
        return model_id, None  # nothing to look up
    if isinstance(source, str) and looks_local_path(source):
        p = Path(os.path.expanduser(source))
        p = p if p.is_absolute() else base_dir / p
        # On a remote cluster the path is looked up on the nodes, not here.
        if not path_probe(p):
            sink.cluster_only(("model_loading_config", "model_source"), f"local model path '{source}' does not exist here",
                              local_node, code="local-source")
        elif not path_probe(p / "config.json", "is_file"):
            sink.cluster_only(("model_loading_config", "model_source"), f"local model directory '{source}' has no config.json here",
                              local_node, code="local-source")
    if isinstance(source, dict):
        uri = source.get("bucket_uri")
        if not isinstance(uri, str) or not (is_cloud_uri(uri) or uri.startswith("pyarrow-")):
            sink.add(("model_loading_config", "model_source", "bucket_uri"), "must be a cloud URI (s3://… or gs://…)")
    return model_id, source


def _check_placement(data: dict, sink: _Sink):
    """(GPU type or None, CPU-only?, bundles) from accelerator_type and placement."""
    from llmctl.hardware import GPUS, RAY_ACCELERATOR_REWRITES, by_ray_type

    acc = data.get("accelerator_type")
    pgc = data.get("placement_group_config")
    bundles = pgc.get("bundles") if isinstance(pgc, dict) else None
    cpu_only = bool(isinstance(bundles, list) and bundles and all(
        isinstance(b, dict) and not b.get("GPU") and not b.get("TPU") for b in bundles
    ))
    acc_cfg = data.get("accelerator_config")
    if isinstance(acc_cfg, dict) and acc_cfg.get("kind") == "cpu":
        cpu_only = True
    gpu = None
    if acc is not None:
        known = ray_accelerator_types()
        if not isinstance(acc, str) or (acc not in known and acc not in RAY_ACCELERATOR_REWRITES):
            common = [g.ray_type for g in GPUS.values() if g.ray_type]
            sink.add(("accelerator_type",), f"unknown accelerator type {acc!r}{_suggest(str(acc), known)}; Ray accepts e.g. {', '.join(common)}",
                     code="accelerator")
        else:
            gpu = by_ray_type(acc)
            if cpu_only:
                sink.add(("accelerator_type",), f"'{acc}' cannot be combined with CPU-only placement bundles; remove accelerator_type "
                                                "for a CPU deployment or add GPU to the bundles", code="accelerator")
    elif cpu_only:
        gpu = GPUS["cpu"]
    return gpu, cpu_only, bundles


def _check_engine_kwargs(ek: dict, sink: _Sink, vllm: Optional[VllmVersion] = None) -> tuple[int, int, Optional[int]]:
    """Every key an engine argument of the target vLLM (llmctl.engine_args:
    the table of that release), every value of its type; keys Ray Serve LLM
    refuses or replaces. Ray refuses a key that is neither an AsyncEngineArgs
    nor a FrontendArgs field of the vLLM its replicas run ("Unknown engine
    argument", vllm_models.py), so an unknown key is an error; one that a newer
    vLLM llmctl knows has is a warning naming that release (the cluster may
    run it: --vllm-version says so). The same for the keys inside config
    mappings (llmctl.engine_args.nested: compilation_config.cudagraph_mode
    must be a field of the target's CompilationConfig, of its type)."""
    from llmctl import engine_args as EA

    table = EA.table_for(vllm)
    specs, origin = table.specs, table.origin
    for k, v in ek.items():
        key = str(k)
        loc = ("engine_kwargs", k)
        if key in EA.RAY_FORBIDS:
            sink.add(loc, EA.RAY_FORBIDS[key], code="ray-owned-engine-arg")
            continue
        if key not in specs:
            newer, older = EA.other_release_with(key, table)
            if newer:
                sink.warn(loc, f"exists from vLLM {newer.rpartition('.')[0]}; the target is {origin}, which refuses it "
                               "(pass --vllm-version if the replicas run a newer vLLM)", code="newer-engine-arg")
                continue
            gone = f"; vLLM {older} had it" if older else ""
            sink.add(loc, EA.unknown_reason(key, specs, origin) + gone, code="unknown-engine-arg")
            continue
        if key in EA.RAY_OVERRIDES:
            sink.warn(loc, EA.RAY_OVERRIDES[key], code="ray-overrides-engine-arg")
        if key == "max_model_len" and v == -1:
            continue  # vLLM >= 0.11: the largest context that fits
        problem = EA.check_value(key, v, specs=specs)
        if problem is None and key in ("tensor_parallel_size", "pipeline_parallel_size", "max_model_len") and is_int(v) and v < 1:
            problem = f"must be a positive integer, got {v!r}"
        if problem is None and key == "gpu_memory_utilization" and isinstance(v, (int, float)) and not 0 < v <= 1:
            problem = f"must be a fraction in (0, 1], got {v!r}"
        if problem:
            sink.add(loc, problem, code="bad-engine-arg")
        elif isinstance(v, dict):
            # the keys inside a config mapping (compilation_config.cudagraph_mode, ...): fields of the target's class
            for p in EA.check_nested(specs[key], v, origin=origin):
                sink.add(loc + tuple(p.path), p.message, p.severity, code=p.code)
    _check_parsers(ek, sink, table)
    tp = ek.get("tensor_parallel_size", 1) if is_int(ek.get("tensor_parallel_size", 1)) else 1
    pp = ek.get("pipeline_parallel_size", 1) if is_int(ek.get("pipeline_parallel_size", 1)) else 1
    mml = ek.get("max_model_len") if is_int(ek.get("max_model_len")) and ek.get("max_model_len", 0) >= 1 else None
    return max(tp, 1), max(pp, 1), mml


def _check_parsers(ek: dict, sink: _Sink, table) -> None:
    """``tool_call_parser`` / ``reasoning_parser``: a name the target vLLM
    registers (llmctl/_parsers_vllm-<version>.json, read from its source), or
    vLLM refuses to start ("invalid reasoning parser"). Not checked when a
    ``*_plugin`` argument may register more names."""
    from llmctl.recipes import PARSER_ARGS, parser_registry

    for key, (_, plugin) in PARSER_ARGS.items():
        name = ek.get(key)
        if not isinstance(name, str) or not name.strip() or ek.get(plugin):
            continue
        found = parser_registry(key, table.target.release)
        if found is None or name in found[0]:
            continue
        names, version, exact = found
        kind = key.replace("_", " ")
        hint = _suggest(name, names) or f"; it registers {', '.join(names)}"
        if exact:
            sink.add(("engine_kwargs", key), f"{name!r} is not a {kind} {table.target.described()} registers{hint}: vLLM "
                                             "refuses to start", "error", code="unknown-parser")
        else:
            sink.add(("engine_kwargs", key), f"{name!r} is not a {kind} vLLM {version} registers{hint} (the nearest release "
                                             f"whose registry llmctl ships; the target is {table.target.described()}): "
                                             "vLLM refuses to start unless the target has it", "warning",
                     code="unknown-parser")


def quantization_problem(arch, method: str) -> Optional[str]:
    """Why vLLM refuses ``quantization: method`` for this checkpoint (ModelConfig._verify_quantization:
    a method that differs from the checkpoint's own; a checkpoint method on an unquantized checkpoint)."""
    ckpt = arch.quantization
    if ckpt:
        if quant.family(ckpt) != quant.family(method):
            return (f"'{method}' does not match the checkpoint's quantization_config ({ckpt}): vLLM refuses the pair; "
                    "remove engine_kwargs.quantization (vLLM reads the checkpoint's)")
        return None
    if quant.needs_checkpoint(method):
        return (f"'{method}' needs a checkpoint quantized with it and this one has no quantization_config: vLLM "
                "refuses to load it; use a quantized checkpoint, or an online method (fp8, experts_int8)")
    return None


def _check_model_rules(source, base_dir: Path, gpu, cpu_only: bool, ek: dict, tp: int, pp: int, mml: Optional[int], sink: _Sink,
                       strategy: str = "PACK"):
    """TP, context length and fit: the rules gen-config applies. Returns the
    sizing plan when there is one."""
    from llmctl import sizing
    from llmctl.catalog import known_profile
    from llmctl.hardware import UNSPECIFIED_GPU
    from llmctl.spec import context_problem, tp_problem

    arch = None
    if source is not None:
        try:
            prof = known_profile(source, base_dir)
            arch = prof.architecture if prof is not None else None
        except ModelNotFound as e:
            sink.warn(("model_loading_config", "model_source"), f"{e.message}; the TP, context and fit checks were skipped",
                      code="model-unreadable")
    if arch is not None and isinstance(ek.get("quantization"), str):
        problem = quantization_problem(arch, ek["quantization"])
        if problem:
            sink.add(("engine_kwargs", "quantization"), problem, code="quantization")
    if gpu is None and not cpu_only:
        gpu = UNSPECIFIED_GPU
    if gpu is not None and not sink.has(("engine_kwargs", "tensor_parallel_size")):
        node = gpu
        if not gpu.is_cpu and tp * pp > gpu.gpus_per_node:
            if strategy == "STRICT_PACK":
                sink.add(("placement_group_config", "strategy"),
                         f"TP {tp} x PP {pp} = {tp * pp} GPUs, but STRICT_PACK keeps a replica on one node and a {gpu.name} "
                         f"node has {gpu.gpus_per_node}; use PACK to let the pipeline stages go to other nodes", "error",
                         code="multi-node")
            else:
                # Ray Serve LLM's placement group is PACK unless told otherwise: bundles may span nodes.
                layout = sizing.layout_problem(gpu, tp, pp)  # the one layout rule gen-config and plan use
                if layout is None:
                    sink.add(("engine_kwargs", "pipeline_parallel_size"),
                             f"TP {tp} x PP {pp} = {tp * pp} GPUs span {sizing.nodes_of(gpu, tp, pp)} {gpu.name} nodes of "
                             f"{gpu.gpus_per_node}: placement strategy {strategy} lets the pipeline stages go to other nodes",
                             "note", code="multi-node")
                else:  # vLLM runs it, over the network between nodes: slow
                    sink.warn(("engine_kwargs", "tensor_parallel_size"), f"{layout} (vLLM runs it, slowly: the TP group's "
                              "all-reduces cross the network)", code="multi-node")
            node = dataclasses.replace(gpu, gpus_per_node=tp * pp)  # the model's own TP rules from here
        problem = tp_problem(arch, tp, pp, node, ek.get("enable_expert_parallel") is True)
        if problem:
            sink.add(("engine_kwargs", "tensor_parallel_size"), problem, code="tp")
    check_dp_layout(arch, gpu, ek, tp, pp, sink)
    if mml is not None and not os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN"):
        problem = context_problem(arch, mml)
        if problem:
            sink.add(("engine_kwargs", "max_model_len"), problem, code="context")
    keys = ("tensor_parallel_size", "pipeline_parallel_size", "max_model_len", "dtype", "gpu_memory_utilization", "kv_cache_dtype")
    if arch is None or gpu is None or not gpu.memory_gib or any(sink.has(("engine_kwargs", k)) for k in keys):
        return None
    try:
        # the one mapping from engine settings to the sizing's inputs (gen-config and plan use it too)
        plan = sizing.plan_for_gpu(arch, gpu, tp=tp, pp=pp, max_model_len=mml, **sizing.sizing_options(ek))
    except sizing.SizingError as e:
        sink.warn(("engine_kwargs",), f"cannot size this model: {e.message}; the fit check was skipped", code="not-sized")
        return None
    if plan is None:
        return None
    where = f"{gpu.name} at TP {tp}" + (f" x PP {pp}" if pp > 1 else "")
    if plan.verdict == "does_not_fit":
        sink.add(("engine_kwargs", "tensor_parallel_size"), f"does not fit on {where}: {plan.reason}", code="does-not-fit")
    elif plan.verdict == "tight":
        sink.warn(("engine_kwargs", "tensor_parallel_size"), f"tight on {where}: {plan.reason}", code="tight")
    return plan


def _scaling_hint(model_id, gpu, cpu_only: bool, plan, mml: Optional[int], ek: dict) -> Optional[ScalingHint]:
    """llmctl's own target for this model on this GPU (sizing.derive_targets)."""
    from llmctl import sizing

    seqs = ek.get("max_num_seqs") if is_int(ek.get("max_num_seqs")) else None
    targets = sizing.derive_targets(plan, max_model_len=mml, max_num_seqs=seqs, cpu=cpu_only)
    if targets is None:
        return None
    where = f"{model_id or 'this model'} on {'cpu' if cpu_only else gpu.name if gpu else 'its GPU'}"
    return ScalingHint(targets.target_ongoing_requests, where)


def _check_lora(data: dict, ek: Any, model_id: Optional[str], sink: _Sink) -> None:
    if isinstance(model_id, str) and ":" in model_id:  # Ray's router reads base:adapter with or without lora_config
        sink.warn(("model_loading_config", "model_id"), "contains ':' which Ray uses to separate the base model from a LoRA adapter name",
                  code="lora-model-id")
    lc = data.get("lora_config")
    if not isinstance(lc, dict):
        return
    path = lc.get("dynamic_lora_loading_path")
    if path is not None and not is_cloud_uri(path):
        sink.add(("lora_config", "dynamic_lora_loading_path"),
                 f"{path!r} is not a remote URI; Ray Serve LLM loads adapters from s3://, gs://, abfss:// or azure://", code="lora")
    n = lc.get("max_num_adapters_per_replica")
    per_replica = n if is_int(n) else 16  # Ray's LoraConfig default
    loras, cpu = (ek.get("max_loras"), ek.get("max_cpu_loras")) if isinstance(ek, dict) else (None, None)
    if path and is_int(loras) and loras > per_replica:
        sink.warn(("engine_kwargs", "max_loras"), f"{loras} is above lora_config.max_num_adapters_per_replica ({per_replica}): "
                  "Serve never gives a replica more adapters, so vLLM reserves memory for slots that stay empty "
                  "(Ray's multi-LoRA guide sets them equal)", code="lora-slots")
    if is_int(cpu) and cpu < (loras if is_int(loras) else 1):
        sink.add(("engine_kwargs", "max_cpu_loras"), f"{cpu} must be >= max_loras ({loras if is_int(loras) else 1}); vLLM "
                 "refuses to start otherwise", code="lora")
    if isinstance(ek, dict) and path and not ek.get("enable_lora"):
        sink.add(("engine_kwargs", "enable_lora"), "must be true when lora_config is set, or vLLM rejects adapter requests", code="lora")


def _check_actor_resources(data: dict, gpu, sink: _Sink) -> None:
    """ray_actor_options.num_gpus is added to the engine's first bundle (llmctl.placement)."""
    from llmctl.hardware import UNSPECIFIED_GPU
    from llmctl.placement import actor_gpu_problem

    found = actor_gpu_problem(data, (gpu if gpu is not None and not gpu.is_cpu else UNSPECIFIED_GPU).gpus_per_node)
    if found:
        severity, message = found
        sink.add(("deployment_config", "ray_actor_options", "num_gpus"), message, severity, code="actor-bundle")


def _check_auto_replicas(data: dict, sink: _Sink, hint: Optional[ScalingHint]) -> None:
    """``num_replicas: auto`` is Serve's default autoscaling, made for light
    request handlers: up to 100 replicas, one more whenever a replica has more
    than 2 requests in flight (``AutoscalingConfig.default()``). A vLLM
    replica batches many requests and takes minutes to start; what the config
    leaves to those defaults is a warning."""
    from llmctl.placement import bundles_total, replica_bundles, replica_counts
    from llmctl.validate.reference import _autoscaling_model

    dc = data.get("deployment_config")
    if not isinstance(dc, dict) or dc.get("num_replicas") != "auto":
        return
    asc = dc.get("autoscaling_config")
    asc = asc if isinstance(asc, dict) else {}
    parts = []
    if "max_replicas" not in asc:
        most = replica_counts(dc)[1]
        gpus = bundles_total(replica_bundles(data)[0], "GPU") * most
        parts.append(f"up to {most} replicas" + (f" ({gpus:g} GPUs)" if gpus else ""))
    if "target_ongoing_requests" not in asc:
        target = _autoscaling_model().default().target_ongoing_requests
        parts.append(f"one more replica whenever one has more than {target:g} requests in flight, "
                     "while a vLLM engine batches many (max_num_seqs) at once and takes minutes to start")
    if not parts:
        return
    fields = [k for k in ("max_replicas", "target_ongoing_requests") if k not in asc]
    if "target_ongoing_requests" in fields and hint is not None and hint.target_ongoing_requests:
        fields[-1] += f" ({hint.target_ongoing_requests} is llmctl's for {hint.where})"
    sink.warn(("deployment_config", "num_replicas"),
              f"auto is Serve's default autoscaling: {'; '.join(parts)}; set autoscaling_config's {' and '.join(fields)}",
              code="auto-replicas")


def _check_cpu_replicas(data: dict, sink: _Sink) -> None:
    """CPU replicas share a node's cores: vLLM's CPU engine binds each to the
    same ones and keeps its scheduler polling (docs/capacity.md: 2 replicas
    on a 2-core node served 0.4-0.5x the requests/s of one, runs 5-7)."""
    from llmctl.placement import bundles_total, replica_bundles, replica_counts

    dc = data.get("deployment_config")
    if not isinstance(dc, dict):
        return
    most = replica_counts(dc)[1]  # num_replicas: auto is Serve's default autoscaling, up to 100
    if most < 2:
        return
    asc = dc.get("autoscaling_config")
    # the field that allows them
    if isinstance(asc, dict) and "max_replicas" in asc:
        loc = ("deployment_config", "autoscaling_config", "max_replicas")
    elif "num_replicas" in dc:
        loc = ("deployment_config", "num_replicas")
    else:
        loc = ("deployment_config", "autoscaling_config")
    cpus = bundles_total(replica_bundles(data)[0], "CPU")  # the engine's bundles and the replica actor's CPU
    sink.add(loc, f"up to {most} CPU-only replicas: vLLM's CPU engine binds every replica's threads to the same cores of a node "
                  f"(VLLM_CPU_OMP_THREADS_BIND=auto) and polls a core for its scheduler, while Ray reserves {cpus:g} CPU per "
                  "replica, so replicas on one node share its cores (2 on a 2-core node served 0.4-0.5x the requests/s of 1); "
                  "keep one replica per CPU node: max_replicas at most the CPU nodes, bundles sized to a node's cores",
             code="cpu-replicas")


def _check_classes(data: dict, sink: _Sink, local_node: bool) -> None:
    """Classes Ray imports where the app is built: found here, or only on the cluster."""
    from llmctl.builders import class_path_problem

    paths = [(("server_cls",), data.get("server_cls"))]
    dc = data.get("deployment_config")
    rrc = dc.get("request_router_config") if isinstance(dc, dict) else None
    if isinstance(rrc, dict):
        paths.append((("deployment_config", "request_router_config", "request_router_class"), rrc.get("request_router_class")))
    asc = dc.get("autoscaling_config") if isinstance(dc, dict) else None
    from llmctl.validate.latency import is_llmctl_policy

    if isinstance(policy_function(asc), str) and not is_llmctl_policy(policy_function(asc)):  # Serve imports it; llmctl's ships with `up`
        paths.append((("deployment_config", "autoscaling_config", "policy", "policy_function"), policy_function(asc)))
    cb = data.get("callback_config")
    if isinstance(cb, dict) and isinstance(cb.get("callback_class"), str):  # each replica imports it (get_or_create_callback)
        paths.append((("callback_config", "callback_class"), cb["callback_class"]))
    env = (data.get("runtime_env") or {}).get("env_vars") if isinstance(data.get("runtime_env"), dict) else None
    if isinstance(env, dict) and "RAYLLM_VLLM_ENGINE_CLS" in env:
        # LLMServer imports this engine class instead of VLLMEngine (llm_server.py _get_default_engine_class)
        paths.append((("runtime_env", "env_vars", "RAYLLM_VLLM_ENGINE_CLS"), env["RAYLLM_VLLM_ENGINE_CLS"]))
    for loc, path in paths:
        if isinstance(path, str) and (problem := class_path_problem(path)):
            if path.strip().startswith("ray."):
                # Ray's own package is the same wheel on the cluster: what it lacks here it lacks there
                sink.add(loc, f"{problem} (it would be part of the installed Ray, which the cluster runs too)", "error",
                         code="class-path")
            else:
                sink.cluster_only(loc, problem, local_node, code="class-path")


def _ray_llm_config(data: dict, sink: _Sink) -> None:
    import logging

    from pydantic import ValidationError

    # Without torch / transformers (no cpu extra) Ray logs "Could not import torch" on
    # stderr while importing LLMConfig, which needs neither to validate.
    logging.getLogger("ray.llm._internal.common.utils.import_utils").setLevel(logging.ERROR)
    with without_model_libraries():  # the command line validates without them (llmctl.light_imports)
        from ray.llm._internal.serve.core.configs.llm_config import LLMConfig

    data = copy.deepcopy(data)
    if isinstance(data.get("server_cls"), str):
        data["server_cls"] = None  # Ray imports it; _check_classes looked for it without running code
    dc = data.get("deployment_config")
    rrc = dc.get("request_router_config") if isinstance(dc, dict) else None
    if isinstance(rrc, dict) and isinstance(rrc.get("request_router_class"), str):
        del rrc["request_router_class"]  # the same: Serve's RequestRouterConfig imports it
    if isinstance(dc, dict) and isinstance(dc.get("autoscaling_config"), dict):
        dc["autoscaling_config"] = without_policy_function(dc["autoscaling_config"])  # and its AutoscalingPolicy
    try:
        LLMConfig.model_validate(data)
    except ValidationError as e:
        for err in e.errors():
            loc = tuple(err["loc"])
            msg = clean_msg(err["msg"])
            if not loc:  # a model-level validator: attribute it to the field it names
                named = sorted((m.start(), f) for f in LLMConfig.model_fields if (m := re.search(rf"\b{f}\b", msg)))
                if any(sink.has((f,)) for _, f in named):
                    continue
                if named:
                    loc = (named[0][1],)
            if sink.has(loc):
                continue
            code = "ray-schema"
            if err["type"] == "extra_forbidden":
                msg = f"unknown field{_suggest(str(loc[-1]), LLMConfig.model_fields)} (Ray's LLMConfig has no such field)"
                code = "unknown-field"
            elif msg.startswith("Invalid deployment config") and sink.has(("deployment_config",)):
                continue
            sink.add(loc, msg, code=code)
    except Exception as e:  # noqa: BLE001 - Ray's validators raise what they like; deploying would fail the same way
        sink.add((), f"Ray's LLMConfig rejects this config: {clean_msg(str(e)) or type(e).__name__}", code="ray-schema")
