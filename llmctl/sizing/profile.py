"""What vLLM's start-up memory profile takes besides weights and KV cache:
peak activation, non-torch memory, CUDA graphs; vLLM's batch defaults."""

from __future__ import annotations

from llmctl.catalog import ModelArch
from llmctl.sizing.formats import GIB

# vLLM's default gpu_memory_utilization (CacheConfig).
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9

# Non-torch memory per GPU (CUDA context share, cuBLAS workspaces and, when a
# replica spans several GPUs with tensor parallelism, the NCCL and custom
# all-reduce buffers) that vLLM's profiler subtracts.  vLLM 0.19 on H100 logs
# (llm-d-planner accuracy/results/v0.19.0, "Actual usage is ... GiB for
# non-torch memory"): 0.25-0.26 GiB at TP1, 2.07 GiB at TP2, 2.21 GiB at TP4,
# 0.07 GiB with pipeline parallelism only.  Older logs: 0.35 GiB (RTX 3090,
# vllm-project/vllm#10517), 1.79 / 3.58 GiB (H100 TP1 / TP2, #10511).
NON_TORCH_GIB_SINGLE = 0.3
NON_TORCH_GIB_TP = 2.1

# Peak activation of vLLM's profiling run (GPUModelRunner.profile_run: a
# forward pass over max_num_batched_tokens dummy tokens, then a dummy sampler
# run over max_num_seqs rows of float32 logits of the full vocabulary).
#   act = T × 2 B × ACT_HIDDEN_COPIES × hidden
#       + max_num_seqs × vocab × 4 B × SAMPLER_COPIES
# Fitted to the "GiB for peak activation" figures vLLM 0.19 logs on H100 with
# its defaults T = 8192, max_num_seqs = 1024 (llm-d-planner
# accuracy/results/v0.19.0): Llama-3.1-8B 1.89 GiB at TP 1, 2 and 4 (it does
# not shrink with TP, so the MLP intermediate — freed inside compiled graphs —
# is not the peak), Qwen2.5-7B / Qwen3-8B 2.21, gemma-2-9b 3.65, gemma-3-27b
# 3.99, gpt-oss-20b (TP2) 2.87, Llama-3.3-70B (TP4) 1.97.  With 4 hidden copies
# the sampler term needs 3.0-3.5 copies of the logits in every one of them
# (logits, softmax probabilities, the top-k/top-p sort); we take 3.25.
ACT_BYTES = 2
ACT_HIDDEN_COPIES = 4
SAMPLER_BYTES = 4
SAMPLER_COPIES = 3.25

# CUDA graphs.  vLLM >= 0.21 subtracts its profiled CUDA-graph estimate from
# the KV budget (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, "default since
# v0.21.0" in vllm/v1/worker/gpu_worker.py); earlier versions captured the
# graphs afterwards, out of the 1 − gpu_memory_utilization slack.  Pools seen:
# 0.91-1.14 GiB at TP1 and 1.55-1.66 GiB at TP2/TP4 (vLLM 0.19, H100,
# "CUDA graph pool memory: X GiB (actual)"), 0.51-1.85 GiB over 50 runs
# (llm-d-planner accuracy report).  We reserve 1.0 GiB (1.5 GiB with TP > 1).
CUDA_GRAPH_GIB = 1.0
CUDA_GRAPH_GIB_TP = 1.5

def default_max_num_batched_tokens(gpu_memory_bytes: int) -> int:
    """vLLM's default for the OpenAI server (EngineArgs.get_batch_defaults):
    16384 on GPUs of ≥160 GiB, 8192 on ≥70 GiB (H100/H200), 2048 otherwise."""
    if gpu_memory_bytes >= 160 * GIB:
        return 16384
    if gpu_memory_bytes >= 70 * GIB:
        return 8192
    return 2048


def default_max_num_seqs(gpu_memory_bytes: int) -> int:
    """vLLM's default max_num_seqs (EngineArgs.get_batch_defaults): 1024 on
    GPUs of ≥70 GiB, 256 otherwise."""
    return 1024 if gpu_memory_bytes >= 70 * GIB else 256


def activation_bytes(arch: ModelArch, *, tp: int = 1, max_num_batched_tokens: int = 8192, max_num_seqs: int = 256) -> int:
    """Peak activation memory of vLLM's profiling run on one GPU:
    ``T × 2 B × 4 × hidden + max_num_seqs × vocab × 4 B × 3.25`` (constants
    ACT_* and SAMPLER_* above).  The same on every TP rank: vLLM's logged
    peak does not shrink with TP (the logits are all-gathered to full vocab)."""
    h = arch.hidden_size
    forward = max_num_batched_tokens * ACT_BYTES * ACT_HIDDEN_COPIES * h
    sampler = max_num_seqs * (arch.vocab_size or 0) * SAMPLER_BYTES * SAMPLER_COPIES
    return int(forward + sampler)


def non_torch_bytes(tp: int = 1, pp: int = 1) -> int:
    """Memory outside PyTorch's allocator per GPU (NON_TORCH_GIB_*)."""
    gib = NON_TORCH_GIB_TP if tp > 1 else NON_TORCH_GIB_SINGLE
    return int(gib * GIB)


def cuda_graph_bytes(tp: int = 1) -> int:
    """CUDA-graph memory current vLLM reserves from the KV budget (CUDA_GRAPH_GIB*)."""
    return int((CUDA_GRAPH_GIB_TP if tp > 1 else CUDA_GRAPH_GIB) * GIB)


