"""The failure signature table (issue 11) over real log excerpts: one per kind,
quoted from the published logs collected in docs/vllm_failures.md
(source named next to each), with their line prefixes; plus a real failure
of vLLM's CPU build captured on this machine (tests/data)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmctl.launch.failures import apply_changes, diagnose, normalize

DATA = Path(__file__).parent / "data"

CASES = [
    # (kind, excerpt, llm_config, expected changes or None, text the cause or fix must contain)
    ("kv-cache-too-small",  # vllm-project/vllm#34076
     "(EngineCore_DP0 pid=1094) ValueError: To serve at least one request with the models's max seq len (262144), (24.0 GiB KV "
     "cache is needed, which is larger than the available KV cache memory (3.18 GiB). Based on the available memory, the "
     "estimated maximum model length is 34736. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
     "initializing the engine.", {"engine_kwargs": {"max_model_len": 262144}},
     {"engine_kwargs.max_model_len": 34816 - 1024}, "max_model_len 262,144 needs 24.0 GiB of KV cache and the replica has 3.18 GiB"),
    ("kv-cache-too-small",  # vllm-project/vllm#16118 (no estimate yet)
     "ERROR 04-05 01:12:55 [core.py:390] ValueError: To serve at least one request with the models's max seq len (1048576), "
     "(24.00 GiB KV cache is needed, which is larger than the available KV cache memory (9.97 GiB). Try increasing "
     "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.", None,
     {"engine_kwargs.max_model_len": -1}, "max_model_len: -1"),
    ("kv-cache-too-small",  # vllm-project/vllm#10517 (V0)
     "The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache (23648). Try "
     "increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.", None,
     {"engine_kwargs.max_model_len": 23552}, "23,648 tokens"),
    ("no-kv-memory",  # vllm-project/vllm#10439
     "vllm-1  | ERROR 11-18 18:07:28 engine.py:366] ValueError: No available memory for the cache blocks. Try increasing "
     "`gpu_memory_utilization` when initializing the engine.", {"engine_kwargs": {"tensor_parallel_size": 1}}, None,
     "tensor_parallel_size above 1"),
    ("cuda-oom",  # vllm-project/vllm#31273 (weights load)
     "(EngineCore_DP0 pid=556790) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 80.00 MiB. GPU 0 has a total "
     "capacity of 139.72 GiB of which 60.69 MiB is free.\nLoading safetensors checkpoint shards:   3% Completed | 1/37", None,
     None, "loading or profiling"),
    ("cuda-oom",  # runpod-workers/worker-vllm#40 (CUDA-graph capture)
     "INFO 02-03 03:43:49 model_runner.py:625] Capturing the model for CUDA graphs.\nengine.py :190 2024-02-03 03:44:03,976 "
     "Error initializing vLLM engine: CUDA out of memory. Tried to allocate 112.00 MiB. GPU 0 has a total capacty of 44.35 GiB "
     "of which 53.38 MiB is free.", {"engine_kwargs": {}}, {"engine_kwargs.enforce_eager": True}, "capturing CUDA graphs"),
    ("gpu-memory-utilization-too-high",  # vllm-project/vllm#20305
     "[multiproc_executor.py:492] ValueError: Free memory on device (31.44/47.38 GiB) on startup is less than desired GPU memory "
     "utilization (0.95, 45.01 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.", None,
     {"engine_kwargs.gpu_memory_utilization": 0.65}, "only 31.44 of 47.38 GiB are free"),
    ("unknown-engine-arg",  # ray-project/ray#64466
     "ValueError: Unknown engine argument: task", None, None, "engine_kwargs.task"),
    ("bad-engine-arg-type",  # modelscope/ms-swift#6290
     "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n[rank1]: mm_processor_cache_gb\n"
     "[rank1]:   Input should be a valid number [type=float_type, input_value=None, input_type=NoneType]", None, None,
     "Input should be a valid number"),
    ("gated-repo",  # sgl-project/sglang#14644
     "Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-3.2-1B-Instruct/resolve/main/config.json.\n"
     "Access to model meta-llama/Llama-3.2-1B-Instruct is restricted. You must have access to it and be authenticated to access "
     "it. Please log in.", {"runtime_env": {"env_vars": {"HF_TOKEN": "${MY_TOKEN}"}}}, None, "export MY_TOKEN="),
    ("gated-repo",  # hiyouga/LlamaFactory#3403 (token fine, no access)
     "Access to model meta-llama/Llama-2-7b-hf is restricted and you are not in the authorized list. Visit "
     "https://huggingface.co/meta-llama/Llama-2-7b-hf to ask for access.", None, None, "request access"),
    ("repo-not-found",  # vllm-project/vllm#17287
     "ValueError: Invalid repository ID or local directory specified: 'DeepSeek-R1-Distill-Qwen-7B-gptqmodel-4bit-vortex-v2'.",
     None, None, "model_source"),
    ("trust-remote-code",  # vllm-project/vllm#37408
     "(APIServer pid=295080)   Value error, The repository /workspace/amd/MiniMax-M2.1-MXFP4 contains custom code which must be "
     "executed to correctly load the model.", None, {"engine_kwargs.trust_remote_code": True}, "trust_remote_code: true"),
    ("unsupported-architecture",  # kaito-project/kaito#1791
     "(APIServer pid=46)   Value error, Model architectures ['NewForSequenceClassification'] are not supported for now. "
     "Supported architectures: dict_keys(['AfmoeForCausalLM'])", None, None, "['NewForSequenceClassification']"),
    ("tp-not-divisible",  # vllm-project/vllm#2652
     "ValueError: Total number of attention heads (52) must be divisible by tensor parallel size (8).", None,
     {"engine_kwargs.tensor_parallel_size": 4}, "TP 8 does not divide the 52 attention heads"),
    ("not-enough-gpus",  # vllm_failures.md §9 (Ray LLM placement group check)
     "ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement group. Required "
     "number of devices: 4. Total number of devices: 2.", None, None, "needs 4 devices"),
    ("cpu-head-dim",  # vllm-project/vllm#39065
     "(EngineCore pid=148) RuntimeError: Unsupported CPU attention configuration: head_dim=512 isa=1", None, None, "head_dim"),
    ("ray-vllm-mismatch",  # ray-project/ray#64006
     "ModuleNotFoundError: No module named 'vllm.entrypoints.openai.speech_to_text'\nImportError: Neither vLLM nor SGLang is "
     "installed. At least one is required for Ray Serve LLM protocol models.", None, None, "vllm==0.29.0"),
    ("start-timeout",  # vllm-project/vllm#17770
     "ERROR 05-06 14:20:15 [core.py:387] ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
     None, None, "llmctl logs"),
]


@pytest.mark.parametrize("kind,text,cfg,changes,needle", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_failure_kind(kind, text, cfg, changes, needle):
    found = diagnose(text, cfg)
    assert found, f"no signature matched: {text[:80]}"
    d = found[0]
    assert d.code == kind
    assert d.changes == changes
    assert needle in d.cause + " " + d.fix
    assert d.evidence and "\n" not in d.evidence and d.source.startswith("vllm_failures.md")


def test_prefixes_do_not_matter():
    plain = "ValueError: Total number of attention heads (52) must be divisible by tensor parallel size (8)."
    prefixed = "(ServeReplica:app:LLMServer:x pid=7, ip=10.0.0.1) (EngineCore_DP0 pid=9) ERROR 01-02 03:04:05 [core.py:1] " + plain
    assert normalize(prefixed) == plain
    assert diagnose(prefixed) == diagnose(plain)


def test_the_real_cpu_failure_captured_here():
    # kv_cache_memory_bytes 262144 for the tiny model at max_model_len 512: vLLM's estimate is 128
    text = (DATA / "vllm_cpu_kv_too_small.log").read_text()
    cfg = {"engine_kwargs": {"max_model_len": 512, "kv_cache_memory_bytes": 262144}}
    (d, *rest) = diagnose(text, cfg)
    assert d.code == "kv-cache-too-small" and d.changes == {"engine_kwargs.max_model_len": 128}
    assert "max_model_len 512" in d.cause and "128" in d.cause
    assert "kv_cache_memory_bytes: 1048576" in d.fix  # 262144 × 512 / 128, in MiB steps
    assert [r.code for r in rest] == []  # the wrapper ("Engine core initialization failed") is not a cause


def test_unrelated_text_gives_nothing():
    assert diagnose("INFO 11-24 00:15:04 [core.py:133] Initializing a V1 LLM engine (v0.32.0)\nApplication startup complete.") == []


def test_apply_changes_round_trip():
    cfg = {"engine_kwargs": {"max_model_len": 512}, "deployment_config": {}}
    new = apply_changes(cfg, {"engine_kwargs.max_model_len": 128, "engine_kwargs.enforce_eager": True})
    assert new["engine_kwargs"] == {"max_model_len": 128, "enforce_eager": True}
    assert cfg["engine_kwargs"] == {"max_model_len": 512}  # the original is untouched
