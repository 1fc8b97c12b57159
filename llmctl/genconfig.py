"""gen-config as a core: answers -> DeploymentSpec -> documents -> validated -> written.

``llmctl gen-config`` (the CLI) and :func:`generate` (the Python API) share
every step here: the same spec checks, the same fit policy, the same
validation before anything is written. Nothing here prints or prompts; the
CLI adds the questions (through :mod:`llmctl.prompts`) and the rendering.

Fit policy: whatever the user did not set, llmctl.sizing chooses so that it
fits; only what the user set (a TP, a max_model_len, a GPU type on which no TP
of one node holds the model) can make a configuration not fit, and then it is
an error (:class:`~llmctl.errors.DoesNotFit`, exit 2) unless ``force``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence, Union

from llmctl.errors import DoesNotFit, UsageError, ValidationFailed, param
from llmctl.prompts import Flags, Session, collect
from llmctl.render import Rendered, render_spec, write_all
from llmctl.spec import DeploymentSpec, ModelSpec

PerModel = Union[None, str, int, Sequence[Union[str, int]]]


@dataclass
class Generated:
    """What gen-config produced: the spec, the documents, their diagnostics
    (warnings; with ``force`` also the does-not-fit errors written anyway) and
    the paths written (empty until written)."""

    spec: DeploymentSpec
    documents: list[Rendered]
    diagnostics: list = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    manifest: Optional[Rendered] = None  # rayservice_<ts>.yaml (with_kuberay)
    capacity: Optional[str] = None  # with ``slo``: the setup the capacity plan chose, in words (apply_slo)

    @property
    def serve_file(self) -> Path:
        return self.documents[-1].path

    @property
    def model_files(self) -> list[Path]:
        return [d.path for d in self.documents[:-1]]


def fit_problem(m: ModelSpec) -> Optional[tuple[str, str]]:
    """(the parameters to blame, as :func:`~llmctl.errors.param` markers;
    message) when the model does not fit where it is going."""
    p = m.plan
    if p is None or p.verdict != "does_not_fit":
        return None
    c = m.choice
    if c is not None and (c.tp_given or c.len_given):
        names = [n for n, given in (("tp", c.tp_given), ("max_model_len", c.len_given)) if given]
        where = f"on {m.gpu.name} at TP {m.tp}" + (f" x PP {m.pp}" if m.pp > 1 else "")
    else:
        names, where = ["gpu"], f"on one {m.gpu.name} node at any TP (largest tried: TP {m.tp})"
    return "/".join(param(n) for n in names), f"{m.model_id} does not fit {where}: {p.reason}"


def build(spec: DeploymentSpec, output_dir: Path | str = ".", *, force: bool = False,
          now: Optional[datetime] = None) -> Generated:
    """Render and validate a spec; nothing is written.

    Raises DoesNotFit (a model the user's settings make not fit, unless
    ``force``) or ValidationFailed (the documents would not be valid)."""
    for m in spec.models:
        problem = fit_problem(m)
        if problem and not force:
            blame, message = problem
            raise DoesNotFit(f"{blame}: {message} (see `llmctl plan --model {m.profile.id} --gpu {m.gpu.name}`; "
                             f"{param('force', True)} writes it anyway)")
    docs = render_spec(spec, Path(output_dir), now=now)
    from llmctl.validate import validate_rendered

    diags = validate_rendered([(str(d.path), d.text, "serve" if i == len(docs) - 1 else "model") for i, d in enumerate(docs)])
    tolerated = {"does-not-fit"} if force else set()
    errors = [d for d in diags if d.is_error and d.code not in tolerated]
    if errors:
        raise ValidationFailed(errors, "the generated files would not be valid; nothing was written:\n"
                               + "\n".join(str(d) for d in errors))
    return Generated(spec, docs, diags)


def write(gen: Generated, *, force: bool = False) -> Generated:
    """Write every document atomically, never over an existing file unless ``force``."""
    gen.written = write_all(gen.documents + ([gen.manifest] if gen.manifest is not None else []), force=force)
    return gen


def with_kuberay(gen: Generated, opts) -> tuple[Generated, list[str]]:
    """Add the KubeRay RayService (rayservice_<ts>.yaml next to the serve file)
    for the generated documents, model configs inlined; nothing is written.
    ``opts`` is a :class:`llmctl.kuberay.manifest.KubeOptions`. Returns the
    notes the user should read."""
    import copy

    from llmctl.kuberay.manifest import build as build_manifest, default_output
    from llmctl.builders import app_llm_configs, set_in

    by_path = {str(d.path): d.data for d in gen.documents[:-1]}
    serve = copy.deepcopy(gen.documents[-1].data)
    for app in serve.get("applications") or []:
        for slot, entry in list(app_llm_configs(app)):
            if isinstance(entry, str) and entry in by_path:
                set_in(app, slot, copy.deepcopy(by_path[entry]))
    m = build_manifest(serve, gen.serve_file.name, opts)
    gen.manifest = Rendered(default_output(gen.serve_file), m.text, m.data)
    return gen, m.notes


def _listed(value: PerModel) -> list:
    if value is None:
        return []
    if isinstance(value, (str, int, float)):
        return [value]
    return list(value)


def _engine_items(value) -> list[str]:
    """``{"max_num_seqs": 64}`` or ``["max_num_seqs=64", "2:dtype=half"]`` as --engine-arg items."""
    import json

    if value is None:
        return []
    if isinstance(value, dict):
        return [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in value.items()]
    return _listed(value)


def generate(
    model: Union[str, Sequence[str]],
    *,
    gpu: PerModel = None,
    gpus_per_node: PerModel = None,
    tp: PerModel = None,
    pp: PerModel = None,
    max_model_len: PerModel = None,
    min_replicas: PerModel = None,
    max_replicas: PerModel = None,
    model_id: PerModel = None,
    lora_path: PerModel = None,
    max_lora_adapters: PerModel = None,
    max_lora_rank: PerModel = None,
    max_loras: PerModel = None,
    max_cpu_loras: PerModel = None,
    lora_env: PerModel = None,
    hf_token_env: PerModel = None,
    target_ongoing_requests: PerModel = None,
    max_ongoing_requests: PerModel = None,
    initial_replicas: PerModel = None,
    upscale_delay: PerModel = None,
    downscale_delay: PerModel = None,
    expected_tokens: PerModel = None,
    engine_args: Union[None, str, Sequence[str], dict] = None,
    dtype: PerModel = None,
    quantization: PerModel = None,
    kv_cache_dtype: PerModel = None,
    max_num_seqs: PerModel = None,
    enable_prefix_caching: Optional[bool] = None,
    trust_remote_code: Optional[bool] = None,
    tool_calling: Optional[bool] = None,
    reasoning: Optional[bool] = None,
    inputs: Optional[str] = None,
    fast_download: Optional[bool] = None,
    gpu_memory_utilization: Optional[float] = None,
    app_name: Optional[str] = None,
    route_prefix: Optional[str] = None,
    http_host: Optional[str] = None,
    http_port: Optional[int] = None,
    api_key_env: Optional[str] = None,
    router: Optional[str] = None,
    autoscale_on: Optional[str] = None,
    autoscale_window: Optional[float] = None,
    output_dir: Path | str = ".",
    write_files: bool = True,
    force: bool = False,
    kuberay=None,
    capacity=None,
) -> Generated:
    """Generate Ray Serve LLM configs, as ``llmctl gen-config --yes`` does.

    ``model`` is one model or a list (catalog ids, HF repo ids, local
    directories, s3:// / gs:// URIs). Per-model options take one value for
    every model or a list with one value per model. What is not given is
    chosen so the configuration fits (see :func:`llmctl.sizing.choose`);
    ``gpu`` is required for every model; ``gpus_per_node`` (``8`` or ``H100=8``) sets the node size of
    the TP x PP layout (default: the GPU type's usual node).

    Returns a :class:`Generated` (spec, documents, diagnostics, and the paths
    written when ``write_files``). Raises :class:`~llmctl.errors.LlmctlError`
    subclasses: UsageError / MissingAnswerError for bad or missing values,
    DoesNotFit, ValidationFailed, OutputExists.

    ``kuberay``: a :class:`llmctl.kuberay.manifest.KubeOptions` to also write
    the KubeRay RayService (``Generated.manifest``).

    ``capacity``: a capacity plan for latency targets (``llmctl.capacity(model, slo="ttft_p95=500ms",
    rate=20)``, what ``gen-config --slo`` computes): the GPU, TP, replica counts and autoscaling targets
    not given are its cheapest setup that meets them (:func:`apply_capacity`); ``Generated.capacity``
    says what it chose.
    """
    flags = Flags(
        models=_listed(model), model_ids=_listed(model_id), gpus=_listed(gpu), gpus_per_node=_listed(gpus_per_node),
        tps=_listed(tp), pps=_listed(pp),
        min_replicas=_listed(min_replicas), max_replicas=_listed(max_replicas), max_model_lens=_listed(max_model_len),
        lora_paths=_listed(lora_path), max_lora_adapters=_listed(max_lora_adapters), max_lora_ranks=_listed(max_lora_rank),
        max_loras=_listed(max_loras), max_cpu_loras=_listed(max_cpu_loras), lora_envs=_listed(lora_env),
        hf_token_envs=_listed(hf_token_env), fast_download=fast_download, gpu_memory_utilization=gpu_memory_utilization,
        target_ongoing_requests=_listed(target_ongoing_requests), max_ongoing_requests=_listed(max_ongoing_requests),
        initial_replicas=_listed(initial_replicas), upscale_delays=_listed(upscale_delay),
        downscale_delays=_listed(downscale_delay), expected_tokens=_listed(expected_tokens),
        engine_args=_engine_items(engine_args), dtypes=_listed(dtype), quantizations=_listed(quantization),
        kv_cache_dtypes=_listed(kv_cache_dtype), max_num_seqs=_listed(max_num_seqs),
        enable_prefix_caching=enable_prefix_caching, trust_remote_code=trust_remote_code,
        tool_calling=tool_calling, reasoning=reasoning, inputs=inputs,
        app_name=app_name, route_prefix=route_prefix, http_host=http_host, http_port=http_port,
        api_key_env=api_key_env, router=router, autoscale_on=autoscale_on, autoscale_window=autoscale_window,
    )
    note = apply_capacity(flags, capacity) if capacity is not None else None
    spec = collect(Session(interactive=False, assume_yes=True), flags)
    gen = build(spec, output_dir, force=force)
    gen.capacity = note
    if kuberay is not None:
        gen, _ = with_kuberay(gen, kuberay)
    return write(gen, force=force) if write_files else gen


def slo_question(flags: Flags) -> dict:
    """The capacity question the answers ask (``capacity(**q, slo=...)``: the model, and the GPU, TP,
    context length, dtype, quantization, KV cache dtype and max_num_seqs when given); refused unless one
    model and at most one GPU and TP are given."""
    if len(flags.models) != 1:
        raise UsageError(f"{param('slo')}: give exactly one {param('model')} (the capacity plan is per model)", param="slo")
    if len(flags.gpus) > 1 or len(flags.tps) > 1:
        raise UsageError(f"{param('slo')}: give {param('gpu')} and {param('tp')} at most once", param="slo")
    q = {"model": flags.models[0], "gpu": flags.gpus[0] if flags.gpus else None, "tp": flags.tps[0] if flags.tps else None,
         "max_model_len": flags.max_model_lens[0] if flags.max_model_lens else None}
    # the engine settings that change the sizing: the plan is for the engine the files will configure
    for attr, key in (("dtypes", "dtype"), ("quantizations", "quantization"), ("kv_cache_dtypes", "kv_cache_dtype"),
                      ("max_num_seqs", "max_num_seqs")):
        if getattr(flags, attr):
            q[key] = getattr(flags, attr)[0]
    return q


def apply_capacity(flags: Flags, table) -> str:
    """Fill the answers a capacity plan decides into ``flags`` (what the user gave stays): the cheapest setup
    of ``table`` (a :class:`llmctl.planner.CapacityTable`, ``llmctl.capacity(...)``) that meets its targets:
    GPU, TP, replicas, the autoscaling targets. Returns what it chose, in words."""
    from llmctl.perf.capacity import BOUND_TEXT

    slo_question(flags)
    rate = table.rate
    meets = [r for r in table.rows if r.meets]
    best = table.cheapest or (min(meets, key=lambda r: ((r.replicas or 1) * r.tp, -r.max_rate)) if meets else None)
    if best is None:
        raise UsageError(f"{param('slo')}: no setup meets {table.slo.text()}" + (f" at {rate:g} req/s" if rate else "")
                         + f" (see `llmctl plan --slo`); relax the targets or pass {param('tp')} / {param('gpu')}", param="slo")
    flags.gpus = flags.gpus or [best.gpu]
    flags.tps = flags.tps or [str(best.tp)]
    flags.min_replicas = flags.min_replicas or ["1"]
    flags.max_replicas = flags.max_replicas or [str(max(best.replicas or 1, int(flags.min_replicas[0])))]
    flags.max_ongoing_requests = flags.max_ongoing_requests or [str(best.max_ongoing_requests)]
    flags.target_ongoing_requests = flags.target_ongoing_requests or [str(best.target_ongoing_requests)]
    return (f"capacity (estimate): {best.gpu} TP {best.tp}: {best.max_rate:.2f} req/s per replica within "
            f"{table.slo.text()} at {best.max_ongoing_requests} concurrent requests ({BOUND_TEXT.get(best.bound, best.bound)})"
            + (f"; {best.replicas} replica(s) for {rate:g} req/s" if rate else "")
            + (f", ${best.usd_per_hour:.2f}/hour" if best.usd_per_hour is not None else ""))


def summary_rows(spec: DeploymentSpec) -> Iterable[dict[str, Any]]:
    """One row per model for a summary table: what was chosen and why."""
    for m in spec.models:
        p = m.plan
        if p is None:
            fit = "CPU (vLLM CPU build; not sized)" if m.gpu.is_cpu else "not sized (no config.json: weights in a bucket)"
        else:
            fit = {"fits": "✓ fits", "tight": "~ tight", "does_not_fit": "✗ does not fit"}[p.verdict]
            fit += f": {p.weights_gib_per_gpu:.1f} GiB weights/GPU, {p.kv_cache_tokens:,} KV tokens, {p.max_concurrency:.1f}x"
        if p is not None and m.dp > 1:
            fit += f" per DP rank ({m.dp} ranks, {m.dp * p.kv_cache_tokens:,} KV tokens per group)"
        mml = m.effective_max_model_len
        from llmctl.prompts.layout import dp_reasons, pd_reasons

        yield {
            "model_id": m.model_id + (f" ({m.role})" if m.role else ""), "source": m.source, "gpu": m.gpu.name,
            "tp": m.tp, "pp": m.pp, "dp": m.dp,
            "replicas": f"{m.min_replicas}-{m.max_replicas}", "max_model_len": mml, "fit": fit,
            "reasons": (list(m.choice.reasons) if m.choice is not None else []) + dp_reasons(m) + pd_reasons(m)
            + recipes_applied(m) + recipe_notes(m) + lora_notes(m),
        }


def lora_notes(m: ModelSpec) -> list[str]:
    """Where a LoRA model's adapters come from and which settings reach the store."""
    if not m.lora_path:
        return []
    refs = ", ".join(k if k == v else f"{k}=${{{v}}}" for k, v in m.lora_env)
    where = (f"the store's settings by reference on the app's runtime_env: {refs}" if refs else
             "no store settings written: the replicas use their nodes' own (AWS_DEFAULT_REGION, endpoint, credentials)")
    return [f"LoRA adapters from {m.lora_path}, requested as {m.model_id}:ADAPTER; {where}"]


def recipes_applied(m: ModelSpec) -> list[str]:
    """Which catalog recipes a model's settings apply, and which it could."""
    from llmctl.catalog import RECIPE_FEATURES

    applied = dict(m.profile.applied_recipes(m.engine_extra))
    lines = [f"recipe applied: {RECIPE_FEATURES.get(f, f)}: {r.settings()}" for f, r in applied.items()]
    offered = [RECIPE_FEATURES[f] for f in m.profile.recipes if f in ("tool_calling", "reasoning") and f not in applied]
    return lines + ([f"recipes not applied: {', '.join(offered)}"] if offered else [])


def recipe_notes(m: ModelSpec) -> list[str]:
    """The notes of the catalog recipes a model's settings apply (e.g. a chat template file to provide)."""
    return [r.note for _, r in m.profile.applied_recipes(m.engine_extra) if r.note]
