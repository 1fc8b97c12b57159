"""What each vLLM engine reports, read from Ray's Prometheus endpoint.

Ray Serve LLM (``log_engine_metrics: true``, its default) hands vLLM's
metrics to Ray's metrics agent (``vllm.v1.metrics.ray_wrappers.
RayPrometheusStatLogger``), which exports them on every node's
``--metrics-export-port`` as ``ray_vllm_*`` series labelled with the Serve
``ReplicaId`` and ``model_name``. Ray's dashboard does not show them
(ray-project/ray#59071); llmctl reads them directly: gauges (running and
waiting requests, KV-cache usage) as they are, counters and histograms
(generation tokens, TTFT) as rates between two scrapes.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Optional

import httpx

_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
PREFIXES = ("ray_vllm_", "vllm_", "ray_vllm:", "vllm:")


def parse_prometheus(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of each sample of a Prometheus text exposition."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        out.append((m.group(1), dict(_LABEL.findall(m.group(2) or "")), value))
    return out


def _short(name: str) -> Optional[str]:
    for p in PREFIXES:
        if name.startswith(p):
            return name[len(p):]
    return None


@dataclass
class EngineSample:
    """One scrape of one replica's engine."""

    replica: str
    model: str
    t: float
    running: float = 0.0
    waiting: float = 0.0
    kv_usage: float = 0.0  # 0..1
    generation_tokens: float = 0.0  # counters since the engine started
    prompt_tokens: float = 0.0
    ttft_sum: float = 0.0
    ttft_count: float = 0.0
    itl_sum: float = 0.0
    itl_count: float = 0.0
    preemptions: float = 0.0
    prefix_cache_queries: float = 0.0  # prompt tokens looked up in the prefix cache, and found
    prefix_cache_hits: float = 0.0
    live: bool = False  # reported a gauge: an engine that runs (Ray keeps a stopped replica's counters)
    ttft_buckets: dict = field(default_factory=dict)  # upper bound (le) -> cumulative count of vLLM's TTFT histogram


@dataclass
class EngineStats:
    """One replica's engine now, with rates over the last interval."""

    replica: str
    model: str
    running: float
    waiting: float
    kv_usage: float
    generation_tokens_per_s: Optional[float] = None
    prompt_tokens_per_s: Optional[float] = None
    ttft_mean_s: Optional[float] = None  # over the interval (since start when there is one scrape)
    itl_mean_s: Optional[float] = None
    requests_done: float = 0.0

    def to_json(self) -> dict:
        return dict(self.__dict__)


_GAUGES = {"num_requests_running": "running", "num_requests_waiting": "waiting", "kv_cache_usage_perc": "kv_usage",
           "gpu_cache_usage_perc": "kv_usage"}
_COUNTERS = {"generation_tokens_total": "generation_tokens", "prompt_tokens_total": "prompt_tokens",
             "time_to_first_token_seconds_sum": "ttft_sum", "time_to_first_token_seconds_count": "ttft_count",
             "inter_token_latency_seconds_sum": "itl_sum", "inter_token_latency_seconds_count": "itl_count",
             "num_preemptions_total": "preemptions",
             "prefix_cache_queries_total": "prefix_cache_queries", "prefix_cache_queries": "prefix_cache_queries",
             "prefix_cache_hits_total": "prefix_cache_hits", "prefix_cache_hits": "prefix_cache_hits"}


def samples_of(text: str, t: Optional[float] = None) -> dict[str, EngineSample]:
    """Per replica (Serve ReplicaId; the worker id when there is none)."""
    t = time.monotonic() if t is None else t
    out: dict[str, EngineSample] = {}
    for name, labels, value in parse_prometheus(text):
        short = _short(name)
        bucket = short == "time_to_first_token_seconds_bucket" and "le" in labels
        if short is None or (short not in _GAUGES and short not in _COUNTERS and not bucket):
            continue
        if math.isnan(value):
            continue
        rid = labels.get("ReplicaId") or labels.get("WorkerId", "")[:8] or "engine"
        s = out.setdefault(rid, EngineSample(rid, labels.get("model_name", ""), t))
        if bucket:
            le = float(labels["le"])
            s.ttft_buckets[le] = s.ttft_buckets.get(le, 0.0) + value
            continue
        attr = _GAUGES.get(short) or _COUNTERS[short]
        setattr(s, attr, getattr(s, attr) + value)  # sums over engines of one replica (data parallel)
        s.live = s.live or short in _GAUGES
    return out


def stats_of(now: dict[str, EngineSample], before: Optional[dict[str, EngineSample]] = None) -> list[EngineStats]:
    out = []
    for rid, s in sorted(now.items()):
        if not s.live:
            continue
        b = (before or {}).get(rid)
        st = EngineStats(rid, s.model, s.running, s.waiting, s.kv_usage, requests_done=s.ttft_count)
        dt = s.t - b.t if b else 0.0
        if b and dt > 0:
            st.generation_tokens_per_s = max(0.0, s.generation_tokens - b.generation_tokens) / dt
            st.prompt_tokens_per_s = max(0.0, s.prompt_tokens - b.prompt_tokens) / dt
            n = s.ttft_count - b.ttft_count
            st.ttft_mean_s = (s.ttft_sum - b.ttft_sum) / n if n > 0 else None
            n = s.itl_count - b.itl_count
            st.itl_mean_s = (s.itl_sum - b.itl_sum) / n if n > 0 else None
        else:
            st.ttft_mean_s = s.ttft_sum / s.ttft_count if s.ttft_count else None
            st.itl_mean_s = s.itl_sum / s.itl_count if s.itl_count else None
        out.append(st)
    return out


class MetricsReader:
    """Scrapes an endpoint (http://HOST:PORT/metrics) and keeps the last scrape for rates."""

    def __init__(self, url: str, timeout: float = 5.0):
        self.url = url if url.rstrip("/").endswith("/metrics") else url.rstrip("/") + "/metrics"
        self.timeout = timeout
        self.last: Optional[dict[str, EngineSample]] = None

    def scrape(self) -> dict[str, EngineSample]:
        r = httpx.get(self.url, timeout=self.timeout, trust_env=False)
        r.raise_for_status()
        return samples_of(r.text)

    def read(self) -> list[EngineStats]:
        now = self.scrape()
        out = stats_of(now, self.last)
        self.last = now
        return out


def _since(a: EngineSample, b: Optional[EngineSample], attr: str) -> float:
    """How much a replica's counter grew between two scrapes (all of it when the replica is new)."""
    return getattr(a, attr) - (getattr(b, attr) if b else 0.0)


def _of_model(samples: dict[str, EngineSample], model: Optional[str]) -> list[tuple[str, EngineSample]]:
    """The replicas' samples, sorted, of ``model`` when given (a sample without a model name counts)."""
    return [(rid, a) for rid, a in sorted(samples.items()) if not (model and a.model and a.model != model)]


def first_tokens(before: dict[str, EngineSample], after: dict[str, EngineSample], model: Optional[str] = None) -> float:
    """Requests the engines (of ``model``, when given) gave a first token between two scrapes."""
    return sum(_since(a, before.get(rid), "ttft_count") for rid, a in _of_model(after, model))


def all_counted(before: dict[str, EngineSample], after: dict[str, EngineSample], requests: float,
                model: Optional[str] = None, groups: Optional[dict[str, list[str]]] = None) -> bool:
    """Whether the engines (of ``model``) counted a first token for each of
    ``requests``. ``groups`` (deployment -> its replica ids): each deployment
    with engines of the model on its own, since every request passes each of
    them once — a prefill/decode app's two pools both count it, a DP group's
    ranks or a deployment's replicas share it; without them (or when none of
    them has an engine of the model), all engines together."""
    counts = [first_tokens(before, m, model) for m in _deployments_of_model(after, model, groups).values()]
    return (min(counts) if counts else first_tokens(before, after, model)) >= requests


def _deployments_of_model(after: dict[str, EngineSample], model: Optional[str],
                          groups: Optional[dict[str, list[str]]]) -> dict[str, dict[str, EngineSample]]:
    """The engines of each deployment of ``groups`` (deployment -> replica
    ids) that has engines of ``model``."""
    out = {}
    for dep, ids in (groups or {}).items():
        mine = {r: after[r] for r in ids if r in after}
        if _of_model(mine, model):
            out[dep] = mine
    return out


def ttft_counts(before: dict[str, EngineSample], after: dict[str, EngineSample], model: Optional[str] = None) -> dict:
    """vLLM's own TTFT of the requests the engines (of ``model``, when given)
    answered between two scrapes, as counts that add up across runs:
    ``{"count", "sum", "buckets": {le: cumulative count}}`` (the histogram's
    growth, summed over replicas). What ``--autoscale-on ttft_pNN`` scales
    on: from the request's arrival at the engine, without Serve's proxy and
    router. :func:`ttft_summary` turns it into a mean and percentiles."""
    out = {"count": 0.0, "sum": 0.0, "buckets": {}}
    for rid, a in _of_model(after, model):
        b = before.get(rid)
        out["count"] += _since(a, b, "ttft_count")
        out["sum"] += _since(a, b, "ttft_sum")
        for le, c in a.ttft_buckets.items():
            out["buckets"][le] = out["buckets"].get(le, 0.0) + c - ((b.ttft_buckets.get(le, 0.0)) if b else 0.0)
    return out


def ttft_counts_by_deployment(before: dict[str, EngineSample], after: dict[str, EngineSample], model: Optional[str],
                              groups: dict[str, list[str]]) -> dict[str, dict]:
    """:func:`ttft_counts` of each deployment of ``groups`` (deployment -> its
    replica ids) that has engines of ``model``: a prefill/decode app's two
    pools each count every request, so their histograms are not one
    distribution to pool."""
    return {dep: ttft_counts(before, mine, model) for dep, mine in _deployments_of_model(after, model, groups).items()}


def add_ttft_counts(a: dict, b: dict) -> dict:
    """Two :func:`ttft_counts` pooled (one sweep step's holds)."""
    buckets = dict(a["buckets"])
    for le, c in b["buckets"].items():
        buckets[le] = buckets.get(le, 0.0) + c
    return {"count": a["count"] + b["count"], "sum": a["sum"] + b["sum"], "buckets": buckets}


def ttft_summary(counts: dict) -> Optional[dict]:
    """``{"requests", "mean", "p50", "p95"}`` (seconds) of :func:`ttft_counts`
    (percentiles as Prometheus's histogram_quantile reads the buckets, the
    latency policy's reading); None when no request was counted."""
    from llmctl.cluster_modules.llmctl_latency import histogram_quantile

    n = counts.get("count") or 0.0
    if n <= 0:
        return None
    buckets = {float(k): v for k, v in (counts.get("buckets") or {}).items()}
    return {"requests": n, "mean": counts["sum"] / n, "p50": histogram_quantile(0.5, buckets),
            "p95": histogram_quantile(0.95, buckets)}


def prefix_cache(before: dict[str, EngineSample], after: dict[str, EngineSample], model: Optional[str] = None) -> dict:
    """vLLM's prefix-cache hit rate between two scrapes: prompt tokens found in
    the cache over those looked up, for all replicas (of ``model``, when given)
    and per replica."""
    per: dict[str, dict] = {}
    for rid, a in _of_model(after, model):
        b = before.get(rid)
        q, h = _since(a, b, "prefix_cache_queries"), _since(a, b, "prefix_cache_hits")
        if q > 0:
            per[rid] = {"queries": q, "hits": h, "hit_rate": h / q}
    q = sum(v["queries"] for v in per.values())
    h = sum(v["hits"] for v in per.values())
    return {"queries": q, "hits": h, "hit_rate": h / q if q else None, "replicas": per}


def engines_of(before: dict[str, EngineSample], after: dict[str, EngineSample],
               replicas: dict[str, list[str]]) -> dict[str, dict]:
    """What each deployment's engines did between two scrapes, from vLLM's own
    counters: requests that got their first token, prompt tokens prefilled
    and tokens generated, mean engine-side TTFT and inter-token latency, and
    the prefix-cache hit rate. ``replicas``: deployment -> its replica ids
    (Serve's status). A prefill/decode app's pools, or a DP group's ranks,
    come out as the deployments they are."""
    out: dict[str, dict] = {}
    for dep, ids in replicas.items():
        pairs = [(after[r], before.get(r)) for r in ids if r in after]
        if not pairs:
            continue
        tot = {attr: sum(_since(a, b, attr) for a, b in pairs)
               for attr in ("ttft_count", "ttft_sum", "itl_count", "itl_sum", "prompt_tokens", "generation_tokens",
                            "prefix_cache_queries", "prefix_cache_hits")}
        out[dep] = {"replicas": len(pairs), "requests": tot["ttft_count"], "prompt_tokens": tot["prompt_tokens"],
                    "generation_tokens": tot["generation_tokens"],
                    "ttft_mean_s": tot["ttft_sum"] / tot["ttft_count"] if tot["ttft_count"] > 0 else None,
                    "itl_mean_s": tot["itl_sum"] / tot["itl_count"] if tot["itl_count"] > 0 else None,
                    "prefix_cache_hit_rate": (tot["prefix_cache_hits"] / tot["prefix_cache_queries"]
                                              if tot["prefix_cache_queries"] > 0 else None)}
    return out
