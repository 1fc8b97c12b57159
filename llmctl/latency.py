"""Serving for latency (issue 41): request routers and latency-driven autoscaling.

A core with no UI and no heavy imports.

Routers (``gen-config --router``), each the ``deployment_config.request_router_config``
Ray Serve 2.60 takes (``ray.serve.config.RequestRouterConfig``):

- ``pow2``: Serve's default, power of two choices: of two random replicas, the
  one with fewer requests in its queue. Best when prompts share little.
- ``prefix``: ``ray.serve.llm.request_router.PrefixCacheAffinityRouter``
  (ray/llm/_internal/serve/routing_policies/prefix_aware/): while the queues are
  balanced (within ``imbalanced_threshold``), the replica whose earlier
  prompts share the longest prefix with this one (a character prefix tree of
  the prompts it routed), when that match is at least ``match_rate_threshold``
  of the prompt; the replica with the smallest tree otherwise; power of two
  once the queues drift apart. It raises vLLM's prefix-cache hits when
  requests share system prompts, chat histories or agent contexts.
- ``kv``: Ray 2.60's ``KVAwareRouter`` (alpha) scores replicas only under
  direct streaming (``RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING=1``, Serve's
  HAProxy ingress) with ai-dynamo installed on the nodes, and vLLM's
  ``vllm.entrypoints.chat_utils`` (which vLLM 0.32 lacks); behind
  ``build_openai_app``'s ingress it finds no token tracker and picks a replica
  at random (kv_aware_router.py, ``initialize_state``). llmctl refuses it.

Latency-driven autoscaling (``gen-config --autoscale-on ttft_p95=500ms``):
``autoscaling_config.policy`` names llmctl's policy class
(:data:`POLICY_PATH`, in ``llmctl/cluster_modules/llmctl_latency``, shipped to
the cluster by ``llmctl up`` as a runtime_env ``py_modules`` package) with
its settings in ``policy_kwargs``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from llmctl.errors import UsageError, param

DEFAULT_ROUTER_PATH = "ray.serve._private.request_router:PowerOfTwoChoicesRequestRouter"  # Serve's DEFAULT_REQUEST_ROUTER_PATH
PREFIX_ROUTER_PATH = "ray.serve.llm.request_router:PrefixCacheAffinityRouter"
KV_ROUTER_PATH = "ray.serve.llm.request_router:KVAwareRouter"
REQUEST_ROUTER_BASE = "ray.serve._private.request_router.request_router:RequestRouter"


@dataclass(frozen=True)
class Router:
    name: str
    path: Optional[str]  # None: write nothing (Serve's default)
    kwargs: dict = field(default_factory=dict)
    when: str = ""


ROUTERS = {
    "pow2": Router("pow2", DEFAULT_ROUTER_PATH, {}, "best when prompts share little (the less busy of two random replicas)"),
    # initialize_state's defaults (prefix_aware_router.py), eviction on: the tree would grow without bound otherwise
    "prefix": Router("prefix", PREFIX_ROUTER_PATH, {
        "imbalanced_threshold": 10, "match_rate_threshold": 0.1, "do_eviction": True,
        "eviction_threshold_chars": 400_000, "eviction_target_chars": 360_000, "eviction_interval_secs": 10,
    }, "helps when many requests share a prompt prefix, e.g. chat with a long system prompt, or RAG"),
    "kv": Router("kv", KV_ROUTER_PATH),
}

KV_REFUSED = ("Ray 2.60's KVAwareRouter scores replicas only under direct streaming "
              "(RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING=1, Serve's HAProxy ingress) with ai-dynamo on every node and a vLLM "
              "that has vllm.entrypoints.chat_utils (0.32 lacks it); behind build_openai_app's ingress it picks replicas "
              "at random. llmctl does not write it; use prefix (PrefixCacheAffinityRouter) for prefix-heavy traffic")


def parse_router(value: Optional[str]) -> Optional[Router]:
    if value is None:
        return None
    key = value.strip().lower()
    if key == "kv":
        raise UsageError(f"{param('router', 'kv')}: {KV_REFUSED}", param="router")
    if key not in ROUTERS:
        raise UsageError(f"{param('router')}: '{value}' is not a router llmctl writes; choose pow2 (Serve's default), "
                         "prefix (PrefixCacheAffinityRouter)", param="router")
    return ROUTERS[key]


def router_config(router: Router) -> dict[str, Any]:
    out: dict[str, Any] = {"request_router_class": router.path}
    if router.kwargs:
        out["request_router_kwargs"] = dict(router.kwargs)
    return out


# --------------------------------------------------------------------------
# latency-driven autoscaling

POLICY_MODULE = "llmctl_latency"
POLICY_CLASS = "LatencyPolicy"
POLICY_PATH = f"{POLICY_MODULE}:{POLICY_CLASS}"
POLICY_METRICS = ("ttft", "itl")
DEFAULT_WINDOW_S = 30.0
DEFAULT_SCALE_DOWN_BELOW = 0.5


@dataclass(frozen=True)
class LatencyGoal:
    metric: str  # ttft | itl (vLLM's per-token inter-token latency histogram)
    percentile: int
    seconds: float
    window_s: float = DEFAULT_WINDOW_S
    scale_down_below: float = DEFAULT_SCALE_DOWN_BELOW

    def text(self) -> str:
        return f"{self.metric}_p{self.percentile}={self.seconds * 1000:g}ms"


def parse_autoscale_on(value: Optional[str], *, window: Optional[float] = None) -> Optional[tuple[LatencyGoal, ...]]:
    """``ttft_p95=500ms`` (or ``itl_p95=50ms``, or both, comma-separated) → the goals."""
    if value is None:
        return None
    from llmctl.perf.slo import parse_slo

    try:
        slo = parse_slo(value)
    except UsageError as e:
        raise UsageError(f"{param('autoscale_on')}: {e.template.removeprefix('slo: ')}", param="autoscale_on") from None
    bad = [t.key for t in slo.targets if t.metric not in POLICY_METRICS]
    if bad:
        raise UsageError(f"{param('autoscale_on')}: {bad[0]}: the policy scales on ttft or itl (vLLM's histograms), e.g. "
                         "ttft_p95=500ms", param="autoscale_on")
    w = DEFAULT_WINDOW_S if window is None else float(window)
    if not w > 0:
        raise UsageError(f"{param('autoscale_window')}: must be a positive number of seconds (got {window})", param="autoscale_window")
    return tuple(LatencyGoal(t.metric, t.percentile, t.seconds, w) for t in slo.targets)


def policy_config(goals: tuple[LatencyGoal, ...], model_id: str) -> dict[str, Any]:
    """``autoscaling_config.policy`` for llmctl's latency policy."""
    return {"policy_function": POLICY_PATH, "policy_kwargs": {
        "targets": {f"{g.metric}_p{g.percentile}": g.seconds for g in goals},
        "model_id": model_id, "window_s": goals[0].window_s, "scale_down_below": goals[0].scale_down_below,
    }}


# The policy's settings and what each must be (llmctl_latency.LatencyPolicy's keyword arguments).
POLICY_KWARGS = {
    "targets": "a mapping of ttft_pNN / itl_pNN to seconds",
    "model_id": "the served model id (vLLM's model_name label)",
    "window_s": "seconds of history the percentile covers",
    "scale_down_below": "a fraction in (0, 1): remove a replica when every percentile is below it x the target",
    "scrape_interval_s": "seconds between reads of the metrics",
    "prometheus_url": "a Prometheus server's base URL (default: $RAY_PROMETHEUS_HOST, else every node's Ray metrics endpoint)",
}


def policy_kwargs_problems(kwargs: Any) -> list[tuple[tuple, str]]:
    """(key path, problem) of llmctl's latency-policy settings."""
    import re

    if not isinstance(kwargs, dict):
        return [((), "must be a mapping of the policy's settings: " + ", ".join(POLICY_KWARGS))]
    out: list[tuple[tuple, str]] = []
    for k in kwargs:
        if k not in POLICY_KWARGS:
            out.append(((k,), f"{POLICY_PATH} takes no setting '{k}' (it takes: {', '.join(POLICY_KWARGS)})"))
    targets = kwargs.get("targets")
    if not isinstance(targets, dict) or not targets:
        out.append((("targets",), "needs at least one target, e.g. {ttft_p95: 0.5} (seconds)"))
    else:
        for key, v in targets.items():
            m = re.fullmatch(r"(ttft|itl)_p(\d{1,2})", str(key))
            if not m:
                out.append((("targets", key), "not ttft_pNN or itl_pNN (e.g. ttft_p95)"))
            elif not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
                out.append((("targets", key), f"must be a positive number of seconds (got {v!r})"))
    if not isinstance(kwargs.get("model_id"), str) or not kwargs.get("model_id"):
        out.append((("model_id",), "must be the served model id (the engines label their metrics with it)"))
    for k in ("window_s", "scrape_interval_s"):
        v = kwargs.get(k)
        if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0):
            out.append(((k,), f"must be a positive number of seconds (got {v!r})"))
    v = kwargs.get("scale_down_below")
    if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 < v < 1):
        out.append((("scale_down_below",), f"must be a fraction between 0 and 1 (got {v!r})"))
    v = kwargs.get("prometheus_url")
    if v is not None and (not isinstance(v, str) or not v.startswith(("http://", "https://"))):
        out.append((("prometheus_url",), f"must be an http(s) URL (got {v!r})"))
    return out


def uses_policy(llm_config: Any) -> bool:
    """Whether an LLMConfig mapping autoscales with llmctl's latency policy."""
    dc = llm_config.get("deployment_config") if isinstance(llm_config, dict) else None
    asc = dc.get("autoscaling_config") if isinstance(dc, dict) else None
    pol = asc.get("policy") if isinstance(asc, dict) else None
    fn = pol.get("policy_function") if isinstance(pol, dict) else None
    return isinstance(fn, str) and fn.strip().replace(".LatencyPolicy", ":LatencyPolicy") == POLICY_PATH


def policy_apps(config: Any) -> list:
    """The applications of a serve config (LLMConfigs inlined, as `up` sends
    them) with a model that autoscales with llmctl's latency policy: they need
    its module in their runtime_env (py_modules)."""
    from llmctl.builders import app_llm_configs

    return [app for app in (config.get("applications") or []) if isinstance(config, dict)
            if any(uses_policy(entry) for _, entry in app_llm_configs(app))]
