"""Flags, the Session that answers questions from flags / prompts / defaults,
and the terminal the prompts go to (handed over by the CLI: no UI import
here)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol, Sequence

from llmctl import spec as S
from llmctl.errors import MissingAnswerError, UsageError

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
    router: Optional[str] = None  # pow2 | prefix (llmctl.latency), for every model
    autoscale_on: Optional[str] = None  # ttft_p95=500ms (llmctl.latency), for every model
    autoscale_window: Optional[float] = None
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
# The terminal the questions go to: the CLI hands over its front-end
# (llmctl.cli.ask, questionary) with use_terminal; the core never imports one.


class Terminal(Protocol):
    def text(self, message: str, parse: Callable[[str], Any], default: str = "",
             instruction: Optional[str] = None) -> Any: ...

    def select(self, message: str, choices: Sequence[tuple[str, Any]], default: Any = None,
               search: bool = False) -> Any: ...

    def confirm(self, message: str, default: bool) -> bool: ...


_terminal: Optional[Terminal] = None


def use_terminal(terminal: Optional[Terminal]) -> None:
    """Where an interactive :class:`Session`'s questions are asked (the CLI's
    ``llmctl.cli.ask``); None: nowhere."""
    global _terminal
    _terminal = terminal


def _asked() -> Terminal:
    if _terminal is None:
        raise MissingAnswerError("no terminal to ask on (llmctl.prompts.use_terminal was not called)")
    return _terminal


def ask_text(message: str, parse: Callable[[str], Any], default: str = "", instruction: Optional[str] = None) -> Any:
    return _asked().text(message, parse, default=default, instruction=instruction)


def ask_select(message: str, choices: Sequence[tuple[str, Any]], default: Any = None, search: bool = False) -> Any:
    return _asked().select(message, choices, default=default, search=search)


def ask_confirm(message: str, default: bool) -> bool:
    return _asked().confirm(message, default)


# --------------------------------------------------------------------------
# The flow

