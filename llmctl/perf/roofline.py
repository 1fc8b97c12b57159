"""One engine step of one replica, as vLLM V1 runs it on a GPU.

An engine step (continuous batching, chunked prefill) runs ``B`` decoding
sequences plus a chunk of ``P`` prompt tokens through every layer. Its time
is the sum of what the step's kernels cost, each at its own roofline:

    t_step = t_0 + B·t_seq + P·t_tok                       (per step, sequence, prompt token: work no TP rank splits)
           + L·t_layer + L_moe·t_moe_layer                 (kernel floors per layer)
           + max(W_dense / (BW·η_mem), F_dense / (F_q·η_gemm[q]))   (dense GEMMs)
           + max(W_touched / (BW·η_moe[q]), F_moe / (F_q·η_moe[q]))  (fused-MoE kernels)
           + max(KV_read / (BW·η_kv), F_attn / (F_bf16·η_attn))  (attention)
           + 2·L·(t_ar + 2·(TP−1)/TP · bytes / link)      (TP all-reduce per layer)

- W_dense: attention projections, dense MLPs, shared experts and lm_head on
  one GPU (read once per step); W_touched: the routed experts the step's
  tokens select (uniform routing: 1 − (1 − k/E)^tokens of them);
- F_q: the tensor-core rate of the weights' format (hardware.py: BF16, FP8,
  FP4 dense TFLOP/s; FP4 weights on a GPU without FP4 tensor cores run at
  the 16-bit rate, vLLM's Marlin / Triton W4A16 kernels);
- attention reads every decoding sequence's KV cache (paged, at its own
  share of the bandwidth) and computes the prompt chunk's queries against
  their context (flash attention, bf16); a sliding-window layer's queries
  see at most its window, a linear-attention layer's none;
- t_layer: what a layer costs whatever its size (a few kernels that each
  take a few microseconds even inside a CUDA graph: the floor a small
  decode batch sees);
- t_0, t_seq, t_tok: the work no TP rank splits, per step, per running
  sequence and per prompt token: the engine core's (scheduling, input
  preparation, sampling, output processing) and what every rank repeats on
  every token (norms, residuals, the router, MoE permutes) — batched over
  the step, not a serial cost per sequence; with CUDA graphs (decode steps)
  the launch cost is in t_0. They are why an 8k-token prefill on 4 or 8
  GPUs takes longer than a quarter or an eighth of one GPU's.

Expert parallelism (``--enable-expert-parallel`` without data parallelism)
deals whole experts out over the TP ranks: the bytes per GPU are the same,
and vLLM's all-gather / reduce-scatter around the MoE layer costs what the
all-reduce it replaces costs, so the step is the same sum.

BW, the TFLOP/s and the link come from llmctl.hardware; every η and
overhead is an :class:`Efficiency` field, fitted on the calibration series
(docs/capacity.md says which on which data). Steady states of a closed or
an open loop of requests over these steps: :mod:`llmctl.perf.steady`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Optional

GB = 1e9


@dataclass(frozen=True)
class ModelShape:
    """What the step needs of one model at one TP size."""

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
    fp8: bool = False  # the dense weights are fp8
    expert_params_active: float = 0.0  # per token, all GPUs: routed-expert parameters a token passes
    dense_kind: str = "bf16"  # tensor-core path of the dense GEMMs: bf16 | fp8 | fp4
    moe_kind: str = ""  # fused-MoE kernel: fp8 (block) | mxfp4 | nvfp4 | bf16 | int8 | int4 ("": dense model)
    moe_layers: int = 0
    ep: bool = False  # --enable-expert-parallel
    attn_layers: int = -1  # layers whose attention sees the whole context (-1: every layer)
    window_layers: int = 0  # sliding-window layers: their queries see at most ``window`` tokens
    window: int = 0

    @property
    def moe(self) -> bool:
        return bool(self.experts) and self.expert_bytes > 0

    @property
    def quant(self) -> str:
        """The weights' precision label, as the calibration data names it: fp4 | fp8 | bf16 (the experts' for a MoE)."""
        kind = self.moe_kind if self.moe else self.dense_kind
        return {"mxfp4": "fp4", "nvfp4": "fp4", "fp4": "fp4", "fp8": "fp8"}.get(kind, "bf16" if kind in ("bf16", "") else kind)

    def touched(self, tokens: float) -> float:
        """Fraction of the routed experts ``tokens`` top-k choices touch (uniform routing)."""
        if not self.moe:
            return 0.0
        return 1 - (1 - self.experts_per_token / self.experts) ** max(tokens, 1)

    def weight_read_bytes(self, tokens: float) -> float:
        """Bytes of weights one GPU reads in a step of ``tokens`` tokens."""
        return self.dense_bytes + self.expert_bytes * self.touched(tokens)


@dataclass(frozen=True)
class Device:
    """A roofline: peak bandwidth (bytes/s), dense FLOP/s per tensor-core dtype and the GPU link."""

    name: str
    mem_bw: float  # bytes/s; math.inf: not modelled (a CPU profile learns overheads only)
    flops: float  # dense BF16 FLOP/s
    link_bw: float = 0.0  # bytes/s per direction
    link_latency_s: float = 10e-6  # unused on a GPU row: Efficiency.ar_s is the fitted all-reduce latency
    fp8_flops: float = 0.0  # 0: no fp8 tensor cores (fp8 weights run at the bf16 rate)
    fp4_flops: float = 0.0  # 0: no fp4 tensor cores (fp4 weights run at the bf16 rate, Marlin W4A16)
    blackwell: bool = False  # SM 10.x: vLLM runs other GEMM / attention kernels there (CUTLASS sm100, FlashInfer TRT-LLM)

    @property
    def known(self) -> bool:
        return 0 < self.mem_bw < math.inf and 0 < self.flops < math.inf

    def rate(self, kind: str) -> float:
        """Dense FLOP/s of the tensor-core path a weight format takes here."""
        if kind == "fp4":
            return self.fp4_flops or self.flops
        if kind == "fp8":
            return self.fp8_flops or self.flops
        return self.flops


def device_of(gpu, **_: Any) -> Device:
    """The roofline of a row of llmctl.hardware.TABLE."""
    if gpu.is_cpu:
        return Device("cpu", math.inf, math.inf)
    return Device(gpu.name, gpu.hbm_gb_s * GB, gpu.bf16_tflops * 1e12, gpu.link_gb_s * GB,
                  fp8_flops=gpu.fp8_tflops * 1e12, fp4_flops=gpu.fp4_tflops * 1e12, blackwell=gpu.blackwell_datacenter)


@dataclass(frozen=True)
class Efficiency:
    """Fractions of the roofline each kind of kernel reaches, and the engine's
    overheads (seconds). The defaults were fitted on the training series of
    tests/data/gpu_serving_measurements.yaml (bench/fit_gpu.py; docs/capacity.md
    lists each with the data it was set on); a CPU profile
    (llmctl.perf.calibrate) refits the overheads."""

    mem: float = 0.95  # of peak HBM bandwidth: dense weights (and a prompt chunk's KV writes)
    kv_mem: float = 0.8169  # of peak HBM bandwidth: decode attention reading the running sequences' paged KV cache
    compute: float = 0.35  # of dense peak FLOP/s, for a weight format with no fitted kernel (and a CPU profile)
    gemm_bf16: float = 0.5786  # dense GEMMs on the 16-bit tensor cores: gemm_fp8's share of the peak (the calibration data has no 16-bit dense model; the fit's 0.205 came from gpt-oss's attention projections and lm_head alone)
    gemm_fp8: float = 0.5786  # dense fp8 GEMMs (CUTLASS / FlashInfer fp8)
    gemm_fp4: float = 0.3411  # dense NVFP4 GEMMs (CUTLASS / FlashInfer fp4)
    moe_fp8: float = 0.2993  # fused-MoE fp8 block-scaled kernels (Triton / DeepGEMM / CUTLASS): of the roofline
    moe_mxfp4: float = 0.8295  # gpt-oss MXFP4 experts (Marlin on Hopper, FlashInfer TRT-LLM on Blackwell)
    moe_nvfp4: float = 0.335  # NVFP4 experts (FlashInfer CUTLASS / TRT-LLM)
    moe_bf16: float = 0.45  # unquantized experts (and int8 / int4 ones, not calibrated)
    moe_mem: float = 0.95  # of peak HBM bandwidth: the fused-MoE kernels streaming the touched experts' weights
    attn: float = 0.4888  # attention's FLOPs (prefill queries against their context; decode) on the 16-bit tensor cores
    layer_s: float = 4.924e-05  # per layer per step whatever its size (kernel floors)
    moe_layer_s: float = 7.01e-06  # more per MoE layer (router, top-k, permute, two grouped GEMMs)
    ar_s: float = 1.282e-05  # per TP all-reduce (NVSwitch one-shot / two-shot custom all-reduce)
    step_s: float = 2.721e-05  # per engine step (scheduler, input preparation, graph launch)
    seq_s: float = 1.899e-05  # per running sequence per step, batched (sampling, output processing)
    token_s: float = 7.196e-06  # per prompt token in a step, whatever the TP size: work every rank repeats on every token (norms, residuals, the router and MoE permutes, the all-reduce's fixed share) and the CPU side of prefill
    api_token_s: float = 0.0  # the API server's work per streamed output token: a parallel stage (TPOT >= B × it)
    frontend_s: float = 0.02  # per request, serial in the API server: a queue (steady.frontend_wait); set on perf_published.yaml gps-h100-qwen3-14b-128 (44 req/s at 128 in / 4 out), never binding on the calibration series (<= 16 req/s)
    request_s: float = 0.0002525  # per request before its first step (HTTP, tokenizing)
    ttft_steps: float = 4.668  # decode steps a new request spends before its prefill: the running one, and in a closed loop of equal requests the prefills of those that finished just before it
    ttft_front: float = 1.0  # the front end's wait counted in TTFT: 1 the client's TTFT, 0 the engine's (vLLM's histogram: plan --slo-at engine)
    ttft_p95_ratio: float = 1.6  # p95 / mean of TTFT
    itl_p95_ratio: float = 1.15  # p95 / mean of the per-request inter-token latency
    compute_half_tokens: float = 127.7  # GEMM rows (tokens; per expert for a fused MoE) at which a GEMM reaches half its kind's efficiency: small-M tiles run part-empty (0: no such loss)
    source: str = "defaults (docs/capacity.md)"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Efficiency":
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in names})

    def gemm(self, kind: str) -> float:
        return {"bf16": self.gemm_bf16, "fp8": self.gemm_fp8, "fp4": self.gemm_fp4}.get(kind, self.compute)

    def moe_eff(self, kind: str) -> float:
        return {"fp8": self.moe_fp8, "mxfp4": self.moe_mxfp4, "nvfp4": self.moe_nvfp4}.get(kind, self.moe_bf16)

    def rows(self, m: float) -> float:
        """The share of a GEMM kind's efficiency reached with ``m`` rows (tokens)."""
        h = self.compute_half_tokens
        return m / (m + h) if h > 0 and m > 0 else 1.0


# the tensor-core path of each fused-MoE kind: MXFP4 runs W4A16 on Hopper (Marlin) and
# MXFP4 x MXFP8 on Blackwell (FlashInfer TRT-LLM, vllm fused_moe/oracle/mxfp4.py): the fp8 rate there
MOE_RATE = {"fp8": "fp8", "nvfp4": "fp4", "mxfp4": "fp8", "bf16": "bf16", "int8": "bf16", "int4": "bf16"}


# dense GEMM kinds whose small-row GEMMs lose efficiency (Efficiency.rows); 16-bit ones are not among them:
# cuBLAS has GEMV-like kernels for a decode batch's few rows
PADDED_GEMMS = frozenset(("fp8", "fp4"))


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
    over = eff.step_s + decode * eff.seq_s + prompt_tokens * eff.token_s
    if not dev.known:
        return Step(over, 0.0, 0.0, 0.0, over)
    over += shape.layers * eff.layer_s + shape.moe_layers * eff.moe_layer_s
    bw = dev.mem_bw
    tp = shape.tp
    # dense GEMMs: the weights once, the FLOPs of every token
    dense_params = max(0.0, shape.params_active - shape.expert_params_active)
    d_mem = shape.dense_bytes / (bw * eff.mem)
    d_rows = eff.rows(tokens) if shape.dense_kind in PADDED_GEMMS else 1.0
    d_cmp = 2 * dense_params / tp * tokens / (dev.rate(shape.dense_kind) * eff.gemm(shape.dense_kind) * d_rows)
    # fused MoE: the experts the tokens touch, streamed at moe_mem; the grouped GEMMs at the kernel's own
    # efficiency, on the rows each touched expert gets (tokens x k / experts touched)
    m_mem = m_cmp = 0.0
    if shape.moe:
        e = eff.moe_eff(shape.moe_kind)
        touched = shape.touched(tokens)
        m_mem = shape.expert_bytes * touched / (bw * eff.moe_mem)
        per_expert = tokens * shape.experts_per_token / max(shape.experts * touched, 1e-9)
        m_cmp = 2 * shape.expert_params_active / tp * tokens / (dev.rate(MOE_RATE.get(shape.moe_kind, "bf16")) * e
                                                                  * eff.rows(per_expert))
    # attention: decode reads each sequence's KV; a prompt chunk's queries see their context (and write their KV)
    a_mem = (decode * context / eff.kv_mem + prompt_tokens / eff.mem) * shape.kv_bytes_per_token / bw
    full = shape.layers if shape.attn_layers < 0 else shape.attn_layers
    seen = full * (decode * context + prompt_tokens * pctx)
    if shape.window_layers:
        w = shape.window
        seen += shape.window_layers * (decode * min(context, w) + prompt_tokens * min(pctx, w))
    a_cmp = 4 * shape.attn_width / tp * seen / (dev.flops * eff.attn)
    mem = d_mem + m_mem + a_mem
    cmp = d_cmp + m_cmp + a_cmp
    kernels = max(d_mem, d_cmp) + max(m_mem, m_cmp) + max(a_mem, a_cmp)
    comm = 0.0
    if tp > 1 and dev.link_bw > 0:
        payload = tokens * shape.hidden * shape.act_bytes
        comm = 2 * shape.layers * (eff.ar_s + 2 * (tp - 1) / tp * payload / dev.link_bw)
    return Step(over + kernels + comm, mem, cmp, comm, over)


def with_overrides(eff: Efficiency, **kw: Any) -> Efficiency:
    return replace(eff, **{k: v for k, v in kw.items() if v is not None})


_MOE_KIND = {"fp8": "fp8", "mxfp4": "mxfp4", "nvfp4": "nvfp4", "int8": "int8", "int4": "int4"}
_DENSE_KIND = {"fp8": "fp8", "nvfp4": "fp4", "mxfp4": "fp4"}


def shape_of(arch, plan, *, name: str, tp: int, dtype: str = "auto", quantization: Optional[str] = None,
             ep: bool = False) -> Optional[ModelShape]:
    """The step's view of a model from llmctl.sizing's parameter count, its
    weight format and the memory plan (None: unknown)."""
    from llmctl import sizing
    from llmctl.sizing.formats import _scheme_bytes

    try:
        pc = sizing.count_parameters(arch)
        fmt = sizing.weight_format(arch, dtype, quantization)
    except sizing.SizingError:
        return None
    gib = 1024 ** 3
    total_bytes = plan.weights_gib_total * gib
    per_param = total_bytes / max(pc.total, 1)
    embed_lookup = pc.embedding if pc.lm_head else 0  # tied: the table is read as the lm_head
    matmul_total = pc.total - embed_lookup
    moe = arch.moe
    experts = pc.experts if moe else 0
    k_frac = moe.num_experts_per_tok / moe.num_experts if moe else 0.0
    expert_b = _scheme_bytes(fmt, "expert") if fmt.scheme else per_param
    expert_bytes = experts * expert_b
    dense_bytes = max(0.0, matmul_total * per_param - expert_bytes) if not fmt.scheme else \
        max(0.0, total_bytes - expert_bytes - embed_lookup * fmt.dtype_bytes)
    scheme = (fmt.scheme or "").lower()
    linear_quantized = bool(fmt.scheme) and (fmt.linear_bytes or fmt.dtype_bytes) < fmt.dtype_bytes
    dense_kind = _DENSE_KIND.get(scheme, "bf16") if linear_quantized else "bf16"
    moe_kind = (_MOE_KIND.get(scheme, "bf16") if fmt.scheme else "bf16") if moe else ""
    moe_layers = 0
    if moe:
        dense_layers = moe.first_k_dense_replace + moe.dense_layers
        moe_layers = max(0, (arch.num_hidden_layers - dense_layers) // moe.layer_step)
    return ModelShape(
        name=name, tp=tp, params_active=float(pc.active - embed_lookup),
        dense_bytes=dense_bytes / tp, expert_bytes=expert_bytes / tp,
        experts=moe.num_experts if moe else 0, experts_per_token=moe.num_experts_per_tok if moe else 0,
        kv_bytes_per_token=float(plan.kv_bytes_per_token),
        attn_width=arch.num_attention_heads * arch.head_dim_effective,
        layers=arch.num_hidden_layers, hidden=arch.hidden_size,
        act_bytes=4 if (arch.torch_dtype or "").lower() in ("float32",) else 2, fp8=dense_kind == "fp8",
        expert_params_active=float(experts * k_frac), dense_kind=dense_kind, moe_kind=moe_kind,
        moe_layers=moe_layers, ep=ep,
        attn_layers=arch.full_attention_layers + arch.chunked_attention_layers,  # chunked (Llama 4): taken as full
        window_layers=arch.sliding_window_layers, window=arch.sliding_window or 0,
    )
