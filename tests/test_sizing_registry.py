"""Every architecture the reference vLLM serves is either modelled by llmctl's
converter or reported as approximate — never sized as exact without being
modelled (issue 36). The architectures are vLLM 0.29.0's ``_VLLM_MODELS``,
read from its registry.py by tools/build_vllm_registry.py into the committed
table tests/data/vllm_registry-0.29.0.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmctl.arch import arch_from_hf_config
from llmctl.arch_families import MODELLED_ARCHITECTURES
from llmctl.catalog import load_catalog
from llmctl.vllm_version import FALLBACK_VLLM_VERSION
from llmctl.sizing import plan

DATA = Path(__file__).parent / "data"
REGISTRY = json.loads((DATA / "vllm_registry-0.29.0.json").read_text(encoding="utf-8"))
ARCHS = REGISTRY["architectures"]
# the fields every decoder config.json has, so that only `architectures` decides
COMMON = dict(model_type="generic", num_hidden_layers=4, hidden_size=256, intermediate_size=512, num_attention_heads=4,
              num_key_value_heads=2, vocab_size=1000, max_position_embeddings=4096)


def test_the_table_is_the_pinned_vllm_s():
    assert REGISTRY["vllm"] == FALLBACK_VLLM_VERSION  # Ray 2.60's pin, the version plans model by default
    assert len(ARCHS) > 300 and "DeepseekV4ForCausalLM" in ARCHS


def test_modelled_architectures_are_vllm_s():
    """Every name llmctl claims to model is one the reference vLLM serves (no stale spelling)."""
    assert MODELLED_ARCHITECTURES <= set(ARCHS), sorted(MODELLED_ARCHITECTURES - set(ARCHS))


@pytest.mark.parametrize("name", sorted(ARCHS))
def test_every_registry_architecture_is_modelled_or_approximate(name):
    a = arch_from_hf_config({**COMMON, "architectures": [name]})
    if name in MODELLED_ARCHITECTURES:
        assert a.approximate is None
        return
    assert a.approximate and name in a.approximate
    p = plan(a, gpu_memory_bytes=80 * 1024**3, tp=1, max_model_len=2048, gpu_name="H100")
    assert p.approximate and "architecture" in p.approximate_kinds
    assert any(name in w for w in p.warnings)


def test_an_unmodelled_architecture_never_does_not_fit_unless_its_weights_alone_exceed_the_band():
    """A model llmctl does not model is 'tight: it may not start' just over the budget, and 'does
    not fit' only when the weights alone, at the low edge of the band, exceed it."""
    from llmctl.sizing import MARGINS, weight_bytes

    known = load_catalog()["llama-3.1-8b-instruct"].architecture
    a = known.model_copy(update={"architectures": ["SomeNewForCausalLM"],
                                 "approximate": arch_from_hf_config({**COMMON, "architectures": ["SomeNewForCausalLM"]}).approximate})
    wb = weight_bytes(a, tp=1).per_gpu
    band = MARGINS["architecture"]
    just_over = int(wb / 0.9 / 1.02)
    p = plan(a, gpu_memory_bytes=just_over, tp=1, max_model_len=4096, gpu_memory_utilization=0.9, gpu_name="H100")
    assert p.verdict == "tight" and p.may_not_start
    beyond = int(wb * (1 - band) / 0.9 * 0.98)
    assert plan(a, gpu_memory_bytes=beyond, tp=1, max_model_len=4096, gpu_memory_utilization=0.9,
                gpu_name="H100").verdict == "does_not_fit"
