"""The tiny test model: offline, deterministic, the shape vLLM's CPU engine needs."""

from __future__ import annotations

import json

import pytest

from llmctl import tinymodel

pytestmark = pytest.mark.engine  # torch, transformers, tokenizers: the cpu extra


def test_same_bytes_twice(tmp_path, tiny_model):
    again = tinymodel.build_tiny_model(tmp_path / "again")
    names = sorted(p.name for p in tiny_model.iterdir())
    assert names == sorted(p.name for p in again.iterdir())
    for name in names:
        assert (tiny_model / name).read_bytes() == (again / name).read_bytes(), name
    assert tinymodel.digest(tiny_model) == tinymodel.digest(again)


def test_shape_and_size(tiny_model):
    cfg = json.loads((tiny_model / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    assert cfg["hidden_size"] == 64 and cfg["num_hidden_layers"] == 2
    assert cfg["num_attention_heads"] == 4 and cfg["num_key_value_heads"] == 2
    assert cfg["head_dim"] >= 32  # vLLM's CPU attention
    assert 900 <= cfg["vocab_size"] <= 1100
    assert cfg["dtype"] == "float32"
    total = sum(p.stat().st_size for p in tiny_model.iterdir())
    assert 300_000 < total < 2_000_000
    gen = json.loads((tiny_model / "generation_config.json").read_text())
    assert gen["eos_token_id"] == cfg["eos_token_id"]


def test_tokenizer_and_chat_template(tiny_model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    assert len(tok) == json.loads((tiny_model / "config.json").read_text())["vocab_size"]
    text = "Hello, world! Ünïcödé ✓"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text  # byte-level: any text round-trips
    prompt = tok.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|assistant|>\n") and "<|user|>\nHi<|end|>" in prompt
    assert tok.eos_token == "<|end|>"


def test_loads_and_generates(tiny_model):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model))
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model))
    ids = tok("Hello", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=4, do_sample=False)
    assert out.shape[1] == ids.shape[1] + 4


def test_cli_refuses_non_empty_dir(tmp_path):
    from llmctl.cli import main

    d = tmp_path / "m"
    d.mkdir()
    (d / "keep.txt").write_text("x")
    assert main(["tiny-model", str(d)]) == 2
    assert (d / "keep.txt").read_text() == "x" and not (d / "config.json").exists()


@pytest.mark.parametrize("force", [False, True])
def test_cli_builds(tmp_path, capsys, force):
    from llmctl.cli import main

    d = tmp_path / "tiny-llama"
    if force:
        d.mkdir()
        (d / "old.txt").write_text("x")
    args = ["tiny-model", str(d)] + (["--force"] if force else [])
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "wrote a tiny Llama" in out and "llmctl gen-config --model" in out
    assert (d / "model.safetensors").is_file() and (d / "tokenizer.json").is_file()
