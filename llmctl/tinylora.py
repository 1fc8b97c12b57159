"""Tiny LoRA adapters for the tiny model, built offline with peft (issue 25).

``build_tiny_lora(model_dir, out_dir, rank=8, target_modules=("q_proj", "v_proj"))``
wraps the model in ``model_dir`` (the tiny Llama of :mod:`llmctl.tinymodel`,
or any local causal LM) with a peft LoRA of that rank on those modules, fills
``lora_A`` and ``lora_B`` from a seeded generator (peft starts ``lora_B`` at
zero, which would make the adapter a no-op) and saves what vLLM and Ray read:
``adapter_config.json`` and ``adapter_model.safetensors`` (a few KB).

``wrong_base=True`` builds the adapter for a different tiny Llama (hidden size
128 instead of 64) and names that model as its base: the shapes do not fit the
served model, as an adapter trained for another base model would not. Its
``base_model_name_or_path`` is :data:`OTHER_BASE` unless ``base_model`` says.

Random weights: an adapter changes the model's random text into other random
text. Tests assert structure, never content. Nothing here touches the network.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional, Sequence

from llmctl.paths import write_atomic

OTHER_BASE = "llmctl-test/other-tiny-llama"
SEED = 4321
FILES = ("adapter_config.json", "adapter_model.safetensors")


def _other_model():
    from transformers import LlamaConfig, LlamaForCausalLM

    from llmctl.tinymodel import ARCH, MAX_MODEL_LEN

    cfg = LlamaConfig(vocab_size=1000, max_position_embeddings=MAX_MODEL_LEN, tie_word_embeddings=True,
                      architectures=["LlamaForCausalLM"], **{**ARCH, "hidden_size": 128, "intermediate_size": 256})
    return LlamaForCausalLM(cfg)


def build_tiny_lora(model_dir: Path | str | None, out_dir: Path | str, *, rank: int = 8, alpha: Optional[int] = None,
                    target_modules: Sequence[str] = ("q_proj", "v_proj"), base_model: Optional[str] = None,
                    wrong_base: bool = False, seed: int = SEED) -> Path:
    """Write a LoRA adapter into ``out_dir`` (created) and return it.

    ``model_dir`` is the base model (unused with ``wrong_base``);
    ``base_model`` overrides the ``base_model_name_or_path`` written (default:
    ``model_dir`` as given, as peft records it). Raises ImportError without
    torch/transformers/peft, ValueError for a module the model lacks (peft's
    message)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    if wrong_base:
        model = _other_model()
        base_name = base_model or OTHER_BASE
    else:
        if model_dir is None:
            raise ValueError("a base model directory is needed (or wrong_base)")
        model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
        base_name = base_model or str(model_dir)
    cfg = LoraConfig(r=rank, lora_alpha=alpha or 2 * rank, target_modules=list(target_modules), lora_dropout=0.0,
                     bias="none", task_type="CAUSAL_LM")
    peft_model = get_peft_model(model, cfg)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(peft_model.named_parameters(), key=lambda kv: kv[0]):
            if "lora_" in name:
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float32) * 0.05)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # The base name is written into the saved config afterwards: given to peft,
    # save_pretrained would look it up on the Hub (embedding-layer check).
    peft_model.save_pretrained(str(out), save_embedding_layers=False)
    readme = out / "README.md"  # peft's model card: not part of the adapter
    if readme.exists():
        readme.unlink()
    conf = out / "adapter_config.json"
    data = json.loads(conf.read_text())
    data["base_model_name_or_path"] = base_name
    write_atomic(conf, json.dumps(data, indent=2, sort_keys=True) + "\n")
    return out


def adapter_summary(adapter_dir: Path | str) -> dict:
    """rank, target modules and base model of a local adapter (its adapter_config.json)."""
    cfg = json.loads((Path(adapter_dir) / "adapter_config.json").read_text())
    return {"r": cfg.get("r"), "target_modules": cfg.get("target_modules"), "base_model": cfg.get("base_model_name_or_path")}
