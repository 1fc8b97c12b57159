"""DeepSeek V4's attention as config.json gives it (read by the one converter,
:func:`llmctl.arch.arch_from_hf_config`; the arithmetic is
:mod:`llmctl.sizing.dsv4`).

DeepSeek V4 (vLLM ``vllm/models/deepseek_v4``, read in the 0.23.0 and 0.29.0
sdists) replaces MLA's latent with one 512-wide KV head per layer
(``head_dim``, of which ``qk_rope_head_dim`` rotary), a sliding-window cache
of ``sliding_window`` tokens on every layer, and on the layers whose
``compress_ratios`` entry is 4 or 128 a compressed cache (one entry per 4 or
128 tokens) filled by a compressor with a float32 state; ratio-4 layers also
run an indexer (``index_n_heads`` × ``index_head_dim``) with its own
compressed fp8 key cache. ``hc_mult`` residual streams run through the model
(hyper-connections), ``num_hash_layers`` leading MoE layers route by a token
hash table, and ``o_groups`` / ``o_lora_rank`` factor the output projection.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from pydantic import BaseModel, ConfigDict, Field


class CompressedAttention(BaseModel):
    """DeepSeek V4's per-layer attention facts (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    head_dim: int = Field(gt=0)
    rope_head_dim: int = Field(gt=0)
    q_lora_rank: int = Field(gt=0)
    o_lora_rank: int = Field(gt=0)
    o_groups: int = Field(gt=0)
    window: int = Field(gt=0, description="sliding_window: tokens of the per-layer SWA cache")
    ratios: tuple[int, ...] = Field(description="compress ratio of each decoder layer (1: SWA only)")
    index_n_heads: int = Field(gt=0)
    index_head_dim: int = Field(gt=0)
    index_topk: int = Field(gt=0)
    hc_mult: int = Field(default=1, gt=0)
    num_hash_layers: int = Field(default=0, ge=0)
    expert_dtype: str = "fp4"
    rope_positions: int = Field(default=0, ge=0, description="rows of each fp32 cos/sin cache (yarn: original × factor)")


def compressed_from_config(get: Callable[..., Any], model_type: str, n_layers: int) -> Optional[CompressedAttention]:
    """The V4 facts when ``model_type`` is deepseek_v4 (None otherwise).
    attention.py: ``compress_ratio = max(1, compress_ratios[layer])``; the list
    carries one more entry for the MTP layer, which is not a decoder layer."""
    if not model_type.startswith("deepseek_v4"):
        return None
    ratios = get("compress_ratios") or []
    if not isinstance(ratios, list) or len(ratios) < n_layers:
        return None
    rs = get("rope_scaling") or {}
    positions = int(get("max_position_embeddings", default=0) or 0)
    if rs.get("original_max_position_embeddings") and rs.get("factor"):
        positions = int(rs["original_max_position_embeddings"] * rs["factor"])  # DeepseekScalingRotaryEmbedding
    return CompressedAttention(
        head_dim=int(get("head_dim")), rope_head_dim=int(get("qk_rope_head_dim")), q_lora_rank=int(get("q_lora_rank")),
        o_lora_rank=int(get("o_lora_rank")), o_groups=int(get("o_groups", default=1)), window=int(get("sliding_window")),
        ratios=tuple(max(1, int(r)) for r in ratios[:n_layers]), index_n_heads=int(get("index_n_heads")),
        index_head_dim=int(get("index_head_dim")), index_topk=int(get("index_topk")),
        hc_mult=int(get("hc_mult", default=1)), num_hash_layers=int(get("num_hash_layers", default=0) or 0),
        expert_dtype=str(get("expert_dtype", default="fp4")), rope_positions=positions,
    )
