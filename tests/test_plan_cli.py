"""`llmctl plan` through the real entry point (llmctl.cli.main)."""

from __future__ import annotations

import json

import pytest

from llmctl.cli import main


def run(capsys, *args):
    rc = main(["plan", *args])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_table_marks_the_advised_row(capsys):
    rc, out, err = run(capsys, "--model", "llama-3.1-8b-instruct", "--gpu", "H100", "--max-model-len", "8192")
    assert rc == 0, err
    assert "advised" in out and "H100" in out and "KV tokens" in out
    assert "Next: llmctl gen-config --model llama-3.1-8b-instruct --gpu H100 --tp 1" in out


def test_json_rows(capsys):
    rc, out, err = run(capsys, "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100",
                       "--max-model-len", "32768", "--json")
    assert rc == 0, err
    doc = json.loads(out)  # plain JSON, nothing else on stdout
    assert doc["model"] == "llama-3.1-70b-instruct"
    assert {r["max_model_len"] for r in doc["rows"]} == {32768}
    rows = {r["tp"]: r for r in doc["rows"]}
    assert set(rows) == {1, 2, 4, 8}  # 64 heads, 8 KV heads, one 8-GPU node
    for r in rows.values():
        for key in ("kv_cache_tokens", "weights_gib_per_gpu", "max_concurrency", "verdict"):
            assert key in r
    assert rows[1]["verdict"] == "does_not_fit"  # 141 GB of bf16 weights on one 80 GB GPU
    assert [t for t, r in rows.items() if r["advised"]] == [4]
    # KV per GPU per token at TP 4: 2 × 80 × 2 × 128 × 2 B = 80 KiB
    assert rows[4]["kv_bytes_per_token"] == 81920


def test_all_gpu_types_and_gpu_memory(capsys):
    rc, out, _ = run(capsys, "--model", "qwen2.5-7b-instruct", "--gpu", "all", "--json")
    assert rc == 0
    gpus = {r["gpu"] for r in json.loads(out)["rows"]}
    assert {"L4", "H100", "B200"} <= gpus
    rc, out_default, _ = run(capsys, "--model", "qwen2.5-7b-instruct", "--json")  # no GPU: every type
    assert rc == 0 and json.loads(out_default) == json.loads(out)
    rc, out, _ = run(capsys, "--model", "qwen2.5-7b-instruct", "--gpu-memory", "40", "--tp", "2", "--json")
    assert rc == 0
    (row,) = json.loads(out)["rows"]
    assert row["gpu"] == "40 GiB" and row["tp"] == 2 and row["gpu_memory_gib"] == 40


def test_kv_cache_dtype_fp8_doubles_tokens(capsys):
    base = json.loads(run(capsys, "--model", "qwen3-8b", "--gpu", "H100", "--tp", "1", "--json")[1])["rows"][0]
    fp8 = json.loads(run(capsys, "--model", "qwen3-8b", "--gpu", "H100", "--tp", "1", "--kv-cache-dtype", "fp8",
                         "--json")[1])["rows"][0]
    assert fp8["kv_bytes_per_token"] * 2 == base["kv_bytes_per_token"]
    assert fp8["kv_cache_tokens"] == pytest.approx(2 * base["kv_cache_tokens"], rel=0.001)


def test_decode_context_parallelism(capsys):
    """DCP shards each request's KV over that many TP ranks (vLLM: DCP reuses them): the pool holds that many times
    the tokens of the same memory, and a TP it does not divide is refused, saying why."""
    def rows(*extra):
        rc, out, err = run(capsys, "--model", "llama-3.1-70b-instruct", "--gpu", "H100", "--max-model-len", "32768",
                           *extra, "--json")
        assert rc == 0, err
        return {r["tp"]: r for r in json.loads(out)["rows"]}

    plain, dcp = rows(), rows("--decode-context-parallel-size", "2")
    assert dcp[4]["kv_cache_gib"] == plain[4]["kv_cache_gib"]
    assert 1.95 < dcp[4]["kv_cache_tokens"] / plain[4]["kv_cache_tokens"] <= 2.0
    assert dcp[1]["verdict"] == "does_not_fit" and "decode_context_parallel_size 2" in dcp[1]["reason"]
    rc, _, err = run(capsys, "--model", "llama-3.1-70b-instruct", "--gpu", "H100", "--decode-context-parallel-size", "0")
    assert rc == 2 and err.count("\n") == 1 and "--decode-context-parallel-size" in err


def test_local_directory_model(tmp_path, capsys):
    cfg = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
        "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
        "max_position_embeddings": 512, "vocab_size": 1000, "torch_dtype": "float32",
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    rc, out, err = run(capsys, "--model", str(tmp_path), "--gpu-memory", "1", "--tp", "1", "--json")
    assert rc == 0, err
    row = json.loads(out)["rows"][0]
    # 2 (K,V) × 2 layers × 2 KV heads × 32 × 2 B = 512 B per token
    assert row["kv_bytes_per_token"] == 512


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--model", "no-such-model", "--gpu", "H100"], "unknown model"),
        (["--model", "qwen2.5-7b-instruct", "--gpu", "H100", "--tp", "3"], "--tp: TP 3"),
        (["--model", "qwen2.5-7b-instruct", "--gpu", "H100", "--gpu-memory", "80"], "either --gpu or --gpu-memory"),
        (["--model", "qwen2.5-7b-instruct", "--gpu-memory", "-1"], "--gpu-memory"),
        (["--model", "qwen2.5-7b-instruct", "--gpu", "H100", "--tp", "-2"], "--tp"),
        (["--model", "qwen2.5-7b-instruct", "--gpu", "H100", "--max-model-len", "0"], "--max-model-len"),
        (["--model", "qwen2.5-7b-instruct", "--gpu", "H100", "--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization"),
        (["--model", "qwen2.5-7b-instruct", "--gpu", "TPUv9"], "--gpu"),
        (["--model", "qwen2.5-7b-instruct", "--gpu", "H100", "--dtype", "int3"], "--dtype"),
        # --dtype is vLLM's dtype (as gen-config's); a quantization given there names --quantization
        (["--model", "qwen2.5-7b-instruct", "--gpu", "H100", "--dtype", "fp8"], "pass --quantization fp8"),
        (["--model", "qwen2.5-7b-instruct", "--gpu", "H100", "--dtype", "int4"], "pass --quantization awq"),
        (["--model", "qwen2.5-7b-instruct", "--gpu", "H100", "--dtype", "awq", "--slo", "ttft_p95=1s"], "--quantization awq"),
        (["--model", "qwen2.5-7b-instruct", "--gpu", "H100", "--quantization", "int4"], "--quantization: quantization: must be one of"),
        (["--gpu", "H100"], "--model"),
    ],
)
def test_bad_flags_exit_2_with_one_line(capsys, args, needle):
    rc, out, err = run(capsys, *args)
    assert rc == 2
    assert out == ""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert needle in lines[0] and "Traceback" not in err


def test_quantization_is_gen_configs_vocabulary(capsys):
    """plan --quantization fp8 sizes vLLM's online fp8 (1 byte per linear weight) as gen-config writes it."""
    import llmctl
    from llmctl.errors import UsageError

    base = "--model", "qwen2.5-7b-instruct", "--gpu", "H100", "--tp", "1", "--json"
    rc, out, err = run(capsys, *base)
    rc8, out8, err8 = run(capsys, *base, "--quantization", "fp8", "--dtype", "bfloat16")
    assert rc == rc8 == 0, err + err8
    w, w8 = (json.loads(o)["rows"][0]["weights_gib_per_gpu"] for o in (out, out8))
    assert 0.5 * w < w8 < 0.75 * w  # linears at 1 byte, embeddings and lm_head at 2
    with pytest.raises(UsageError) as e:
        llmctl.plan("qwen2.5-7b-instruct", gpu="H100", dtype="fp8")
    assert e.value.param == "dtype" and "quantization='fp8'" in str(e.value)


def test_plan_imports_no_ray_vllm_or_hub():
    import subprocess
    import sys

    code = (
        "import sys, io, contextlib\n"
        "from llmctl.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    rc = main(['plan', '--model', 'qwen3-8b', '--gpu', 'H100', '--json'])\n"
        "heavy = [m for m in ('ray', 'vllm', 'huggingface_hub', 'torch') if m in sys.modules]\n"
        "print(rc, heavy)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.stdout.strip() == "0 []", res.stdout + res.stderr
