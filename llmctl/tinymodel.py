"""Build a tiny Llama-architecture model offline and deterministically.

The model exists so tests and ``make demo`` can run a real vLLM engine on a
CPU-only machine without downloading anything. It has random weights and
produces random text: assert structure, never content.

What is written (``build_tiny_model(dir)``), about 1 MB in all:

- ``config.json`` / ``generation_config.json`` — a ``LlamaForCausalLM`` with
  hidden size 64, 2 layers, 4 attention heads, 2 KV heads and head_dim 32
  (vLLM's CPU attention needs head_dim >= 32, so head_dim is set explicitly and
  is larger than hidden/heads).
- ``model.safetensors`` — float32 weights drawn from a seeded ``torch.Generator``
  in a fixed parameter order (not from the global RNG, so nothing else in the
  process can disturb them).
- ``tokenizer.json`` — a byte-level BPE tokenizer of ~1000 tokens trained with
  ``tokenizers`` on the fixed corpus below, plus special tokens.
- ``tokenizer_config.json`` (with a chat template) and ``special_tokens_map.json``,
  written by hand so the bytes depend on nothing but this file.

The same llmctl, transformers and torch versions give byte-identical files
(tests/test_tinymodel.py builds twice and compares). Nothing here touches the
network.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from llmctl.paths import write_atomic

SEED = 1234
VOCAB_SIZE = 1000
MAX_MODEL_LEN = 512

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
BOS, EOS, UNK, PAD = "<s>", "<|end|>", "<unk>", "<pad>"

# Renders `tools` and assistant tool calls the Hermes way (<tools> signatures,
# <tool_call>{"name": …, "arguments": …}</tool_call>), the format vLLM's
# `hermes` tool parser reads, so `gen-config --tool-calling` recognises it
# (llmctl.recipes.template_recipes) and the end-to-end test can send `tools`.
# Without tools the prompt is what it always was.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% if tools %}{{ '<|system|>\\n<tools>\\n' }}"
    "{% for tool in tools %}{{ (tool.function if tool.function is defined else tool) | tojson }}{{ '\\n' }}{% endfor %}"
    "{{ '</tools>\\nTo call a tool, answer <tool_call>{\"name\": NAME, \"arguments\": ARGS}</tool_call><|end|>\\n' }}"
    "{% endif %}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' }}{% if message['content'] %}{{ message['content'] }}{% endif %}"
    "{% if message.tool_calls is defined and message.tool_calls %}{% for call in message.tool_calls %}"
    "{% set f = call.function if call.function is defined else call %}"
    "{{ '<tool_call>' }}{{ {'name': f.name, 'arguments': f.arguments} | tojson }}{{ '</tool_call>' }}"
    "{% endfor %}{% endif %}"
    "{{ '<|end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)

ARCH = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
}

_TEXT = """\
Ray Serve runs large language models behind an OpenAI compatible endpoint.
A replica loads the model, the engine schedules requests, and the router
balances traffic across replicas. The cluster has a head node and workers.
Hello! How are you today? I am fine, thank you. What is the weather like?
The quick brown fox jumps over the lazy dog. Pack my box with five dozen
liquor jugs. Sphinx of black quartz, judge my vow. How vexingly quick daft
zebras jump! The five boxing wizards jump quickly.
def main():
    print("hello, world")
    return 0
{"role": "user", "content": "Tell me a story about a small model."}
Once upon a time there was a tiny model with two layers and four heads.
It lived on a laptop without a GPU and answered every question with noise.
"""

_SUBJECTS = ["the model", "a replica", "the cluster", "my friend", "the engine", "a token",
             "the server", "our team", "the user", "this request", "the router", "a worker"]
_VERBS = ["answers", "loads", "sends", "reads", "writes", "returns", "starts", "stops",
          "scales", "waits for", "streams", "counts"]
_OBJECTS = ["a short reply", "the weights", "every request", "the logs", "a new config",
            "the first token", "two numbers", "the chat template", "some memory", "the status",
            "a long story", "the endpoint"]
_TAILS = ["quickly.", "on the CPU.", "again and again.", "before noon.", "without a GPU.",
          "in one second.", "for the test.", "with care.", "at night.", "today."]


def corpus() -> list[str]:
    """The fixed training text: a few paragraphs plus generated sentences."""
    lines = _TEXT.splitlines()
    n = 0
    for i, s in enumerate(_SUBJECTS):
        for j, v in enumerate(_VERBS):
            o = _OBJECTS[(i * 5 + j * 7) % len(_OBJECTS)]
            t = _TAILS[(i * 3 + j) % len(_TAILS)]
            lines.append(f"{s.capitalize()} {v} {o} {t}")
            lines.append(f"Q: Does {s} {v.split()[0].rstrip('s')} {o}? A: Yes, {s} {v} {o} {t}")
            n += 1
    for k in range(300):
        lines.append(f"Item {k}: {k * 7 % 101} + {k * 13 % 97} = {k * 7 % 101 + k * 13 % 97}")
    return lines


def build_tokenizer():
    """Train the byte-level BPE tokenizer (returns a ``tokenizers.Tokenizer``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=1,
        show_progress=False,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    return tok


# The tiny mixture of experts (build_tiny_model(dir, moe=True)): the same attention and tokenizer, a
# MixtralForCausalLM with 4 routed experts of width 64, 2 per token, so vLLM's MoE layers (and data
# parallelism with expert parallelism) have something to route. vLLM's CPU build runs Mixtral's fused MoE.
MOE = {"num_local_experts": 4, "num_experts_per_tok": 2, "intermediate_size": 64}


def _config(vocab_size: int, ids: dict[str, int], moe: bool = False) -> dict:
    from transformers import LlamaConfig, MixtralConfig

    if moe:
        return MixtralConfig(
            vocab_size=vocab_size, max_position_embeddings=MAX_MODEL_LEN, rms_norm_eps=1e-5, tie_word_embeddings=True,
            bos_token_id=ids[BOS], eos_token_id=ids[EOS], pad_token_id=ids[PAD], architectures=["MixtralForCausalLM"],
            sliding_window=None, **{**ARCH, **MOE},
        )
    cfg = LlamaConfig(
        vocab_size=vocab_size,
        max_position_embeddings=MAX_MODEL_LEN,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        bos_token_id=ids[BOS],
        eos_token_id=ids[EOS],
        pad_token_id=ids[PAD],
        architectures=["LlamaForCausalLM"],
        **ARCH,
    )
    return cfg


def build_tiny_model(out_dir: Path | str, *, moe: bool = False) -> Path:
    """Write the tiny model into ``out_dir`` (created if needed) and return it;
    ``moe``: the tiny mixture of experts (:data:`MOE`) instead of the Llama.

    Imports torch/transformers/tokenizers lazily; raises ImportError if they
    are missing.
    """
    import torch
    from transformers import LlamaForCausalLM, MixtralForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    tok = build_tokenizer()
    ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}
    vocab_size = tok.get_vocab_size()

    cfg = _config(vocab_size, ids, moe)
    prev_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        model = (MixtralForCausalLM if moe else LlamaForCausalLM)(cfg)
    finally:
        torch.set_default_dtype(prev_dtype)
    gen = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            else:
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float32) * 0.02)
    model = model.to(torch.float32).eval()
    model.save_pretrained(out, safe_serialization=True)
    # Rewrite config.json / generation_config.json with sorted keys so their
    # bytes never depend on dict ordering inside transformers.
    for name in ("config.json", "generation_config.json"):
        p = out / name
        if p.exists():
            data = json.loads(p.read_text())
            write_atomic(p, json.dumps(data, indent=2, sort_keys=True) + "\n")
    gen_cfg = out / "generation_config.json"
    if not gen_cfg.exists():  # pragma: no cover - transformers always writes it
        write_atomic(gen_cfg, json.dumps({"bos_token_id": ids[BOS], "eos_token_id": ids[EOS]}, indent=2) + "\n")

    write_atomic(out / "tokenizer.json", tok.to_str(pretty=True) + "\n")
    tok_cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "unk_token": UNK,
        "pad_token": PAD,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": MAX_MODEL_LEN,
        "chat_template": CHAT_TEMPLATE,
    }
    write_atomic(out / "tokenizer_config.json", json.dumps(tok_cfg, indent=2, sort_keys=True) + "\n")
    special = {"bos_token": BOS, "eos_token": EOS, "unk_token": UNK, "pad_token": PAD}
    write_atomic(out / "special_tokens_map.json", json.dumps(special, indent=2, sort_keys=True) + "\n")
    return out


def digest(model_dir: Path | str) -> str:
    """SHA-256 over every file's name and bytes (sorted): equal digests = same model."""
    h = hashlib.sha256()
    root = Path(model_dir)
    for p in sorted(q for q in root.rglob("*") if q.is_file()):
        h.update(str(p.relative_to(root)).encode() + b"\0")
        h.update(p.read_bytes())
    return h.hexdigest()
