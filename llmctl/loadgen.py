"""``llmctl bench``: load an app's OpenAI endpoint and watch it scale (issue 8).

A core with no UI: :func:`bench` runs ``concurrency`` async workers (httpx)
that send chat completions until ``requests`` were sent or ``duration``
seconds passed, while a sampler records each LLM deployment's replica counts
from Serve's REST API. Tokens are counted from the server's own ``usage``
(``stream_options.include_usage`` when streaming); ``ignore_eos`` makes every
request generate exactly ``max_tokens`` so runs are comparable. Errors (HTTP
status, timeouts, broken streams) are counted, never raised; ``stop`` (a
threading.Event the CLI sets on Ctrl-C) ends the run early and the result
holds what was measured so far.

Metrics, per request: time to first token (first content chunk), the gaps
between content chunks (inter-token latency, as vLLM's own benchmark measures
it), latency, output tokens. Aggregates: req/s and output tokens/s over the
wall time of the run, TTFT / ITL / latency percentiles (linear interpolation).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import secrets
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional

import httpx
from httpx_sse import aconnect_sse

from llmctl.errors import UsageError, param
from llmctl.launch.benchprobe import ReplicaSample, cpu_probe, replica_sampler, routing_of  # noqa: F401 (re-exported)
from llmctl.launch.endpoint import endpoint_headers, resolve_endpoint
from llmctl.workload import PrefixPool, _pair, prompt_of  # noqa: F401 (prompt_of: re-exported)


@dataclass
class RequestResult:
    ok: bool
    latency: float
    ttft: Optional[float] = None
    itls: list[float] = field(default_factory=list)
    output_tokens: int = 0
    prompt_tokens: int = 0
    error: str = ""  # "HTTP 404", "ReadTimeout", …
    detail: str = ""  # the start of a failed response's body (what the server said)
    start: float = 0.0  # seconds since the run began
    prefix_id: Optional[int] = None  # the shared prefix it drew (llmctl.workload.PrefixPool)

    @property
    def tpot(self) -> Optional[float]:
        """The request's mean time per output token after the first (vLLM's TPOT):
        what llmctl's ``itl`` targets measure (llmctl.perf.slo)."""
        if self.ttft is None or self.output_tokens < 2:
            return None
        return max(0.0, self.latency - self.ttft) / (self.output_tokens - 1)


@dataclass
class InflightSample:
    t: float
    inflight: int


@dataclass
class BenchSettings:
    url: str
    model: str
    concurrency: int
    requests: Optional[int]
    duration: Optional[float]
    prompt_tokens: int
    max_tokens: int
    stream: bool
    rate: Optional[float] = None  # open loop: Poisson arrivals at this many requests/s (concurrency caps the in-flight)
    seed: int = 0
    salt: str = field(default_factory=lambda: secrets.token_hex(4))  # the run's prompts: new every run
    prefixes: int = 0  # a prefix pool (llmctl.workload): this many shared prefixes ...
    prefix_tokens: int = 0  # ... of about this many tokens, one per request before its own prompt_tokens
    trace: Optional[str] = None  # a replayed trace (llmctl.workload.read_trace): its path
    speedup: float = 1.0  # the trace's times divided by this


def percentiles(values: list[float], ps: tuple[int, ...] = (50, 90, 99)) -> dict[str, Optional[float]]:
    """Linear-interpolation percentiles (numpy's default method)."""
    out: dict[str, Optional[float]] = {}
    vs = sorted(values)
    for p in ps:
        if not vs:
            out[f"p{p}"] = None
            continue
        k = (len(vs) - 1) * p / 100
        lo, hi = int(k), min(int(k) + 1, len(vs) - 1)
        out[f"p{p}"] = vs[lo] + (vs[hi] - vs[lo]) * (k - lo)
    return out


def stats(values: list[float]) -> dict[str, Optional[float]]:
    """p50 / p90 / p95 / p99 and the mean."""
    out = percentiles(values, (50, 90, 95, 99))
    out["mean"] = sum(values) / len(values) if values else None
    return out


@dataclass
class BenchResult:
    settings: BenchSettings
    results: list[RequestResult]
    seconds: float
    timeline: list[ReplicaSample] = field(default_factory=list)
    interrupted: bool = False
    inflight: list[InflightSample] = field(default_factory=list)
    busy_cores: Optional[float] = None  # CPU cores the local cluster and the load generator kept busy
    prefix_cache: Optional[dict] = None  # vLLM's prefix-cache hits over the run (llmctl.perf.metrics.prefix_cache)
    routing: dict = field(default_factory=dict)  # deployment -> its request router and autoscaling policy
    engines: dict = field(default_factory=dict)  # deployment -> what its engines did over the run (perf.metrics.engines_of)

    @property
    def done(self) -> int:
        return sum(1 for r in self.results if r.ok)

    @property
    def failed(self) -> int:
        return sum(1 for r in self.results if not r.ok)

    @property
    def output_tokens(self) -> int:
        return sum(r.output_tokens for r in self.results if r.ok)

    def errors(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.results:
            if not r.ok:
                out[r.error] = out.get(r.error, 0) + 1
        return out

    def diagnoses(self) -> list:
        """What llmctl recognises in the failed responses (launch/failures.py): a LoRA
        adapter vLLM refused, one Ray could not find in its store, …"""
        from llmctl.launch.failures import diagnose

        details = list(dict.fromkeys(r.detail for r in self.results if not r.ok and r.detail))
        return diagnose("\n".join(details)) if details else []

    def summary(self) -> dict[str, Any]:
        ok = [r for r in self.results if r.ok]
        secs = max(self.seconds, 1e-9)
        return {
            "requests": len(self.results), "done": self.done, "failed": self.failed, "errors": self.errors(),
            "seconds": round(self.seconds, 3), "req_per_s": self.done / secs, "output_tokens": self.output_tokens,
            "output_tokens_per_s": self.output_tokens / secs,
            "prompt_tokens_mean": (sum(r.prompt_tokens for r in ok) / len(ok)) if ok else None,
            "ttft_s": stats([r.ttft for r in ok if r.ttft is not None]),
            "itl_s": stats([g for r in ok for g in r.itls]),
            "tpot_s": stats([t for r in ok if (t := r.tpot) is not None]),
            "latency_s": stats([r.latency for r in ok]),
            "interrupted": self.interrupted,
            "diagnoses": [{"code": d.code, "cause": d.cause, "fix": d.fix} for d in self.diagnoses()],
            **({"busy_cores": round(self.busy_cores, 3)} if self.busy_cores is not None else {}),
            **({"prefix_cache": self.prefix_cache} if self.prefix_cache is not None else {}),
            **({"routing": self.routing} if self.routing else {}),
            **({"engines": self.engines} if self.engines else {}),
            **({"prefix_pool": {"count": self.settings.prefixes, "tokens": self.settings.prefix_tokens,
                                "requests_per_prefix": _per_prefix(self.results)}} if getattr(self.settings, "prefixes", None) else {}),
        }

    @classmethod
    def pooled(cls, parts: list["BenchResult"]) -> "BenchResult":
        """Several holds of one step as one: every request, the time of all
        (a rate over the whole), busy cores weighted by time."""
        out = cls(parts[0].settings, [r for p in parts for r in p.results], sum(p.seconds for p in parts))
        out.interrupted = any(p.interrupted for p in parts)
        busy = [(p.busy_cores, p.seconds) for p in parts if p.busy_cores is not None]
        if busy:
            out.busy_cores = sum(b * t for b, t in busy) / max(sum(t for _, t in busy), 1e-9)
        return out

    def steady(self, warmup: float, until: float) -> "BenchResult":
        """The requests started in [``warmup``, ``until``) seconds, over that
        window: a closed loop's first requests all start at once and run
        faster than the steady state that follows (``bench --warmup``)."""
        return BenchResult(self.settings, [r for r in self.results if warmup <= r.start < until],
                           max(until - warmup, 1e-9), self.timeline, self.interrupted, self.inflight, self.busy_cores)

    def replica_timeline(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for s in self.timeline:
            out.setdefault(s.deployment, []).append({"t": round(s.t, 2), "running": s.running, "target": s.target,
                                                      **({"message": s.message} if s.message else {})})
        return out

    def to_json(self) -> dict[str, Any]:
        return {"settings": asdict(self.settings), "summary": self.summary(), "replicas": self.replica_timeline(),
                "inflight": [[round(x.t, 2), x.inflight] for x in self.inflight],
                # the first failed requests as they failed: when, what, what the server said
                "failures": [{"start": round(r.start, 2), "latency": round(r.latency, 3), "error": r.error,
                              "detail": r.detail[:1000]} for r in self.results if not r.ok][:20]}

    def requests_json(self) -> list[dict[str, Any]]:
        """Each request: start, TTFT, TPOT, latency, tokens (for the report's distributions)."""
        # start rounded down: 1.99996 s stays in a [1, 2) window (rounding made it 2.0)
        return [{"start": math.floor(r.start * 1e4) / 1e4, "ok": r.ok, "ttft": r.ttft, "tpot": r.tpot, "latency": round(r.latency, 5),
                 "output_tokens": r.output_tokens, "prompt_tokens": r.prompt_tokens} for r in self.results]


def _per_prefix(results: list[RequestResult]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in results:
        if r.prefix_id is not None:
            out[str(r.prefix_id)] = out.get(str(r.prefix_id), 0) + 1
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


def _prompt(s: BenchSettings, seed: int, tokens: int, prefix_id: Optional[int]) -> tuple[str, Optional[int]]:
    """The request's prompt: its own ``tokens`` (new for every request of the
    run), after one of the pool's shared prefixes when there is a pool."""
    # the request's number and its hold's (a sweep's step and pass), paired: a prompt of its own across a sweep
    own = prompt_of(tokens, _pair(seed, s.seed), s.salt)
    if not s.prefixes or not s.prefix_tokens:
        return own, None
    pool = PrefixPool(s.prefixes, s.prefix_tokens)
    pid = pool.draw(_pair(seed, s.seed), s.salt) if prefix_id is None else prefix_id % pool.count
    return pool.text(pid, s.salt) + " " + own, pid


def request_of(s: BenchSettings, seed: int, req: Any = None) -> tuple[str, int, Optional[int]]:
    """(prompt, max_tokens, prefix id) of request number ``seed``; ``req`` (a
    llmctl.workload.TraceRequest) gives its tokens and prefix, else the settings do."""
    tokens, max_tokens, pid = s.prompt_tokens, s.max_tokens, None
    if req is not None:
        tokens, max_tokens, pid = req.input_tokens, req.output_tokens, req.prefix_id
        if s.prefixes and s.prefix_tokens:
            tokens = max(1, tokens - s.prefix_tokens)
    content, pid = _prompt(s, seed, tokens, pid)
    return content, max_tokens, pid


async def _one(client: httpx.AsyncClient, s: BenchSettings, content: str, max_tokens: int) -> RequestResult:
    body: dict[str, Any] = {
        "model": s.model, "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens, "ignore_eos": True, "stream": s.stream,
    }
    if s.stream:
        body["stream_options"] = {"include_usage": True}
    t0 = time.perf_counter()
    try:
        if not s.stream:
            r = await client.post(s.url + "/chat/completions", json=body)
            latency = time.perf_counter() - t0
            if r.status_code != 200:
                return RequestResult(False, latency, error=f"HTTP {r.status_code}", detail=r.text[:8000])
            usage = r.json().get("usage") or {}
            return RequestResult(True, latency, latency, [], int(usage.get("completion_tokens") or 0),
                                 int(usage.get("prompt_tokens") or 0))
        ttft, last, gaps, usage = None, None, [], {}
        # the events as the SSE spec frames them (httpx-sse): lines end at CR or LF only; httpx's own aiter_lines
        # also splits at U+2028, U+0085 and the like, which JSON strings carry unescaped and models generate
        async with aconnect_sse(client, "POST", s.url + "/chat/completions", json=body) as events:
            r = events.response
            if r.status_code != 200:
                body = (await r.aread()).decode("utf-8", "replace")
                return RequestResult(False, time.perf_counter() - t0, error=f"HTTP {r.status_code}", detail=body[:8000])
            done, seen = False, ""
            async for event in events.aiter_sse():
                if event.data == "[DONE]":
                    done = True
                if not event.data or done:
                    continue
                seen = event.data
                try:
                    chunk = json.loads(event.data)
                except ValueError:  # an event cut short (the connection closed mid-event) or not JSON at all
                    return RequestResult(False, time.perf_counter() - t0, ttft, gaps,
                                         error="bad stream event", detail=event.data[:1000])
                if chunk.get("usage"):
                    usage = chunk["usage"]
                if any((c.get("delta") or {}).get("content") for c in chunk.get("choices") or []):
                    now = time.perf_counter()
                    if ttft is None:
                        ttft = now - t0
                    else:
                        gaps.append(now - last)
                    last = now
        latency = time.perf_counter() - t0
        if not done:  # the connection closed before the stream's end (an event cut short is dropped, as SSE says)
            return RequestResult(False, latency, ttft, gaps, error="stream cut before [DONE]",
                                 detail=f"last event: {seen[:1000]}" if seen else "no event")
        if not usage:
            return RequestResult(False, latency, ttft, gaps, error="no usage in the stream")
        return RequestResult(True, latency, ttft, gaps, int(usage.get("completion_tokens") or 0), int(usage.get("prompt_tokens") or 0))
    except (httpx.HTTPError, ValueError) as e:
        return RequestResult(False, time.perf_counter() - t0, error=type(e).__name__)


async def run_hold(s: BenchSettings, stop: threading.Event, sample: Optional[Callable[[], list[ReplicaSample]]],
               on_progress: Optional[Callable[["BenchResult"], None]], interval: float,
               cpu_seconds: Optional[Callable[[], float]] = None, headers: Optional[dict] = None,
               schedule: Optional[list] = None) -> BenchResult:
    """One hold of load (a run of ``bench``, a step of a sweep): until ``s``'s
    requests are sent or its duration has passed, then until those in flight
    finish. ``schedule`` (llmctl.workload.TraceRequest, times already scaled):
    each request sent at its time (at most ``s.concurrency`` in flight; the
    rest wait), until the schedule ends, ``s.duration`` passes or ``stop``."""
    res = BenchResult(s, [], 0.0)
    sent = 0
    inflight = 0
    limits = httpx.Limits(max_connections=s.concurrency + 2, max_keepalive_connections=s.concurrency + 2)

    def more() -> bool:
        if stop.is_set():
            return False
        if s.requests is not None:
            return sent < s.requests
        return time.perf_counter() - t0 < (s.duration or 0)

    async with httpx.AsyncClient(timeout=httpx.Timeout(600, connect=10), limits=limits, trust_env=False,
                                 headers=headers or {}) as client:  # headers: the app's API key, never in BenchSettings
        t0 = time.perf_counter()  # the run's clock starts once the client is ready
        cpu0 = cpu_seconds() if cpu_seconds else None

        async def one(seed: int, req: Any = None) -> None:
            nonlocal inflight
            inflight += 1
            start = time.perf_counter() - t0
            content, max_tokens, pid = request_of(s, seed, req)
            try:
                r = await _one(client, s, content, max_tokens)
            finally:
                inflight -= 1
            r.start, r.prefix_id = start, pid
            res.results.append(r)

        async def worker(w: int) -> None:
            nonlocal sent
            while more():
                sent += 1
                await one(sent)  # one seed per request of the run

        async def arrivals() -> None:
            """Open loop: Poisson arrivals at s.rate; at most s.concurrency in flight (the rest wait)."""
            nonlocal sent
            rng = random.Random(s.seed)
            gate = asyncio.Semaphore(s.concurrency)
            tasks = []

            async def gated(seed: int) -> None:
                async with gate:
                    await one(seed)

            nxt = time.perf_counter()
            while more():
                nxt += rng.expovariate(s.rate or 1.0)
                await asyncio.sleep(max(0.0, nxt - time.perf_counter()))
                if not more():
                    break
                sent += 1
                tasks.append(asyncio.create_task(gated(sent)))
            await asyncio.gather(*tasks, return_exceptions=True)

        async def sampler() -> None:
            while True:
                res.inflight.append(InflightSample(time.perf_counter() - t0, inflight))
                if sample is not None:
                    try:
                        for smp in await asyncio.to_thread(sample):
                            smp.t = time.perf_counter() - t0
                            res.timeline.append(smp)
                    except Exception as e:  # noqa: BLE001 - a status hiccup must not end the load
                        res.timeline.append(ReplicaSample(time.perf_counter() - t0, "?", 0, None, f"status failed: {e}"))
                res.seconds = time.perf_counter() - t0
                if on_progress is not None:
                    on_progress(res)
                await asyncio.sleep(interval)

        async def watch_stop(tasks: list[asyncio.Task]) -> None:
            while not stop.is_set() and not all(t.done() for t in tasks):
                await asyncio.sleep(0.1)
            if stop.is_set():
                for t in tasks:
                    t.cancel()

        async def replay() -> None:
            """A trace: each request at its own time."""
            nonlocal sent
            gate = asyncio.Semaphore(s.concurrency)
            tasks = []

            async def gated(seed: int, req: Any) -> None:
                async with gate:
                    await one(seed, req)

            for req in schedule or []:
                await asyncio.sleep(max(0.0, t0 + req.t - time.perf_counter()))
                if stop.is_set() or (s.duration is not None and time.perf_counter() - t0 >= s.duration):
                    break
                sent += 1
                tasks.append(asyncio.create_task(gated(sent, req)))
            await asyncio.gather(*tasks, return_exceptions=True)

        if schedule is not None:
            workers = [asyncio.create_task(replay())]
        elif s.rate:
            workers = [asyncio.create_task(arrivals())]
        else:
            workers = [asyncio.create_task(worker(i)) for i in range(s.concurrency)]
        side = asyncio.create_task(sampler())
        guard = asyncio.create_task(watch_stop(workers))
        await asyncio.gather(*workers, return_exceptions=True)
        res.seconds = time.perf_counter() - t0
        res.interrupted = stop.is_set()
        if cpu_seconds is not None and cpu0 is not None:
            try:
                res.busy_cores = (cpu_seconds() - cpu0) / max(res.seconds, 1e-9)
            except Exception:  # noqa: BLE001 - a process gone: no figure
                res.busy_cores = None
        res.inflight.append(InflightSample(res.seconds, inflight))
        if sample is not None:  # one last look at the replicas
            try:
                for smp in await asyncio.to_thread(sample):
                    smp.t = res.seconds
                    res.timeline.append(smp)
            except Exception as e:  # noqa: BLE001 - as in sampler(): recorded, never the end of the run
                res.timeline.append(ReplicaSample(res.seconds, "?", 0, None, f"status failed: {e}"))
        side.cancel()
        guard.cancel()
    return res


def bench(
    app: Optional[str] = None,
    *,
    model: Optional[str] = None,
    url: Optional[str] = None,
    address: Optional[str] = None,
    concurrency: int = 8,
    requests: Optional[int] = None,
    duration: Optional[float] = None,
    prompt_tokens: int = 128,
    max_tokens: int = 128,
    stream: bool = True,
    stop: Optional[threading.Event] = None,
    on_progress: Optional[Callable[[BenchResult], None]] = None,
    interval: float = 2.0,
    rate: Optional[float] = None,
    seed: int = 0,
    api_key_env: Optional[str] = None,
    ray_token_env: Optional[str] = None,
    prefixes: int = 0,
    prefix_tokens: int = 0,
    trace: Optional[str] = None,
    speedup: Optional[float] = None,
    metrics_url: Optional[str] = None,
) -> BenchResult:
    """Load an app's OpenAI endpoint (found through status, or ``url``) and
    return what was measured, with the replica timeline. ``requests`` or
    ``duration`` bounds the run (default: 5 × concurrency requests).
    ``ray_token_env``: the variable holding a remote cluster's Ray token.

    ``prefixes`` / ``prefix_tokens``: a prefix pool (llmctl.workload): each
    prompt is one of ``prefixes`` shared prefixes of about ``prefix_tokens``
    tokens, then ``prompt_tokens`` of its own. ``trace``: replay a trace file
    (llmctl.workload.read_trace) at its own pace, ``speedup`` times faster;
    its rows give each request's tokens (and prefix). With the engines'
    metrics (the local head llmctl started, or ``metrics_url``) the result
    holds vLLM's prefix-cache hit rate over the run; with the cluster's
    Serve status, each deployment's request router and autoscaling policy."""
    for name, v in (("concurrency", concurrency), ("prompt_tokens", prompt_tokens), ("max_tokens", max_tokens)):
        if v is None or v < 1:
            raise UsageError(f"{param(name)}: must be a positive integer (got {v})", param=name)
    if requests is not None and duration is not None:
        raise UsageError(f"{param('requests')}: give {param('requests')} or {param('duration')}, not both", param="requests")
    if (prefixes or prefix_tokens) and (prefixes < 1 or prefix_tokens < 1):
        raise UsageError(f"{param('prefixes')} and {param('prefix_tokens')}: a prefix pool needs both, each a positive "
                         f"integer (e.g. 8 prefixes of 256 tokens; got {prefixes} and {prefix_tokens})", param="prefixes")
    schedule = None
    if trace is not None:
        from llmctl.workload import parse_speedup, read_trace

        if requests is not None or rate is not None:
            raise UsageError(f"{param('trace')}: the trace sets when requests arrive; leave out {param('requests')} and "
                             f"{param('rate')} ({param('duration')} stops the replay early)", param="trace")
        factor = parse_speedup(speedup)
        schedule = read_trace(trace).scaled(factor).requests
    elif speedup is not None:
        raise UsageError(f"{param('speedup')}: scales a trace's times; add {param('trace')} FILE", param="speedup")
    if requests is not None and requests < 1:
        raise UsageError(f"{param('requests')}: must be a positive integer (got {requests})", param="requests")
    if duration is not None and duration <= 0:
        raise UsageError(f"{param('duration')}: must be a positive number of seconds (got {duration:g})", param="duration")
    if requests is None and duration is None and schedule is None:
        requests = 5 * concurrency
    headers = endpoint_headers(app, url, address, api_key_env, ray_token_env)
    base, chosen, dashboard, app_name = resolve_endpoint(app, model, url, address, headers, ray_token_env)
    settings = BenchSettings(base, chosen, concurrency, requests, duration, prompt_tokens, max_tokens, stream, rate, seed,
                             prefixes=prefixes, prefix_tokens=prefix_tokens, trace=str(trace) if trace else None,
                             speedup=float(speedup or 1.0))
    sample = replica_sampler(dashboard, app_name, ray_token_env) if dashboard and app_name else None
    cpu = cpu_probe(dashboard)
    from llmctl.launch.metrics import engine_probe

    probe = engine_probe(address, metrics_url, ray_token_env=ray_token_env) if (dashboard or metrics_url) else None
    before = probe() if probe else None
    res = asyncio.run(run_hold(settings, stop or threading.Event(), sample, on_progress, interval, cpu, headers, schedule))
    if dashboard and app_name:
        res.routing = routing_of(dashboard, app_name, ray_token_env)
    if before is not None:
        from llmctl.launch.metrics import settled_scrape
        from llmctl.perf.metrics import engines_of, prefix_cache

        model_id = chosen.split(":")[0]
        groups = {d: r.get("replicas", []) for d, r in res.routing.items()}
        after, complete = settled_scrape(probe, before, res.done, model_id, groups=groups)
        if after is not None:
            res.prefix_cache = {**prefix_cache(before, after, model_id), "complete": complete}
            res.engines = engines_of(before, after, groups)
    return res
