"""Memory arithmetic: does a model fit, at which TP, with how much KV cache.

Pure functions over a :class:`~llmctl.catalog.ModelArch` (no I/O, no printing).
The model follows what vLLM (V1 engine) does at start-up, step by step:

1. ``Worker.determine_available_memory`` (vllm/v1/worker/gpu_worker.py):
   ``available KV = total_memory × gpu_memory_utilization − (weights +
   peak activation + non-torch memory) − CUDA-graph estimate``.
2. ``get_kv_cache_configs`` / ``get_max_concurrency_for_kv_cache_config``
   (vllm/v1/core/kv_cache_utils.py): the KV pool is split into blocks of
   ``block_size`` (16) tokens; for hybrid sliding-window models the hybrid
   allocator groups layers and a request holds at most ``window − 1 +
   max_num_batched_tokens`` tokens in each sliding group.  vLLM logs
   ``GPU KV cache size: N tokens`` = max concurrency × max_model_len, and
   refuses to start when one max_model_len request does not fit.

Modules: :mod:`.formats` (bytes per dtype / quantization), :mod:`.params`
(parameter counts, TP rules), :mod:`.weights` (bytes per GPU), :mod:`.kv` (KV bytes and
capacity), :mod:`.profile` (activation, non-torch, CUDA graphs),
:mod:`.versions` (which vLLM is modelled and what changes with its version:
defaults, switches), :mod:`.replica` (one replica's plan and verdict), :mod:`.advice` (the
one TP / max_model_len rule every caller uses).  Every constant carries its
source next to it; docs/sizing.md has the method, the published vLLM figures
it is checked against and where it is weakest.
"""

from llmctl.sizing.advice import (  # noqa: F401
    DEFAULT_CONTEXT_CAP,
    Choice,
    advise_tp,
    align_len,
    choose,
    default_context,
    plan_for_gpu,
    sizing_options,
    layout_problem,
    nodes_of,
    tp_problem_on_node,
    tp_sizes_on_node,
)
from llmctl.sizing.autoscale import (  # noqa: F401
    DEFAULT_EXPECTED_TOKENS,
    IngressScaling,
    Targets,
    derive_targets,
    ingress_autoscaling,
)
from llmctl.sizing.formats import (  # noqa: F401
    DTYPE_CHOICES,
    FP8_BYTES,
    GIB,
    INT4_BYTES,
    INT8_BYTES,
    KV_CACHE_DTYPE_CHOICES,
    MXFP4_BYTES,
    SizingError,
    WeightFormat,
    kv_dtype_bytes,
    weight_format,
)
from llmctl.sizing.kv import (  # noqa: F401
    BLOCK_SIZE,
    KVCapacity,
    kv_bytes_per_token,
    kv_bytes_per_token_layer,
    kv_bytes_per_token_replica,
    kv_capacity,
)
from llmctl.sizing.params import (  # noqa: F401
    VOCAB_PADDING,
    ParamCount,
    count_parameters,
    pp_partition,
    safetensors_total_bytes,
    tp_problem,
    valid_tp_sizes,
)
from llmctl.sizing.weights import WeightBytes, weight_bytes  # noqa: F401
from llmctl.sizing.replica import (  # noqa: F401
    APPROXIMATE_MARGIN,
    ESTIMATE_MARGIN,
    MARGINS,
    TIGHT_CONCURRENCY,
    Plan,
    estimate_margin,
    plan,
)
from llmctl.hardware import GPUType as GPUTraits, find_device as gpu_traits  # noqa: F401  (the GPU table is llmctl.hardware)
from llmctl.sizing.profile import (  # noqa: F401
    Overheads,
    activation_bytes,
    cuda_graph_bytes,
    default_max_num_batched_tokens,
    default_max_num_seqs,
    moe_workspace_bytes,
    non_torch_bytes,
    overheads,
)
from llmctl.sizing.versions import (  # noqa: F401
    VllmVersion,
    default_gpu_memory_utilization,
    default_vllm_version,
    parse_vllm_version,
)
