"""The scaling questions: what Serve scales on (ongoing requests, its
default, or llmctl's latency policy: ``--autoscale-on``), the "autoscaling
details" (targets derived from the sizing plan, llmctl.sizing.derive_targets)
and the request router (``--router``). Flags win; a terminal may change the
rest; ``--yes`` and no terminal keep Serve's defaults."""

from __future__ import annotations

from typing import Any, Optional

from llmctl import sizing
from llmctl import spec as S
from llmctl.catalog import ModelProfile
from llmctl.errors import UsageError
from llmctl.hardware import GPUType
from llmctl.latency import DEFAULT_WINDOW_S, ROUTERS, LatencyGoal, parse_autoscale_on, parse_router
from llmctl.prompts.session import Flags, Session, ask_confirm, ask_select, ask_text

# What the latency questions offer: the metric (vLLM's histogram), its name at the prompt and the target it
# suggests (the flag's own examples: --autoscale-on ttft_p95=500ms, itl_p95=50ms).
LATENCY_METRICS = {"ttft": ("Time to first token (TTFT)", "500ms"), "itl": ("Inter-token latency (ITL)", "50ms")}
ONGOING = "ongoing"  # the "Scale on" answer that keeps Serve's default policy
SERVE_DEFAULT_ROUTER = "default"  # the routing answer that writes no request_router_config (Serve's own default)


def ask_scale_on(session: Session, flags: Flags, pm, min_r: int, max_r: int) -> tuple[LatencyGoal, ...]:
    """The goals of llmctl's latency policy, or () to scale on ongoing
    requests (Serve's default). ``--autoscale-on`` (with ``--autoscale-window``)
    wins; a terminal asks when no flag chose the signal (neither it nor
    ``--target-ongoing-requests``) and the replicas can change (max > min).
    Typed targets go through the flag's parser (llmctl.latency.parse_autoscale_on)."""
    if flags.autoscale_on is not None:
        return parse_autoscale_on(flags.autoscale_on, window=flags.autoscale_window) or ()
    offer = (session.interactive and not session.assume_yes and max_r > min_r
             and pm(flags.target_ongoing_requests, "--target-ongoing-requests") is None)
    goals: tuple[LatencyGoal, ...] = ()
    if offer:
        picked = ask_select("Scale on:", [
            ("ongoing requests per replica (Serve's default)", ONGOING),
            *((f"{name[0].lower()}{name[1:]}, p95 (llmctl's latency policy)", metric)
              for metric, (name, _) in LATENCY_METRICS.items()),
            ("both TTFT and ITL, p95 (llmctl's latency policy)", ",".join(LATENCY_METRICS)),
        ], default=ONGOING)
        if picked != ONGOING:
            goals = _ask_latency_goals(flags, picked.split(","))
    if flags.autoscale_window is not None and not goals:
        raise UsageError("--autoscale-window: the window of --autoscale-on's percentiles; add --autoscale-on (e.g. ttft_p95=500ms)")
    return goals


def _ask_latency_goals(flags: Flags, metrics: list[str]) -> tuple[LatencyGoal, ...]:
    targets = []
    for metric in metrics:
        name, example = LATENCY_METRICS[metric]
        goal, = ask_text(f"{name} p95 target, with its unit (a replica is added while the p95 is above it):",
                         lambda v, m=metric: parse_autoscale_on(f"{m}_p95={str(v).strip()}"), default=example,
                         instruction="(500ms, 0.5s)")
        targets.append(goal.text())
    text = ",".join(targets)
    if flags.autoscale_window is not None:
        return parse_autoscale_on(text, window=flags.autoscale_window) or ()
    parse_window = lambda v: parse_autoscale_on(text, window=S.parse_seconds(v, what="autoscale window"))  # noqa: E731
    return ask_text("Window the percentiles cover, in seconds:", parse_window, default=f"{DEFAULT_WINDOW_S:g}")


def ask_router(session: Session, flags: Flags, max_r: int) -> Optional[str]:
    """The request router's name (llmctl.latency.ROUTERS), or None for
    Serve's default with nothing written. ``--router`` wins; a terminal asks
    when there is more than one replica to route between."""
    if flags.router is not None:
        return parse_router(flags.router).name
    if not (session.interactive and not session.assume_yes and max_r > 1):
        return None
    picked = ask_select("Request routing between replicas:", [
        (f"Serve's default, power of two choices: {ROUTERS['pow2'].when}", SERVE_DEFAULT_ROUTER),  # writes nothing
        (f"prefix-cache aware (PrefixCacheAffinityRouter): {ROUTERS['prefix'].when}", "prefix"),
    ], default=SERVE_DEFAULT_ROUTER)
    return None if picked == SERVE_DEFAULT_ROUTER else picked


def ask_autoscaling(session: Session, flags: Flags, pm, profile: ModelProfile, gpu: GPUType, choice: sizing.Choice,
                     min_r: int, max_r: int, *, max_num_seqs: Optional[int] = None) -> dict[str, Any]:
    """What Serve scales on (:func:`ask_scale_on`), then target / max ongoing
    requests, initial replicas, delays: flags win, otherwise
    llmctl.sizing.derive_targets' values from the plan (the one rule); a
    terminal offers to change them in one "autoscaling details" step. With
    latency goals the policy decides: no ongoing-requests target, and no
    max_ongoing_requests cap unless given (docs/latency.md, "Where requests wait")."""
    goals = ask_scale_on(session, flags, pm, min_r, max_r)
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
    if goals:
        up_now = targets.upscale_delay_s if targets else None
        summary = f"upscale delay {up_now:g} s, Serve's other defaults" if up_now is not None else "Serve's defaults"
    elif targets:
        summary = f"target {targets.target_ongoing_requests}, at most {targets.max_ongoing_requests} ongoing requests per replica"
    else:
        summary = "Serve's defaults"
    details = session.interactive and not session.assume_yes and all(v is None for v in given.values()) and ask_confirm(
        f"Autoscaling details: {summary}. Change them?", False)
    if details and not goals:
        expected = ask_text("Expected tokens per request (prompt + output):", parse_tokens,
                            default=str(expected or sizing.DEFAULT_EXPECTED_TOKENS))
        targets = derive(expected)
    ask = (lambda f: f) if details else (lambda f: None)
    ask_ongoing = (lambda f: None) if goals else ask  # the latency policy decides: no ongoing-requests questions
    parse_n = lambda what: (lambda v: S.parse_int(v, what=what, minimum=1))  # noqa: E731
    target = session.answer(
        given["target"], flag="--target-ongoing-requests", label="target ongoing requests",
        parse=parse_n("target ongoing requests"),
        default=targets.target_ongoing_requests if targets and not goals else None,
        ask=ask_ongoing(lambda: ask_text("Target ongoing requests per replica (Serve adds replicas above it):",
                                 parse_n("target ongoing requests"), default=str(targets.target_ongoing_requests if targets else 2))),
    )
    # With latency goals, Ray Serve LLM's own default (no cap): requests wait in vLLM's scheduler, whose TTFT histogram
    # counts the wait. With a cap they wait in Serve's handle queue, unseen by the engine's metrics: measured here,
    # vLLM's TTFT p95 stayed at 40-54 ms while clients waited seconds, and the policy scaled down under load.
    max_default = targets.max_ongoing_requests if targets and not goals else None
    if max_default is not None and target is not None and max_default < target:
        max_default = target  # a target set above the derived capacity: never let the default contradict it
    max_ongoing = session.answer(
        given["max"], flag="--max-ongoing-requests", label="max ongoing requests",
        parse=parse_n("max ongoing requests"), default=max_default,
        ask=ask_ongoing(lambda: ask_text("Max ongoing requests per replica:", parse_n("max ongoing requests"),
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
            "upscale_delay_s": up, "downscale_delay_s": down, "expected_tokens": expected, "targets": targets,
            "latency_goals": goals}

