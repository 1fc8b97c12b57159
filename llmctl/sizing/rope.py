"""RoPE cos/sin caches: buffers vLLM builds on the GPU with the model, so its
"Model loading took X GiB" includes them.

vLLM's ``get_rope`` (``model_executor/layers/rotary_embedding/__init__.py``)
builds one ``RotaryEmbedding`` per distinct (head size, rotary dim, max
position, rope parameters) and registers ``cos_sin_cache`` — ``[positions,
rotary_dim]`` (``ModelArch.rotary_dim``: fewer than head_dim with a partial
rotary factor) in the model dtype (``torch.get_default_dtype()`` while the
model is built) — as a buffer on every rank and pipeline stage.  How many
positions it covers depends on the scaling type (``base.py``,
``linear_scaling_rope.py``, ``yarn_scaling_rope.py``,
``deepseek_scaling_rope.py``, ``mrope.py``):

- default, llama3, dynamic, longrope: ``max_position_embeddings``
- linear: ``max_position_embeddings × factor`` (one cache per factor)
- yarn / deepseek_yarn: ``original_max_position_embeddings × factor``
- M-RoPE (``mrope_section``): ``max_position_embeddings × 4``
  (``MRotaryEmbedding``: "We enlarge max_position_embeddings to 4 times")

It is small for most models (32 MiB for 131,072 positions × 128) but not for
long-context ones: Llama 4 Scout's 10,485,760 positions × 128 × 2 B = 2.5 GiB
on every GPU; Gemma 3's global layers (linear × 8 over 131,072 positions ×
256) 512 MiB beside the local layers' 64 MiB.
"""

from __future__ import annotations

from llmctl.arch import ModelArch

# MRotaryEmbedding's positions_factor default (vllm mrope.py)
MROPE_POSITIONS_FACTOR = 4


def _positions(max_pos: int, rs: dict) -> int:
    kind = str(rs.get("rope_type") or rs.get("type") or "default").lower()
    try:
        factor = float(rs.get("factor", 1.0) or 1.0)
    except (TypeError, ValueError):
        factor = 1.0
    if "mrope_section" in rs or kind == "mrope":
        return max_pos * MROPE_POSITIONS_FACTOR
    if kind == "linear":
        return int(max_pos * factor)
    if kind in ("yarn", "deepseek_yarn", "deepseek_llama_scaling"):
        try:
            return int(int(rs["original_max_position_embeddings"]) * factor)
        except (KeyError, TypeError, ValueError):  # vLLM requires it; a config without it: the plain length
            return max_pos
    return max_pos


def rope_cache_elements(arch: ModelArch) -> int:
    """Elements of every distinct cos/sin cache the model builds (0 when the
    maximum position is unknown; DeepSeek V4 counts its own, sizing/dsv4.py)."""
    if arch.compressed is not None or not arch.max_position_embeddings:
        return 0
    max_pos = int(arch.max_position_embeddings)
    rs = arch.rope_scaling if isinstance(arch.rope_scaling, dict) else {}
    if arch.mla is not None:
        return _positions(max_pos, rs) * arch.mla.qk_rope_head_dim
    hd = arch.head_dim_effective
    mt = arch.model_type
    if mt.startswith(("gemma3", "gemma4")) and arch.sliding_window_layers:
        # gemma3.py / gemma3n.py / gemma4.py: the sliding layers' rope (rope_local_base_freq, no scaling)
        # differs from the full layers' (scaled; Gemma 4: proportional over global_head_dim) -> two caches
        full_hd = arch.full_head_dim or hd
        return max_pos * hd + _positions(max_pos, rs) * full_hd
    return _positions(max_pos, rs) * (arch.rotary_dim or hd)


def rope_cache_bytes(arch: ModelArch, dtype_bytes: float) -> int:
    """Bytes of the model's rope caches on every GPU (replicated, every stage)."""
    return int(rope_cache_elements(arch) * dtype_bytes)
