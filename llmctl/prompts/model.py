"""The questions of one model: which model, GPU, TP and context, replicas,
LoRA, token variable (what it scales on, autoscaling details and the request
router: :mod:`.scaling`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from llmctl import sizing
from llmctl import spec as S
from llmctl.catalog import ModelProfile, load_catalog, resolve_model
from llmctl.errors import UsageError
from llmctl.hardware import GPUS, GPUType, with_node_size
from llmctl.prompts.layout import ask_dp, auto_layout
from llmctl.prompts.engine import ask_engine_args, profile_with_recipes
from llmctl.prompts.scaling import ask_autoscaling, ask_router
from llmctl.prompts.session import CUSTOM, Flags, Session, ask_confirm, ask_select, ask_text, per_model

# The model the list opens on: Ray Serve LLM's own quickstart model (Ray's docs
# serve Qwen/Qwen2.5-0.5B-Instruct as "qwen-0.5b"): small enough for every GPU
# type and for vLLM's CPU build, not gated, with a tool-calling recipe that
# needs no template file, so Enter at every prompt gives files that validate.
DEFAULT_MODEL = "qwen2.5-0.5b-instruct"


def _model_choices(catalog: dict[str, ModelProfile]) -> list[tuple[str, Any]]:
    # "Other" last: the list opens on the default model, and typing filters it.
    rows: list[tuple[str, Any]] = []
    for p in catalog.values():
        params = f"{p.parameters.total / 1e9:.1f}B" if p.parameters else "?"
        gated = ", gated" if p.gated else ""
        default = " (default)" if p.id == DEFAULT_MODEL else ""
        rows.append((f"{p.id}  ({p.hf_repo}, {params}, {p.task}{gated}){default}", p.id))
    rows.append(("Other: a Hugging Face repo id, a local directory, or s3:// / gs:// weights…", CUSTOM))
    return rows


def _parse_model(text: str) -> ModelProfile:
    return resolve_model(str(text))


def _parse_optional_model(text: str) -> Optional[ModelProfile]:
    return None if not str(text).strip() else _parse_model(text)


@dataclass
class TPOption:
    tp: int
    label: str
    fits: Optional[str]  # "fits" | "tight" | "does_not_fit" | None (unknown)
    plan: Any = None


def tp_options(profile: ModelProfile, gpu: GPUType, *, pp: int, max_model_len: Optional[int], **sizing_kw: Any) -> list[TPOption]:
    """Valid TP sizes with the sizing verdict for each at ``max_model_len``."""
    arch = profile.architecture
    opts = []
    for tp in S.valid_tp_sizes(arch, gpu, pp):
        plan = sizing.plan_for_gpu(arch, gpu, tp=tp, pp=pp, max_model_len=max_model_len, **sizing_kw)
        if plan is None:
            opts.append(TPOption(tp, f"TP {tp}", None))
            continue
        mark = {"fits": "✓", "tight": "~", "does_not_fit": "✗"}[plan.verdict]
        label = (f"{mark} TP {tp}: {plan.weights_gib_per_gpu:.1f} GiB weights/GPU, "
                 f"{plan.kv_cache_tokens:,} KV tokens, {plan.max_concurrency:.1f}x concurrency at {plan.max_model_len:,}")
        if plan.verdict == "does_not_fit":
            label = f"{mark} TP {tp}: does not fit ({plan.reason})"
        opts.append(TPOption(tp, label, plan.verdict, plan))
    return opts


def _sizing_kw(flags: Flags, gpu: GPUType) -> dict[str, Any]:
    """What the fit arithmetic needs beyond TP / PP / length."""
    if flags.gpu_memory_utilization is not None and gpu.is_cpu:
        raise UsageError("--gpu-memory-utilization: does not apply to --gpu cpu (vLLM's CPU build sizes its KV cache "
                         "with kv_cache_memory_bytes, which llmctl sets)")
    return {"gpu_memory_utilization": flags.gpu_memory_utilization}


def collect_model(session: Session, flags: Flags, i: int, n: int, *, taken_ids: set[str]) -> S.ModelSpec:
    """All answers for model number i (0-based) of n."""
    catalog = load_catalog()
    pm = lambda values, flag: per_model(values, flag, n, i)  # noqa: E731

    def ask_model():
        while True:
            choice = ask_select("Model (type to search):", _model_choices(catalog), search=True,
                                default=DEFAULT_MODEL if DEFAULT_MODEL in catalog else None)
            if choice != CUSTOM:
                return catalog[choice]
            typed = ask_text("Hugging Face repo id, local directory, or s3:// / gs:// URI:", _parse_optional_model,
                             instruction="(empty: back to the list)")
            if typed is not None:
                return typed

    model_flag = flags.models[i] if i < len(flags.models) else None
    profile: ModelProfile = profile_with_recipes(session.answer(
        model_flag, flag="--model", label="model",
        parse=_parse_model, ask=ask_model,
    ))
    default_id = profile.id
    k = 2
    while default_id in taken_ids:
        default_id, k = f"{profile.id}-{k}", k + 1
    model_id = session.answer(
        pm(flags.model_ids, "--model-id"), flag="--model-id", label="model id", parse=S.parse_model_id,
        default=default_id,
        ask=lambda: ask_text("Model id clients will send as \"model\":", S.parse_model_id, default=default_id),
    )

    gpu: GPUType = _ask_gpu(session, flags, pm, profile)
    arch = profile.architecture
    engine = ask_engine_args(session, flags, pm, i, profile)
    auto = auto_layout(flags, pm, profile, gpu, engine)
    engine = ask_dp(session, flags, profile, gpu, engine, auto)
    sz = {**_sizing_kw(flags, gpu), **sizing.sizing_options(engine)}
    pp = session.answer(
        pm(flags.pps, "--pp"), flag="--pp", label="pipeline-parallel size",
        parse=lambda v: S.parse_pp(v, arch=arch), default=auto.pp if auto is not None and "data_parallel_size" not in engine else 1,
    )
    uses_layout = auto is not None and pp == auto.pp and (auto.dp == 1 or engine.get("data_parallel_size") == auto.dp)
    tp, max_model_len, choice = _ask_tp_and_length(session, flags, pm, profile, gpu, pp, sz,
                                                   layout_tp=auto.tp if uses_layout else None)

    min_r = session.answer(
        pm(flags.min_replicas, "--min-replicas"), flag="--min-replicas", label="minimum replicas",
        parse=lambda v: S.parse_replicas(v, what="min replicas", minimum=0), default=1,
        ask=lambda: ask_text("Minimum replicas (autoscaling):", lambda v: S.parse_replicas(v, what="min replicas", minimum=0), default="1"),
    )
    max_default = max(min_r, 1)
    max_r = session.answer(
        pm(flags.max_replicas, "--max-replicas"), flag="--max-replicas", label="maximum replicas",
        parse=lambda v: _parse_max_replicas(v, min_r), default=max_default,
        ask=lambda: ask_text("Maximum replicas (autoscaling):", lambda v: _parse_max_replicas(v, min_r), default=str(max_default)),
    )

    scaling = ask_autoscaling(session, flags, pm, profile, gpu, choice, min_r, max_r, max_num_seqs=sz.get("max_num_seqs"))
    router = ask_router(session, flags, max_r)
    lora = _ask_lora(session, flags, pm)

    token_flag = pm(flags.hf_token_envs, "--hf-token-env")
    hf_token_env = None
    if profile.gated or token_flag is not None:
        hf_token_env = session.answer(
            token_flag, flag="--hf-token-env", label="HF token variable", parse=S.parse_env_name,
            default=S.DEFAULT_TOKEN_ENV,
            ask=lambda: ask_text(
                f"{profile.hf_repo} is gated: NAME of the environment variable that holds your HF token:",
                S.parse_env_name, default=S.DEFAULT_TOKEN_ENV,
                instruction="(the token itself is never written to disk)",
            ),
        )
    fast = session.answer(
        flags.fast_download, flag="--fast-download", label="fast downloads", parse=bool, default=False,
        ask=lambda: ask_confirm("Turn on fast downloads (HF_HUB_ENABLE_HF_TRANSFER=1; needs hf_transfer on the cluster)?", False),
    )

    spec = S.ModelSpec(
        profile=profile, model_id=model_id, gpu=gpu, tp=tp, pp=pp, min_replicas=min_r, max_replicas=max_r,
        max_model_len=max_model_len, **lora,
        hf_token_env=hf_token_env, fast_download=bool(fast), gpu_memory_utilization=flags.gpu_memory_utilization,
        choice=choice, engine_extra=engine, router=router, **scaling,
        layout_note=(f"{profile.id} does not fit one {gpu.name} node at any TP: the default layout, {auto.describe()}"
                     if uses_layout else None),
    )
    try:
        spec.check()
    except ValueError as e:
        raise UsageError(str(e)) from None
    return spec


def _ask_tp_and_length(session: Session, flags: Flags, pm, profile: ModelProfile, gpu: GPUType, pp: int,
                       sz: dict[str, Any], layout_tp: Optional[int] = None) -> tuple[int, Optional[int], sizing.Choice]:
    """TP, then max_model_len: what the user set (a flag, or an answer at the
    prompt) is kept; the rest is llmctl.sizing.choose's — the one rule. A
    default layout in use (``layout_tp``: the model needs more than one node)
    fixes TP as llmctl.sizing.layouts chose it, unless the user sets one."""
    arch = profile.architecture
    tp_flag, len_flag = pm(flags.tps, "--tp"), pm(flags.max_model_lens, "--max-model-len")
    parse_tp = lambda v: S.parse_tp(v, arch=arch, gpu=gpu, pp=pp, expert_parallel=bool(sz.get("enable_expert_parallel")))  # noqa: E731
    parse_len = lambda v: S.parse_max_model_len(v, arch=arch)  # noqa: E731
    tp_fixed = session.parse_flag(tp_flag, flag="--tp", parse=parse_tp)
    len_fixed = session.parse_flag(len_flag, flag="--max-model-len", parse=parse_len)
    first = sizing.choose(arch, gpu, tp=tp_fixed if tp_fixed is not None else layout_tp, pp=pp, max_model_len=len_fixed, **sz)

    def ask_tp():
        options = tp_options(profile, gpu, pp=pp, max_model_len=first.max_model_len, **sz)
        if not options:
            raise UsageError(f"--gpu: no tensor-parallel size of {profile.id} works on {gpu.name}: "
                             f"{S.tp_problem(arch, 1, pp, gpu) or 'no valid TP'}")
        return ask_select("Tensor-parallel size (GPUs per replica):", [(o.label, o.tp) for o in options], default=first.tp)

    asked_tp = session.asks(tp_flag, first.tp, ask_tp)
    tp = session.answer(tp_flag, flag="--tp", label="tensor-parallel size", parse=parse_tp, default=first.tp, ask=ask_tp)
    tp_set = tp_fixed is not None or asked_tp or layout_tp is not None  # a TP picked at the prompt is the user's
    after_tp = first if tp == first.tp else sizing.choose(arch, gpu, tp=tp, pp=pp, max_model_len=len_fixed, **sz)
    len_default = after_tp.max_model_len

    def ask_len():
        shown = "" if len_default is None else str(len_default)
        why = next((r for r in after_tp.reasons if r.startswith("max_model_len")), "")
        return ask_text("max_model_len (tokens; 8192 or 8k):", parse_len, default=shown,
                        instruction=f"({why})" if why else None)

    mml = session.answer(len_flag, flag="--max-model-len", label="max_model_len", parse=parse_len, default=len_default, ask=ask_len)
    if mml is None:
        mml = len_default
    len_set = len_fixed is not None or mml != len_default
    final = sizing.choose(arch, gpu, tp=tp if tp_set else None, pp=pp, max_model_len=mml if len_set else None, **sz)
    return final.tp, final.max_model_len, final


def _ask_lora(session: Session, flags: Flags, pm) -> dict[str, Any]:
    """lora_path, adapters per replica, max rank, max LoRAs per batch / on CPU, and the store's settings by reference."""
    lora_flag = pm(flags.lora_paths, "--lora-path")
    lora_path = session.answer(
        lora_flag, flag="--lora-path", label="LoRA path", parse=S.parse_lora_path, default=None,
        ask=lambda: (ask_text("LoRA adapters path (s3://… or gs://…):", S.parse_lora_path)
                     if ask_confirm("Serve LoRA adapters from cloud storage?", False) else None),
    )
    if not lora_path:
        for values, flag in ((flags.max_lora_adapters, "--max-lora-adapters"), (flags.max_lora_ranks, "--max-lora-rank"),
                             (flags.max_loras, "--max-loras"), (flags.max_cpu_loras, "--max-cpu-loras"),
                             (flags.lora_envs, "--lora-env")):
            if pm(values, flag) is not None:
                raise UsageError(f"{flag}: needs --lora-path (LoRA settings apply only when adapters are served)")
        return {}
    parse_n = lambda v: S.parse_int(v, what="max LoRA adapters per replica", minimum=1)  # noqa: E731
    max_adapters = session.answer(
        pm(flags.max_lora_adapters, "--max-lora-adapters"), flag="--max-lora-adapters",
        label="max LoRA adapters per replica", parse=parse_n, default=S.DEFAULT_LORA_ADAPTERS,
        ask=lambda: ask_text("Max LoRA adapters per replica:", parse_n, default=str(S.DEFAULT_LORA_ADAPTERS)),
    )
    parse_rank = lambda v: S.parse_int(v, what="max LoRA rank", minimum=1)  # noqa: E731
    max_rank = session.answer(
        pm(flags.max_lora_ranks, "--max-lora-rank"), flag="--max-lora-rank", label="max LoRA rank", parse=parse_rank,
        default=None, ask=lambda: ask_text("Highest adapter rank to serve (max_lora_rank; vLLM takes 1, 8, 16, 32, 64, "
                                           "128, 256, 320, 512):", parse_rank, default="16"),
    )
    parse_loras = lambda v: S.parse_int(v, what="max LoRAs per batch", minimum=1)  # noqa: E731
    max_loras = session.parse_flag(pm(flags.max_loras, "--max-loras"), flag="--max-loras", parse=parse_loras)
    max_cpu = session.parse_flag(pm(flags.max_cpu_loras, "--max-cpu-loras"), flag="--max-cpu-loras",
                                 parse=lambda v: S.parse_int(v, what="max CPU LoRAs", minimum=1))
    import os

    detected = S.default_lora_env(lora_path, dict(os.environ))
    shown = ",".join(k if k == v else f"{k}={v}" for k, v in detected) or "none"
    env = session.answer(
        pm(flags.lora_envs, "--lora-env"), flag="--lora-env", label="LoRA store settings", parse=S.parse_lora_env,
        default=detected,
        ask=lambda: ask_text("Store settings the replicas take from the environment, by reference (KEY or KEY=VAR, "
                             "comma-separated, or none):", S.parse_lora_env, default=shown,
                             instruction="(endpoint, region, credentials: names only, never values)"),
    )
    return {"lora_path": lora_path, "max_lora_adapters": max_adapters, "max_lora_rank": max_rank, "max_loras": max_loras,
            "max_cpu_loras": max_cpu, "lora_env": tuple(env or ())}


def _recommended_gpu(profile: ModelProfile) -> Optional[str]:
    for name in GPUS:
        if name in profile.recommended:
            return name
    return None


def _ask_gpu(session: Session, flags: Flags, pm, profile: ModelProfile) -> GPUType:
    def ask():
        rows = []
        for g in GPUS.values():
            if g.is_cpu:
                rows.append((f"{'cpu':9} {'':>7}  CPU only (vLLM CPU build: tests, demos)", g.name))
                continue
            rec = profile.recommended.get(g.name)
            hint = f"  recommended TP {rec.tp}, max_model_len {rec.max_model_len:,}" if rec else ("  does not fit on one node" if profile.recommended else "")
            rows.append((f"{g.name:9} {g.nominal:>7}{hint}", g.name))
        return GPUS[ask_select("GPU type:", rows, default=_recommended_gpu(profile))]

    gpu = session.answer(pm(flags.gpus, "--gpu"), flag="--gpu", label="GPU type", parse=S.parse_gpu, ask=ask)
    return with_node_size(gpu, flags.gpus_per_node)  # --gpus-per-node: TP x PP beyond one node spans several


def _parse_max_replicas(v: Any, min_r: int) -> int:
    mx = S.parse_replicas(v, what="max replicas", minimum=1)
    S.check_replicas(min_r, mx)
    return mx

