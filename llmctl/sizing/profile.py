"""What vLLM's start-up memory profile takes besides weights and KV cache —
peak activation, non-torch memory, CUDA graphs — per GPU and pipeline stage,
for a given vLLM version (docs/vllm-memory-profile.md is the source reading;
docs/sizing.md the method and its accuracy).

Every term is vLLM's own arithmetic except four constants that only a
measurement gives (:data:`ACT_RESIDUAL_GIB`, :data:`NON_TORCH_BASE_GIB`,
:data:`NVSWITCH_COMM_GIB`, :data:`CUDA_GRAPH_MIB_PER_GRAPH`); those are
calibrated on the llm-d vLLM 0.19 H100 logs only (``bench/sizing.py
--calibrate`` recomputes them, tests/test_sizing.py checks they agree) and
every other published figure in tests/data is held out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from llmctl.arch import ModelArch
from llmctl.hardware import GPUType as GPUTraits, find_device as gpu_traits
from llmctl.sizing.formats import GIB, WeightFormat
from llmctl.sizing.params import _layers, pp_partition
from llmctl.sizing.weights import expert_width_per_rank
from llmctl.sizing.versions import (
    VllmVersion,
    batch_defaults,
    comm_init_counted,
    cuda_graphs_subtracted,
    cudagraph_capture_sizes,
    default_gpu_memory_utilization,
    default_vllm_version,
    fi_allreduce_fusion,
    moe_workspace_persistent,
    nccl_connects_eagerly,
    model_runner_v2,
    mrv2_sampler_bytes_per_logit,
    sampler_bytes_per_logit,
    triton_sampler_buffer,
)

MIB = 1024**2

# --------------------------------------------------------------------------
# Measured constants (llm-d-planner accuracy/results/v0.19.0 logs, vLLM 0.19.0,
# H100 80GB; "Actual usage is W GiB for weight, A GiB for peak activation, N GiB
# for non-torch memory, and G GiB for CUDAGraph memory").

# What the profile's activation peak holds beyond the terms below (cuBLAS /
# attention workspaces, allocator rounding): logged "peak activation" −
# modelled terms, averaged over the 9 text-only fit logs that print it
# (0.031-0.038 GiB each; vision models excluded: their encoder run is extra).
ACT_RESIDUAL_GIB = 0.034

# Non-torch memory of one worker without communicators (lazily loaded kernels,
# library handles): "GiB for non-torch memory" at TP 1 — 0.25-0.27 GiB in the 7
# fit logs at TP 1 (mean 0.256).  Held-out logs show it varies: 0.02 GiB (RTX
# 4090, vLLM 0.10.2), 0.13 GiB (H100, vLLM 0.14).
NON_TORCH_BASE_GIB = 0.26

# Extra non-torch memory per GPU with tensor parallelism on NVSwitch H100s
# (NCCL buffers connected during the profile, FlashInfer all-reduce fusion
# workspace; docs/vllm-memory-profile.md §3): logged non-torch at TP − the TP 1
# base.  TP 2: 2.07 GiB (gpt-oss-20b, Mixtral-8x7B); TP 4: 2.21 (Llama-3.3-70B
# fp8), 2.17 (Llama-4-Scout).
NVSWITCH_COMM_GIB = {2: 1.81, 4: 1.93}

# CUDA-graph estimate vLLM ≥ 0.20 subtracts, per captured graph descriptor
# (gpu_model_runner.profile_cudagraph_memory: first capture + per-graph × (n − 1)
# per mode; no closed form).  The 11 pools the fit logs print ("GiB for
# CUDAGraph memory", the actual pool of vLLM 0.19 at the defaults: 51 capture
# sizes, FULL_AND_PIECEWISE = 102 descriptors) are 0.91-1.84 GiB, mean 1.30
# GiB = 13.1 MiB per descriptor.  vLLM ≥ 0.20 subtracts its estimate, which
# differs from the actual pool by ~10 % (qwen3-32b-l20-tp2 log: 0.93 vs 1.04).
CUDA_GRAPH_MIB_PER_GRAPH = 13.1

# --------------------------------------------------------------------------
# Derived from the source (docs/vllm-memory-profile.md §3.1), not measured.

# NCCL NVLS buffers (transport/nvls.cc ncclNvlsBufferSetup, NVLS on NVSwitch
# Hopper/Blackwell with > 2 GPUs): nChannels(16) × 2 × 128 KiB × 8 steps × TP.
def _nvls_bytes(tp: int) -> int:
    return 16 * 2 * 128 * 1024 * 8 * tp if tp > 2 else 0


# FlashInfer all-reduce + RMSNorm fusion workspace (0.17+, SM 9.0/10.x, TP > 1):
# buffer + 3 Lamport buffers of tp × max_token_num × hidden × 2 B, with
# max_token_num = min(FI_ALLREDUCE_FUSION_MAX_SIZE_MB[tp] / (hidden × 2), T)
# (config/vllm.py; FlashInfer trtllm_create_ipc_workspace_for_all_reduce_fusion).
FI_FUSION_MAX_MB = {2: 64, 4: 2, 6: 0.5, 8: 0.5}


def _fi_fusion_bytes(tp: int, hidden: int, tokens: int) -> int:
    cap = FI_FUSION_MAX_MB.get(tp, 0.5) * MIB
    return int(4 * tp * min(cap, tokens * hidden * 2))


# Custom all-reduce (custom_all_reduce.py): 2 × 8 MiB IPC buffers + 8 MiB
# rank_data; enabled for TP 2/4/6/8 over NVLink, or TP 2 over PCIe.
CUSTOM_AR_BYTES = 24 * MIB

# NCCL buffers of one communicator: ~100 MB with NCCL_MAX_NCHANNELS=16, ~52 MB
# with 8 (vllm PR #18242); a profile connects two (the TP group's PyNccl
# communicator and torch's device group).  Used where nothing was measured:
# PCIe GPUs and pre-Hopper NVLink (A100), which lack the buffers vLLM enables
# on SM 9.0/10.x only (symmetric-memory all-reduce, FlashInfer fusion, NVLS).
NCCL_COMM_BYTES = 2 * 100 * 1000**2


# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Stage:
    """Overheads of one GPU of one pipeline stage, in bytes."""

    activation: int
    non_torch: int
    cuda_graphs: int

    @property
    def total(self) -> int:
        return self.activation + self.non_torch + self.cuda_graphs


@dataclass(frozen=True)
class Overheads:
    stages: tuple[Stage, ...]
    max_num_batched_tokens: int
    max_num_seqs: int
    # why these figures are less certain: (kind, reason); kinds as plan.MARGINS
    approximate: tuple[tuple[str, str], ...] = field(default_factory=tuple)


def _stage_layers(arch: ModelArch, pp: int) -> list[tuple[int, int]]:
    """(dense-MLP layers, MoE layers) on each pipeline stage."""
    layers = _layers(arch)
    out, start = [], 0
    for n in pp_partition(arch.num_hidden_layers, pp):
        part = layers[start:start + n]
        out.append((sum(1 for l in part if l.mlp_split), sum(1 for l in part if l.experts)))
        start += n
    return out


# vLLM's all2all backends for expert parallelism (vllm/config/parallel.py ParallelConfig.all2all_backend):
# the default all-gathers and reduce-scatters through the DP group and reserves nothing beforehand; the
# DeepEP backends create a deep_ep.Buffer per rank of VLLM_DEEPEP_BUFFER_SIZE_MB (vllm/envs.py: 1024) for
# NVLink and, across nodes, as much again for RDMA (high throughput; low latency's RDMA size is DeepEP's
# get_low_latency_rdma_size_hint, taken as the same here) (distributed/device_communicators/all2all.py).
DEFAULT_ALL2ALL_BACKEND = "allgather_reducescatter"
DEEPEP_BUFFER_MIB = 1024


def all2all_buffer_bytes(backend: str, internode: bool) -> int:
    """Bytes one rank reserves outside torch for the MoE all-to-all."""
    if not str(backend).startswith("deepep"):
        return 0
    return DEEPEP_BUFFER_MIB * MIB * (2 if internode else 1)


def moe_workspace_bytes(arch: ModelArch, tokens: int, tp: int = 1, *, expert_parallel: bool = False,
                        act_bytes: int = 2) -> int:
    """The fused-MoE workspaces at ``tokens`` tokens (TritonExperts.workspace_shapes:
    (M, topk, max(N/2, K)) and (M, topk, max(N, K)) with N = 2 × I per rank,
    K = hidden; 0.18+ M = T).  With expert parallelism the layer runs with
    tp_size 1 (FusedMoEParallelConfig.make), so I is not split."""
    m = arch.moe
    if m is None:
        return 0
    i_rank = expert_width_per_rank(arch, tp, expert_parallel)
    h = arch.hidden_size
    return act_bytes * tokens * m.num_experts_per_tok * (max(i_rank, h) + max(2 * i_rank, h))


def _activation(arch, v: VllmVersion, traits: GPUTraits, fmt: WeightFormat, *, tp, stage, pp, dense, moe,
                T, S, expert_parallel, act_bytes, dp: int = 1, naive_dispatch: bool = True) -> int:
    """Peak of GPUModelRunner.profile_run on one GPU of stage ``stage``
    (docs/vllm-memory-profile.md §2): a forward pass over T dummy tokens,
    then — on the last stage only — the dummy sampler run over R = min(S, T)
    rows of full-vocabulary logits (all-gathered: the same on every TP rank)."""
    a = act_bytes
    h = arch.hidden_size
    V = arch.vocab_size or 0
    R = min(S, T)
    last = stage == pp - 1
    persistent = 0
    # Forward: residual + hidden (2·T·h, not sharded) and the largest piece
    # between two attention ops — the dense MLP's gate_up + activation
    # (3·I/TP per token) or attention's q/k/v projection.
    if arch.mla is not None:
        m = arch.mla
        attn = arch.num_attention_heads // tp * (m.qk_nope_head_dim + m.qk_rope_head_dim) + m.kv_lora_rank + m.qk_rope_head_dim
    else:
        attn = (arch.num_attention_heads // tp + 2 * max(1, arch.num_key_value_heads // tp)) * arch.head_dim_effective
    piece = attn
    if dense:
        dense_inter = (arch.moe.dense_intermediate_size if arch.moe else None) or arch.intermediate_size
        piece = max(piece, 3 * -(-dense_inter // tp))
    hc = arch.compressed.hc_mult if arch.compressed is not None else 1  # DeepSeek V4: hc_mult residual streams
    forward = a * T * (2 * h * hc + piece)
    # Data-parallel attention with the default all2all backend (allgather_reducescatter): every MoE layer
    # all-gathers the hidden states of all DP ranks before its experts run and reduce-scatters after
    # (fused_moe/runner/moe_runner.py do_naive_dispatch_combine; device_communicators/all2all.py
    # AgRsAll2AllManager), and the profile run gives every rank T tokens: the experts see DP x T tokens.
    Tm = T * dp if (moe and dp > 1 and naive_dispatch) else T
    if Tm > T:
        forward += a * (Tm - T) * h  # the gathered hidden states beside this rank's own
    if moe and (fmt.expert_scheme or fmt.scheme) != "mxfp4":  # gpt-oss's MXFP4 experts show no workspace in the 0.19 logs
        if moe_workspace_persistent(v):
            persistent += moe_workspace_bytes(arch, Tm, tp, expert_parallel=expert_parallel, act_bytes=a)
        else:  # ≤ 0.13: fused_experts_impl, per call: cache13 + cache2 over min(T, 32768) tokens
            i_rank = expert_width_per_rank(arch, tp, expert_parallel)
            forward += a * min(Tm, 32768) * arch.moe.num_experts_per_tok * (max(2 * i_rank, h) + i_rank)
    if stage > 0:  # make_empty_intermediate_tensors: hidden_states + residual of T tokens (V4: T × hc_mult × h)
        persistent += (hc if hc > 1 else 2) * T * h * a
    sampler = a * T * h  # the forward's output stays alive
    if last:
        mrv2 = model_runner_v2(v, arch.architectures, moe=arch.moe is not None, quantized=fmt.scheme is not None,
                               hybrid=bool(arch.linear_attention_layers or arch.sliding_window_layers))
        if mrv2:
            sampler += R * V * mrv2_sampler_bytes_per_logit(tp)
        else:
            per_logit = sampler_bytes_per_logit(v) - (2 if a == 4 else 0)  # no float32 copy of float32 logits
            sampler += R * V * per_logit + 2 * a * R * h  # + the R last rows and their rand_like
        if not mrv2 and triton_sampler_buffer(v) and R >= 8:
            persistent += min(1 << (R - 1).bit_length(), traits.sm_count) * V * 4
    return int(persistent + max(forward, sampler) + ACT_RESIDUAL_GIB * GIB)


# Qwen3-VL's profile video (vllm/model_executor/models/qwen3_vl.py, qwen2_vl.py, vLLM 0.11-0.12):
# get_num_frames_with_most_features caps the dummy video at _MAX_FRAMES_PER_VIDEO = 24,576 frames, which the
# video processor's pixel cap and its 32-pixel floor leave at 32 x 32: 2 x 2 patches per temporal pair, one merged
# token each; get_max_video_tokens counts every merged token 12.5 times (its "<t seconds>" timestamp text).
QWEN3_VL_PROFILE_FRAMES = 24576
QWEN3_VL_TOKEN_TEXT = 12.5


def mm_profile_hold_bytes(arch: ModelArch, v: VllmVersion, T: int, max_model_len: Optional[int],
                          video: bool = True) -> int:
    """What vLLM 0.11-0.12's profile_run keeps of its multimodal dummy
    batch through the text dummy run and the sampler run, on every TP rank
    (gpu_model_runner.profile_run): for Qwen3-VL one dummy video (its
    tokens per item, 12,288 merged tokens × 12.5, are more than an image's),
    whose encoder output is copied into a zero tensor of the encoder budget's
    rows (0.11: max(max_num_batched_tokens, tokens per item); 0.12: tokens
    per item) kept as encoder_cache["tmp"], beside the output itself and the
    float32 pixel tensor. Read from the 0.11.0 / 0.12.0 wheels; vLLM 0.32
    keeps only the real output, so other versions get 0 here (the plan says
    the vision profile is approximate); so does a deployment whose video
    limit is 0 (``video``: its dummy item is an image, not read)."""
    tower = arch.vision_tower
    if (not video or tower is None or tower.model_type != "qwen3_vl" or not tower.output_width or not tower.patch_values
            or not ((0, 11) <= v.release[:2] <= (0, 12))):
        return 0
    pairs = QWEN3_VL_PROFILE_FRAMES // 2  # temporal pairs of 32 x 32 frames: one merged token and 4 patches each
    if max_model_len is not None and max_model_len < pairs:
        return 0  # a shorter context stops the frame search earlier: not read
    per_item = int(pairs * QWEN3_VL_TOKEN_TEXT)
    rows = max(T, per_item) if v.release[:2] == (0, 11) else per_item
    return (rows + pairs) * tower.output_width * 2 + 4 * pairs * tower.patch_values * 4


def _comm(traits: GPUTraits, v: VllmVersion, tp: int, pp: int, hidden: int, T: int,
          why: list[tuple[str, str]]) -> int:
    """Non-torch memory tensor parallelism adds to one worker."""
    if tp < 2:
        return 0
    fi = fi_allreduce_fusion(v, pp) and traits.hopper_or_newer
    if traits.interconnect == "nvswitch" and traits.hopper_or_newer:
        known = max([k for k in NVSWITCH_COMM_GIB if k <= tp] or [2])
        b = NVSWITCH_COMM_GIB[known] * GIB + _nvls_bytes(tp) - _nvls_bytes(known)
        # the measured figures (0.19, PP 1, Hopper) include the FlashInfer fusion workspace
        if not fi:
            b -= _fi_fusion_bytes(known, hidden, T)
        elif tp != known:
            b += _fi_fusion_bytes(tp, hidden, T) - _fi_fusion_bytes(known, hidden, T)
        if tp not in NVSWITCH_COMM_GIB:
            why.append(("comm", f"multi-GPU communication memory measured at TP {', '.join(map(str, NVSWITCH_COMM_GIB))} only; "
                       f"TP {tp} extrapolated"))
    else:
        b = NCCL_COMM_BYTES
        if fi:  # SM 9.0 / 10.x boards without NVSwitch (H200 NVL's NVLink bridges) still build the fusion workspace
            b += _fi_fusion_bytes(tp, hidden, T)
        link = "PCIe" if traits.interconnect == "pcie" else f"{traits.name} NVLink"
        why.append(("comm", f"multi-GPU communication memory over {link} not measured (NCCL buffer size from vllm PR #18242)"))
    if comm_init_counted(v):
        # snapshot before dist init: custom all-reduce IPC buffers count; with
        # NCCL_CUMEM_ENABLE=0 (≤ 0.10.1) NCCL connected its rings at init too
        if traits.interconnect == "nvswitch" or tp == 2:
            b += CUSTOM_AR_BYTES
        why.append(("comm", f"vLLM {v.label} counts communicator buffers allocated at start-up"
                    + (" (NCCL connects eagerly)" if nccl_connects_eagerly(v) else "") + "; not measured"))
    return int(max(b, 0))


def cuda_graph_estimate_bytes(v: VllmVersion, traits: GPUTraits, max_num_seqs: int, max_num_batched_tokens: int) -> int:
    """vLLM's CUDA-graph estimate: CUDA_GRAPH_MIB_PER_GRAPH per descriptor —
    PIECEWISE for every capture size, FULL for those ≤ max_num_seqs
    (FULL_AND_PIECEWISE, the default since 0.11)."""
    sizes = cudagraph_capture_sizes(max_num_seqs, max_num_batched_tokens, blackwell=traits.blackwell_datacenter, v=v)
    n = len(sizes) + (sum(1 for s in sizes if s <= max_num_seqs) if v.at_least(11) else 0)
    return int(n * CUDA_GRAPH_MIB_PER_GRAPH * MIB)


def overheads(
    arch: ModelArch,
    fmt: WeightFormat,
    *,
    gpu_memory_bytes: int,
    gpu_name: Optional[str] = None,
    tp: int = 1,
    pp: int = 1,
    vllm_version: Optional[VllmVersion] = None,
    max_num_batched_tokens: Optional[int] = None,
    max_num_seqs: Optional[int] = None,
    enforce_eager: bool = False,
    expert_parallel: bool = False,
    count_cuda_graphs: Optional[bool] = None,
    dp: int = 1,
    all2all_backend: Optional[str] = None,
    internode: bool = False,
    max_model_len: Optional[int] = None,
    video_profiled: bool = True,
) -> Overheads:
    """Activation, non-torch and CUDA-graph bytes per GPU of each pipeline
    stage, as the given vLLM version subtracts them before sizing the KV cache.
    ``dp``: data-parallel attention ranks (the MoE layers see DP x T tokens
    with the default all2all backend); ``all2all_backend``: vLLM's
    ``all2all_backend`` (:func:`all2all_buffer_bytes`); ``internode``: the EP
    group spans nodes; ``max_model_len``, ``video_profiled``: the multimodal
    profile item depends on them (:func:`mm_profile_hold_bytes`)."""
    v = vllm_version or default_vllm_version()
    traits = gpu_traits(gpu_name, gpu_memory_bytes)
    dT, dS = batch_defaults(v, gpu_memory_bytes, traits.name)
    T = max_num_batched_tokens or dT
    S = max_num_seqs or dS
    act_bytes = 4 if fmt.dtype_bytes == 4 else 2
    why: list[tuple[str, str]] = []
    nt = int(NON_TORCH_BASE_GIB * GIB) + _comm(traits, v, tp, pp, arch.hidden_size, T, why)
    backend = all2all_backend or DEFAULT_ALL2ALL_BACKEND
    if arch.moe is not None and dp > 1:
        a2a = all2all_buffer_bytes(backend, internode)
        if a2a:
            nt += a2a
            why.append(("all2all", f"all2all backend {backend}: DeepEP's buffers taken as VLLM_DEEPEP_BUFFER_SIZE_MB "
                                   f"({DEEPEP_BUFFER_MIB} MiB) per rank{' for NVLink and again for RDMA' if internode else ''}"))
    if v.release < (0, 9, 2):
        why.append(("version", f"vLLM {v.label} counts everything on the device outside torch (CUDA context, other processes)"))
    graphs = count_cuda_graphs if count_cuda_graphs is not None else cuda_graphs_subtracted(v)
    cg = 0 if (enforce_eager or not graphs) else cuda_graph_estimate_bytes(v, traits, S, T)
    mm = mm_profile_hold_bytes(arch, v, T, max_model_len, video_profiled)  # the encoder runs where the embeddings are made: stage 0
    stages = tuple(
        Stage(
            _activation(arch, v, traits, fmt, tp=tp, stage=s, pp=pp, dense=dense, moe=moe, T=T, S=S,
                        expert_parallel=expert_parallel, act_bytes=act_bytes, dp=dp,
                        naive_dispatch=backend == DEFAULT_ALL2ALL_BACKEND) + (mm if s == 0 else 0),
            nt, cg,
        )
        for s, (dense, moe) in enumerate(_stage_layers(arch, pp))
    )
    return Overheads(stages, T, S, tuple(dict.fromkeys(why)))


# --------------------------------------------------------------------------
# The single-figure helpers llmctl.sizing has always exported.


def default_max_num_batched_tokens(gpu_memory_bytes: int, vllm_version: Optional[VllmVersion] = None,
                                   gpu_name: Optional[str] = None) -> int:
    """vLLM's server default (versions.batch_defaults): 16384 on ≥ 160 GiB
    GPUs (0.28+), 8192 on ≥ 70 GiB (not A100), 2048 otherwise."""
    v = vllm_version or default_vllm_version()
    return batch_defaults(v, gpu_memory_bytes, gpu_traits(gpu_name, gpu_memory_bytes).name)[0]


def default_max_num_seqs(gpu_memory_bytes: int, vllm_version: Optional[VllmVersion] = None,
                         gpu_name: Optional[str] = None) -> int:
    """vLLM's server default max_num_seqs: 1024 where the batched-token default
    is ≥ 8192, else 256."""
    v = vllm_version or default_vllm_version()
    return batch_defaults(v, gpu_memory_bytes, gpu_traits(gpu_name, gpu_memory_bytes).name)[1]


def activation_bytes(arch: ModelArch, *, tp: int = 1, max_num_batched_tokens: int = 8192, max_num_seqs: int = 256,
                     vllm_version: Optional[VllmVersion] = None, gpu_memory_bytes: int = 80 * GIB,
                     gpu_name: Optional[str] = None) -> int:
    """Peak activation of the profiling run on one GPU (PP 1, bf16)."""
    from llmctl.sizing.formats import weight_format

    o = overheads(arch, weight_format(arch), gpu_memory_bytes=gpu_memory_bytes, gpu_name=gpu_name, tp=tp,
                  vllm_version=vllm_version, max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs)
    return o.stages[-1].activation


def non_torch_bytes(tp: int = 1, pp: int = 1, *, vllm_version: Optional[VllmVersion] = None,
                    gpu_name: Optional[str] = "H100", hidden_size: int = 4096, max_num_batched_tokens: int = 8192) -> int:
    """Non-torch memory per GPU: the base plus what tensor parallelism adds."""
    v = vllm_version or default_vllm_version()
    return int(NON_TORCH_BASE_GIB * GIB) + _comm(gpu_traits(gpu_name, 80 * GIB), v, tp, pp, hidden_size,
                                                 max_num_batched_tokens, [])


def cuda_graph_bytes(tp: int = 1, *, vllm_version: Optional[VllmVersion] = None, max_num_seqs: int = 1024,
                     max_num_batched_tokens: int = 8192, gpu_name: Optional[str] = "H100") -> int:
    """The CUDA-graph estimate the KV budget loses (0 for vLLM < 0.20)."""
    v = vllm_version or default_vllm_version()
    if not cuda_graphs_subtracted(v):
        return 0
    return cuda_graph_estimate_bytes(v, gpu_traits(gpu_name, 80 * GIB), max_num_seqs, max_num_batched_tokens)


__all__ = [
    "ACT_RESIDUAL_GIB", "CUDA_GRAPH_MIB_PER_GRAPH", "NON_TORCH_BASE_GIB",
    "NVSWITCH_COMM_GIB", "Overheads", "Stage", "activation_bytes", "cuda_graph_bytes", "cuda_graph_estimate_bytes",
    "default_gpu_memory_utilization", "default_max_num_batched_tokens", "default_max_num_seqs",
    "moe_workspace_bytes", "non_torch_bytes", "overheads",
]
