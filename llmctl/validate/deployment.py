"""Checks of a Serve ``deployment_config`` (an LLM deployment's, or the
ingress's): option names Serve would silently ignore, autoscaling bounds with
the real reason, then Serve's own AutoscalingConfig."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from llmctl.scalars import is_int, lax_int
from llmctl.spec import replicas_problem
from llmctl.validate.documents import _Sink
from llmctl.validate.reference import _autoscaling_model, _deployment_option_names, _suggest


# Ray Serve LLM's own defaults merged under a user's deployment_config (and the
# ingress's): ray/llm/_internal/serve/constants.py DEFAULT_MAX_ONGOING_REQUESTS,
# DEFAULT_MAX_TARGET_ONGOING_REQUESTS.
RAY_LLM_DEFAULT_ONGOING = int(1e9)


@dataclass(frozen=True)
class ScalingHint:
    """What llmctl would suggest for this deployment (for the never-scales error)."""

    target_ongoing_requests: Optional[int]
    where: str  # "tiny-llama on cpu", "the ingress of llm_app"


def check_deployment_config(dc: Any, sink: _Sink, loc: tuple = ("deployment_config",),
                            hint: Optional[ScalingHint] = None) -> None:
    """Options and autoscaling of one Serve LLM deployment (LLMServer or the ingress)."""
    if dc is None:
        return
    if not isinstance(dc, dict):
        sink.add(loc, "must be a mapping of Ray Serve deployment options")
        return
    # serve.deployment(**options) refuses a keyword it does not take (TypeError when the app is built)
    allowed = _deployment_option_names()
    autoscaling_fields = _autoscaling_model().model_fields
    for k in dc:
        if k in allowed:
            continue
        if k in autoscaling_fields:
            sink.add(loc + (k,), "belongs in autoscaling_config: Serve refuses it here (serve.deployment() has no such "
                                 "option)", "error", code="misplaced-option")
        else:
            sink.add(loc + (k,), f"unknown deployment option{_suggest(str(k), allowed)}", "error", code="unknown-option")
    nr = dc.get("num_replicas")
    if nr is not None and nr != "auto":
        _count(nr, 0, sink, loc + ("num_replicas",), 'a non-negative integer or "auto"')
    asc = dc.get("autoscaling_config")
    if asc is not None:
        check_autoscaling(asc, sink, loc + ("autoscaling_config",))
    if nr is not None and asc is not None and nr != "auto":
        sink.add(loc + ("num_replicas",), "cannot be set together with autoscaling_config (use one)")
    bounds = [loc + ("autoscaling_config", k) for k in ("min_replicas", "max_replicas", "target_ongoing_requests")]
    if isinstance(asc, dict) and not any(sink.has(b) for b in bounds):
        _check_scaling(dc, asc, sink, loc, hint)


def _check_scaling(dc: dict, asc: dict, sink: _Sink, loc: tuple, hint: Optional[ScalingHint]) -> None:
    """What makes a Serve LLM deployment scale, or not."""
    from llmctl.spec import ongoing_problem

    mn, mx = lax_int(asc.get("min_replicas", 1)), lax_int(asc.get("max_replicas", 1))  # as Serve reads them
    target = asc.get("target_ongoing_requests")
    # with num_replicas: auto the target defaults to Serve's own (2), not Ray Serve LLM's 1e9 (auto-replicas says so)
    custom = isinstance(policy_function(asc), str)  # a policy of its own decides; the target is not what scales it
    if is_int(mn) and is_int(mx) and mx > mn and target is None and dc.get("num_replicas") != "auto" and not custom:
        if hint is not None and hint.target_ongoing_requests:
            fix = f"llmctl suggests target_ongoing_requests: {hint.target_ongoing_requests} for {hint.where}"
        else:
            fix = "set autoscaling_config.target_ongoing_requests (llmctl gen-config derives one from the sizing plan)"
        sink.add(loc + ("autoscaling_config",),
                 f"never scales above min_replicas ({mn}): Ray Serve LLM's default target_ongoing_requests is 1e9; {fix}",
                 code="never-scales")
    max_ongoing = dc.get("max_ongoing_requests", RAY_LLM_DEFAULT_ONGOING)
    if isinstance(target, (int, float)) and not isinstance(target, bool) and is_int(max_ongoing):
        problem = ongoing_problem(target, max_ongoing)
        if problem:
            sink.add(loc + ("max_ongoing_requests",), problem, code="max-below-target")
    if mn == 0:
        sink.warn(loc + ("autoscaling_config", "min_replicas"),
                  "0 (scale to zero): after an idle period the first request waits while Serve starts a replica and vLLM "
                  "loads the model (about a minute for the tiny CPU model here; minutes for large models)",
                  code="scale-to-zero")


def check_autoscaling(asc: Any, sink: _Sink, loc: tuple) -> None:
    if not isinstance(asc, dict):
        sink.add(loc, "must be a mapping (min_replicas, max_replicas, …)")
        return
    # Serve's AutoscalingConfig ignores a key it does not have: the app deploys, with that setting's default
    model = _autoscaling_model()
    for k in asc:
        if k in model.model_fields:
            continue
        if k in _deployment_option_names():
            sink.warn(loc + (k,), "belongs in deployment_config, one level up: Serve ignores it inside autoscaling_config "
                                  "(ray-project/ray#61439)", code="misplaced-option")
        else:
            sink.warn(loc + (k,), f"unknown autoscaling option{_suggest(str(k), model.model_fields)}: Serve ignores it "
                                  "and deploys with the default", code="unknown-option")
    mn, mx = 1, 1
    if "min_replicas" in asc:
        mn = _count(asc["min_replicas"], 0, sink, loc + ("min_replicas",), "an integer >= 0")
    if "max_replicas" in asc:
        mx = _count(asc["max_replicas"], 1, sink, loc + ("max_replicas",), "an integer >= 1")
    if mn is not None and mx is not None:
        problem = replicas_problem(mn, mx)
        if problem:
            sink.add(loc + ("min_replicas",), problem, code="replicas")
    if sink.has(loc):
        return
    from pydantic import ValidationError

    try:
        model(**without_policy_function({k: v for k, v in asc.items() if k in model.model_fields}))
    except ValidationError as e:
        for err in e.errors():
            sink.add(loc + tuple(err["loc"]), clean_msg(err["msg"]), code="ray-schema")
    except (ValueError, TypeError) as e:
        sink.add(loc, clean_msg(str(e)), code="ray-schema")


def policy_function(asc: Any) -> Any:
    """``autoscaling_config.policy.policy_function``: an import path Serve imports (a class path, for
    llm_config's class checks), or None."""
    pol = asc.get("policy") if isinstance(asc, dict) else None
    return pol.get("policy_function") if isinstance(pol, dict) else None


def without_policy_function(asc: dict) -> dict:
    """``asc`` for Serve's own AutoscalingConfig without a ``policy_function``
    path, which it would import here (ModuleNotFoundError for a module only the
    cluster has); the class checks look for it without running code."""
    if not isinstance(policy_function(asc), str):
        return asc
    return {**asc, "policy": {k: v for k, v in asc["policy"].items() if k != "policy_function"}}


def _count(v: Any, low: int, sink: _Sink, loc: tuple, what: str) -> Optional[int]:
    """A replica count as Serve reads it: an int as written; a value pydantic's
    lax mode reads as one (``"2"``, ``2.0``, ``true``) deploys as that number,
    a warning; anything else (or below ``low``) is an error. The count Serve
    would use, or None."""
    n = lax_int(v)
    if n is None or n < low:
        sink.add(loc, f"must be {what}, got {v!r}")
        return None
    if not is_int(v):
        sink.warn(loc, f"{v!r} is not an integer as written; Serve reads it as {n} (pydantic's lax mode): write {n}",
                  code="lenient-count")
    return n


def clean_msg(msg: str) -> str:
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    return msg.splitlines()[0] if msg else msg
