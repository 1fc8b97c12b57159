"""`llmctl plan`: does a model fit, at which TP, with how much KV cache.

Thin layer over :mod:`llmctl.sizing`: flags go through the parsers gen-config
uses (:mod:`llmctl.spec`), and the advised TP and context length come from
``sizing.choose`` — the rule gen-config's defaults and the catalog follow.
No ray / vllm import; huggingface_hub only when the model is not in the catalog.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from typing_extensions import Annotated

from llmctl.cli.root import app
from llmctl.cli.console import out, print_json
from llmctl.cli.options import (DecodeTpOpt, DpOpt, GpuOpt, GpusPerNodeOpt, IslOpt, JsonOpt, ModelOpt, OslOpt, PdOpt, PrefillTpOpt,
                                PriceOpt, ProfileOpt)
from llmctl.workload import DEFAULT_ISL, DEFAULT_OSL
from llmctl.errors import UsageError

@app.command("plan")
def plan_cmd(
    model: ModelOpt = None,
    gpu: GpuOpt = None,
    gpu_memory: Annotated[Optional[float], typer.Option("--gpu-memory", metavar="GIB", help="Memory of one GPU in GiB, as the driver reports it (instead of --gpu).")] = None,
    tp: Annotated[Optional[str], typer.Option("--tp", metavar="N", help="Tensor-parallel size; default: every valid size on one node, the advised one marked.")] = None,
    pp: Annotated[str, typer.Option("--pp", metavar="N", help="Pipeline-parallel size.")] = "1",
    max_model_len: Annotated[Optional[str], typer.Option("--max-model-len", metavar="TOKENS", help="Context length in tokens: 16384, or 16K = 16,384 (16k = 16,000, as vLLM reads it); default: llmctl's choice (the model's context, capped at 32,768, or the most that fits).")] = None,
    gpu_memory_utilization: Annotated[Optional[float], typer.Option("--gpu-memory-utilization", metavar="FRACTION", help="vLLM's gpu_memory_utilization (default: that vLLM's, 0.92 from 0.20, 0.9 before).")] = None,
    dtype: Annotated[str, typer.Option("--dtype", metavar="DTYPE", help="vLLM dtype: auto, half, float16, bfloat16, float, float32 (a quantization goes to --quantization).")] = "auto",
    kv_cache_dtype: Annotated[str, typer.Option("--kv-cache-dtype", metavar="DTYPE", help="KV cache dtype: auto, fp8 (fp8_e4m3, fp8_e5m2), or vLLM's packed nvfp4 and int8/fp8/int4_per_token_head.")] = "auto",
    min_concurrency: Annotated[Optional[float], typer.Option("--min-concurrency", metavar="N", help="Advise only TP sizes holding at least this many concurrent full-length requests.")] = None,
    vllm_version: Annotated[Optional[str], typer.Option("--vllm-version", metavar="X.Y.Z", help="The vLLM whose start-up memory profile to model (default: the one the installed Ray pins).")] = None,
    quantization: Annotated[Optional[str], typer.Option("--quantization", metavar="METHOD", help="vLLM quantization method (awq, gptq, fp8, …); default: what the checkpoint says. On an unquantized checkpoint, fp8 or experts_int8 (vLLM quantizes it as it loads).")] = None,
    enforce_eager: Annotated[bool, typer.Option("--enforce-eager", help="vLLM's --enforce-eager: no CUDA graphs, so their memory is not taken from the KV cache.")] = False,
    enable_expert_parallel: Annotated[bool, typer.Option("--enable-expert-parallel", help="vLLM's --enable-expert-parallel: whole experts dealt out over the TP ranks.")] = False,
    max_num_seqs: Annotated[Optional[str], typer.Option("--max-num-seqs", metavar="N", help="vLLM's --max-num-seqs (default: that vLLM's, by GPU size).")] = None,
    max_num_batched_tokens: Annotated[Optional[str], typer.Option("--max-num-batched-tokens", metavar="TOKENS", help="vLLM's --max-num-batched-tokens (8192, 8K; default: that vLLM's, by GPU size).")] = None,
    slo: Annotated[Optional[str], typer.Option("--slo", metavar="TARGETS", help="Plan for latency targets instead: ttft_p95=500ms,itl_p95=40ms (itl: each request's mean time per output token). Shows the estimated highest request rate per replica, replicas, cost and the limiting bound; --gpu may then list several (L4,H100).")] = None,
    rate: Annotated[Optional[float], typer.Option("--rate", metavar="REQ_PER_S", help="With --slo: the request rate to serve (replicas and cost are for it). Without --slo: predicted TTFT, ITL and throughput of one replica at this rate (open loop).")] = None,
    concurrency: Annotated[Optional[str], typer.Option("--concurrency", metavar="N[,M...]", help="Predicted TTFT, ITL, request and token throughput of one replica with N concurrent clients (closed loop), per GPU and TP size.")] = None,
    isl: IslOpt = DEFAULT_ISL,
    osl: OslOpt = DEFAULT_OSL,
    price: PriceOpt = None,
    profile: ProfileOpt = None,
    slo_at: Annotated[str, typer.Option("--slo-at", metavar="client|engine", help="With --slo and --profile: whose TTFT the targets are, the clients' (default: from sending the request, Serve's proxy included) or the engines' (vLLM's own histogram, what gen-config --autoscale-on scales on).")] = "client",
    gpus_per_node: GpusPerNodeOpt = None,
    trace: Annotated[Optional[Path], typer.Option("--trace", metavar="FILE", help="With --slo: size for a request trace (the layouts `bench --trace` replays): replicas, cost and the bound for its busiest --window, not its mean rate; also the replicas window by window.")] = None,
    window: Annotated[Optional[float], typer.Option("--window", metavar="SECONDS", help="With --trace: the window its peak rate is taken over (default 60).")] = None,
    speedup: Annotated[Optional[float], typer.Option("--speedup", metavar="FACTOR", help="With --trace: the trace replayed FACTOR times faster (as `bench --trace --speedup`).")] = None,
    dp: DpOpt = None,
    pd: PdOpt = None,
    prefill_tp: PrefillTpOpt = None,
    decode_tp: DecodeTpOpt = None,
    decode_context_parallel_size: Annotated[Optional[str], typer.Option("--decode-context-parallel-size", metavar="N", help="vLLM's decode context parallelism: each request's KV sharded over N of the TP ranks (N divides TP), so the KV cache holds N times the tokens.")] = None,
    json_: JsonOpt = False,
) -> None:
    """Estimate weights, KV cache and concurrency per GPU; advise a TP size. With --slo: capacity for a latency goal and its cost."""
    from llmctl.planner import plan

    if not model:
        raise UsageError("no model given; pass --model (a catalog id from `llmctl models`, an HF repo id or a directory)")
    sized: dict[str, Any] = dict(gpu=gpu, tp=tp, max_model_len=max_model_len, dtype=dtype, kv_cache_dtype=kv_cache_dtype,
                                 max_num_seqs=max_num_seqs, quantization=quantization)  # what --slo, --rate, --concurrency size
    priced: dict[str, Any] = dict(price=price, profile=[str(p) for p in profile or []], slo_at=slo_at)
    if trace is not None:
        if slo is None:
            raise UsageError("--trace: sizes for latency targets; add --slo (e.g. --slo ttft_p95=500ms,itl_p95=40ms)")
        if rate is not None or concurrency is not None:
            raise UsageError("--trace: the trace sets the rate; leave out --rate and --concurrency")
        from llmctl.planner import trace_capacity

        tp_plan = trace_capacity(model, trace=str(trace), slo=slo, window=window, speedup=speedup, **priced, **sized)
        if json_:
            print_json(tp_plan.to_json())
        else:
            _render_trace(tp_plan)
        return
    if window is not None or speedup is not None:
        raise UsageError("--window and --speedup: apply to a trace; add --trace FILE")
    if slo is not None:
        from llmctl.planner import capacity

        if concurrency is not None:
            raise UsageError("--concurrency: not with --slo (--slo searches the concurrency itself; --rate sets the rate to serve)")

        table = capacity(model, slo=slo, rate=rate, isl=isl, osl=osl, **priced, **sized)
        if json_:
            print_json(table.to_json())
        else:
            _render_capacity(table)
        return
    if concurrency is not None and rate is not None:
        raise UsageError("--concurrency and --rate: pass one (clients per replica, or requests per second per replica)")
    if price is not None or profile or slo_at != "client":
        raise UsageError("--price, --profile and --slo-at plan for a latency goal: add --slo (e.g. --slo ttft_p95=500ms,itl_p95=40ms)")
    if concurrency is not None or rate is not None:
        from llmctl.planner import load

        table = load(model, concurrency=concurrency, rate=rate, isl=isl, osl=osl, **sized)
        if json_:
            print_json(table.to_json())
        else:
            _render_load(table)
        return
    table = plan(model, gpu=gpu, gpu_memory=gpu_memory, tp=tp, pp=pp, max_model_len=max_model_len,
                 gpu_memory_utilization=gpu_memory_utilization, dtype=dtype, kv_cache_dtype=kv_cache_dtype,
                 min_concurrency=min_concurrency, vllm_version=vllm_version, quantization=quantization,
                 enforce_eager=enforce_eager, enable_expert_parallel=enable_expert_parallel, max_num_seqs=max_num_seqs,
                 max_num_batched_tokens=max_num_batched_tokens, gpus_per_node=gpus_per_node, dp=dp, pd=pd,
                 prefill_tp=prefill_tp, decode_tp=decode_tp, decode_context_parallel_size=decode_context_parallel_size)
    if json_:
        print_json(table.to_json())
        return
    explicit_len = None if max_model_len is None else table.rows[0]["max_model_len"]
    _render(table.profile, table.profile.architecture, table.rows, table.parameters, explicit_len)


def _render(profile, arch, rows: list[dict[str, Any]], params: dict[str, int], explicit_len: Optional[int]) -> None:
    from rich.table import Table

    ptxt = f"{params['total'] / 1e9:.1f}B params" if params else "params unknown"
    if params and params["active"] != params["total"]:
        ptxt += f" ({params['active'] / 1e9:.1f}B active)"
    table = Table(title=f"{profile.id}: {ptxt}, context {arch.context_limit:,}" if arch.context_limit else f"{profile.id}: {ptxt}")
    multi = any(r.get("nodes", 1) > 1 for r in rows)  # a replica spanning nodes: say how many
    dp = any(r.get("dp", 1) > 1 for r in rows)  # data-parallel ranks: every figure is one rank's
    pools = any(r.get("pool") for r in rows)
    cols = (("GPU", "left"), *((("pool", "left"),) if pools else ()), *((("DP", "right"), ("EP", "right")) if dp else ()),
            ("TP", "right"), ("PP", "right"), *((("nodes", "right"),) if multi else ()),
            ("max_model_len", "right"), ("weights/GPU", "right"),
            ("KV/GPU", "right"), ("KV tokens", "right"), ("max conc.", "right"), ("fits up to", "right"),
            ("verdict", "left"), ("advice", "left"))
    for col, just in cols:
        table.add_column(col, justify=just)
    style = {"fits": "green", "tight": "yellow", "does_not_fit": "red"}
    for r in rows:
        table.add_row(
            r["gpu"], *((r.get("pool", ""),) if pools else ()),
            *((str(r.get("dp", 1)), str(r.get("ep_size", 1)) if r.get("ep_size", 1) > 1 else "-") if dp else ()),
            str(r["tp"]), str(r["pp"]), *((f"{r['nodes']} x {r['gpus_per_node']}",) if multi else ()),
            f"{r['max_model_len']:,}", f"{r['weights_gib_per_gpu']:.1f} GiB",
            f"{max(r['kv_cache_gib'], 0):.1f} GiB", f"{r['kv_cache_tokens']:,}", f"{r['max_concurrency']:.1f}",
            f"{r['max_model_len_fits']:,}", f"[{style[r['verdict']]}]{r['verdict'].replace('_', ' ')}[/]",
            "← advised" if r["advised"] else "",
        )
    out.print(table)
    advised = [r for r in rows if r["advised"]]
    if dp:
        out.print("DP rows are one rank each: weights with the experts dealt over EP ranks, activation with the MoE "
                  "all-gather of every rank's batch, KV cache per rank (a group holds DP x the KV tokens)", markup=False)
    for r in advised:
        what = r.get("layout") or (f"{r['pool']} pool " if r.get("pool") else "") + f"TP {r['tp']}"
        out.print(f"advised: {r['gpu']} {what} at max_model_len {r['max_model_len']:,}: {r['reason']}", markup=False)
        for why in r["reasons"]:
            out.print(f"  {why}", markup=False)
    if not advised and len(rows) > 1:
        out.print("no TP size on one node starts this model here; lower --max-model-len, quantize (--quantization fp8) "
                  "or pick a larger GPU", markup=False)
    if len(rows) == 1 and rows[0]["verdict"] == "does_not_fit":
        out.print(f"why: {rows[0]['reason']}", markup=False)
    seen: set[str] = set()
    for r in rows:
        for w in r["warnings"]:
            if w not in seen:
                seen.add(w)
                out.print(f"note: {w}", markup=False)
    if rows:
        out.print(f"Estimates follow vLLM {rows[0]['vllm_version']}'s start-up memory profile (docs/sizing.md); "
                  f"tight allows for a {min(r['margin'] for r in rows):.0%} error"
                  + (f" ({max(r['margin'] for r in rows):.0%} where approximate)"
                     if any(r['approximate'] for r in rows) else "") + ".", markup=False)
    if advised:
        r = advised[0]
        gpu_flag = f" --gpu {r['gpu']}" if " GiB" not in r["gpu"] else ""
        length = f" --max-model-len {explicit_len}" if explicit_len else ""
        if r.get("pool"):
            what = " --pd P:D" + "".join(f" --{x['pool']}-tp {x['tp']}" for x in advised if x["gpu"] == r["gpu"])
        elif r.get("layout"):
            what = ""  # gen-config --yes writes the default layout itself
        else:
            what = (f" --dp {r['dp']}" if r.get("dp", 1) > 1 else "") + f" --tp {r['tp']}"
        out.print(f"Next: llmctl gen-config --model {profile.id}{gpu_flag}{what}{length}", markup=False)


def _render_capacity(table) -> None:
    from rich.table import Table

    from llmctl.perf.capacity import BOUND_TEXT

    rate = f", {table.rate:g} req/s" if table.rate else ""
    t = Table(title=f"{table.profile.id}: {table.slo.text()}{rate}, {table.isl:,} in / {table.osl:,} out tokens "
                    f"(estimates{', calibrated' if table.calibration else ''})", title_justify="left")
    for col, just in (("GPU", "left"), ("TP", "right"), ("max req/s per replica", "right"), ("conc./replica", "right"),
                      ("TTFT p95", "right"), ("ITL p95", "right"), ("replicas", "right"), ("$/hour", "right"),
                      ("$/1M out tok", "right"), ("limited by", "left"), ("", "left")):
        t.add_column(col, justify=just)
    for r in table.rows:
        p = r.prediction
        ok = r.max_rate > 0
        t.add_row(r.gpu, str(r.tp), f"{r.max_rate:.2f}" if ok else "-", f"{r.concurrency:.1f}" if ok else "-",
                  f"{p.ttft_p95_s * 1000:.0f} ms" if p and ok else "-", f"{p.itl_p95_s * 1000:.1f} ms" if p and ok else "-",
                  str(r.replicas) if r.replicas else "-", f"{r.usd_per_hour:.2f}" if r.usd_per_hour is not None else "-",
                  f"{r.usd_per_m_output_tokens:.2f}" if r.usd_per_m_output_tokens is not None else "-",
                  BOUND_TEXT.get(r.bound, r.bound), "← cheapest" if r.cheapest else "")
    out.print(t)
    best = table.cheapest
    if best is not None:
        out.print(f"cheapest: {best.replicas} x {best.gpu} TP {best.tp} ({best.replicas * best.tp} GPUs, ${best.usd_per_hour:.2f}/hour): "
                  f"{best.max_rate:.2f} req/s per replica at {best.max_ongoing_requests} concurrent requests, "
                  f"limited by {BOUND_TEXT.get(best.bound, best.bound)}", markup=False)
    elif table.rate:
        out.print("no priced setup meets the goal; pass --price GPU=USD for the GPUs without a price, relax --slo or raise --tp", markup=False)
    for r in table.rows:
        if r.by_replicas:
            out.print(f"{r.gpu}: replicas on the measured host: " + ", ".join(f"{k} -> {v:.2f} req/s" for k, v in r.by_replicas.items()),
                      markup=False)
        if r.note:
            out.print(f"note: {r.gpu} TP {r.tp}: {r.note}", markup=False)
    cal = table.calibration
    if cal is not None:
        e = cal.efficiency
        out.print(f"calibrated on {cal.device} ({', '.join(cal.sources)}): step {e.step_s * 1000:.2f} ms + {e.seq_s * 1000:.3f} ms/sequence "
                  f"+ {e.token_s * 1e6:.1f} us/prompt token; request {e.request_s * 1000:.0f} ms, TTFT {e.ttft_steps:.1f} steps; "
                  f"p95/mean TTFT {e.ttft_p95_ratio:.2f}, ITL {e.itl_p95_ratio:.2f}"
                  + (f"; replicas on one host: x{', x'.join(f'{v:.2f} at {k}' for k, v in sorted(cal.replica_stretch.items()))} slower"
                     if len(cal.replica_stretch) > 1 else "")
                  + (f" (fitted on their own sweep: {', '.join(map(str, sorted(cal.per_replicas)))} replicas; "
                     "the factor extrapolates to others)" if cal.per_replicas else ""), markup=False)
    for src in sorted({v["source"] for v in table.prices.values()}):
        out.print(f"prices: {src}", markup=False)
    _print_extrapolations(table.rows)
    out.print("These are estimates of a step-time model of vLLM, not measurements: docs/capacity.md gives its accuracy "
              "per GPU, model kind, precision and TP on 751 measured points (JSON: each row's 'band'). Measure yours "
              "with `llmctl bench --sweep ... --slo ... --output bench.json` and calibrate with --profile bench.json.", markup=False)
    if best is not None:
        out.print(f"Next: llmctl gen-config --model {table.profile.id} --slo {table.slo.text()}"
                  + (f" --rate {table.rate:g}" if table.rate else "") + f" --isl {table.isl} --osl {table.osl}", markup=False)


def _render_trace(tp) -> None:
    s = tp.trace
    pk = s["peak"]
    out.print(f"trace {s['path']} ({s['layout']}{f', x{tp.speedup:g}' if tp.speedup != 1 else ''}): {s['requests']} requests over "
              f"{s['duration_s']:.0f} s, mean {s['mean_rate']:.2f} req/s; busiest {s['window_s']:g} s from {pk['start_s']:.0f} s: "
              f"{pk['rate']:.2f} req/s, {pk['input_tokens_mean']:.0f} in / {pk['output_tokens_mean']:.0f} out tokens "
              "(sized for the peak, not the mean)"
              + (f"; {s['skipped']} failed request(s) left out" if s.get("skipped") else ""), markup=False)
    _render_capacity(tp.table)
    for r in tp.table.rows:
        if r.max_rate <= 0:
            continue
        mean = tp.replicas_for(r, s["mean_rate"])
        series = [tp.replicas_for(r, rate) for _, rate in tp.windows]
        txt = " ".join("-" if n is None else str(n) for n in series)
        out.print(f"{r.gpu} TP {r.tp}: {r.replicas if r.replicas else 'out of reach'} replica(s) at the peak, "
                  f"{mean if mean else 'out of reach'} at the mean rate; per {s['window_s']:g} s window: {txt}", markup=False)


def _print_extrapolations(rows) -> None:
    """One line per reason a figure leaves the calibration data, with the rows it applies to."""
    by_reason: dict[str, list[str]] = {}
    for r in rows:
        for why in r.extrapolates:
            by_reason.setdefault(why, []).append(f"{r.gpu} TP {r.tp}")
    for why, where in by_reason.items():
        out.print(f"extrapolates: {why} ({'every row' if len(where) == len(rows) else ', '.join(where)})", markup=False)


def _band_text(band: dict, metric: str) -> str:
    b = band.get(metric)
    return f"x{b['low']:.2f}-{b['high']:.2f}" if b else "?"


def _render_load(table) -> None:
    import math

    from rich.table import Table

    what = "concurrent clients" if table.mode == "concurrency" else "requests/s"
    t = Table(title=f"{table.profile.id}: one replica at {', '.join(f'{v:g}' for v in table.values)} {what}, "
                    f"{table.isl:,} in / {table.osl:,} out tokens (estimates)", title_justify="left")
    for col, just in (("GPU", "left"), ("TP", "right"), ("load", "right"), ("TTFT", "right"), ("ITL", "right"),
                      ("req/s", "right"), ("out tok/s", "right"), ("measured/predicted (tok/s)", "right"),
                      ("limited by", "left"), ("", "left")):
        t.add_column(col, justify=just)
    for r in table.rows:
        p = r.prediction
        sat = p.saturated
        ttft = "saturated" if sat or not math.isfinite(p.ttft_s) else (
            f"{p.ttft_s * 1000:.0f} ms" if p.ttft_s < 10 else f"{p.ttft_s:.1f} s")
        flag = "extrapolates" if r.extrapolates else ""
        t.add_row(r.gpu, str(r.tp), f"{r.load:g}", ttft, f"{p.itl_s * 1000:.1f} ms", f"{p.rate:.2f}",
                  f"{p.output_tokens_per_s:,.0f}", _band_text(r.band, "tok_s"),
                  ("queued beyond " + p.capped_by.replace("_", " ")) if p.capped_by else p.decode_bound.replace("_", " "), flag)
    out.print(t)
    _print_extrapolations(table.rows)
    if any(r.prediction.saturated for r in table.rows):
        out.print("saturated: the replica cannot sustain that rate; the queue grows without bound (add replicas, "
                  "or see `llmctl plan --slo ...` for the highest rate within a latency goal)", markup=False)
    out.print("These are estimates of a step-time model of vLLM, calibrated on measured GPU sweeps (docs/capacity.md); "
              "'measured/predicted' is the 10th-90th percentile of that ratio for this kind of setup in those sweeps "
              "(for a GPU they lack, in published runs on it).",
              markup=False)
