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

from llmctl import sizing
from llmctl.catalog import ModelArch, ModelProfile
from llmctl.errors import param
from llmctl.secrets import looks_like_hf_token
from llmctl.sources import CLOUD_SCHEMES, is_cloud_uri, is_env_name
from llmctl.serve_facts import LOOPBACK_HOST
from llmctl.hardware import CPU_DEFAULT_MAX_MODEL_LEN, CPU_DTYPE, CPU_MIN_KV_CACHE_BYTES, GPUType  # noqa: F401 (re-exported)

REMOTE_LORA_SCHEMES = CLOUD_SCHEMES
DEFAULT_APP_NAME = "llm_app"
DEFAULT_ROUTE_PREFIX = "/"
DEFAULT_TOKEN_ENV = "HF_TOKEN"
DEFAULT_LORA_ADAPTERS = 16


_APP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


# --------------------------------------------------------------------------
# Single answers


def parse_flag(value, *, flag: str, parse):
    """A flag's value through its parser (None when not given); a bad value is
    a UsageError naming the flag: ``--tp: TP 3 does not divide …``. gen-config,
    plan and the Python API all report bad values through here. ``flag`` is
    the flag's text (prompts) or a parameter marker (``llmctl.errors.param``:
    the core), which the CLI spells as the flag."""
    from llmctl.errors import LlmctlError, UsageError, template_of

    if value is None:
        return None
    try:
        return parse(value)
    except ValueError as e:
        raise UsageError(f"{flag}: {template_of(e)}") from None
    except LlmctlError as e:
        raise UsageError(f"{flag}: {e.template}") from None


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


def tp_problem(arch: Optional[ModelArch], tp: int, pp: int, gpu: GPUType, expert_parallel: bool = False) -> Optional[str]:
    """Why a TP size cannot work, or None (llmctl.sizing's one rule)."""
    return sizing.tp_problem_on_node(arch, gpu, tp, pp, expert_parallel)


def valid_tp_sizes(arch: Optional[ModelArch], gpu: GPUType, pp: int = 1) -> list[int]:
    return sizing.tp_sizes_on_node(arch, gpu, pp)


def parse_tp(text: str | int, *, arch: Optional[ModelArch], gpu: GPUType, pp: int = 1, expert_parallel: bool = False) -> int:
    tp = parse_int(text, what="tensor-parallel size", minimum=1)
    problem = tp_problem(arch, tp, pp, gpu, expert_parallel)
    if problem:
        raise ValueError(problem)
    return tp


def parse_pp(text: str | int, *, arch: Optional[ModelArch]) -> int:
    pp = parse_int(text, what="pipeline-parallel size", minimum=1)
    if arch is not None and pp > arch.num_hidden_layers:
        raise ValueError(f"PP {pp} exceeds the model's {arch.num_hidden_layers} layers")
    return pp


def parse_replicas(text: str | int, *, what: str, minimum: int) -> int:
    return parse_int(text, what=what, minimum=minimum)


def replicas_problem(min_replicas: int, max_replicas: int) -> Optional[str]:
    """The one min/max replicas rule (gen-config and validate)."""
    if min_replicas > max_replicas:
        return (
            f"min_replicas ({min_replicas}) must be <= max_replicas ({max_replicas}): "
            "the autoscaler never goes below min_replicas"
        )
    return None


def check_replicas(min_replicas: int, max_replicas: int) -> None:
    problem = replicas_problem(min_replicas, max_replicas)
    if problem:
        raise ValueError(problem)


def context_problem(arch: Optional[ModelArch], max_model_len: int) -> Optional[str]:
    """The one context-length rule (gen-config, plan, validate): vLLM refuses a
    max_model_len beyond the model's context unless VLLM_ALLOW_LONG_MAX_MODEL_LEN."""
    limit = None if arch is None else arch.context_limit
    if limit is None or max_model_len <= limit:
        return None
    rs = arch.rope_scaling or {}
    kind = rs.get("rope_type") or rs.get("type")
    return (
        f"max_model_len {max_model_len} exceeds the model's context of {limit} tokens "
        f"(max_position_embeddings {arch.max_position_embeddings}" + (f", rope_scaling {kind}" if rs else "") + ")"
    )


def parse_max_model_len(text: str | int | None, *, arch: Optional[ModelArch]) -> Optional[int]:
    """An int (``8192``, ``8K`` = 8,192, ``8k`` = 8,000 as vLLM reads them), or
    empty / ``auto`` for the default (llmctl.sizing's choice: the longest that
    fits, up to the default context)."""
    if text is None:
        return None
    if isinstance(text, str):
        s = text.strip().lower()
        if s in ("", "auto", "none"):
            return None
        value = parse_tokens(text.strip(), what="max_model_len")
    else:
        value = parse_int(text, what="max_model_len", minimum=1)
    if value < 1:
        raise ValueError("max_model_len must be >= 1")
    problem = context_problem(arch, value)
    if problem:
        raise ValueError(problem)
    return value


def parse_gpu_memory_utilization(text: str | float) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"gpu_memory_utilization must be a fraction in (0, 1], got '{text}'") from None
    if not 0 < value <= 1:
        raise ValueError(f"gpu_memory_utilization must be a fraction in (0, 1], got {value:g}")
    return value


def parse_tokens(text: str | int, *, what: str) -> int:
    """A token count as vLLM's CLI reads one (``human_readable_int``, the one
    rule: llmctl.engine_args.values.human_int): ``2048``, ``2k`` = 2,000,
    ``2K`` = 2,048."""
    from llmctl.engine_args.values import human_int

    if isinstance(text, str) and re.fullmatch(r"\s*\d+(\.\d+)?[kKmMgG]\s*", text):
        try:
            return parse_int(human_int(text.strip()), what=what, minimum=1)
        except ValueError as e:
            raise ValueError(f"{what} must be an integer, got '{text}' ({e})") from None
    return parse_int(text, what=what, minimum=1)


def parse_seconds(text: str | float, *, what: str) -> float:
    """A delay in seconds: ``30``, ``30s``, ``2.5``, ``1m``."""
    s = str(text).strip().lower()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|m)?", s)
    if not m:
        raise ValueError(f"{what} must be a number of seconds (30, 30s, 1m), got '{text}'")
    value = float(m.group(1)) * (60 if m.group(2) == "m" else 1)
    return value


def parse_initial_replicas(text: str | int, *, min_replicas: int, max_replicas: int) -> int:
    n = parse_int(text, what="initial replicas", minimum=0)
    if not min_replicas <= n <= max_replicas:
        raise ValueError(f"initial replicas ({n}) must be between min_replicas ({min_replicas}) and max_replicas ({max_replicas})")
    return n


def ongoing_problem(target: Optional[int], max_ongoing: Optional[int]) -> Optional[str]:
    """The one target-vs-max rule (gen-config and validate)."""
    if target is not None and max_ongoing is not None and max_ongoing < target:
        return (f"max_ongoing_requests ({max_ongoing}) must be >= target_ongoing_requests ({target}): a replica never "
                "gets more than max_ongoing_requests, so the target could never be reached and Serve would not scale up")
    return None


def parse_lora_path(text: Optional[str]) -> Optional[str]:
    if text is None or str(text).strip() == "":
        return None
    s = str(text).strip()
    if not is_cloud_uri(s):
        raise ValueError(
            f"LoRA path '{s}' must be a remote URI (s3://, gs://, abfss:// or azure://): "
            "Ray Serve LLM downloads adapters from cloud storage"
        )
    return s.rstrip("/")


LORA_ENV_S3 = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
               "AWS_SESSION_TOKEN")
LORA_ENV_GS = ("GOOGLE_APPLICATION_CREDENTIALS",)


def default_lora_env(path: Optional[str], environ: dict) -> tuple:
    """The store settings set in ``environ``, as (key, variable) references for
    the replicas' runtime_env. boto3 (Ray's S3 loader) reads the region from
    AWS_DEFAULT_REGION only: a shell with just AWS_REGION gets
    ``AWS_DEFAULT_REGION: ${AWS_REGION}`` (ray-project/ray#55502)."""
    if not path:
        return ()
    if path.startswith("s3://"):
        pairs = [(v, v) for v in LORA_ENV_S3 if environ.get(v)]
        if environ.get("AWS_REGION") and not environ.get("AWS_DEFAULT_REGION"):
            pairs.append(("AWS_DEFAULT_REGION", "AWS_REGION"))
        return tuple(sorted(pairs))
    if path.startswith("gs://"):
        return tuple((v, v) for v in LORA_ENV_GS if environ.get(v))
    return ()


def parse_lora_env(text: str) -> tuple:
    """``KEY[=VAR],...`` (or ``none``) -> ((KEY, VAR), ...): KEY is set to ``${VAR}``."""
    s = str(text).strip()
    if s.lower() in ("", "none"):
        return ()
    out = []
    for item in (p.strip() for p in s.split(",") if p.strip()):
        key, _, var = item.partition("=")
        key, var = key.strip(), (var.strip() or key.strip())
        if var.startswith("${") and var.endswith("}"):
            var = var[2:-1]
        for name in (key, var):
            if not is_env_name(name):
                raise ValueError(f"'{item}': expected KEY or KEY=VAR with environment variable NAMES (values are never written)")
        out.append((key, var))
    return tuple(sorted(set(out)))


def parse_env_name(text: str) -> str:
    s = str(text).strip()
    if looks_like_hf_token(s):
        raise ValueError("that looks like a token; give the NAME of the environment variable that holds it (e.g. HF_TOKEN)")
    if not is_env_name(s):
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
    max_loras: Optional[int] = None  # vLLM's adapters in one batch (default: max_lora_adapters)
    max_cpu_loras: Optional[int] = None  # vLLM's CPU cache of adapters (default: max_loras)
    # The store's settings the replicas get by reference: (runtime_env key, variable), e.g.
    # ("AWS_DEFAULT_REGION", "AWS_REGION"): `AWS_DEFAULT_REGION: ${AWS_REGION}` (never a value).
    lora_env: tuple = ()
    hf_token_env: Optional[str] = None
    fast_download: bool = False
    gpu_memory_utilization: Optional[float] = None
    # Autoscaling (llmctl.sizing.autoscale derives the defaults from the plan).
    target_ongoing_requests: Optional[int] = None
    max_ongoing_requests: Optional[int] = None
    initial_replicas: Optional[int] = None
    upscale_delay_s: Optional[float] = None
    downscale_delay_s: Optional[float] = None
    expected_tokens: Optional[int] = None
    # Serving for latency (llmctl.latency): the request router's name and the latency goals of the autoscaling policy.
    router: Optional[str] = None
    latency_goals: tuple = ()
    # vLLM engine arguments beyond llmctl's own keys (typed by llmctl.engine_args).
    engine_extra: dict = field(default_factory=dict)
    # llmctl.sizing's choice behind tp / max_model_len: the plan and the reasons
    # (what was chosen and why), for summaries and the fit policy; and the
    # derivation behind the autoscaling targets (for a YAML comment).
    choice: Optional[sizing.Choice] = field(default=None, compare=False)
    targets: Optional[sizing.Targets] = field(default=None, compare=False)
    # The pool of a prefill/decode app ("prefill" or "decode"; llmctl.patterns), None otherwise.
    role: Optional[str] = None
    # Why the layout is not one node's (llmctl.sizing.layouts.default_layout), for summaries.
    layout_note: Optional[str] = field(default=None, compare=False)

    @property
    def dp(self) -> int:
        """Data-parallel ranks per group (engine_kwargs.data_parallel_size)."""
        v = self.engine_extra.get("data_parallel_size", 1)
        return v if isinstance(v, int) and v > 1 else 1

    @property
    def expert_parallel(self) -> bool:
        return self.engine_extra.get("enable_expert_parallel") is True

    @property
    def plan(self) -> Optional[sizing.Plan]:
        return self.choice.plan if self.choice is not None else None

    @property
    def arch(self) -> Optional[ModelArch]:
        return self.profile.architecture

    @property
    def source(self) -> str:
        return self.profile.hf_repo

    @property
    def effective_max_model_len(self) -> Optional[int]:
        if self.max_model_len is None and self.gpu.is_cpu:
            return CPU_DEFAULT_MAX_MODEL_LEN
        return self.max_model_len

    def check(self) -> None:
        """Cross-field checks; raises ValueError naming the field."""
        check_replicas(self.min_replicas, self.max_replicas)
        problem = tp_problem(self.arch, self.tp, self.pp, self.gpu, self.expert_parallel)
        if problem:
            raise ValueError(problem)
        if self.max_model_len is not None:
            parse_max_model_len(self.max_model_len, arch=self.arch)
        if self.max_lora_adapters < 1:
            raise ValueError("max LoRA adapters per replica must be >= 1")
        loras = self.max_loras or self.max_lora_adapters
        if self.max_cpu_loras is not None and self.max_cpu_loras < loras:
            raise ValueError(f"max CPU LoRAs ({self.max_cpu_loras}) must be >= max LoRAs per batch ({loras}); vLLM refuses less")
        if self.initial_replicas is not None:
            parse_initial_replicas(self.initial_replicas, min_replicas=self.min_replicas, max_replicas=self.max_replicas)
        problem = ongoing_problem(self.target_ongoing_requests, self.max_ongoing_requests)
        if problem:
            raise ValueError(problem)


@dataclass(frozen=True)
class DeploymentSpec:
    app_name: str = DEFAULT_APP_NAME
    route_prefix: str = DEFAULT_ROUTE_PREFIX
    models: tuple[ModelSpec, ...] = field(default_factory=tuple)
    http_host: str = LOOPBACK_HOST
    http_port: int = 8000
    # Autoscaling of the OpenAiIngress deployment (None: Ray's single replica).
    ingress: Optional[sizing.IngressScaling] = None
    # The environment variable holding the endpoint's API key (llmctl's API-key ingress); None: no key.
    api_key_env: Optional[str] = None

    @property
    def pattern(self) -> str:
        """The Ray Serve LLM builder the app needs (llmctl.patterns): "pd" (a
        prefill and a decode pool of one model), "dp" (one model with
        data-parallel ranks), else "openai"."""
        if any(m.role for m in self.models):
            return "pd"
        if any(m.dp > 1 for m in self.models):
            return "dp"
        return "openai"

    def check(self) -> None:
        if not self.models:
            raise ValueError("no model in the app")
        if self.pattern == "pd":
            if [m.role for m in self.models] != ["prefill", "decode"] or self.models[0].model_id != self.models[1].model_id:
                raise ValueError("a prefill/decode app has one model: its prefill pool, then its decode pool")
            for m in self.models:
                m.check()
            return self._check_app()
        if self.pattern == "dp" and len(self.models) > 1:
            raise ValueError(f"{param('dp')}: Ray's data-parallel builder (build_dp_openai_app) serves one model; "
                             "generate one app per model")
        seen: dict[str, int] = {}
        for i, m in enumerate(self.models):
            m.check()
            if m.model_id in seen:
                raise ValueError(f"duplicate model id '{m.model_id}' (models {seen[m.model_id] + 1} and {i + 1}); give each a distinct {param('model_id')}")
            seen[m.model_id] = i
        self._check_app()

    def _check_app(self) -> None:
        parse_app_name(self.app_name)
        parse_route_prefix(self.route_prefix)
        if self.api_key_env is not None:
            parse_env_name(self.api_key_env)


def is_bucket(source: str) -> bool:
    return is_cloud_uri(source)
