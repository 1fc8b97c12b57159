"""Flags, the Session that answers questions from flags / prompts / defaults,
and the questionary front-end (imported lazily: only the interactive path
needs it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from llmctl import spec as S
from llmctl.errors import LlmctlError, MissingAnswerError, UsageError

_MISSING = object()
CUSTOM = "__custom__"


@dataclass
class Flags:
    """Raw flag values of `llmctl gen-config` (None = not given)."""

    models: list[str] = field(default_factory=list)
    model_ids: list[str] = field(default_factory=list)
    gpus: list[str] = field(default_factory=list)
    gpus_per_node: list[str] = field(default_factory=list)  # N or TYPE=N: the node size of the layout (and KubeRay pods)
    tps: list[str] = field(default_factory=list)
    pps: list[str] = field(default_factory=list)
    min_replicas: list[str] = field(default_factory=list)
    max_replicas: list[str] = field(default_factory=list)
    max_model_lens: list[str] = field(default_factory=list)
    lora_paths: list[str] = field(default_factory=list)
    max_lora_adapters: list[str] = field(default_factory=list)
    max_lora_ranks: list[str] = field(default_factory=list)
    max_loras: list[str] = field(default_factory=list)
    max_cpu_loras: list[str] = field(default_factory=list)
    lora_envs: list[str] = field(default_factory=list)  # KEY or KEY=VAR, for every model's store
    hf_token_envs: list[str] = field(default_factory=list)
    target_ongoing_requests: list[str] = field(default_factory=list)
    max_ongoing_requests: list[str] = field(default_factory=list)
    initial_replicas: list[str] = field(default_factory=list)
    upscale_delays: list[str] = field(default_factory=list)
    downscale_delays: list[str] = field(default_factory=list)
    expected_tokens: list[str] = field(default_factory=list)
    engine_args: list[str] = field(default_factory=list)
    dtypes: list[str] = field(default_factory=list)
    quantizations: list[str] = field(default_factory=list)
    kv_cache_dtypes: list[str] = field(default_factory=list)
    max_num_seqs: list[str] = field(default_factory=list)
    enable_prefix_caching: Optional[bool] = None
    trust_remote_code: Optional[bool] = None
    tool_calling: Optional[bool] = None
    reasoning: Optional[bool] = None
    inputs: Optional[str] = None  # all | image | text (multimodal recipes)
    fast_download: Optional[bool] = None
    gpu_memory_utilization: Optional[float] = None
    app_name: Optional[str] = None
    route_prefix: Optional[str] = None
    http_host: Optional[str] = None
    http_port: Optional[int] = None
    api_key_env: Optional[str] = None  # "" = explicitly none
    # Serving patterns (llmctl.patterns): data-parallel attention + expert parallelism, prefill/decode.
    dp: Optional[str] = None
    enable_expert_parallel: Optional[bool] = None
    pd: Optional[str] = None  # PREFILL:DECODE
    kv_connector: Optional[str] = None
    prefill_tp: Optional[str] = None
    decode_tp: Optional[str] = None
    prefill_args: list[str] = field(default_factory=list)  # KEY=VALUE engine arguments of the prefill pool only
    decode_args: list[str] = field(default_factory=list)


def per_model(values: list[str], flag: str, n: int, i: int) -> Optional[str]:
    """A repeatable per-model flag: once for all models, or once per --model."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    if len(values) != n:
        raise UsageError(f"{flag} given {len(values)} times for {n} models; give it once (for all) or once per --model")
    return values[i]


class Session:
    """Asks questions on a terminal, or takes flags / defaults without one."""

    def __init__(self, *, interactive: bool, assume_yes: bool):
        self.interactive = interactive
        self.assume_yes = assume_yes

    def asks(self, flag_value: Any, default: Any = _MISSING, ask: Optional[Callable[[], Any]] = None) -> bool:
        """Whether :meth:`answer` would prompt for this question."""
        return flag_value is None and self.interactive and ask is not None and not (self.assume_yes and default is not _MISSING)

    @staticmethod
    def parse_flag(flag_value: Any, *, flag: str, parse: Callable[[Any], Any]) -> Any:
        """A flag's parsed value (None when not given); bad values name the flag."""
        return S.parse_flag(flag_value, flag=flag, parse=parse)

    def answer(
        self,
        flag_value: Any,
        *,
        flag: str,
        label: str,
        parse: Callable[[Any], Any],
        default: Any = _MISSING,
        ask: Optional[Callable[[], Any]] = None,
    ) -> Any:
        if flag_value is not None:
            return S.parse_flag(flag_value, flag=flag, parse=parse)
        if self.interactive and ask is not None and not (self.assume_yes and default is not _MISSING):
            return ask()
        if default is not _MISSING and (self.assume_yes or ask is None):
            return default
        if default is not _MISSING:
            raise MissingAnswerError(f"no {label} given and no terminal to ask on; pass {flag} (or --yes to accept the default)")
        raise MissingAnswerError(f"no {label} given and no terminal to ask on; pass {flag}")


# --------------------------------------------------------------------------
# questionary front-end (imported lazily: only the interactive path needs it)


def _validator(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def check(text: str):
        try:
            parse(text)
        except (ValueError, LlmctlError) as e:
            return str(getattr(e, "message", e))
        return True

    return check


def ask_text(message: str, parse: Callable[[str], Any], default: str = "", instruction: Optional[str] = None) -> Any:
    import questionary

    raw = questionary.text(message, default=default, validate=_validator(parse), instruction=instruction).unsafe_ask()
    return parse(raw)


def ask_select(message: str, choices: Sequence[tuple[str, Any]], default: Any = None, search: bool = False) -> Any:
    import questionary

    qchoices = [questionary.Choice(title=t, value=v) for t, v in choices]
    dflt = next((c for c in qchoices if c.value == default), None)
    kwargs: dict[str, Any] = {}
    if search:
        kwargs.update(use_search_filter=True, use_jk_keys=False)
    return questionary.select(message, choices=qchoices, default=dflt, **kwargs).unsafe_ask()


def ask_confirm(message: str, default: bool) -> bool:
    import questionary

    return bool(questionary.confirm(message, default=default).unsafe_ask())


# --------------------------------------------------------------------------
# The flow

