"""Where a cluster's engine metrics are: Ray's Prometheus endpoint.

Every Ray node exports its processes' metrics (vLLM's among them, through
Ray Serve LLM) on its ``--metrics-export-port``. For the local head llmctl
started, the port is in its state file; for another cluster the user names
the endpoint (``metrics_url``): Ray's REST API does not publish it.
"""

from __future__ import annotations

import time
from typing import Callable, Optional

from llmctl.errors import ClusterUnreachable, UsageError
from llmctl.serve_facts import LOOPBACK_HOST
from llmctl.launch import address as _address


def metrics_url(address: Optional[str] = None, metrics_url: Optional[str] = None, *,
                ray_token_env: Optional[str] = None) -> str:
    if metrics_url:
        return metrics_url
    target = _address.resolve_target(address, ray_token_env)
    if target.local is None:
        raise UsageError("engine metrics of a cluster llmctl did not start: pass the metrics endpoint of the node "
                         "running the replicas (http://NODE:METRICS_EXPORT_PORT/metrics)")
    port = target.local.ports.get("metrics_export")
    if not port:
        raise UsageError("the local head's state has no metrics export port (started by an older llmctl); restart it")
    return f"http://{LOOPBACK_HOST}:{port}/metrics"


def engine_metrics(address: Optional[str] = None, metrics_url_: Optional[str] = None, *, interval: float = 0.0,
                   reader=None, ray_token_env: Optional[str] = None):
    """Per replica: running and waiting requests, KV-cache usage, and (with
    ``interval`` > 0: two scrapes that far apart) generation tokens/s and the
    TTFT of the requests in between. Returns (url, [EngineStats])."""
    import httpx

    from llmctl.perf.metrics import MetricsReader

    url = metrics_url(address, metrics_url_, ray_token_env=ray_token_env)
    reader = reader or MetricsReader(url)
    try:
        if interval > 0 and reader.last is None:
            reader.read()
            time.sleep(interval)
        return url, reader.read()
    except httpx.HTTPError as e:
        raise ClusterUnreachable(f"no metrics at {url} ({type(e).__name__})") from None


def engine_probe(address: Optional[str] = None, metrics_url_: Optional[str] = None, *,
                 ray_token_env: Optional[str] = None) -> Optional[Callable[[], Optional[dict]]]:
    """A function that scrapes the engines' counters now (per replica; None
    when the scrape fails), or None when no metrics endpoint is known (a
    cluster llmctl did not start and no ``metrics_url``)."""
    import httpx

    from llmctl.errors import LlmctlError
    from llmctl.perf.metrics import MetricsReader

    try:
        url = metrics_url(address, metrics_url_, ray_token_env=ray_token_env)
    except LlmctlError:
        return None
    reader = MetricsReader(url)

    def scrape() -> Optional[dict]:
        try:
            return reader.scrape()
        except httpx.HTTPError:
            return None

    return scrape


# Ray exports the engines' counters once per metrics report interval (1 s on a
# head llmctl starts, Ray's default 10 s elsewhere): a scrape right after a
# short run misses its last requests.
COUNTERS_WAIT_S = 12.0


def settled_scrape(probe: Callable[[], Optional[dict]], before: dict, requests: int,
                   model: Optional[str] = None, wait: float = COUNTERS_WAIT_S,
                   groups: Optional[dict[str, list[str]]] = None) -> tuple[Optional[dict], bool]:
    """(scrape, True) once the engines (of ``model``) count, since ``before``,
    a first token for each of the ``requests`` a run had answered (vLLM's
    TTFT histogram counts every request once per engine it passes: each
    deployment of ``groups`` on its own, llmctl.perf.metrics.all_counted),
    or (the last scrape, False) after ``wait`` seconds; (None, False) when
    no scrape answered."""
    from llmctl.perf.metrics import all_counted
    from llmctl.poll import poll_iter

    last = None
    for _ in poll_iter(wait, 0.5):
        after = probe()
        if after is None:
            continue
        last = after
        if all_counted(before, after, requests, model, groups):
            return after, True
    return last, False


def local_cpu_seconds(dashboard_url: Optional[str] = None) -> Optional[Callable[[], float]]:
    """CPU seconds used so far by the local Ray head llmctl started (every
    process of it: raylet, workers, Serve replicas) and this process, or None
    (no local head, or psutil missing): a sweep step's busy cores on a
    shared machine, whatever else runs there."""
    try:
        import psutil
    except ImportError:
        return None
    from llmctl.launch.cluster import running_state

    state = running_state()
    if state is None or (dashboard_url and dashboard_url.rstrip("/") != state.dashboard_url.rstrip("/")):
        return None

    def total() -> float:
        procs = [psutil.Process()]
        try:
            head = psutil.Process(state.pid)
            procs += [head, *head.children(recursive=True)]
        except psutil.Error:
            pass
        secs = 0.0
        for p in procs:
            try:
                t = p.cpu_times()
                secs += t.user + t.system
            except psutil.Error:
                continue
        return secs

    return total
