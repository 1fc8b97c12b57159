"""Checks of a Serve ``deployment_config`` (an LLM deployment's, or the
ingress's): option names Serve would silently ignore, autoscaling bounds with
the real reason, then Serve's own AutoscalingConfig."""

from __future__ import annotations

from typing import Any

from llmctl.spec import replicas_problem
from llmctl.validate.documents import _Sink
from llmctl.validate.reference import _autoscaling_model, _deployment_option_names, _suggest


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_deployment_config(dc: Any, sink: _Sink, loc: tuple = ("deployment_config",)) -> None:
    if dc is None:
        return
    if not isinstance(dc, dict):
        sink.add(loc, "must be a mapping of Ray Serve deployment options")
        return
    allowed = _deployment_option_names()
    for k in dc:
        if k not in allowed:
            sink.add(loc + (k,), f"unknown deployment option{_suggest(str(k), allowed)}", code="unknown-option")
    nr = dc.get("num_replicas")
    if nr is not None and nr != "auto" and (not is_int(nr) or nr < 0):
        sink.add(loc + ("num_replicas",), f"must be a non-negative integer or \"auto\", got {nr!r}")
    asc = dc.get("autoscaling_config")
    if asc is not None:
        check_autoscaling(asc, sink, loc + ("autoscaling_config",))
    if nr is not None and asc is not None and nr != "auto":
        sink.add(loc + ("num_replicas",), "cannot be set together with autoscaling_config (use one)")


def check_autoscaling(asc: Any, sink: _Sink, loc: tuple) -> None:
    if not isinstance(asc, dict):
        sink.add(loc, "must be a mapping (min_replicas, max_replicas, …)")
        return
    model = _autoscaling_model()
    for k in asc:
        if k not in model.model_fields:
            sink.add(loc + (k,), f"unknown autoscaling option{_suggest(str(k), model.model_fields)}", code="unknown-option")
    mn, mx = asc.get("min_replicas", 1), asc.get("max_replicas", 1)
    for key, v, low in (("min_replicas", mn, 0), ("max_replicas", mx, 1)):
        if key in asc and (not is_int(v) or v < low):
            sink.add(loc + (key,), f"must be an integer >= {low}, got {v!r}")
    if is_int(mn) and is_int(mx) and mn >= 0 and mx >= 1:
        problem = replicas_problem(mn, mx)
        if problem:
            sink.add(loc + ("min_replicas",), problem, code="replicas")
    if sink.has(loc):
        return
    from pydantic import ValidationError

    try:
        model(**{k: v for k, v in asc.items() if k in model.model_fields})
    except ValidationError as e:
        for err in e.errors():
            sink.add(loc + tuple(err["loc"]), clean_msg(err["msg"]), code="ray-schema")
    except (ValueError, TypeError) as e:
        sink.add(loc, clean_msg(str(e)), code="ray-schema")


def clean_msg(msg: str) -> str:
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    return msg.splitlines()[0] if msg else msg
