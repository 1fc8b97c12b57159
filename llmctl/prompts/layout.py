"""The layout questions: data-parallel attention with expert parallelism
(``--dp N --enable-expert-parallel``, offered at the terminal for MoE
models) and prefill/decode disaggregation (``--pd P:D``): the rules are
:mod:`llmctl.patterns`'."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from llmctl import engine_args as EA
from llmctl import patterns as P
from llmctl import sizing
from llmctl import spec as S
from llmctl.catalog import ModelProfile
from llmctl.errors import UsageError
from llmctl.hardware import GPUType
from llmctl.prompts.session import Flags, Session, ask_confirm, ask_select, ask_text
from llmctl.sizing.layouts import Layout, default_layout


def auto_layout(flags: Flags, pm, profile: ModelProfile, gpu: GPUType, engine: dict[str, Any]) -> Optional[Layout]:
    """The default layout (llmctl.sizing.layouts) when the user set none of
    --tp, --pp, --dp, --pd and the model does not fit one node as it is."""
    if flags.dp is not None or flags.pd is not None or pm(flags.tps, "--tp") is not None or pm(flags.pps, "--pp") is not None:
        return None
    if profile.architecture is None or gpu.is_cpu:
        return None
    sz = sizing.sizing_options(engine)
    if flags.gpu_memory_utilization is not None:
        sz["gpu_memory_utilization"] = flags.gpu_memory_utilization
    lay = default_layout(profile.architecture, gpu, **sz)
    return lay if lay is not None and lay.kind != "single node" else None


def ask_dp(session: Session, flags: Flags, profile: ModelProfile, gpu: GPUType, engine: dict[str, Any],
           auto: Optional[Layout] = None) -> dict[str, Any]:
    """``engine`` with ``data_parallel_size`` / ``enable_expert_parallel``
    (and, for DP over MoE, a per-rank ``max_num_batched_tokens`` that keeps the
    all-gathered MoE batch at :data:`llmctl.patterns.DP_GATHERED_TOKENS`
    unless set) as the flags or the terminal's answers say; ``auto``: the
    default layout when the model needs more than one node."""
    arch = profile.architecture
    moe = arch is not None and arch.moe is not None
    offer = moe and not gpu.is_cpu and session.interactive and not session.assume_yes and flags.dp is None \
        and flags.pd is None

    dp_default = auto.dp if auto is not None and auto.kind == "DP+EP" else 1

    def ask_layout():
        choices = [("one engine per replica (tensor parallel)", 1)]
        choices += [(f"data-parallel attention + expert parallel: DP {n} ranks per group", n)
                    for n in sorted({2, 4, 8, 16, 32, dp_default} - {1}) if n <= 4 * gpu.gpus_per_node]
        return ask_select(f"{profile.id} is a mixture of experts: layout?", choices, default=dp_default)

    dp = session.answer(flags.dp, flag="--dp", label="data-parallel size", parse=P.parse_dp, default=dp_default,
                        ask=ask_layout if offer else None)
    ep_default = dp > 1 and moe
    ep = session.answer(flags.enable_expert_parallel, flag="--enable-expert-parallel", label="expert parallelism",
                        parse=bool, default=ep_default,
                        ask=(lambda: ask_confirm("Deal the experts over the ranks (enable_expert_parallel)?", True))
                        if offer and dp > 1 else None)
    out = dict(engine)
    if dp > 1:
        out["data_parallel_size"] = dp
        if moe and "max_num_batched_tokens" not in out:
            out["max_num_batched_tokens"] = P.dp_batched_tokens(dp)
        out.pop("data_parallel_size", None)
        out = {"data_parallel_size": dp, **out}
    if ep:
        out["enable_expert_parallel"] = True
    elif flags.enable_expert_parallel is False:
        out.pop("enable_expert_parallel", None)
    return out


def dp_reasons(m: S.ModelSpec) -> list[str]:
    note = [m.layout_note] if m.layout_note else []
    dp = m.engine_extra.get("data_parallel_size", 1)
    if dp <= 1:
        return note
    ranks = m.tp * m.pp
    out = note + [f"DP {dp} x TP {m.tp}" + (f" x PP {m.pp}" if m.pp > 1 else "") + f" = {dp * ranks} GPUs per DP group "
           f"({sizing.nodes_of(m.gpu, dp * ranks) if not m.gpu.is_cpu else 1} node(s)); replicas count DP groups "
           f"(Ray multiplies min/max_replicas by {dp})"]
    if m.engine_extra.get("enable_expert_parallel"):
        out.append(f"experts dealt over DP x TP = {dp * m.tp} ranks (enable_expert_parallel)")
    if m.engine_extra.get("max_num_batched_tokens") == P.dp_batched_tokens(dp):
        out.append(f"max_num_batched_tokens {P.dp_batched_tokens(dp)} per rank: the MoE layers run over every rank's "
                   f"batch (DP x tokens), kept near {P.DP_GATHERED_TOKENS}")
    return out


def _pool_engine(items: list[str], flag: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, value = S.parse_flag(item, flag=flag, parse=EA.parse_engine_arg)
        out[key] = value
    return out


def pd_pools(session: Session, flags: Flags, m: S.ModelSpec) -> Optional[tuple[S.ModelSpec, S.ModelSpec, str]]:
    """(prefill, decode, connector) for ``--pd P:D``, or None without it.
    Each pool is the collected model with its own TP (``--prefill-tp`` /
    ``--decode-tp``, else sized for the pool), its own engine arguments
    (``--prefill-arg`` / ``--decode-arg``) and its replica counts times P or D."""
    for flag, given in (("--kv-connector", flags.kv_connector), ("--prefill-tp", flags.prefill_tp),
                        ("--decode-tp", flags.decode_tp), ("--prefill-arg", flags.prefill_args or None),
                        ("--decode-arg", flags.decode_args or None)):
        if given is not None and flags.pd is None:
            raise UsageError(f"{flag}: only with --pd PREFILL:DECODE (prefill/decode disaggregation)")
    if flags.pd is None:
        return None
    p, d = S.parse_flag(flags.pd, flag="--pd", parse=P.parse_pd)
    given_kv = m.engine_extra.get("kv_transfer_config")  # --engine-arg kv_transfer_config={...}: both pools, as given
    if given_kv is not None:
        if flags.kv_connector is not None:
            raise UsageError("--kv-connector: the connector is already in --engine-arg kv_transfer_config; give one of them")
        if not isinstance(given_kv, dict) or not isinstance(given_kv.get("kv_connector"), str):
            raise UsageError("--engine-arg: kv_transfer_config must be a mapping with kv_connector (and kv_role)")
        connector, kv = given_kv["kv_connector"], dict(given_kv)
    else:
        connector = session.answer(flags.kv_connector, flag="--kv-connector", label="KV connector",
                                   parse=P.parse_kv_connector, default=P.DEFAULT_KV_CONNECTOR,
                                   ask=lambda: ask_text("KV connector between the pools:", P.parse_kv_connector,
                                                        default=P.DEFAULT_KV_CONNECTOR))
        kv = P.kv_transfer_config(connector)
    pools = []
    for role, n, tp_flag, items, flag in (("prefill", p, flags.prefill_tp, flags.prefill_args, "--prefill-arg"),
                                          ("decode", d, flags.decode_tp, flags.decode_args, "--decode-arg")):
        engine = {**m.engine_extra, **_pool_engine(items, flag), "kv_transfer_config": dict(kv)}
        tp = S.parse_flag(tp_flag, flag=f"--{role}-tp", parse=lambda v: S.parse_tp(
            v, arch=m.arch, gpu=m.gpu, pp=m.pp, expert_parallel=bool(engine.get("enable_expert_parallel"))))
        sz = sizing.sizing_options(engine)
        if m.gpu_memory_utilization is not None:
            sz["gpu_memory_utilization"] = m.gpu_memory_utilization
        choice = m.choice
        if not m.gpu.is_cpu and m.arch is not None:
            choice = sizing.choose(m.arch, m.gpu, tp=tp if tp is not None else m.tp, pp=m.pp,
                                   max_model_len=m.max_model_len, **sz)
        scaling: dict[str, Any] = {}
        derived = m.targets is not None and m.target_ongoing_requests == m.targets.target_ongoing_requests
        if derived and choice is not None and choice.plan is not None:  # the pool's own plan, not the model's
            t = sizing.derive_targets(choice.plan, max_model_len=choice.max_model_len, expected_tokens=m.expected_tokens,
                                      max_num_seqs=sz.get("max_num_seqs"), gpu_memory_bytes=m.gpu.memory_bytes or None)
            if t is not None:
                scaling = {"targets": t, "target_ongoing_requests": t.target_ongoing_requests,
                           "max_ongoing_requests": t.max_ongoing_requests}
        pools.append(dataclasses.replace(
            m, role=role, tp=tp if tp is not None else m.tp, engine_extra=engine, choice=choice, **scaling,
            min_replicas=m.min_replicas * n, max_replicas=m.max_replicas * n,
            initial_replicas=None if m.initial_replicas is None else m.initial_replicas * n))
    return pools[0], pools[1], connector


def pd_reasons(m: S.ModelSpec) -> list[str]:
    if m.role is None:
        return []
    kv = m.engine_extra.get("kv_transfer_config") or {}
    what = ("prefill pool: runs each prompt once (max_tokens 1) and hands its KV cache over"
            if m.role == "prefill" else "decode pool: pulls the prompt's KV cache and generates; the ingress talks to it")
    return [f"{what}; connector {kv.get('kv_connector')} ({kv.get('kv_role')}); replicas {m.min_replicas}-{m.max_replicas}"]
