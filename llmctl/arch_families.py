"""The architectures llmctl's converter models from vLLM's source
(:func:`llmctl.arch.arch_from_hf_config`); any other ``architectures`` entry
is sized as a generic decoder from config.json's common fields and the plan
says so (approximate, the "architecture" band; it never says "does not fit"
unless the weights alone, at the low edge of that band, exceed the memory).

Each name is a key of vLLM 0.29's ``_VLLM_MODELS``
(``vllm/model_executor/models/registry.py``; the committed table
tests/data/vllm_registry-0.29.0.json, written by
tools/build_vllm_registry.py, is what tests/test_sizing_registry.py walks).
A family is listed when every tensor and cache vLLM builds for it is one the
converter reads (docs/sizing.md, "Any config.json"); parts it still does not
read make the plan approximate on their own (a vision tower without a
formula, an unknown quantization).
"""

from __future__ import annotations

MODELLED_ARCHITECTURES = frozenset({
    # dense GQA / MHA decoders (llama.py, qwen2.py, qwen3.py, mistral, phi3.py, gemma*.py)
    "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Phi3ForCausalLM",
    "GemmaForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration",
    "Gemma3nForCausalLM", "Gemma3nForConditionalGeneration", "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration",
    # mixture of experts (mixtral.py, qwen2_moe.py, qwen3_moe.py, gpt_oss.py, glm4_moe.py, minimax_m2.py)
    "MixtralForCausalLM", "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "GptOssForCausalLM", "Glm4MoeForCausalLM",
    "MiniMaxM2ForCausalLM",
    # MLA, sparse MLA and DeepSeek V4 (deepseek_v2.py, models/deepseek_v32, models/deepseek_v4; GLM-5's DSA)
    "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV4ForCausalLM",
    "GlmMoeDsaForCausalLM",
    # hybrids (qwen3_next.py, qwen3_5.py, granitemoehybrid.py, nemotron_h.py, llama4.py's chunked attention)
    "Qwen3NextForCausalLM", "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM", "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration", "GraniteMoeHybridForCausalLM", "Llama4ForConditionalGeneration",
    "NemotronHForCausalLM",  # nemotron_h.py: hybrid_override_pattern blocks, latent MoE
    "Llama4ForCausalLM",
    # vision-language towers with a formula (llmctl/vision.py)
    "Qwen2_5_VLForConditionalGeneration", "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration",
})


def unmodelled_reason(architectures: list[str]) -> str | None:
    """Why a config whose ``architectures`` llmctl does not model is sized approximately (None when modelled)."""
    if any(a in MODELLED_ARCHITECTURES for a in architectures):
        return None
    name = architectures[0] if architectures else "unknown"
    return (f"{name} is not an architecture llmctl models from vLLM's source: sized as a generic decoder "
            "from config.json's common fields (its own layers and caches not modelled)")
