"""The "autoscaling details" questions: targets derived from the sizing plan
(llmctl.sizing.derive_targets), flags win, a terminal may change them."""

from __future__ import annotations

from typing import Any, Optional

from llmctl import sizing
from llmctl import spec as S
from llmctl.catalog import ModelProfile
from llmctl.errors import UsageError
from llmctl.hardware import GPUType
from llmctl.prompts.session import Flags, Session, ask_confirm, ask_text

def ask_autoscaling(session: Session, flags: Flags, pm, profile: ModelProfile, gpu: GPUType, choice: sizing.Choice,
                     min_r: int, max_r: int, *, max_num_seqs: Optional[int] = None) -> dict[str, Any]:
    """target / max ongoing requests, initial replicas, delays: flags win,
    otherwise llmctl.sizing.derive_targets' values from the plan (the one
    rule); a terminal offers to change them in one "autoscaling details" step."""
    given = {
        "target": pm(flags.target_ongoing_requests, "--target-ongoing-requests"),
        "max": pm(flags.max_ongoing_requests, "--max-ongoing-requests"),
        "initial": pm(flags.initial_replicas, "--initial-replicas"),
        "up": pm(flags.upscale_delays, "--upscale-delay"),
        "down": pm(flags.downscale_delays, "--downscale-delay"),
        "tokens": pm(flags.expected_tokens, "--expected-tokens"),
    }
    parse_tokens = lambda v: S.parse_tokens(v, what="expected tokens per request")  # noqa: E731
    expected = S.parse_flag(given["tokens"], flag="--expected-tokens", parse=parse_tokens)

    def derive(tokens):
        return sizing.derive_targets(choice.plan, max_model_len=choice.max_model_len, expected_tokens=tokens,
                                     max_num_seqs=max_num_seqs, gpu_memory_bytes=gpu.memory_bytes or None, cpu=gpu.is_cpu)

    targets = derive(expected)
    details = session.interactive and not session.assume_yes and all(v is None for v in given.values()) and ask_confirm(
        "Autoscaling details: " + (f"target {targets.target_ongoing_requests}, at most {targets.max_ongoing_requests} "
                                   "ongoing requests per replica" if targets else "Serve's defaults")
        + ". Change them?", False)
    if details:
        expected = ask_text("Expected tokens per request (prompt + output):", parse_tokens,
                            default=str(expected or sizing.DEFAULT_EXPECTED_TOKENS))
        targets = derive(expected)
    ask = (lambda f: f) if details else (lambda f: None)
    parse_n = lambda what: (lambda v: S.parse_int(v, what=what, minimum=1))  # noqa: E731
    target = session.answer(
        given["target"], flag="--target-ongoing-requests", label="target ongoing requests",
        parse=parse_n("target ongoing requests"), default=targets.target_ongoing_requests if targets else None,
        ask=ask(lambda: ask_text("Target ongoing requests per replica (Serve adds replicas above it):",
                                 parse_n("target ongoing requests"), default=str(targets.target_ongoing_requests if targets else 2))),
    )
    max_default = targets.max_ongoing_requests if targets else None
    if max_default is not None and target is not None and max_default < target:
        max_default = target  # a target set above the derived capacity: never let the default contradict it
    max_ongoing = session.answer(
        given["max"], flag="--max-ongoing-requests", label="max ongoing requests",
        parse=parse_n("max ongoing requests"), default=max_default,
        ask=ask(lambda: ask_text("Max ongoing requests per replica:", parse_n("max ongoing requests"),
                                 default=str(max_default or target or 2))),
    )
    problem = S.ongoing_problem(target, max_ongoing)
    if problem:
        raise UsageError(f"--max-ongoing-requests: {problem}")
    parse_init = lambda v: S.parse_initial_replicas(v, min_replicas=min_r, max_replicas=max_r)  # noqa: E731
    initial = session.answer(given["initial"], flag="--initial-replicas", label="initial replicas", parse=parse_init,
                             default=None, ask=ask(lambda: ask_text("Initial replicas (empty: min_replicas):",
                                                                    lambda v: None if not str(v).strip() else parse_init(v))))
    parse_up = lambda v: S.parse_seconds(v, what="upscale delay")  # noqa: E731
    parse_down = lambda v: S.parse_seconds(v, what="downscale delay")  # noqa: E731
    up_default = targets.upscale_delay_s if targets else None
    up = session.answer(given["up"], flag="--upscale-delay", label="upscale delay", parse=parse_up, default=up_default,
                        ask=ask(lambda: ask_text("Upscale delay in seconds (empty: Serve's 30 s):",
                                                 lambda v: None if not str(v).strip() else parse_up(v),
                                                 default="" if up_default is None else f"{up_default:g}")))
    down = session.answer(given["down"], flag="--downscale-delay", label="downscale delay", parse=parse_down, default=None,
                          ask=ask(lambda: ask_text("Downscale delay in seconds (empty: Serve's 600 s):",
                                                   lambda v: None if not str(v).strip() else parse_down(v))))
    return {"target_ongoing_requests": target, "max_ongoing_requests": max_ongoing, "initial_replicas": initial,
            "upscale_delay_s": up, "downscale_delay_s": down, "expected_tokens": expected, "targets": targets}

