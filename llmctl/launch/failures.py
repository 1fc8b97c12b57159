"""vLLM and Ray Serve LLM start-up failures: signature → cause → fix (issue 11).

Each :class:`Signature` is a regex over a failing replica's log tail and
Ray's deployment message (line prefixes such as ``(EngineCore_DP0 pid=1094)``
or ``ERROR 04-05 01:12:55 [core.py:390]`` removed first by :func:`normalize`),
the message's source, and a function that turns the match (and the model's
own LLMConfig, when known) into a :class:`Diagnosis`: one-line cause, one-line
fix in the config's own terms, and — when the fix is mechanical — the
LLMConfig values to change (``llmctl up --fix`` applies them).

Message texts, their versions and the regexes: docs/vllm_failures.md (each
signature cites its section, ``vllm_failures.md §N``; the sources there are
vLLM 0.32's and Ray 2.60's code and published logs). Pure: no I/O, no ray or
vllm import.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PREFIX = re.compile(
    r"^(?:\((?:EngineCore|APIServer|Worker|ServeReplica|ServeController|RayWorkerWrapper)[^)]*\)\s*"
    r"|\[rank\d+\]:\s*|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+\[[^\]]*\]\s*"
    r"|\[std(?:out|err) [^\]]*\]\s*|\[replica [^\]]*\]\s*|\s*Value error,\s*)+"
)


def normalize(text: str) -> str:
    """Log text without ANSI colours and per-line prefixes (process tags, levels, Serve labels)."""
    return "\n".join(_PREFIX.sub("", _ANSI.sub("", line)) for line in str(text).splitlines())


@dataclass(frozen=True)
class Diagnosis:
    code: str  # stable: "kv-cache-too-small", "cuda-oom", …
    cause: str
    fix: str
    changes: Optional[dict[str, Any]]  # dotted LLMConfig paths -> new values; None: not mechanical
    evidence: str  # the matched text, one line
    source: str  # where the message comes from (reference section)


def _ek(cfg: Optional[dict]) -> dict:
    return (cfg or {}).get("engine_kwargs") or {}


def _len_fix(n: int) -> int:
    """vLLM's estimate rounded down to a multiple of 1,024 (kept below 1,024)."""
    return n - n % 1024 if n >= 1024 else n


def _kv(m: re.Match, cfg: Optional[dict]) -> Diagnosis:
    mml = int(m.group("max_model_len"))
    est = m.groupdict().get("estimated_max_len")
    need, avail = m.group("needed_gib"), m.group("available_gib")
    cause = (f"max_model_len {mml:,} needs {need} GiB of KV cache and the replica has {avail} GiB" if float(need) > 0
             else f"max_model_len {mml:,} needs more KV cache than the replica has")
    if est:
        new = _len_fix(int(est.replace(",", "")))
        cause += f"; vLLM estimates the longest context that fits at {int(est.replace(',', '')):,} tokens"
        fix = f"set engine_kwargs.max_model_len: {new}, or more KV memory (TP, kv_cache_dtype: fp8, gpu_memory_utilization)"
        kvb = _ek(cfg).get("kv_cache_memory_bytes")
        if isinstance(kvb, int) and int(est.replace(",", "")) > 0:
            fix += f"; on the CPU build: kv_cache_memory_bytes: {math.ceil(kvb * mml / int(est.replace(',', '')) / 2**20) * 2**20}"
        return Diagnosis("kv-cache-too-small", cause, fix, {"engine_kwargs.max_model_len": new}, m.group(0), "vllm_failures.md §1")
    return Diagnosis("kv-cache-too-small", cause, "lower engine_kwargs.max_model_len, or max_model_len: -1 (vLLM picks what fits)",
                     {"engine_kwargs.max_model_len": -1}, m.group(0), "vllm_failures.md §1")


def _kv_v0(m: re.Match, cfg) -> Diagnosis:
    mml, tokens = int(m.group("max_model_len")), int(m.group("kv_tokens"))
    return Diagnosis("kv-cache-too-small", f"max_model_len {mml:,} exceeds the {tokens:,} tokens the KV cache holds",
                     f"set engine_kwargs.max_model_len: {_len_fix(tokens)}", {"engine_kwargs.max_model_len": _len_fix(tokens)},
                     m.group(0), "vllm_failures.md §1 (V0)")


def _over_derived(m: re.Match, cfg) -> Diagnosis:
    derived = int(float(m.group("derived")))
    return Diagnosis("context-too-long", f"max_model_len {int(m.group('user')):,} is beyond the model's {m.group('key')} ({derived:,})",
                     f"set engine_kwargs.max_model_len: {derived}", {"engine_kwargs.max_model_len": derived}, m.group(0),
                     "vllm_failures.md §1")


def _no_kv(m: re.Match, cfg) -> Diagnosis:
    tp = _ek(cfg).get("tensor_parallel_size", 1)
    return Diagnosis("no-kv-memory", "the weights and activations leave no memory for the KV cache",
                     f"more GPUs (tensor_parallel_size above {tp}), a quantized checkpoint, or a larger GPU; "
                     "`llmctl plan` shows which fits", None, m.group(0), "vllm_failures.md §2")


def _oom(m: re.Match, cfg, text: str = "") -> Diagnosis:
    capture = re.search(r"capture_model|torch\.cuda\.graph|Capturing (?:the model for )?CUDA graph|Capturing cudagraphs", text)
    if capture and not _ek(cfg).get("enforce_eager"):
        return Diagnosis("cuda-oom", "CUDA ran out of memory while capturing CUDA graphs",
                         "set engine_kwargs.enforce_eager: true (no CUDA graphs), or lower gpu_memory_utilization / max_num_seqs",
                         {"engine_kwargs.enforce_eager": True}, m.group(0), "vllm_failures.md §3")
    return Diagnosis("cuda-oom", "CUDA ran out of memory while loading or profiling the model",
                     "more GPUs (tensor_parallel_size), a quantized checkpoint or a larger GPU (`llmctl plan`)", None,
                     m.group(0), "vllm_failures.md §3")


def _free_mem(m: re.Match, cfg) -> Diagnosis:
    free, total = float(m.group("free_gib")), float(m.group("total_gib"))
    new = math.floor(free / total * 100) / 100 - 0.01
    return Diagnosis("gpu-memory-utilization-too-high",
                     f"gpu_memory_utilization {m.group('util')} asks for {m.group('requested_gib')} GiB but only {free} of "
                     f"{total} GiB are free (another process holds the rest)",
                     f"set engine_kwargs.gpu_memory_utilization: {new:.2f}, or free the GPU",
                     {"engine_kwargs.gpu_memory_utilization": round(new, 2)}, m.group(0), "vllm_failures.md §4")


def _unknown_arg(m: re.Match, cfg) -> Diagnosis:
    key = m.group("key")
    from llmctl.engine_args import suggest
    from llmctl.suggest import phrase

    near = suggest(key)
    return Diagnosis("unknown-engine-arg", f"engine_kwargs.{key} is not an argument of the vLLM on the cluster",
                     f"remove engine_kwargs.{key}" + phrase(near) + "; `llmctl validate` checks keys",
                     None, m.group(0), "vllm_failures.md §5")


def _bad_type(m: re.Match, cfg) -> Diagnosis:
    return Diagnosis("bad-engine-arg-type", f"vLLM refused a value: {m.group('model')}: {m.group('msg').strip()}",
                     "give the value vLLM's type (`llmctl validate` checks engine_kwargs values)", None, m.group(0).splitlines()[0],
                     "vllm_failures.md §5")


def _gated(m: re.Match, cfg) -> Diagnosis:
    denied = m.groupdict().get("not_authorized")
    env = ((cfg or {}).get("runtime_env") or {}).get("env_vars") or {}
    var = next((v[2:-1] for v in env.values() if isinstance(v, str) and v.startswith("${")), "HF_TOKEN")
    if denied:
        return Diagnosis("gated-repo", "the token is valid but its account has no access to this gated model",
                         "request access on the model's Hugging Face page, then `llmctl up` again", None, m.group(0), "vllm_failures.md §6")
    return Diagnosis("gated-repo", "the model is gated and the replica had no Hugging Face token with access",
                     f"export {var}=<a token with access> and run `llmctl up` again (gen-config --hf-token-env names the variable)",
                     None, m.group(0), "vllm_failures.md §6")


def _not_found(m: re.Match, cfg) -> Diagnosis:
    return Diagnosis("repo-not-found", "model_source is neither a Hugging Face repo nor a directory with config.json on the node",
                     "fix model_loading_config.model_source (a repo id, or a path present on every node)", None, m.group(0),
                     "vllm_failures.md §7")


def _remote_code(m: re.Match, cfg) -> Diagnosis:
    return Diagnosis("trust-remote-code", "the model's architecture is defined by code in its repository",
                     "set engine_kwargs.trust_remote_code: true if you trust that code (gen-config --trust-remote-code)",
                     {"engine_kwargs.trust_remote_code": True}, m.group(0), "vllm_failures.md §8")


def _arch(m: re.Match, cfg) -> Diagnosis:
    return Diagnosis("unsupported-architecture", f"the vLLM on the cluster does not support {m.group('archs')}",
                     "use a vLLM that supports it, or a model with a supported architecture", None, m.group(0), "vllm_failures.md §8")


def _tp_heads(m: re.Match, cfg) -> Diagnosis:
    heads, tp = int(m.group("heads")), int(m.group("tp"))
    new = max(t for t in range(1, tp + 1) if heads % t == 0)
    return Diagnosis("tp-not-divisible", f"TP {tp} does not divide the {heads} attention heads",
                     f"set engine_kwargs.tensor_parallel_size: {new} (`llmctl plan` lists the valid sizes)",
                     {"engine_kwargs.tensor_parallel_size": new}, m.group(0), "vllm_failures.md §9")


def _pg_devices(m: re.Match, cfg) -> Diagnosis:
    return Diagnosis("not-enough-gpus", f"the replica needs {m.group('required')} devices and its placement group has {m.group('total')}",
                     "lower tensor_parallel_size × pipeline_parallel_size to the GPUs per node (`llmctl check`)", None,
                     m.group(0), "vllm_failures.md §9")


def _cpu_head_dim(m: re.Match, cfg) -> Diagnosis:
    return Diagnosis("cpu-head-dim", "vLLM's CPU attention does not support this model's head_dim",
                     "serve it on a GPU, or a model with head_dim >= 32 (a multiple of 32)", None, m.group(0), "vllm_failures.md §11")


def _sigill(m: re.Match, cfg) -> Diagnosis:
    if _ek(cfg).get("dtype") in ("bfloat16", "auto", None):
        return Diagnosis("cpu-bf16-crash", "the CPU engine died with an illegal instruction (bfloat16 on a CPU without it)",
                         "set engine_kwargs.dtype: float32", {"engine_kwargs.dtype": "float32"}, m.group(0), "vllm_failures.md §11")
    return Diagnosis("cpu-bf16-crash", "the CPU engine died with an illegal instruction", "check the CPU's instruction set",
                     None, m.group(0), "vllm_failures.md §11")


def _mismatch(m: re.Match, cfg) -> Diagnosis:
    return Diagnosis("ray-vllm-mismatch", "Ray Serve LLM cannot import the vLLM on the cluster (a version it does not support)",
                     "install the vLLM version the cluster's Ray pins (Ray 2.60: vllm==0.29.0)", None, m.group(0), "vllm_failures.md §12")


def _timeout(m: re.Match, cfg) -> Diagnosis:
    return Diagnosis("start-timeout", "the engine did not start in time (slow download or load, or a dead worker)",
                     "see `llmctl logs APP`; large models need a longer --timeout", None, m.group(0), "vllm_failures.md §10")


def _lora_rank(m: re.Match, cfg) -> Diagnosis:
    rank, cap = int(m.group("rank")), int(m.group("max"))
    new = next((a for a in (1, 8, 16, 32, 64, 128, 256, 320, 512) if a >= rank), rank)  # vLLM's MaxLoRARanks
    return Diagnosis("lora-rank", f"the adapter's LoRA rank {rank} is above engine_kwargs.max_lora_rank {cap}, so vLLM "
                     "refused to load it (the base model and other adapters keep serving)",
                     f"set engine_kwargs.max_lora_rank: {new} and redeploy, or serve a lower-rank adapter; `llmctl check` "
                     "finds such adapters before deploying", {"engine_kwargs.max_lora_rank": new}, m.group(0),
                     "vllm/lora/peft_helper.py validate_legal")


def _lora_shape(m: re.Match, cfg) -> Diagnosis:
    return Diagnosis("lora-base-model", f"the adapter's tensors ({m.group('b')}) do not fit the served model's layers "
                     f"({m.group('a')}): it was trained for another base model",
                     "serve it on the model it was trained for; `llmctl check` compares adapters with the model", None,
                     m.group(0), "vllm/lora/lora_model.py (weights loaded into the base layers)")


def _lora_modules(m: re.Match, cfg) -> Diagnosis:
    return Diagnosis("lora-target-modules", f"the adapter targets {m.group('got')}, layers this model does not have",
                     "retrain it for this architecture's layer names; `llmctl check` lists them", None, m.group(0),
                     "vllm/lora/lora_model.py check_unexpected_modules")


def _lora_missing(m: re.Match, cfg) -> Diagnosis:
    return Diagnosis("lora-not-found", f"Ray could not read {m.group('folder')}/adapter_config.json: the adapter is not "
                     "there, or the replica's endpoint, AWS_DEFAULT_REGION or credentials do not reach the store "
                     "(ray-project/ray#55502: Ray turns every store error into this 404)",
                     "`llmctl check SERVE_FILE` reads the store with the replica's settings and names the cause", None,
                     m.group(0), "ray/llm/_internal/serve/utils/lora_serve_utils.py")


@dataclass(frozen=True)
class Signature:
    code: str
    pattern: re.Pattern
    make: Callable[..., Diagnosis]


def _sig(code: str, regex: str, make: Callable[..., Diagnosis], flags: int = re.S) -> Signature:
    return Signature(code, re.compile(regex, flags), make)


# Most specific first: a root cause beats the wrapper that reports it.
SIGNATURES: tuple[Signature, ...] = (
    _sig("kv-cache-too-small", r"To serve at least one request with the models?'s? max seq len\s*\((?P<max_model_len>\d+)\),\s*\(?"
         r"(?P<needed_gib>\d+(?:\.\d+)?)\s*Gi?B KV\s+cache is\s*needed, which is larger than the available KV\s+[Cc]ache\s+memory\s*"
         r"\((?P<available_gib>-?\d+(?:\.\d+)?)\s*Gi?B\)\.?(?:\s*(?:Based on the available memory,\s*)?(?i:the\s+)?"
         r"(?i:estimated maximum model length is)\s*(?P<estimated_max_len>\d[\d,]*))?", _kv),
    _sig("kv-cache-too-small", r"The model's max seq len \((?P<max_model_len>\d+)\) is larger than the maximum number of tokens "
         r"that can be stored in KV cache \((?P<kv_tokens>\d+)\)", _kv_v0),
    _sig("context-too-long", r"User-specified max_model_len \((?P<user>\d+)\) is greater than the derived max_model_len "
         r"\((?P<key>\w+)=(?P<derived>[\d.]+) or model_max_length=(?P<model_max_length>\S+) in model's config\.json\)", _over_derived),
    _sig("no-kv-memory", r"No available memory for the cache blocks", _no_kv),
    _sig("gpu-memory-utilization-too-high", r"Free memory on device\s*(?P<device>[^\s(]+)?\s*\((?P<free_gib>\d+(?:\.\d+)?)/"
         r"(?P<total_gib>\d+(?:\.\d+)?) GiB\) on startup is less than (?:desired GPU memory utilization|the engine's budget after "
         r"excluding external process's weights) \((?P<util>\d*\.?\d+), (?P<requested_gib>\d+(?:\.\d+)?) GiB\)", _free_mem),
    _sig("cuda-oom", r"CUDA out of memory\. Tried to allocate \d+(?:\.\d+)? [KMGT]iB|CUDA (?:driver )?error: out of memory", _oom),
    _sig("unknown-engine-arg", r"Unknown engine argument: (?P<key>\w+)|got an unexpected keyword argument '(?P<key2>\w+)'",
         lambda m, cfg: _unknown_arg(_Renamed(m, "key", m.group("key") or m.group("key2")), cfg)),
    _sig("bad-engine-arg-type", r"(?P<count>\d+) validation errors? for (?P<model>\w+Config)\n(?:(?P<field>[^\s\n][^\n]*)\n)?\s*"
         r"(?P<msg>(?:Input should|Value error)[^\n]*?) \[type=(?P<type>\w+)", _bad_type),
    _sig("gated-repo", r"Access to model (?P<repo>\S+) is restricted(?P<not_authorized> and you are not in the authorized list)?"
         r"|Cannot access gated repo for url \S+|You are trying to access a gated repo", _gated),
    _sig("repo-not-found", r"Invalid repository ID or local directory specified: '[^']+'|\S+ is not a local folder and is not a "
         r"valid model identifier|Repository Not Found for url: \S+|Failed to load Hugging Face config for model_id='[^']+'",
         _not_found),
    _sig("trust-remote-code", r"contains custom code which must be executed|requires you to execute the configuration file|"
         r"requires you to execute custom code|consider setting `trust_remote_code=True`|Please pass the argument "
         r"`trust_remote_code=True`", _remote_code),
    _sig("unsupported-architecture", r"Model architectures (?P<archs>\[[^\]]*\]) are not supported for now", _arch),
    _sig("tp-not-divisible", r"Total number of attention heads \((?P<heads>\d+)\) must be divisible by tensor parallel size "
         r"\((?P<tp>\d+)\)", _tp_heads),
    _sig("not-enough-gpus", r"The number of required (?P<device>\w+?)s exceeds the total number of available \w+?s in the "
         r"placement group\. Required number of devices: (?P<required>\d+)\. Total number of devices: (?P<total>\d+)", _pg_devices),
    _sig("cpu-head-dim", r"Unsupported CPU attention configuration: head_dim=\d+|expect head_dim(?:_v)? to be multiples of 32",
         _cpu_head_dim),
    _sig("cpu-bf16-crash", r"Illegal instruction|Failed core proc\(s\): \{[^}]*:\s*-4\}", _sigill),
    _sig("ray-vllm-mismatch", r"No module named 'vllm(?:\.[\w.]+)?'|vLLM is installed but failed to import|Neither vLLM nor "
         r"SGLang is installed|got multiple values for keyword argument '\w+'", _mismatch),
    _sig("lora-rank", r"LoRA rank (?P<rank>\d+) is greater than max_lora_rank (?P<max>\d+)", _lora_rank),
    _sig("lora-base-model", r"Failed to load lora model:.*?The size of tensor a \((?P<a>\d+)\) must match the size of "
         r"tensor b \((?P<b>\d+)\)", _lora_shape),
    _sig("lora-target-modules", r"expected target modules in \[?[^\n]*? but received (?P<got>\[[^\]]*\])", _lora_modules),
    _sig("lora-not-found", r"Unable to find LoRA adapter config file \\?\"?adapter_config\.json\\?\"? in folder "
         r"(?P<folder>\S+?)\.? Check", _lora_missing),
    _sig("start-timeout", r"Timed out waiting for engine core processes to start|The actor died unexpectedly before finishing "
         r"this task", _timeout),
)


class _Renamed:
    """A match whose ``group(name)`` returns a value chosen by the signature."""

    def __init__(self, m: re.Match, name: str, value: str):
        self._m, self._name, self._value = m, name, value

    def group(self, g=0):
        return self._value if g == self._name else self._m.group(g)


def diagnose(text: str, llm_config: Optional[dict] = None) -> list[Diagnosis]:
    """Every failure signature found in ``text`` (a log tail and/or Ray's
    message), most specific first, one per code."""
    norm = normalize(text)
    out: list[Diagnosis] = []
    seen: set[str] = set()
    for sig in SIGNATURES:
        if sig.code in seen:
            continue
        m = sig.pattern.search(norm)
        if m is None:
            continue
        d = _oom(m, llm_config, norm) if sig.make is _oom else sig.make(m, llm_config)
        out.append(Diagnosis(d.code, d.cause, d.fix, d.changes, " ".join(d.evidence.split())[:300], d.source))
        seen.add(sig.code)
    return out


def apply_changes(llm_config: dict, changes: dict[str, Any]) -> dict:
    """A deep copy of ``llm_config`` with the dotted paths set."""
    import copy

    cfg = copy.deepcopy(llm_config)
    for dotted, value in changes.items():
        node = cfg
        *parents, last = dotted.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return cfg
