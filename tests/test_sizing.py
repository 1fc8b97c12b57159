"""llmctl.sizing: hand-computed cases, published parameter counts and the
accuracy table against published vLLM start-up figures.

Every expected number is either computed by hand in a comment next to it or
comes from a published source (tests/data/*.yaml) — never from the code.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from llmctl.catalog import resolve_model
from llmctl.sizing import (
    BLOCK_SIZE,
    GIB,
    SizingError,
    advise_tp,
    count_parameters,
    kv_bytes_per_token,
    kv_bytes_per_token_replica,
    kv_capacity,
    plan,
    pp_partition,
    safetensors_total_bytes,
    tp_problem,
    valid_tp_sizes,
    weight_bytes,
)

from llmctl.hardware import GPUS

DATA = Path(__file__).parent / "data"
H100 = int(79.19 * GIB)  # vLLM 0.19's total for an H100 80GB (see llmctl/hardware.py)
H100_GPU = GPUS["H100"]
assert H100_GPU.memory_bytes == H100


def arch(repo: str):
    return resolve_model(repo, allow_remote=False).architecture


def _bench():
    spec = importlib.util.spec_from_file_location("bench_sizing", Path(__file__).parents[1] / "bench" / "sizing.py")
    mod = importlib.util.module_from_spec(spec)
    import sys

    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


# --------------------------------------------------------------------------
# KV bytes per token


def test_kv_llama_8b_tp1_is_128_kib():
    # 2 (K,V) × 32 layers × 8 KV heads × 128 head_dim × 2 B = 131072 B = 128 KiB
    assert kv_bytes_per_token(arch("meta-llama/Llama-3.1-8B-Instruct"), tp=1) == 128 * 1024


def test_kv_llama_70b_tp4_is_80_kib_per_gpu():
    # 2 × 80 layers × (8 / 4 = 2) heads × 128 × 2 B = 81920 B = 80 KiB per GPU
    a = arch("meta-llama/Llama-3.1-70B-Instruct")
    assert kv_bytes_per_token(a, tp=4) == 80 * 1024
    # the whole replica holds 4 × 80 KiB = 2 × 80 × 8 × 128 × 2 B
    assert kv_bytes_per_token_replica(a, tp=4) == 4 * 80 * 1024


def test_kv_heads_replicated_when_tp_exceeds_kv_heads():
    # Qwen3-30B-A3B: 4 KV heads. TP 8 -> max(1, 4 // 8) = 1 head per GPU:
    # 2 × 48 layers × 1 × 128 × 2 B = 24576 B, the same as at TP 4 (no further saving)
    a = arch("Qwen/Qwen3-30B-A3B")
    assert kv_bytes_per_token(a, tp=8) == 24576
    assert kv_bytes_per_token(a, tp=4) == 24576
    assert kv_bytes_per_token(a, tp=2) == 2 * 24576
    # replica total at TP 8: 8 GPUs × 24576 B = twice the model's 2 × 48 × 4 × 128 × 2 B
    assert kv_bytes_per_token_replica(a, tp=8) == 2 * (2 * 48 * 4 * 128 * 2)
    p = plan(a, gpu_memory_bytes=H100, tp=8, max_model_len=8192)
    assert any("replicated" in w for w in p.warnings)


def test_kv_mla_deepseek_v3():
    # MLA: 61 layers × (kv_lora_rank 512 + qk_rope_head_dim 64) × 2 B = 70272 B, no factor 2,
    # and the same latent on every TP rank
    a = arch("deepseek-ai/DeepSeek-V3")
    assert kv_bytes_per_token(a, tp=1) == 61 * 576 * 2 == 70272
    assert kv_bytes_per_token(a, tp=8) == 70272
    assert kv_bytes_per_token(a, tp=8, kv_cache_dtype="fp8") == 61 * 576


def test_kv_sliding_window_counts_only_full_attention_layers():
    # gemma-2-9b: 42 layers, 21 global + 21 sliding (window 4096); per layer
    # 2 × 8 heads × 256 × 2 B = 8192 B; growing part = 21 × 8192 = 172032 B per token
    a = arch("google/gemma-2-9b-it")
    assert a.sliding_window_layers == 21
    assert kv_bytes_per_token(a, tp=1) == 21 * 8192 == 172032


def test_kv_capacity_hybrid_allocator_hand_computed():
    # gemma-2-9b, 1000 blocks' worth of memory: group size g = 21 (21 full vs 21 sliding),
    # one block of one group = 16 tokens × 8192 B × 21 layers = 2,752,512 B.
    a = arch("google/gemma-2-9b-it")
    avail = 1000 * 16 * 8192 * 21
    cap = kv_capacity(a, avail, max_model_len=8192, max_num_batched_tokens=2048)
    assert cap.blocks == 1000
    # per request: full group cdiv(8192, 16) = 512 blocks; sliding group
    # cdiv(min(4096 - 1 + 2048, 8192), 16) = cdiv(6143, 16) = 384 blocks -> 896
    assert cap.max_concurrency == pytest.approx(1000 / 896)
    assert cap.tokens == int(1000 / 896 * 8192)  # 9142: vLLM logs concurrency × max_model_len


def test_kv_capacity_full_attention_is_blocks_times_16():
    # Llama-8B, exactly 100 blocks + a bit: 100 × 16 tokens × 131072 B + 5 B
    a = arch("meta-llama/Llama-3.1-8B-Instruct")
    cap = kv_capacity(a, 100 * 16 * 131072 + 5, max_model_len=800)
    assert cap.blocks == 100 and cap.tokens == 1600 and cap.max_concurrency == 2.0


def test_kv_fp8_halves_bytes():
    a = arch("meta-llama/Llama-3.1-8B-Instruct")
    assert kv_bytes_per_token(a, kv_cache_dtype="fp8") == 64 * 1024


# --------------------------------------------------------------------------
# Parameters and weights


def test_llama_8b_parameter_count_by_hand():
    # embed 128256 × 4096 = 525,336,576, lm_head the same (untied);
    # per layer: q+o 2 × 4096² = 33,554,432; k+v 2 × 4096 × 1024 = 8,388,608;
    # MLP 3 × 4096 × 14336 = 176,160,768; 2 norms × 4096 = 8192 -> 218,112,000 × 32
    # = 6,979,584,000; final norm 4096. Total 8,030,261,248.
    pc = count_parameters(arch("meta-llama/Llama-3.1-8B-Instruct"))
    assert pc.total == 2 * 525_336_576 + 32 * 218_112_000 + 4096 == 8_030_261_248
    assert pc.active == pc.total and pc.mtp == 0


def test_tied_embeddings_counted_once():
    # Llama-3.2-1B ties: only one 128256 × 2048 matrix
    pc = count_parameters(arch("meta-llama/Llama-3.2-1B-Instruct"))
    assert pc.lm_head == 0 and pc.embedding == 128256 * 2048


PUBLISHED = yaml.safe_load((DATA / "sizing_param_counts.yaml").read_text())


@pytest.mark.parametrize("row", PUBLISHED, ids=[r["model"] for r in PUBLISHED])
def test_parameter_counts_match_published_totals(row):
    pc = count_parameters(arch(row["model"]))
    assert pc.total == pytest.approx(float(row["total"]), rel=row["tolerance"]), row["source"]
    if "active" in row:
        assert pc.active == pytest.approx(float(row["active"]), rel=0.05), row["source"]
    if "mtp" in row:
        assert pc.mtp == pytest.approx(float(row["mtp"]), rel=row["mtp_tolerance"]), row["source"]


def test_weights_bf16_split_over_tp():
    a = arch("meta-llama/Llama-3.1-8B-Instruct")
    w1 = weight_bytes(a, tp=1)
    assert w1.per_gpu == 8_030_261_248 * 2  # bf16, nothing replicated at TP 1 but norms
    w2 = weight_bytes(a, tp=2)
    # everything halves except the replicated norms (65 × 4096 params × 2 B)
    norms = (2 * 32 + 1) * 4096 * 2
    assert w2.per_gpu == pytest.approx((w1.per_gpu - norms) / 2 + norms, abs=2)
    assert w2.replicated_per_gpu == norms


def test_weights_fp8_and_int4():
    a = arch("meta-llama/Llama-3.1-8B-Instruct")
    emb = 2 * 525_336_576  # embeddings + lm_head stay 16-bit
    linear = 8_030_261_248 - emb - (2 * 32 + 1) * 4096
    fp8 = weight_bytes(a, dtype="fp8").per_gpu
    assert fp8 == pytest.approx(emb * 2 + linear * 1.0, rel=0.001)
    int4 = weight_bytes(a, dtype="int4").per_gpu
    # 0.5 B + fp16 scale and 4-bit zero per group of 128: (16 + 4) / 128 bits = 0.0195 B
    assert int4 == pytest.approx(emb * 2 + linear * (0.5 + 2.5 / 128), rel=0.001)


def test_weights_from_safetensors_index():
    a = arch("meta-llama/Llama-3.1-8B-Instruct")
    index = {"metadata": {"total_size": 16_060_522_496}, "weight_map": {}}
    total = safetensors_total_bytes(index)
    assert total == 16_060_522_496
    w = weight_bytes(a, tp=2, weights_total_bytes=total)
    assert w.from_index and w.total == pytest.approx(total, abs=8)
    with pytest.raises(SizingError):
        safetensors_total_bytes({"weight_map": {}})


def test_mxfp4_experts_of_gpt_oss():
    a = arch("openai/gpt-oss-20b")
    w = weight_bytes(a)  # checkpoint quant_method mxfp4 -> experts at 4.25 bits
    assert w.fmt.scheme == "mxfp4"
    # experts alone, unpadded: 24 layers × 32 experts × 3 × 2880 × 2880 × 4.25 / 8 B ≈ 10.1 GB;
    # the same experts in bf16 would be 24 × 32 × 3 × 2880 × 2880 × 2 B ≈ 38.2 GB.
    experts_mxfp4 = 24 * 32 * 3 * 2880 * 2880 * 4.25 / 8
    experts_bf16 = 24 * 32 * 3 * 2880 * 2880 * 2
    # attention, router and embeddings stay bf16 (~2.9 GB) and vLLM pads the
    # experts to 3072 wide: the whole model is a little over the experts
    assert experts_mxfp4 < w.per_gpu < experts_mxfp4 * 1.6
    assert w.per_gpu < experts_bf16 / 2  # unquantized experts would fail this
    unquantized = weight_bytes(a.model_copy(update={"quantization": None}))
    assert unquantized.per_gpu > experts_bf16 > 2 * w.per_gpu


def test_pp_partition_follows_vllm():
    # vLLM get_pp_indices: 27 layers, PP 4 -> 6 each, remainder 3 to the stages before the last
    assert pp_partition(27, 4) == [7, 7, 7, 6]
    assert pp_partition(32, 2) == [16, 16]
    with pytest.raises(SizingError):
        pp_partition(4, 8)


# --------------------------------------------------------------------------
# TP rules and advice


def test_tp_rules():
    q = arch("Qwen/Qwen2.5-7B-Instruct")  # 28 heads, 4 KV heads
    assert valid_tp_sizes(q, 8) == [1, 2, 4]
    assert "28 attention heads" in tp_problem(q, 8)
    assert "KV heads" in tp_problem(q, 7)  # 28 % 7 == 0 but 7 and 4 do not divide
    moe = arch("Qwen/Qwen3-30B-A3B").model_copy(update={"quantization": "fp8"})
    # fp8 block quantization: 768 / 8 = 96 is not a multiple of 128
    assert "128" in tp_problem(moe, 8)
    assert "128" in tp_problem(moe, 4)  # 768 / 4 = 192, not a multiple of 128 either
    assert tp_problem(moe, 2) is None  # 768 / 2 = 384 = 3 × 128

def test_plan_invalid_tp_does_not_fit():
    p = plan(arch("Qwen/Qwen2.5-7B-Instruct"), gpu_memory_bytes=H100, tp=8)
    assert p.verdict == "does_not_fit" and "attention heads" in p.reason


def test_plan_defaults_to_the_models_context():
    a = arch("Qwen/Qwen2.5-7B-Instruct")
    assert plan(a, gpu_memory_bytes=H100).max_model_len == 32768


def test_plan_70b_on_one_h100_does_not_fit():
    # 70.55 B params × 2 B = 141 GB of weights > 0.9 × 79.19 GiB
    p = plan(arch("meta-llama/Llama-3.1-70B-Instruct"), gpu_memory_bytes=H100, tp=1, max_model_len=8192)
    assert p.verdict == "does_not_fit" and "weights" in p.reason


def test_advise_smallest_tp_and_max_len_are_consistent():
    a = arch("meta-llama/Llama-3.1-70B-Instruct")
    tp, p = advise_tp(a, H100_GPU, max_model_len=32768)
    assert tp == 4 and p.verdict in ("fits", "tight")
    assert plan(a, gpu_memory_bytes=H100, tp=2, max_model_len=32768).verdict == "does_not_fit"
    # at 0.95 utilization TP 2 starts, with a shorter context: 0.95 × 79.19 = 75.23 GiB less
    # 65.7 GiB of weights and ~5.7 GiB of overheads leaves a few GiB = ~25k tokens at 160 KiB/token
    u = 0.95
    longest = plan(a, gpu_memory_bytes=H100, tp=2, max_model_len=1, gpu_memory_utilization=u).max_model_len_fits
    assert 0 < longest < 32768
    assert plan(a, gpu_memory_bytes=H100, tp=2, max_model_len=longest, gpu_memory_utilization=u).verdict != "does_not_fit"
    assert plan(a, gpu_memory_bytes=H100, tp=2, max_model_len=longest + BLOCK_SIZE,
                gpu_memory_utilization=u).verdict == "does_not_fit"


def test_advise_with_concurrency_needs_more_gpus():
    a = arch("meta-llama/Llama-3.1-8B-Instruct")
    tp1, p1 = advise_tp(a, H100_GPU, max_model_len=131072)
    tp_many, p_many = advise_tp(a, H100_GPU, max_model_len=131072, min_concurrency=p1.max_concurrency + 1)
    assert tp1 == 1 and tp_many > 1 and p_many.max_concurrency >= p1.max_concurrency + 1


def test_plan_rejects_bad_numbers():
    a = arch("meta-llama/Llama-3.1-8B-Instruct")
    for kwargs, param in [({"tp": 0}, "tp"), ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
                          ({"max_model_len": -1}, "max_model_len"), ({"dtype": "int3"}, "dtype"),
                          ({"kv_cache_dtype": "fp4"}, "kv_cache_dtype")]:
        with pytest.raises(SizingError) as e:
            plan(a, gpu_memory_bytes=H100, **kwargs)
        assert e.value.param == param


def test_plan_json_fields():
    d = plan(arch("meta-llama/Llama-3.1-8B-Instruct"), gpu_memory_bytes=H100, max_model_len=8192).to_dict()
    for key in ("kv_cache_tokens", "weights_gib_per_gpu", "max_concurrency", "verdict", "reason", "headroom_gib"):
        assert key in d


# --------------------------------------------------------------------------
# Accuracy against published vLLM figures (tests/data/vllm_startup_figures.yaml)

_BENCH = _bench()
_ROWS = _BENCH.all_rows()


def test_accuracy_data_has_enough_cases():
    cases = _BENCH.load_cases()
    assert len(cases) >= 8
    assert sum(1 for c in cases if "kv" in c["checks"]) >= 8
    for c in cases:
        assert c["source"].startswith("https://github.com/") and c["log"]


@pytest.mark.parametrize("row", _ROWS, ids=[f"{r.case}:{r.quantity}" for r in _ROWS])
def test_accuracy_against_vllm(row):
    assert row.ok, f"{row.case} {row.quantity}: vLLM {row.vllm}, estimate {row.estimate}, error {row.error}"
