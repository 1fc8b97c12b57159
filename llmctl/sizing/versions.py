"""Which vLLM the plan models, and what changes with its version.

vLLM's start-up memory accounting changed several times between 0.8.5 and
0.33 (docs/vllm-memory-profile.md reads the tagged PyPI sdists).  A plan
therefore models one version: by default the vLLM the installed Ray pins
(:func:`default_vllm_version`, which lives in :mod:`llmctl.vllm_version` with
the rest of "which vLLM": engine-argument checks use the same one) — the
cluster's vLLM, not one installed next to llmctl.  Every switch below names the vLLM file and
the versions it was read in.
"""

from __future__ import annotations

from typing import Optional

from llmctl.sizing.formats import GIB
from llmctl.vllm_version import (  # noqa: F401  (re-exported: the plan's version is the one every check uses)
    FALLBACK_VLLM_VERSION,
    VersionTuple,
    VllmVersion,
    default_vllm_version,
    parse_vllm_version,
)

# The range docs/vllm-memory-profile.md read (sdists 0.8.5 ... 0.33.0).  A plan
# for a version outside it is marked approximate.
MODELLED_FIRST: VersionTuple = (0, 8, 5)
MODELLED_LAST: VersionTuple = (0, 33, 99)


def modelled(v: VllmVersion) -> bool:
    return MODELLED_FIRST <= v.release <= MODELLED_LAST


def version_problem(v: VllmVersion) -> Optional[str]:
    """Why the memory model does not cover this version (None when it does)."""
    if modelled(v):
        return None
    lo, hi = "{}.{}.{}".format(*MODELLED_FIRST), "0.{}".format(MODELLED_LAST[1])
    if v.release < MODELLED_FIRST:
        return f"vLLM {v.label} predates the modelled range ({lo}-{hi}; the V0 engine's profile differs)"
    return f"vLLM {v.label} is newer than the modelled range ({lo}-{hi})"


# --------------------------------------------------------------------------
# Defaults


def default_gpu_memory_utilization(v: Optional[VllmVersion] = None) -> float:
    """CacheConfig.gpu_memory_utilization (vllm/config/cache.py): 0.9 up to
    0.19.0, ``Field(default=0.92)`` from 0.20.0 (read in 0.20.0 ... 0.33.0)."""
    v = v or default_vllm_version()
    return 0.92 if v.at_least(20) else 0.9


def batch_defaults(v: VllmVersion, nvml_total_bytes: int, device_name: str) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) of the OpenAI server
    (engine/arg_utils.py EngineArgs.get_batch_defaults), keyed on the NVML
    total (``get_device_total_memory``, nvidia-smi's figure) and device name:

    - 0.28+: >= 160 GiB -> 16384 / 1024;
    - 0.9.0+: >= 70 GiB and "a100" not in the name -> 8192 / 1024 (0.8.5: no
      A100 exception);
    - otherwise 2048 / 256.
    """
    if v.at_least(28) and nvml_total_bytes >= 160 * GIB:
        return 16384, 1024
    a100 = "a100" in device_name.lower() and v.at_least(9)
    if nvml_total_bytes >= 70 * GIB and not a100:
        return 8192, 1024
    return 2048, 256


def cudagraph_capture_sizes(max_num_seqs: int, max_num_batched_tokens: int, *, blackwell: bool = False,
                            v: Optional[VllmVersion] = None) -> list[int]:
    """Decode batch sizes vLLM captures (config/vllm.py
    VllmConfig._set_cudagraph_sizes, 0.19): ``[1, 2, 4] + range(8, 256, 8) +
    range(256, max + 1, 16)`` up to ``max = min(2 × max_num_seqs, 512, T)``;
    0.29+: 1024 instead of 512 on data-centre Blackwell."""
    cap = 1024 if (blackwell and (v is None or v.at_least(29))) else 512
    top = min(2 * max_num_seqs, cap, max_num_batched_tokens)
    sizes = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, cap + 1, 16))
    return [s for s in sizes if s <= top]


# --------------------------------------------------------------------------
# Switches of the profile (docs/vllm-memory-profile.md §1-§4, §7)


def cuda_graphs_subtracted(v: VllmVersion) -> bool:
    """vLLM takes its CUDA-graph estimate out of the KV budget from 0.20.0
    (envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default "1"; "0" in 0.18
    and 0.19, no estimate before 0.18: graphs came out of the 1 −
    gpu_memory_utilization slack)."""
    return v.at_least(20)


def sampler_bytes_per_logit(v: VllmVersion) -> int:
    """Bytes per logit the dummy sampler run holds at its peak (model dtype
    bf16), by the top-k/top-p path vLLM takes (v1/sample/ops/topk_topp_sampler.py):

    - FlashInfer (default up to 0.11.0 when installed — the vllm-openai images
      ship it — and again from 0.21): bf16 logits 2 + float32 copy 4 + masked
      logits 4 + probabilities 4 = 14;
    - PyTorch (0.11.1-0.16: FlashInfer is opt-in, "Users must opt in explicitly
      via VLLM_USE_FLASHINFER_SAMPLER=1"): ``logits.sort`` over R ≥ 128 rows runs
      PyTorch's segmented_sort_pairs (aten/src/ATen/native/cuda/SortStable.cu),
      which holds, besides the 2 + 4 of the logits, the sorted values 4, int64
      indices 8, an int64 reverse-index array 8 and cub's alternate key/value
      buffers 4 + 8 = 38 (later steps of apply_top_k_top_p peak lower, 28);
    - 0.17-0.20: Triton sorts in place (14, plus the buffer of
      :func:`triton_sampler_buffer`)."""
    if v.release >= (0, 11, 1) and not v.at_least(17):
        return 38
    return 14


# config/vllm.py DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (0.23.0 read; 0.29.0 still lists them)
MRV2_FIRST_ARCHITECTURES = frozenset({"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"})


def model_runner_v2(v: VllmVersion, architectures: list[str], *, moe: bool, quantized: bool, hybrid: bool) -> bool:
    """Whether vLLM builds the engine with Model Runner V2 (config/vllm.py
    ``use_v2_model_runner``; docs/vllm-memory-2026.md F3): opt-in up to 0.21;
    0.22-0.24 by default for the architectures of
    :data:`MRV2_FIRST_ARCHITECTURES` that are neither MoE nor quantized (0.23.0
    ``_is_default_v2_model_runner_model``); 0.25-0.28 for generate models that
    are neither hybrid nor MoE (0.25 read; 0.26-0.28 not read, taken as 0.25);
    every architecture from 0.29 (0.29.0: only unsupported features fall back)."""
    if not v.at_least(22):
        return False
    if v.at_least(29):
        return True
    if v.at_least(25):
        return not moe and not hybrid
    return any(a in MRV2_FIRST_ARCHITECTURES for a in architectures) and not moe and not quantized


def mrv2_sampler_bytes_per_logit(tp: int) -> int:
    """Model Runner V2's profile sampler (v1/worker/gpu/model_runner.py
    ``_dummy_sampler_run``, 0.29): a dummy batch has no sampling parameters, so
    the logits pass unchanged (no float32 copy, no top-k/top-p sort) and only
    the bf16 logits count, with TP > 1 the all-gather's output and its
    re-layout together (base_device_communicator.py all_gather)."""
    return 2 if tp == 1 else 4


def triton_sampler_buffer(v: VllmVersion) -> bool:
    """0.17-0.20: apply_top_k_top_p_triton keeps ``buffer = logits.new_empty(
    (min(next_power_of_2(R), num_SMs), vocab))`` in float32."""
    return v.at_least(17) and not v.at_least(21)


def moe_workspace_persistent(v: VllmVersion) -> bool:
    """0.14+: FusedMoEModularKernel takes its workspaces from the per-device
    WorkspaceManager (v1/worker/workspace.py), kept across the sampler run;
    ≤ 0.13: fused_experts_impl allocated them per call, freed after each layer."""
    return v.at_least(14)


def comm_init_counted(v: VllmVersion) -> bool:
    """0.9.2-0.10.2 take the memory snapshot before init_worker_distributed_
    environment, so communicator buffers allocated at init count as non-torch
    memory; 0.11.0+ initialise the distributed environment first
    (gpu_worker.py init_device)."""
    return v.release >= (0, 9, 2) and not v.at_least(11)


def nccl_connects_eagerly(v: VllmVersion) -> bool:
    """0.8.5-0.10.1 force NCCL_CUMEM_ENABLE=0 (env_override.py), so NCCL
    connects every ring/tree at ncclCommInitRank; 0.10.2 dropped it (vllm PR
    #24141) and NCCL connects lazily at the first collective."""
    return not v.release >= (0, 10, 2)


def fi_allreduce_fusion(v: VllmVersion, pp: int) -> bool:
    """FlashInfer all-reduce + RMSNorm fusion at the default -O2 (config/vllm.py
    enable_allreduce_rms_fusion, 0.17+) — also needs TP > 1 and SM 9.0/10.x
    (checked by the caller); 0.17-0.20 and 0.23 also require PP == 1."""
    if not v.at_least(17):
        return False
    if pp > 1 and ((v.at_least(17) and not v.at_least(21)) or (v.at_least(23) and not v.at_least(24))):
        return False
    return True


def hybrid_allocator(v: VllmVersion) -> bool:
    """0.9.2+ group sliding-window and full-attention layers
    (kv_cache_utils._get_kv_cache_config_uniform_page_size); 0.8.5-0.9.0
    allocate sliding layers as full attention (unify_hybrid_kv_cache_specs)."""
    return v.release >= (0, 9, 2)


def mxfp4_triton_layout(v: VllmVersion, compute_capability: tuple[int, int]) -> Optional[tuple[bool, bool]]:
    """How gpt-oss's MXFP4 experts sit in memory on Hopper (compute capability
    9.x): from 0.12 vLLM vendors triton_kernels (vllm/third_party/triton_kernels)
    and picks its TRITON MoE backend there (quantization/mxfp4.py
    get_mxfp4_backend up to 0.18; fused_moe/oracle/mxfp4.py's gpt-oss priority
    list from 0.19), which swizzles the weights instead of padding them to
    Marlin's tiles (the 0.19.0 H100 log: "Using 'TRITON' Mxfp4 MoE backend").
    Returns (prepad64, scales_kept), or None (other GPUs, vLLM before 0.12:
    the padded Marlin / FlashInfer layouts):

    - prepad64: tensor_details/layout_details/hopper_value.py pre-pads both
      byte dimensions to 64 (0.17.0 ... 0.21.0; not in 0.12-0.16 nor 0.22+);
    - scales_kept: the checkpoint's e8m0 scales stay registered beside their
      swizzled copy until 0.25.0 adds ``del layer.w13_weight_scale``.

    Read in the 0.12.0 ... 0.33.0 wheels (0.12.0, 0.13.0, 0.14.0/.1, 0.15.0/.1,
    0.16.0, 0.17.0/.1, 0.18.0, 0.19.0/.1, 0.20.0/.2, 0.21.0-0.33.0)."""
    if compute_capability[0] != 9 or not v.at_least(12):
        return None
    return v.at_least(17) and not v.at_least(22), not v.at_least(25)


def checkpoint_kv_cache_dtype(v: VllmVersion, kv_cache_dtype: Optional[str], declared: Optional[str]) -> Optional[str]:
    """The KV cache dtype vLLM runs with: from 0.14 an "auto" kv_cache_dtype
    becomes what a ModelOpt checkpoint declares (engine/arg_utils.py
    create_engine_config: resolve_kv_cache_dtype_string, read in 0.14.0 ...
    0.29.0; not in 0.13.0); otherwise as given."""
    if (kv_cache_dtype or "auto").strip().lower() == "auto" and declared and v.at_least(14):
        return declared
    return kv_cache_dtype


def sparse_mla_kv_cache_dtype(v: VllmVersion, kv_cache_dtype: str, compute_capability: tuple[int, int],
                              heads_per_rank: int) -> str:
    """The page layout of an fp8 KV cache on a sparse-MLA model (DeepSeek V3.2,
    GLM-5): the attention backend decides (model_executor/layers/attention/
    mla_attention.py: FLASHMLA_SPARSE converts fp8 to DeepSeek's fp8_ds_mla,
    656 B a token and layer; FLASHINFER_MLA_SPARSE keeps the standard 576 B
    layout). platforms/cuda.py _get_backend_priorities puts FlashInfer's
    first on compute capability 10.x for an fp8 cache from 0.19 (read in
    0.19.0, 0.26.0, 0.29.0), and in 0.17-0.18 when a rank has at most 16
    heads; elsewhere (Hopper; 0.26+'s SM120 backend converts too) and
    before 0.17, fp8_ds_mla. A cache that is not fp8 is returned as given."""
    key = (kv_cache_dtype or "auto").strip().lower()
    if key not in ("fp8", "fp8_e4m3", "fp8_e5m2"):
        return kv_cache_dtype
    if compute_capability[0] == 10 and (v.at_least(19) or (v.at_least(17) and heads_per_rank <= 16)):
        return kv_cache_dtype
    return "fp8_ds_mla"
