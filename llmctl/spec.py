"""DeploymentSpec: the one place answers are checked.

Every answer — from a flag, from a prompt, or a default — goes through the
``parse_*`` functions below; the questionary prompts call the same functions in
their ``validate=`` callbacks, so a flag and a prompt can never disagree. The
parse functions raise :class:`ValueError` with a message that does not name
the flag; the caller (flags or prompt) adds where the answer came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from llmctl.catalog import BUCKET_SCHEMES, ModelArch, ModelProfile
from llmctl.hardware import GPUType

REMOTE_LORA_SCHEMES = ("s3://", "gs://", "abfss://", "azure://")
DEFAULT_APP_NAME = "llm_app"
DEFAULT_ROUTE_PREFIX = "/"
DEFAULT_TOKEN_ENV = "HF_TOKEN"
DEFAULT_LORA_ADAPTERS = 16

# vLLM CPU settings measured to work on this machine (DESIGN.md): bfloat16
# crashed ("Illegal instruction"), float32 works; CUDA graphs do not apply.
CPU_DTYPE = "float32"
CPU_DEFAULT_MAX_MODEL_LEN = 512
CPU_MIN_KV_CACHE_BYTES = 64 * 1024 * 1024

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_APP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


# --------------------------------------------------------------------------
# Single answers


def parse_int(text: str | int, *, what: str, minimum: int) -> int:
    if isinstance(text, bool):
        raise ValueError(f"{what} must be an integer")
    if isinstance(text, int):
        value = text
    else:
        s = str(text).strip()
        if not re.fullmatch(r"[+-]?\d+", s):
            raise ValueError(f"{what} must be an integer, got '{text}'")
        value = int(s)
    if value < minimum:
        raise ValueError(f"{what} must be >= {minimum}, got {value}")
    return value


def parse_gpu(text: str) -> GPUType:
    from llmctl.hardware import get_gpu
    from llmctl.errors import UsageError

    try:
        return get_gpu(text)
    except UsageError as e:
        raise ValueError(str(e).split(": ", 1)[1]) from None


def tp_problem(arch: Optional[ModelArch], tp: int, pp: int, gpu: GPUType) -> Optional[str]:
    """Why a TP size cannot work, or None. Same rule everywhere (flags, prompts,
    validate): the node's size here, vLLM's model rules in llmctl.sizing."""
    from llmctl import sizing

    per_node = gpu.gpus_per_node
    if tp * pp > per_node:
        where = "a CPU-only replica runs one engine worker" if gpu.is_cpu else f"one {gpu.name} node has at most {per_node} GPUs"
        return f"TP {tp} x PP {pp} = {tp * pp} workers, but {where}"
    if arch is None:
        return None
    problem = sizing.tp_problem(arch, tp)
    if problem:
        return f"{problem} (valid: {', '.join(map(str, valid_tp_sizes(arch, gpu, pp))) or 'none'})"
    if arch.num_hidden_layers < pp:
        return f"PP {pp} exceeds the model's {arch.num_hidden_layers} layers"
    return None


def valid_tp_sizes(arch: Optional[ModelArch], gpu: GPUType, pp: int = 1) -> list[int]:
    from llmctl import sizing

    limit = gpu.gpus_per_node // max(pp, 1)
    if arch is None:
        return [t for t in range(1, limit + 1) if t & (t - 1) == 0]
    return sizing.valid_tp_sizes(arch, limit)


def parse_tp(text: str | int, *, arch: Optional[ModelArch], gpu: GPUType, pp: int = 1) -> int:
    tp = parse_int(text, what="tensor-parallel size", minimum=1)
    problem = tp_problem(arch, tp, pp, gpu)
    if problem:
        raise ValueError(problem)
    return tp


def parse_replicas(text: str | int, *, what: str, minimum: int) -> int:
    return parse_int(text, what=what, minimum=minimum)


def check_replicas(min_replicas: int, max_replicas: int) -> None:
    if min_replicas > max_replicas:
        raise ValueError(
            f"min_replicas ({min_replicas}) must be <= max_replicas ({max_replicas}): "
            "the autoscaler can never scale below its minimum"
        )


def context_limit(arch: Optional[ModelArch]) -> Optional[int]:
    """The longest max_model_len vLLM accepts for the model without
    VLLM_ALLOW_LONG_MAX_MODEL_LEN (vLLM's _get_and_verify_max_len: the rope
    factor extends max_position_embeddings except for llama3/longrope/su/mrope
    scaling, which already bake it into max_position_embeddings; yarn scales the
    original context)."""
    if arch is None or arch.max_position_embeddings is None:
        return None
    limit = arch.max_position_embeddings
    rs = arch.rope_scaling or {}
    kind = rs.get("rope_type") or rs.get("type")
    if rs and kind not in ("llama3", "longrope", "su", "mrope", "default", None):
        factor = arch.rope_factor
        if kind == "yarn" and rs.get("original_max_position_embeddings"):
            limit = max(limit, int(rs["original_max_position_embeddings"] * factor))
        elif factor > 1:
            limit = int(limit * factor)
    return limit


def parse_max_model_len(text: str | int | None, *, arch: Optional[ModelArch]) -> Optional[int]:
    """An int (``8192``, ``8k``, ``32K``), or empty / ``auto`` for vLLM's default."""
    if text is None:
        return None
    if isinstance(text, str):
        s = text.strip().lower()
        if s in ("", "auto", "none"):
            return None
        m = re.fullmatch(r"(\d+)\s*k", s)
        value = int(m.group(1)) * 1024 if m else parse_int(s, what="max_model_len", minimum=1)
    else:
        value = parse_int(text, what="max_model_len", minimum=1)
    if value < 1:
        raise ValueError("max_model_len must be >= 1")
    limit = context_limit(arch)
    if limit is not None and value > limit:
        raise ValueError(
            f"max_model_len {value} exceeds the model's context of {limit} tokens "
            f"(max_position_embeddings {arch.max_position_embeddings}"
            + (f", rope_scaling {arch.rope_scaling.get('rope_type') or arch.rope_scaling.get('type')}" if arch.rope_scaling else "")
            + ")"
        )
    return value


def parse_lora_path(text: Optional[str]) -> Optional[str]:
    if text is None or str(text).strip() == "":
        return None
    s = str(text).strip()
    if not s.startswith(REMOTE_LORA_SCHEMES):
        raise ValueError(
            f"LoRA path '{s}' must be a remote URI (s3://, gs://, abfss:// or azure://): "
            "Ray Serve LLM downloads adapters from cloud storage"
        )
    return s.rstrip("/")


def parse_env_name(text: str) -> str:
    s = str(text).strip()
    if s.startswith("hf_") and len(s) > 20:
        raise ValueError("that looks like a token; give the NAME of the environment variable that holds it (e.g. HF_TOKEN)")
    if not _ENV_NAME.match(s):
        raise ValueError(f"'{s}' is not an environment variable name (letters, digits, '_'; not starting with a digit)")
    return s


def parse_app_name(text: str) -> str:
    s = str(text).strip()
    if not _APP_NAME.match(s):
        raise ValueError(f"app name '{text}' must start with a letter or digit and use only letters, digits, '_', '.', '-'")
    return s


def parse_route_prefix(text: str) -> str:
    s = str(text).strip()
    if not s.startswith("/"):
        raise ValueError(f"route prefix '{text}' must start with '/'")
    if s != "/" and s.endswith("/"):
        raise ValueError(f"route prefix '{text}' must not end with '/'")
    if any(c.isspace() for c in s):
        raise ValueError(f"route prefix '{text}' must not contain spaces")
    return s


def parse_model_id(text: str) -> str:
    s = str(text)
    if s.strip() == "":
        raise ValueError("model id must not be empty")
    if s != s.strip():
        raise ValueError("model id must not start or end with whitespace")
    if any(ord(c) < 32 for c in s):
        raise ValueError("model id must not contain control characters")
    return s


# --------------------------------------------------------------------------
# The spec


@dataclass(frozen=True)
class ModelSpec:
    """Everything llmctl writes for one model (one LLMConfig)."""

    profile: ModelProfile
    model_id: str
    gpu: GPUType
    tp: int = 1
    pp: int = 1
    min_replicas: int = 1
    max_replicas: int = 1
    max_model_len: Optional[int] = None
    lora_path: Optional[str] = None
    max_lora_adapters: int = DEFAULT_LORA_ADAPTERS
    max_lora_rank: Optional[int] = None
    hf_token_env: Optional[str] = None
    fast_download: bool = False
    gpu_memory_utilization: Optional[float] = None

    @property
    def arch(self) -> Optional[ModelArch]:
        return self.profile.architecture

    @property
    def source(self) -> str:
        return self.profile.hf_repo

    @property
    def effective_max_model_len(self) -> Optional[int]:
        if self.max_model_len is not None:
            return self.max_model_len
        if self.gpu.is_cpu:
            return CPU_DEFAULT_MAX_MODEL_LEN
        return None

    def check(self) -> None:
        """Cross-field checks; raises ValueError naming the field."""
        check_replicas(self.min_replicas, self.max_replicas)
        problem = tp_problem(self.arch, self.tp, self.pp, self.gpu)
        if problem:
            raise ValueError(problem)
        if self.max_model_len is not None:
            parse_max_model_len(self.max_model_len, arch=self.arch)
        if self.max_lora_adapters < 1:
            raise ValueError("max LoRA adapters per replica must be >= 1")


@dataclass(frozen=True)
class DeploymentSpec:
    app_name: str = DEFAULT_APP_NAME
    route_prefix: str = DEFAULT_ROUTE_PREFIX
    models: tuple[ModelSpec, ...] = field(default_factory=tuple)
    http_host: str = "127.0.0.1"
    http_port: int = 8000

    def check(self) -> None:
        if not self.models:
            raise ValueError("no model in the app")
        seen: dict[str, int] = {}
        for i, m in enumerate(self.models):
            m.check()
            if m.model_id in seen:
                raise ValueError(f"duplicate model id '{m.model_id}' (models {seen[m.model_id] + 1} and {i + 1}); give each a distinct --model-id")
            seen[m.model_id] = i
        parse_app_name(self.app_name)
        parse_route_prefix(self.route_prefix)


def is_bucket(source: str) -> bool:
    return source.startswith(BUCKET_SCHEMES)
