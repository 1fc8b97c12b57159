"""llmctl's latency autoscaling policy for Ray Serve (issue 41).

``autoscaling_config.policy.policy_function: llmctl_latency:LatencyPolicy``
with ``policy_kwargs``:

- ``targets``: ``{"ttft_p95": 0.5}`` and/or ``{"itl_p95": 0.05}`` (seconds):
  percentiles of vLLM's own histograms (``vllm:time_to_first_token_seconds``,
  ``vllm:inter_token_latency_seconds``) over the last ``window_s`` seconds;
- ``model_id``: the served model (the ``model_name`` label of the metrics);
- ``window_s`` (30), ``scale_down_below`` (0.5), ``scrape_interval_s`` (5);
- ``prometheus_url``: read the percentiles from this Prometheus server
  (PromQL ``histogram_quantile`` over ``rate(..._bucket[window])``, through
  Ray's ``PrometheusQueryMixin``); without it, the policy reads every alive
  node's Ray metrics endpoint itself (``ray.nodes()``: ``NodeManagerAddress``
  and ``MetricsExportPort``), where Ray Serve LLM exports vLLM's metrics, so
  no Prometheus server is needed.

Each decision (Serve calls the policy every control-loop tick, ~0.1 s; the
metrics are read in a background thread every ``scrape_interval_s``):

- a percentile above its target → one replica more than run now (never
  fewer than Serve's current target, so replicas still starting are not
  cancelled);
- every percentile below ``scale_down_below`` x its target, or no request in
  the window → one replica fewer than run now;
- otherwise → Serve's current target.

Serve applies ``min_replicas``/``max_replicas``, ``upscale_delay_s``/
``downscale_delay_s`` and the scaling factors to what the policy returns
(ray/serve/autoscaling_policy.py ``_apply_autoscaling_config``).

Serve imports this module where the app is built (``llmctl up`` ships it as a
runtime_env ``py_modules`` package) and pickles the class by value for its
controller: it imports only the standard library and Ray, never llmctl.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
import urllib.parse
import urllib.request
import weakref
from collections import deque
from typing import Any, Dict, Optional, Tuple

try:
    from ray.serve.autoscaling_policy import PrometheusQueryMixin
except ImportError:  # pragma: no cover - a Ray without it: direct reads only
    class PrometheusQueryMixin:  # type: ignore[no-redef]
        def __init__(self, **kwargs):
            pass

        prometheus_metrics = None

__all__ = ["LatencyPolicy", "histogram_quantile", "parse_buckets"]

logger = logging.getLogger("ray.serve")

HISTOGRAMS = {"ttft": "time_to_first_token_seconds", "itl": "inter_token_latency_seconds"}
_KEY = re.compile(r"^(ttft|itl)_p(\d{1,2})$")
_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\}\s+(\S+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_buckets(text: str, model_id: str) -> Dict[str, Dict[float, float]]:
    """{metric: {upper bound: cumulative count}} of vLLM's histograms for
    ``model_id`` in a Prometheus text exposition, summed over replicas."""
    names = {f"{p}{h}_bucket": m for m, h in HISTOGRAMS.items() for p in ("ray_vllm_", "ray_vllm:", "vllm:", "vllm_")}
    out: Dict[str, Dict[float, float]] = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        m = _LINE.match(line)
        if not m or m.group(1) not in names:
            continue
        labels = dict(_LABEL.findall(m.group(2)))
        if labels.get("model_name", model_id) != model_id or "le" not in labels:
            continue
        try:
            le, v = float(labels["le"]), float(m.group(3))
        except ValueError:
            continue
        if math.isnan(v):
            continue
        h = out.setdefault(names[m.group(1)], {})
        h[le] = h.get(le, 0.0) + v
    return out


def histogram_quantile(q: float, buckets: Dict[float, float]) -> Optional[float]:
    """Prometheus's histogram_quantile on cumulative counts (linear within a bucket)."""
    if not buckets:
        return None
    bounds = sorted(buckets)
    total = buckets[bounds[-1]]
    if total <= 0:
        return None
    rank, prev_b, prev_c = q * total, 0.0, 0.0
    for b in bounds:
        c = buckets[b]
        if c >= rank:
            if math.isinf(b):
                return prev_b
            return prev_b + (b - prev_b) * ((rank - prev_c) / (c - prev_c) if c > prev_c else 1.0)
        prev_b, prev_c = b, c
    return prev_b


def _delta(new: Dict[float, float], old: Dict[float, float]) -> Dict[float, float]:
    return {b: max(0.0, c - old.get(b, 0.0)) for b, c in new.items()}


def _node_urls() -> list:
    import ray

    urls = []
    for n in ray.nodes():
        port = n.get("MetricsExportPort")
        if n.get("Alive") and port:
            urls.append(f"http://{n.get('NodeManagerAddress', '127.0.0.1')}:{port}/metrics")
    return urls


def _read(url: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - Ray's own metrics endpoints
        return r.read().decode("utf-8", "replace")


class _Scraper:
    """Background reads of the nodes' metrics: a history of summed bucket counts."""

    def __init__(self, model_id: str, window_s: float, interval_s: float):
        self.model_id, self.window_s, self.interval_s = model_id, window_s, interval_s
        self.lock = threading.Lock()
        self.history: deque = deque()  # (monotonic time, {metric: {le: count}})
        self.error: Optional[str] = None
        self.stop = threading.Event()

    def once(self) -> None:
        total: Dict[str, Dict[float, float]] = {}
        for url in _node_urls():
            try:
                text = _read(url)
            except OSError as e:
                self.error = f"{url}: {e}"
                continue
            for metric, h in parse_buckets(text, self.model_id).items():
                acc = total.setdefault(metric, {})
                for b, c in h.items():
                    acc[b] = acc.get(b, 0.0) + c
        now = time.monotonic()
        with self.lock:
            self.history.append((now, total))
            while len(self.history) > 2 and self.history[1][0] <= now - self.window_s:
                self.history.popleft()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.once()
            except Exception as e:  # noqa: BLE001 - the controller's thread must survive a bad read
                self.error = f"{type(e).__name__}: {e}"
            self.stop.wait(self.interval_s)

    def window(self) -> Optional[Dict[str, Dict[float, float]]]:
        """Bucket counts of the requests in the window (None: fewer than two reads yet)."""
        with self.lock:
            if len(self.history) < 2:
                return None
            (_, old), (_, new) = self.history[0], self.history[-1]
        return {m: _delta(h, old.get(m, {})) for m, h in new.items()}


class LatencyPolicy(PrometheusQueryMixin):
    """Scale on TTFT / ITL percentiles (see the module doc)."""

    def __init__(self, targets: Dict[str, float], model_id: str, window_s: float = 30.0,
                 scale_down_below: float = 0.5, scrape_interval_s: float = 5.0, prometheus_url: Optional[str] = None):
        self.targets: Dict[str, Tuple[str, float, float]] = {}
        for key, seconds in targets.items():
            m = _KEY.match(key)
            if not m:
                raise ValueError(f"llmctl_latency: target {key!r} is not ttft_pNN or itl_pNN")
            self.targets[key] = (m.group(1), int(m.group(2)) / 100.0, float(seconds))
        self.model_id, self.window_s, self.below = model_id, float(window_s), float(scale_down_below)
        self.prometheus_url = prometheus_url
        queries = []
        if prometheus_url:
            w = f"{max(int(self.window_s), 1)}s"
            sel = f'{{model_name="{model_id}"}}'
            for key, (metric, q, _) in self.targets.items():
                h = HISTOGRAMS[metric]
                queries.append(f"histogram_quantile({q}, sum by (le) (rate(ray_vllm_{h}_bucket{sel}[{w}])))")
                queries.append(f"sum(increase(ray_vllm_{h}_count{sel}[{w}]))")
        super().__init__(prometheus_address=prometheus_url, prometheus_queries=queries,
                         fetch_interval_s=float(scrape_interval_s), cache_ttl_s=max(15.0, 3 * float(scrape_interval_s)))
        self._queries = queries
        self._scraper: Optional[_Scraper] = None
        if not prometheus_url:
            self._scraper = _Scraper(model_id, self.window_s, float(scrape_interval_s))
            threading.Thread(target=self._scraper.run, name="llmctl-latency-metrics", daemon=True).start()
            weakref.finalize(self, self._scraper.stop.set)
        self._last_log, self._last_why = 0.0, ""

    def measure(self) -> Tuple[Dict[str, Optional[float]], Optional[float]]:
        """({target key: percentile now, None when unknown}, requests in the window or None when unknown)."""
        out: Dict[str, Optional[float]] = {}
        if self._scraper is not None:
            win = self._scraper.window()
            if win is None:
                return {k: None for k in self.targets}, None
            n = None
            for key, (metric, q, _) in self.targets.items():
                h = win.get(metric, {})
                out[key] = histogram_quantile(q, h)
                if metric == "ttft" or n is None:
                    n = max(h.values()) if h else 0.0
            return out, n
        metrics = self.prometheus_metrics or {}
        if not metrics:
            return {k: None for k in self.targets}, None
        n = None
        for i, key in enumerate(self.targets):
            v, c = metrics.get(self._queries[2 * i]), metrics.get(self._queries[2 * i + 1])
            out[key] = v if v is not None and not math.isnan(v) else None
            if c is not None and (n is None or key.startswith("ttft")):
                n = c
        return out, n

    def __call__(self, ctx: Any) -> Tuple[int, Dict[str, Any]]:
        current, target = ctx.current_num_replicas, ctx.target_num_replicas
        values, requests = self.measure()
        if requests is None:  # nothing read yet: keep what Serve has
            desired, why = target, "no metrics yet"
        elif requests <= 0:
            desired, why = current - 1, "no requests in the window"
        elif any(v is not None and v > self.targets[k][2] for k, v in values.items()):
            desired, why = max(target, current + 1), "above target"
        elif all(v is not None and v < self.below * self.targets[k][2] for k, v in values.items()):
            desired, why = current - 1, f"below {self.below:g} x target"
        else:
            desired, why = target, "within target"
        state = {"llmctl_latency": {"values": values, "requests": requests, "decision": why,
                                    "error": self._scraper.error if self._scraper else None}}
        now = time.monotonic()
        # each change it asks for (at most every 5 s), and each change of reason (why it does not scale shows too)
        if (desired != target and now - self._last_log > 5) or why != self._last_why:
            self._last_log, self._last_why = now, why
            logger.info("llmctl_latency %s: %s (%s over %gs, %s requests; targets %s): %d -> %d replicas wanted",
                        self.model_id, why, json.dumps({k: v for k, v in values.items()}), self.window_s, requests,
                        json.dumps({k: t[2] for k, t in self.targets.items()}), target, desired)
        return max(desired, 0), state
