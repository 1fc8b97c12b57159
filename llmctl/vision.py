"""Vision towers counted from ``vision_config`` (docs/vllm-memory-2026.md §5,
each formula read from vLLM 0.29's model file): parameters, the part every
TP rank holds in full (patch / position embeddings, norms, Gemma 3's
projector), and the most tokens one image becomes (the encoder profile's
item). A tower whose formula llmctl does not have gives ``parameters=None``
and the plan says its weights are not counted.
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict


class VisionTower(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model_type: str
    parameters: Optional[int] = None  # None: no formula for this tower
    replicated: int = 0  # parameters every TP rank holds in full
    hidden_size: Optional[int] = None
    depth: Optional[int] = None
    intermediate_size: Optional[int] = None
    tokens_per_item: Optional[int] = None  # the most (merged) tokens one image gives the language model
    buffer_per_token: int = 0  # persistent bytes per batched token allocated with the model (Qwen3-VL deepstack)
    output_width: Optional[int] = None  # elements of one output row (Qwen3-VL: out_hidden_size × (1 + deepstack levels))
    patch_values: Optional[int] = None  # pixel values of one patch (channels × temporal_patch_size × patch_size²)


def _vit_layers(n: int, d: int, f: int, gated: bool, norm: int) -> int:
    """``n`` encoder layers: qkv + proj with biases, the MLP (gated SiLU with
    biases, or fc1/fc2), ``norm`` parameters of norms per layer."""
    mlp = (2 * d * f + 2 * f) + (f * d + d) if gated else (d * f + f) + (f * d + d)
    return n * (norm + (3 * d * d + 3 * d) + (d * d + d) + mlp)


def _qwen25_vl(v: dict) -> VisionTower:
    d, f, n = int(v["hidden_size"]), int(v["intermediate_size"]), int(v["depth"])
    p, t, m, o = int(v.get("patch_size", 14)), int(v.get("temporal_patch_size", 2)), int(v.get("spatial_merge_size", 2)), int(v["out_hidden_size"])
    patch = 3 * t * p * p * d
    md = m * m * d
    merger = d + (md * md + md) + (md * o + o)
    return VisionTower(model_type="qwen2_5_vl", parameters=patch + _vit_layers(n, d, f, True, 2 * d) + merger,
                       replicated=patch + n * 2 * d + d, hidden_size=d, depth=n, intermediate_size=f,
                       tokens_per_item=12845056 // (p * m) ** 2)


def _qwen3_vl(v: dict, text_hidden: int) -> VisionTower:
    d, f, n = int(v["hidden_size"]), int(v["intermediate_size"]), int(v["depth"])
    p, t, m, o = int(v.get("patch_size", 16)), int(v.get("temporal_patch_size", 2)), int(v.get("spatial_merge_size", 2)), int(v["out_hidden_size"])
    positions = int(v.get("num_position_embeddings", 2304))
    deep = len(v.get("deepstack_visual_indexes") or [])
    patch = 3 * t * p * p * d + d
    md = m * m * d
    merger = 2 * d + (md * md + md) + (md * o + o)
    deep_mergers = deep * (2 * md + (md * md + md) + (md * o + o))
    params = patch + positions * d + _vit_layers(n, d, f, False, 4 * d) + merger + deep_mergers
    return VisionTower(model_type="qwen3_vl", parameters=params, replicated=patch + positions * d + n * 4 * d,
                       hidden_size=d, depth=n, intermediate_size=f, tokens_per_item=12845056 // (p * m) ** 2,
                       buffer_per_token=deep * text_hidden * 2, output_width=o * (1 + deep), patch_values=3 * t * p * p)


def _siglip(v: dict, text_hidden: int, model_type: str) -> VisionTower:
    d, f, n = int(v["hidden_size"]), int(v["intermediate_size"]), int(v["num_hidden_layers"])
    p, size = int(v.get("patch_size", 14)), int(v.get("image_size", 896))
    patch = 3 * p * p * d + d
    pos = (size // p) ** 2 * d
    projector = d * text_hidden + d
    params = patch + pos + _vit_layers(n, d, f, False, 4 * d) + 2 * d + projector
    return VisionTower(model_type=model_type, parameters=params, replicated=patch + pos + n * 4 * d + 2 * d + projector,
                       hidden_size=d, depth=n, intermediate_size=f, tokens_per_item=256)


def _clip_llava(v: dict, text_hidden: int, feature_layer: Any, newline: bool) -> VisionTower:
    """LLaVA / LLaVA-NeXT's CLIP tower as vLLM builds it (llava.py
    init_vision_tower_for_llava, clip.py CLIPVisionModel): a bias-free patch
    convolution, the class embedding, (image / patch)² + 1 positions and the
    pre-LayerNorm; only the layers up to ``vision_feature_layer`` (−2: all but
    the last), without the post-LayerNorm then; per layer q/k/v/out with
    biases, two LayerNorms, fc1/fc2 with biases. Then the two-layer projector
    (vision hidden → text hidden → text hidden, biases) and LLaVA-NeXT's
    image_newline row. The layers and the projector are TP-split."""
    d, f, n = int(v["hidden_size"]), int(v["intermediate_size"]), int(v["num_hidden_layers"])
    p, size = int(v.get("patch_size", 14)), int(v.get("image_size", 336))
    layer = int(feature_layer) if isinstance(feature_layer, int) else -2
    kept = n + layer + 1 if layer < 0 else layer  # vllm get_layer_index
    embed = 3 * p * p * d + d + ((size // p) ** 2 + 1) * d + 2 * d
    layers = kept * (4 * (d * d + d) + 4 * d + (d * f + f) + (f * d + d)) + (2 * d if kept == n else 0)
    projector = d * text_hidden + text_hidden + text_hidden * text_hidden + text_hidden + (text_hidden if newline else 0)
    return VisionTower(model_type="clip_vision_model", parameters=embed + layers + projector,
                       replicated=embed + kept * 4 * d + (text_hidden if newline else 0), hidden_size=d, depth=kept,
                       intermediate_size=f)


def _gemma4(v: dict, text_hidden: int) -> VisionTower:
    """transformers Gemma4VisionModel (modeling_gemma4.py): a linear patch
    embedder 3·p²·D, a 2 × position_embedding_size × D position table, per layer
    q/k/v/o D × heads·head_dim, q/k norms, four RMSNorms and a gated MLP 3·D·F;
    the multimodal embedder D × text hidden."""
    d, f, n = int(v["hidden_size"]), int(v["intermediate_size"]), int(v["num_hidden_layers"])
    p = int(v.get("patch_size", 16))
    inner = int(v.get("num_attention_heads", 16)) * int(v.get("head_dim", d // int(v.get("num_attention_heads", 16))))
    pos = 2 * int(v.get("position_embedding_size", 10240)) * d
    patch = 3 * p * p * d
    layers = n * (4 * d * inner + 2 * (inner // int(v.get("num_attention_heads", 16))) + 4 * d + 3 * d * f)
    projector = d * text_hidden + d
    return VisionTower(model_type="gemma4_vision", parameters=patch + pos + layers + projector,
                       replicated=patch + pos + n * 4 * d + projector, hidden_size=d, depth=n, intermediate_size=f,
                       tokens_per_item=int(v.get("default_output_length", 280)))


def gemma4_audio_parameters(a: dict, text_hidden: int) -> int:
    """Gemma 4's audio tower and its embedder (vLLM gemma4_mm.py: transformers'
    Gemma4AudioModel built with AutoModel.from_config — not TP-split — and
    Gemma4MultimodalEmbedder's output_proj_dims × text hidden projection).
    The conformer (modeling_gemma4.py): two 3×3 subsampling convolutions and
    an input projection of (channels[0] / 4) × channels[1] inputs; per layer two macaron FFNs
    (d × 4d each way, two norms), q/k/v/post and relative-key projections,
    a light convolution (d → 2d, depthwise k, d → d, two norms) and three
    norms; an output projection d → output_proj_dims with bias. Missing keys
    take transformers' Gemma4AudioConfig defaults (those of the released
    E-series checkpoints: 12 × 1024, 8 heads, channels 128/32, kernel 5, 1536);
    304,824,608 parameters for those, as transformers counts them."""
    d, n = int(a.get("hidden_size", 1024)), int(a.get("num_hidden_layers", 12))
    heads, k = int(a.get("num_attention_heads", 8)), int(a.get("conv_kernel_size", 5))
    c0, c1 = (list(a.get("subsampling_conv_channels") or [128, 32]) + [32])[:2]
    out = int(a.get("output_proj_dims") or 1536)
    sub = c0 * 9 + c0 + c1 * c0 * 9 + c1 + d * (c0 // 4) * c1  # input_proj_linear: (channels[0] // 4) x channels[1] -> d
    layer = 2 * (8 * d * d + 2 * d) + 5 * d * d + d // heads + (3 * d * d + d * k + 2 * d) + 3 * d
    return sub + n * layer + out * d + out + out * text_hidden


def vision_from_config(cfg: dict, *, model_type: str, text_hidden: Any) -> Optional[VisionTower]:
    """The tower of a multimodal config.json (None when it has no vision_config);
    Gemma 4's audio tower, when its config has one, is counted with it
    (replicated: vLLM builds it with transformers' modules)."""
    tower = _vision(cfg, model_type=model_type, text_hidden=text_hidden)
    a = cfg.get("audio_config")
    if tower is not None and tower.parameters is not None and isinstance(a, dict) and tower.model_type == "gemma4_vision":
        extra = gemma4_audio_parameters(a, int(text_hidden) if isinstance(text_hidden, int) else 0)
        tower = tower.model_copy(update={"parameters": tower.parameters + extra, "replicated": tower.replicated + extra})
    return tower


def _vision(cfg: dict, *, model_type: str, text_hidden: Any) -> Optional[VisionTower]:
    v = cfg.get("vision_config")
    if not isinstance(v, dict):
        return None
    vt = str(v.get("model_type") or "")
    th = int(text_hidden) if isinstance(text_hidden, int) else 0
    try:
        if model_type in ("qwen2_5_vl",) or vt == "qwen2_5_vl":
            return _qwen25_vl(v)
        if model_type.startswith(("qwen3_vl", "qwen3_5")) or vt.startswith(("qwen3_vl", "qwen3_5")):
            return _qwen3_vl(v, th)  # Qwen3.5 / 3.6 keep Qwen3-VL's tower (no deepstack mergers when none are listed)
        if vt == "gemma4_vision" or (not vt and model_type.startswith("gemma4")):  # a copy without the tower's model_type
            return _gemma4(v, th)
        if model_type == "gemma3" and vt in ("siglip_vision_model", "") and "hidden_size" in v:
            return _siglip(v, th, "siglip")
        if model_type in ("llava", "llava_next") and vt == "clip_vision_model":
            return _clip_llava(v, th, cfg.get("vision_feature_layer", -2), newline=model_type == "llava_next")
    except (KeyError, TypeError, ValueError):
        pass
    return VisionTower(model_type=vt or model_type)
