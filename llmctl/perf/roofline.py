"""The performance model: one replica's engine step as a roofline, and the
steady state of a closed loop of N concurrent requests.

An engine step (vLLM V1, continuous batching with chunked prefill) runs the
``B`` decoding sequences plus a chunk of prompt tokens. Its time is

    t_step = t_0 + B·t_seq + P·t_tok + max(bytes / (BW·η_mem), flops / (F·η_flop)) + t_comm

- bytes: the weights one GPU reads once per step (for a mixture of experts
  only the experts the step's tokens touch), plus the KV cache of every
  sequence's context (attention reads it all);
- flops: 2 × active parameters per token (the matmuls) plus attention,
  4 × layers × query width × context per token;
- t_comm: tensor parallelism's two all-reduces per layer of the step's
  activations, ring all-reduce over the GPU link (2·(TP−1)/TP · bytes / link)
  plus a fixed latency each;
- t_0, t_seq, t_tok: the engine's own costs per step, per running sequence
  and per prompt token (scheduling, sampling, detokenizing, Python), which
  dominate on a CPU and with tiny models.

BW, F and the link come from the GPU table (llmctl.hardware); the
efficiencies η and the overheads are :class:`Efficiency` — defaults chosen on
the training half of tests/data/perf_published.yaml, or fitted to a
measurement (:mod:`llmctl.perf.calibrate`). Every figure is an estimate.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Optional

GB = 1e9


@dataclass(frozen=True)
class ModelShape:
    """What the roofline needs of one model at one TP size (per GPU)."""

    name: str
    tp: int
    params_active: float  # per token, all GPUs: matmul parameters a token passes (no input embedding lookup)
    dense_bytes: float  # per GPU: weights read every step (attention, dense MLP, shared experts, lm_head)
    expert_bytes: float  # per GPU: all routed experts (0 for a dense model)
    experts: int  # routed experts per MoE layer (0: dense)
    experts_per_token: int
    kv_bytes_per_token: float  # per GPU
    attn_width: int  # query heads × head_dim (all GPUs)
    layers: int
    hidden: int
    act_bytes: int = 2  # bytes per activation element (all-reduce payload)
    fp8: bool = False  # weights in fp8: matmuls may use the fp8 tensor cores

    def weight_read_bytes(self, tokens: float) -> float:
        """Bytes of weights one GPU reads in a step of ``tokens`` tokens: the
        experts ``tokens`` top-k choices touch, uniform routing assumed."""
        if not self.experts or self.expert_bytes <= 0:
            return self.dense_bytes
        k = self.experts_per_token / self.experts
        touched = 1 - (1 - k) ** max(tokens, 1)
        return self.dense_bytes + self.expert_bytes * touched


@dataclass(frozen=True)
class Device:
    """A roofline: peak bandwidth (bytes/s), dense FLOP/s and the GPU link."""

    name: str
    mem_bw: float  # bytes/s; math.inf: not modelled (a CPU profile learns overheads only)
    flops: float  # FLOP/s at the weights' dtype
    link_bw: float = 0.0  # bytes/s per direction
    link_latency_s: float = 10e-6  # per all-reduce (NCCL small-message latency, order of magnitude)

    @property
    def known(self) -> bool:
        return 0 < self.mem_bw < math.inf and 0 < self.flops < math.inf


def device_of(gpu, *, fp8: bool = False) -> Device:
    """The roofline of a row of llmctl.hardware.TABLE (fp8: its fp8 tensor cores, when it has them)."""
    if gpu.is_cpu:
        return Device("cpu", math.inf, math.inf)
    tflops = gpu.fp8_tflops if fp8 and gpu.fp8_tflops else gpu.bf16_tflops
    return Device(gpu.name, gpu.hbm_gb_s * GB, tflops * 1e12, gpu.link_gb_s * GB,
                  5e-6 if gpu.interconnect == "nvswitch" else 15e-6)


@dataclass(frozen=True)
class Efficiency:
    """Fractions of the roofline reached, and the engine's overheads (seconds)."""

    # Defaults: chosen on tests/data/perf_published.yaml (docs/capacity.md, "How the defaults were chosen")
    mem: float = 0.80  # of peak bandwidth in decode
    compute: float = 0.35  # of dense peak FLOP/s (end to end: attention, norms and sampling included)
    compute_half_tokens: float = 0.0  # >0: tokens in a step at which the matmuls reach half of `compute`
    step_s: float = 0.001  # per engine step (scheduler, kernel launches)
    seq_s: float = 0.0002  # per running sequence per step (scheduling, sampling, detokenizing)
    frontend_s: float = 0.02  # per request, serial in the API server (tokenizing, HTTP, streaming): a queue (frontend_wait), rate < 1/frontend_s
    token_s: float = 0.0  # per prompt token (tokenizing, the prefill's own overheads)
    request_s: float = 0.010  # per request before its first step (HTTP, Ray Serve router, ingress)
    ttft_steps: float = 1.5  # steps a new request spends before its first token: waiting for the running one, then its own
    ttft_p95_ratio: float = 1.6  # p95 / mean of TTFT
    itl_p95_ratio: float = 1.15  # p95 / mean of the per-request inter-token latency
    source: str = "defaults (docs/capacity.md)"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Efficiency":
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass(frozen=True)
class Engine:
    """The vLLM limits of one replica."""

    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    kv_tokens: int = 0  # KV cache tokens of the replica (0: unlimited)


@dataclass(frozen=True)
class Step:
    seconds: float
    mem_s: float
    compute_s: float
    comm_s: float
    overhead_s: float

    @property
    def bound(self) -> str:
        roof = max(self.mem_s, self.compute_s)
        if self.overhead_s > roof and self.overhead_s > self.comm_s:
            return "engine_overhead"
        if self.comm_s > roof:
            return "interconnect"
        return "memory_bandwidth" if self.mem_s >= self.compute_s else "compute"


def step_time(shape: ModelShape, dev: Device, eff: Efficiency, *, decode: float, prompt_tokens: float,
              context: float, prompt_context: Optional[float] = None) -> Step:
    """One engine step with ``decode`` running sequences of mean context
    ``context`` and a chunk of ``prompt_tokens`` prompt tokens whose queries
    see ``prompt_context`` tokens on average (default: half the chunk)."""
    tokens = decode + prompt_tokens
    pctx = prompt_tokens / 2 if prompt_context is None else prompt_context
    # attention reads every decoding sequence's whole KV cache; a prompt chunk's
    # (flash attention, tiled queries) about once more, with what it writes
    kv_read = (decode * context + prompt_tokens) * shape.kv_bytes_per_token
    mem = (shape.weight_read_bytes(tokens) + kv_read) / (dev.mem_bw * eff.mem) if dev.known else 0.0
    attn = 4 * shape.layers * shape.attn_width / shape.tp * (decode * context + prompt_tokens * pctx)
    flops = 2 * shape.params_active / shape.tp * tokens + attn
    # small steps use the tensor cores less well: efficiency rises with the tokens of the step
    ceff = eff.compute * tokens / (tokens + eff.compute_half_tokens) if eff.compute_half_tokens else eff.compute
    cmp = flops / (dev.flops * ceff) if dev.known and tokens > 0 else 0.0
    comm = 0.0
    if shape.tp > 1 and dev.link_bw > 0:
        payload = tokens * shape.hidden * shape.act_bytes
        comm = 2 * shape.layers * (2 * (shape.tp - 1) / shape.tp * payload / dev.link_bw + dev.link_latency_s)
    over = eff.step_s + decode * eff.seq_s + prompt_tokens * eff.token_s
    return Step(over + max(mem, cmp) + comm, mem, cmp, comm, over)


@dataclass(frozen=True)
class Prediction:
    concurrency: float
    rate: float  # requests per second
    output_tokens_per_s: float
    ttft_s: float  # mean
    ttft_p95_s: float
    itl_s: float  # mean per-request inter-token latency
    itl_p95_s: float
    latency_s: float
    running: float  # sequences running in the engine (≤ max_num_seqs, KV capacity)
    decode_bound: str
    prefill_bound: str
    capped_by: str = ""  # "max_num_seqs" | "kv_capacity" when concurrency beyond it queues

    def stats(self) -> dict[str, dict[str, float]]:
        """In the shape of loadgen summaries, for SLO.met()."""
        return {"ttft_s": {"p50": self.ttft_s, "p95": self.ttft_p95_s, "p90": self.ttft_p95_s, "p99": self.ttft_p95_s},
                "tpot_s": {"p50": self.itl_s, "p95": self.itl_p95_s, "p90": self.itl_p95_s, "p99": self.itl_p95_s},
                "latency_s": {"p50": self.latency_s, "p95": self.latency_s, "p90": self.latency_s, "p99": self.latency_s}}


def predict(shape: ModelShape, dev: Device, eff: Efficiency, engine: Engine, *, concurrency: float, isl: int,
            osl: int) -> Prediction:
    """Steady state of ``concurrency`` closed-loop clients on one replica
    (each sends its next request when the last one finished): a fixed point
    of Little's law (rate = concurrency / latency) and the step time."""
    n = max(float(concurrency), 1e-6)
    caps = [(engine.max_num_seqs, "max_num_seqs")]
    if engine.kv_tokens:
        caps.append((max(1.0, engine.kv_tokens / max(1, isl + osl)), "kv_capacity"))
    cap, cap_name = min(caps, key=lambda c: c[0])
    running = min(n, cap)
    context = isl + osl / 2
    budget = max(1.0, engine.max_num_batched_tokens - running)
    rate, dec, t_prev, frontend_bound, wait = 0.0, running, 0.0, False, 0.0
    chunks = max(1, math.ceil(isl / budget))
    for _ in range(80):
        dec_step = step_time(shape, dev, eff, decode=dec, prompt_tokens=min(rate * isl * t_prev, budget), context=context,
                             prompt_context=isl / 2)
        pf_step = step_time(shape, dev, eff, decode=dec, prompt_tokens=min(isl, budget), context=context,
                            prompt_context=isl / 2)
        ttft = eff.request_s + (eff.ttft_steps - 1) * dec_step.seconds + chunks * pf_step.seconds
        itl = dec_step.seconds
        run_latency = ttft + (osl - 1) * itl
        # the serial front end is a queue the n clients pass once per request
        wait = frontend_wait(eff.frontend_s, n, run_latency)
        # prompt tokens the engine takes per second cannot exceed what the chunks hold
        new_rate = min(n / (run_latency + wait), running / run_latency, budget / max(isl, 1) / max(pf_step.seconds, 1e-9))
        frontend_bound = bool(eff.frontend_s) and new_rate * eff.frontend_s >= 0.9
        new_dec = new_rate * max(osl - 1, 0) * itl
        done = abs(new_rate - rate) <= 1e-5 * max(new_rate, 1e-9) and abs(new_dec - dec) < 1e-4 * max(dec, 1.0)
        rate = new_rate if not rate else rate + 0.5 * (new_rate - rate)
        dec = dec + 0.5 * (new_dec - dec)
        t_prev = dec_step.seconds
        if done:
            break
    # closed loop: all n clients cycle at the engine's rate; whatever latency the
    # engine and the front end's queue do not explain (beyond max_num_seqs or KV
    # capacity, behind a saturated prefill) is spent waiting before the first token
    run_latency = ttft + (osl - 1) * itl + wait
    total = max(run_latency, n / rate) if rate > 0 else run_latency
    ttft_total = ttft + wait + (total - run_latency)
    return Prediction(
        concurrency=n, rate=n / total, output_tokens_per_s=osl * n / total,
        ttft_s=ttft_total, ttft_p95_s=ttft_total * eff.ttft_p95_ratio, itl_s=itl, itl_p95_s=itl * eff.itl_p95_ratio,
        latency_s=total, running=running,
        decode_bound="frontend" if frontend_bound else dec_step.bound, prefill_bound=pf_step.bound,
        capped_by=cap_name if n > cap else "",
    )


def frontend_wait(service_s: float, n: float, think_s: float) -> float:
    """Time a request spends at a serial front end (``service_s`` each:
    HTTP, the proxy and ingress, tokenizing) when ``n`` closed-loop clients
    spend ``think_s`` elsewhere per request (in the engine): Schweitzer's
    approximate mean value analysis, R = s·(1 + Q·(n−1)/n) with Q = X·R and
    X = n / (think + R), solved in closed form. One client: R = s; many: the
    rate tends to 1/s, with the queueing wait growing smoothly before it
    (a hard cap at 1/s put every client at full speed right up to it)."""
    if service_s <= 0:
        return 0.0
    a = (n - 1) / n if n > 1 else 0.0
    b = think_s - service_s - a * service_s * n
    return (-b + math.sqrt(b * b + 4 * service_s * think_s)) / 2


def with_overrides(eff: Efficiency, **kw: Any) -> Efficiency:
    return replace(eff, **{k: v for k, v in kw.items() if v is not None})


def shape_of(arch, plan, *, name: str, tp: int) -> Optional[ModelShape]:
    """The roofline's view of a model from llmctl.sizing's parameter count and memory plan (None: unknown)."""
    from llmctl import sizing

    try:
        pc = sizing.count_parameters(arch)
    except sizing.SizingError:
        return None
    gib = 1024 ** 3
    total_bytes = plan.weights_gib_total * gib
    per_param = total_bytes / max(pc.total, 1)
    embed_lookup = pc.embedding if pc.lm_head else 0  # tied: the table is read as the lm_head
    matmul_total = pc.total - embed_lookup
    matmul_active = pc.active - embed_lookup
    experts = pc.experts
    moe = arch.moe
    fp8 = (plan.weight_format or "").lower().startswith("fp8") or (plan.weight_format or "").lower() in ("fp8", "float8")
    return ModelShape(
        name=name, tp=tp, params_active=float(matmul_active),
        dense_bytes=(matmul_total - experts) * per_param / tp,
        expert_bytes=experts * per_param / tp,
        experts=moe.num_experts if moe else 0, experts_per_token=moe.num_experts_per_tok if moe else 0,
        kv_bytes_per_token=float(plan.kv_bytes_per_token),
        attn_width=arch.num_attention_heads * arch.head_dim_effective,
        layers=arch.num_hidden_layers, hidden=arch.hidden_size,
        act_bytes=4 if (arch.torch_dtype or "").lower() in ("float32",) else 2, fp8=fp8,
    )
