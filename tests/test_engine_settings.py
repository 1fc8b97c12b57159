"""gen-config's engine settings (issue 12): --engine-arg and the named flags
land typed in the YAML; bad values exit 2 naming the type or choices; keys
llmctl or Ray own are refused, naming the flag to use; sizing uses them."""

from __future__ import annotations

import pytest

import llmctl
from llmctl import sizing

from helpers import files_under, load_yaml, run_cli

GOOD = [
    (["--engine-arg", "max_num_seqs=64"], "max_num_seqs", 64),
    (["--max-num-seqs", "64"], "max_num_seqs", 64),
    (["--engine-arg", "enable_prefix_caching=yes"], "enable_prefix_caching", True),
    (["--no-enable-prefix-caching"], "enable_prefix_caching", False),
    (["--engine-arg", 'limit_mm_per_prompt={"image": 2}'], "limit_mm_per_prompt", {"image": 2}),
    (["--engine-arg", "kv-cache-dtype=fp8"], "kv_cache_dtype", "fp8"),
    (["--kv-cache-dtype", "fp8"], "kv_cache_dtype", "fp8"),
    (["--dtype", "half"], "dtype", "half"),
    (["--quantization", "fp8"], "quantization", "fp8"),
    (["--trust-remote-code"], "trust_remote_code", True),
    (["--engine-arg", "gpu_memory_utilization=0.8"], None, None),  # owned: refused below
]


@pytest.mark.parametrize("args,key,value", [g for g in GOOD if g[1]], ids=[g[1] + "-" + g[0][0] for g in GOOD if g[1]])
def test_good_values_land_typed(capsys, tmp_path, args, key, value):
    r = run_cli(capsys, "gen-config", "-m", "qwen3-8b", "--gpu", "H100", *args, "--yes", "-o", tmp_path)
    assert r.code == 0, r.err
    ek = load_yaml(tmp_path / "model_config" / "qwen3-8b.yaml")["engine_kwargs"]
    assert ek[key] == value and type(ek[key]) is type(value)


BAD = [
    (["--engine-arg", "max_num_seqs=lots"], "error: --engine-arg: max_num_seqs: expected an integer, got 'lots'"),
    (["--max-num-seqs", "lots"], "error: --max-num-seqs: max_num_seqs: expected an integer, got 'lots'"),
    (["--engine-arg", "enable_prefix_caching=maybe"], "error: --engine-arg: enable_prefix_caching: expected true or false, got 'maybe'"),
    (["--dtype", "bf17"], "error: --dtype: dtype: must be one of auto, half, float16, bfloat16, float, float32; got 'bf17'"),
    (["--engine-arg", "max_num_seq=8"], "error: --engine-arg: max_num_seq: not an engine argument of {origin} (did you mean 'max_num_seqs'?)"),
    (["--engine-arg", "tensor_parallel_size=2"], "error: --engine-arg: tensor_parallel_size: set by llmctl or Ray Serve LLM; use --tp"),
    (["--engine-arg", "max_model_len=4096"], "error: --engine-arg: max_model_len: set by llmctl or Ray Serve LLM; use --max-model-len"),
    (["--engine-arg", "model=x"], "error: --engine-arg: model: set by llmctl or Ray Serve LLM; use model_loading_config.model_source (gen-config --model)"),
    (["--engine-arg", "gpu_memory_utilization=0.8"], "error: --engine-arg: gpu_memory_utilization: set by llmctl or Ray Serve LLM; use --gpu-memory-utilization"),
    (["--engine-arg", "no-equals-sign"], "error: --engine-arg: no-equals-sign: expected KEY=VALUE"),
    (["--engine-arg", "3:max_num_seqs=2"], "error: --engine-arg: '3:max_num_seqs=2' names no model of this run (use its position 1, 2, …, "
                                           "its --model value or its catalog id)"),
]


@pytest.mark.parametrize("args,expected", BAD, ids=[b[0][-1] for b in BAD])
def test_bad_values_exit_2_naming_type_or_choices(capsys, tmp_path, args, expected):
    from llmctl.engine_args import engine_args

    r = run_cli(capsys, "gen-config", "-m", "qwen3-8b", "--gpu", "H100", *args, "--yes", "-o", tmp_path)
    # {origin}: the vLLM gen-config writes for, Ray's pin ("vLLM 0.29.0 (Ray 2.60's pin)")
    assert r.code == 2 and r.err.strip() == expected.replace("{origin}", engine_args()[1]), r.err
    assert files_under(tmp_path) == []


def test_per_model_engine_args(tmp_path):
    gen = llmctl.generate(["qwen3-8b", "qwen3-4b"], gpu="H100", engine_args=["2:max_num_seqs=8", "enable_prefix_caching=true"],
                          write_files=False)
    first, second = (d.data["engine_kwargs"] for d in gen.documents[:2])
    assert "max_num_seqs" not in first and second["max_num_seqs"] == 8
    assert first["enable_prefix_caching"] is second["enable_prefix_caching"] is True
    by_id = llmctl.generate(["qwen3-8b", "qwen3-4b"], gpu="H100", engine_args=["qwen3-8b:max_num_seqs=16"], write_files=False)
    assert by_id.documents[0].data["engine_kwargs"]["max_num_seqs"] == 16 and "max_num_seqs" not in by_id.documents[1].data["engine_kwargs"]


def test_sizing_uses_the_engine_settings():
    base = llmctl.generate("llama-3.1-8b-instruct", gpu="L4", tp=2, max_model_len=8192, write_files=False).spec.models[0]
    fp8 = llmctl.generate("llama-3.1-8b-instruct", gpu="L4", tp=2, max_model_len=8192, kv_cache_dtype="fp8",
                          write_files=False).spec.models[0]
    assert fp8.plan.kv_bytes_per_token * 2 == base.plan.kv_bytes_per_token  # fp8 KV: half the bytes per token
    assert fp8.plan.kv_cache_tokens > 1.9 * base.plan.kv_cache_tokens
    quant = llmctl.generate("llama-3.1-8b-instruct", gpu="L4", tp=1, max_model_len=8192, quantization="fp8",
                            write_files=False).spec.models[0]
    assert quant.plan.weight_format == "fp8" and quant.plan.weights_gib_per_gpu < 0.6 * base.plan.weights_gib_total
    capped = llmctl.generate("llama-3.1-8b-instruct", gpu="L4", tp=2, max_model_len=8192, max_num_seqs=4,
                             write_files=False).spec.models[0]
    assert capped.max_ongoing_requests == 4  # max_num_seqs caps what one replica runs at once
    assert sizing.sizing_options({"quantization": "awq", "dtype": "half"}) == {
        "dtype": "half", "quantization": "awq", "kv_cache_dtype": "auto"}
    # awq needs an AWQ checkpoint: on a bf16 one vLLM refuses it, and the plan says so instead of sizing int4
    awq = llmctl.plan("llama-3.1-8b-instruct", gpu="L4", tp=1, max_model_len=8192, quantization="awq").rows[0]
    assert awq["weight_format"] == "bf16" and any("needs a checkpoint quantized that way" in w for w in awq["warnings"])


def test_validate_checks_the_same_types(capsys, tmp_path):
    gen = llmctl.generate("qwen3-8b", gpu="H100", max_num_seqs=64, output_dir=tmp_path)
    path = gen.model_files[0]
    assert run_cli(capsys, "validate", path).code == 0
    path.write_text(path.read_text().replace("max_num_seqs: 64", "max_num_seqs: lots"))
    r = run_cli(capsys, "validate", path)
    assert r.code == 2 and "engine_kwargs.max_num_seqs: expected an integer, got 'lots'" in r.err


@pytest.mark.parametrize("vllm,fragment", [
    ("0.29.0", None),
    ("0.32.0", "works except KV-aware request routing"),
    ("0.33.1", "replicas fail at import"),
    ("0.30.0", "newer than Ray's pin"),
    ("0.20.0", "lacks vllm.entrypoints.launchers.cli_args"),
])
def test_version_guard_names_both_versions(vllm, fragment):
    from llmctl import compat

    c = compat.check(vllm)
    assert c.ray and c.pinned == "==0.29.0"  # what the installed ray[llm] 2.60 requires
    if fragment is None:
        assert c.warning is None
    else:
        assert fragment in c.warning and f"vLLM {vllm}" in c.warning and f"Ray {c.ray}" in c.warning
        assert c.fails == ("fail at import" in c.warning)


def test_validate_sizes_a_quantized_config_as_gen_config_does(capsys, tmp_path):
    """--quantization fp8 lets Llama-3.1-70B fit on L4s; the files gen-config
    writes must validate (validate sizes through sizing.sizing_options too)."""
    r = run_cli(capsys, "gen-config", "-m", "llama-3.1-70b-instruct", "--gpu", "L4", "--quantization", "fp8", "--yes",
                "-o", tmp_path)
    assert r.code == 0, r.err
    assert load_yaml(tmp_path / "model_config" / "llama-3.1-70b-instruct.yaml")["engine_kwargs"]["quantization"] == "fp8"
