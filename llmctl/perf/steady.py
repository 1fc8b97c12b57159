"""Steady states of one replica under load, over the engine steps of
:mod:`llmctl.perf.roofline`: a closed loop of N concurrent clients (each
sends its next request when its last one finished: ``plan --concurrency``,
``vllm bench serve --max-concurrency``) and an open loop of R requests per
second (``plan --rate``).

What a request sees, with X requests per second entering the engine:

- decode: every step gives each of the D decoding sequences a token; steps
  that also carry a prompt chunk take longer, so the time per output token
  is the decode step stretched by the share of time prefill takes,
  TPOT = t_step(D) / (1 − X·C) with C the extra time one request's prefill
  chunks add to the steps they ride on (vLLM V1 schedules the running
  requests' decode tokens first, then prompt tokens up to
  max_num_batched_tokens: vllm/v1/core/sched/scheduler.py);
- the API server streams each token (detokenizing, SSE) in its own process,
  in parallel with the engine: TPOT >= D × its time per token;
- TTFT = the request's own costs before the engine (HTTP, tokenizing) + the
  end of the running step + its prefill chunks + its wait behind other
  prompts (an M/D/1 queue on the prefill budget) + beyond the engine's
  capacity (max_num_seqs, KV cache) the wait for a free slot.

Closed loop: the fixed point of Little's law, X = N / (TTFT + (osl − 1)·TPOT);
past the engine's capacity the clients queue and only TTFT grows. Open loop:
X is given; past the rate the engine sustains, the queue grows without bound
(``saturated``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from llmctl.perf.burst import simulate
from llmctl.perf.roofline import Device, Efficiency, Engine, ModelShape, step_time

MAX_LOAD = 0.97  # utilisation where a queue is taken as saturated


@dataclass(frozen=True)
class Prediction:
    concurrency: float  # requests in flight per replica (closed loop: the clients; open loop: Little's law)
    rate: float  # requests per second
    output_tokens_per_s: float
    ttft_s: float  # mean (central) time to first token; math.inf when saturated
    ttft_p95_s: float
    itl_s: float  # mean per-request time per output token after the first (TPOT)
    itl_p95_s: float
    latency_s: float
    running: float  # sequences running in the engine (≤ max_num_seqs, KV capacity)
    decode_bound: str
    prefill_bound: str
    capped_by: str = ""  # "max_num_seqs" | "kv_capacity" when concurrency beyond it queues
    saturated: bool = False  # open loop: the rate is beyond what the replica sustains

    def stats(self) -> dict[str, dict[str, float]]:
        """In the shape of loadgen summaries, for SLO.met()."""
        return {"ttft_s": {"p50": self.ttft_s, "p95": self.ttft_p95_s, "p90": self.ttft_p95_s, "p99": self.ttft_p95_s},
                "tpot_s": {"p50": self.itl_s, "p95": self.itl_p95_s, "p90": self.itl_p95_s, "p99": self.itl_p95_s},
                "latency_s": {"p50": self.latency_s, "p95": self.latency_s, "p90": self.latency_s, "p99": self.latency_s}}


def capacity_cap(engine: Engine, isl: int, osl: int) -> tuple[float, str]:
    """Requests the engine runs at once: vLLM's max_num_seqs, or the KV cache
    holding every running request's prompt and output."""
    cap, name = float(engine.max_num_seqs), "max_num_seqs"
    if engine.kv_tokens:
        kv = max(1.0, engine.kv_tokens / max(1, isl + osl))
        if kv < cap:
            cap, name = kv, "kv_capacity"
    return cap, name


@dataclass(frozen=True)
class _State:
    tpot: float
    ttft: float  # in the engine: the request's costs, the running step, its chunks, the prefill queue
    decode: float
    prefill_load: float  # utilisation of the prefill budget (≥ MAX_LOAD: saturated)
    decode_bound: str
    prefill_bound: str


def _state(shape: ModelShape, dev: Device, eff: Efficiency, engine: Engine, *, rate: float, decode: float,
           isl: int, osl: int, running: float = math.inf) -> _State:
    """The steps at ``rate`` requests per second with ``decode`` sequences
    decoding, of ``running`` in the engine (closed loop: the prompts waiting
    for their prefill are at most the running ones not decoding)."""
    ctx = isl + osl / 2
    budget = max(1.0, engine.max_num_batched_tokens - decode)
    chunks = max(1, math.ceil(isl / budget))
    chunk = isl / chunks
    t0 = step_time(shape, dev, eff, decode=decode, prompt_tokens=0, context=ctx)
    tp = step_time(shape, dev, eff, decode=decode, prompt_tokens=chunk, context=ctx, prompt_context=isl / 2)
    extra = chunks * max(0.0, tp.seconds - t0.seconds)
    share = min(MAX_LOAD, rate * extra)
    tpot = max(t0.seconds / (1 - share), decode * eff.api_token_s)
    # the prefill budget as a server: prompts share a step up to max_num_batched_tokens
    full = step_time(shape, dev, eff, decode=decode, prompt_tokens=min(budget, max(chunk, rate * isl * tpot)),
                     context=ctx, prompt_context=isl / 2)
    load = rate * isl * full.seconds / budget if budget >= isl else rate * chunks * tp.seconds
    prefill = chunks * tp.seconds
    if math.isfinite(running):
        # closed loop: the prefill budget is a station the running requests pass once per request; an arriving
        # request finds the others as they are with one client fewer (the arrival theorem): Schweitzer's mean
        # value analysis, as for the API server (frontend_wait), with the rest of a request's time as think time
        think = eff.request_s + (osl - 1 + eff.ttft_steps - 1) * tpot
        wait = max(0.0, frontend_wait(prefill, running, think) - prefill)
        before = (eff.ttft_steps - 1) * tpot
    else:  # open loop, Poisson arrivals: M/D/1 on the prefill budget
        wait = (min(load, MAX_LOAD) / (2 * (1 - min(load, MAX_LOAD)))) * prefill
        # a request arriving at a random time finds the running step half done on average; the closed loop's
        # further steps (the prefills of the requests that finished just before it) do not apply
        before = min(eff.ttft_steps - 1, 0.5) * tpot
    ttft = eff.request_s + before + prefill + wait
    return _State(tpot, ttft, decode, load, t0.bound, tp.bound)


def frontend_wait(service_s: float, n: float, think_s: float) -> float:
    """Time a request spends at a serial front end (``service_s`` each) when
    ``n`` closed-loop clients spend ``think_s`` elsewhere per request:
    Schweitzer's approximate mean value analysis, R = s·(1 + Q·(n−1)/n) with
    Q = X·R and X = n / (think + R), in closed form. One client: R = s;
    many: the rate tends to 1/s, the wait growing smoothly before it."""
    if service_s <= 0:
        return 0.0
    a = (n - 1) / n if n > 1 else 0.0
    b = think_s - service_s - a * service_s * n
    return (-b + math.sqrt(b * b + 4 * service_s * think_s)) / 2


def first_round_wait(shape: ModelShape, dev: Device, eff: Efficiency, engine: Engine, *, clients: float, isl: int,
                     osl: int, ttft: float) -> float:
    """What the first round of a closed-loop run adds to a request's TTFT
    beyond the steady state's ``ttft``: the clients start together, so their
    first requests queue for their prefills (llmctl.perf.burst; those beyond
    the engine's cap queue in the steady state too)."""
    cap, _ = capacity_cap(engine, isl, osl)
    n = max(1, int(round(min(clients, cap))))
    burst = simulate(shape, dev, eff, engine, requests=n, isl=isl, osl=osl, first_tokens_only=True)
    return max(0.0, burst.mean_ttft_s - ttft)


def predict(shape: ModelShape, dev: Device, eff: Efficiency, engine: Engine, *, concurrency: float, isl: int,
            osl: int, rounds: float = math.inf) -> Prediction:
    """Closed loop: ``concurrency`` clients on one replica, steady state;
    with ``rounds`` (requests each client sends in a measured run) the mean
    over such a run, whose first round starts as one burst."""
    n = max(float(concurrency), 1e-6)
    cap, cap_name = capacity_cap(engine, isl, osl)
    running = min(n, cap)
    dec = running
    t = step_time(shape, dev, eff, decode=dec, prompt_tokens=0, context=isl + osl / 2).seconds
    rate = running / max(osl * t, 1e-9)
    st = None
    for _ in range(200):
        st = _state(shape, dev, eff, engine, rate=rate, decode=dec, isl=isl, osl=osl, running=running)
        run = st.ttft + (osl - 1) * st.tpot
        wait = frontend_wait(eff.frontend_s, n, run)
        new_rate = min(n / (run + wait), running / run)
        new_dec = min(running, new_rate * (osl - 1) * st.tpot)
        done = abs(new_rate / rate - 1) < 1e-6 and abs(new_dec - dec) <= 1e-6 * max(dec, 1.0)
        rate = math.sqrt(rate * new_rate)
        dec = 0.5 * (dec + new_dec)
        if done:
            break
    run = st.ttft + (osl - 1) * st.tpot
    wait = frontend_wait(eff.frontend_s, n, run)
    total = max(run + wait, n / rate)
    ttft = st.ttft + eff.ttft_front * (total - run)  # the wait in front of the engine: the client's, not the engine's
    if math.isfinite(rounds) and rounds > 0 and dev.known:
        extra = first_round_wait(shape, dev, eff, engine, clients=n, isl=isl, osl=osl, ttft=ttft) / rounds
        ttft, total = ttft + extra, total + extra
    return Prediction(
        concurrency=n, rate=n / total, output_tokens_per_s=osl * n / total, ttft_s=ttft,
        ttft_p95_s=ttft * eff.ttft_p95_ratio, itl_s=st.tpot, itl_p95_s=st.tpot * eff.itl_p95_ratio,
        latency_s=total, running=running,
        decode_bound="frontend" if eff.frontend_s and rate * eff.frontend_s >= 0.9 else st.decode_bound,
        prefill_bound=st.prefill_bound, capped_by=cap_name if n > cap else "",
    )


def predict_rate(shape: ModelShape, dev: Device, eff: Efficiency, engine: Engine, *, rate: float, isl: int,
                 osl: int) -> Prediction:
    """Open loop: ``rate`` requests per second (Poisson arrivals) on one replica."""
    cap, cap_name = capacity_cap(engine, isl, osl)
    x = max(float(rate), 1e-9)
    dec, st, saturated = 1.0, None, False
    for _ in range(200):
        st = _state(shape, dev, eff, engine, rate=x, decode=dec, isl=isl, osl=osl)
        new_dec = x * (osl - 1) * st.tpot
        if new_dec > cap or st.prefill_load >= MAX_LOAD or x * (st.ttft + (osl - 1) * st.tpot) > cap:
            saturated = True
            break
        if abs(new_dec - dec) <= 1e-6 * max(dec, 1.0):
            dec = new_dec
            break
        dec = 0.5 * (dec + new_dec)
    fe = 0.0
    if eff.frontend_s:
        u = x * eff.frontend_s
        saturated = saturated or u >= MAX_LOAD
        fe = eff.frontend_s + (u / (2 * (1 - u)) * eff.frontend_s if u < 1 else math.inf)
    if saturated:
        inf = math.inf
        return Prediction(concurrency=inf, rate=x, output_tokens_per_s=x * osl, ttft_s=inf, ttft_p95_s=inf,
                          itl_s=st.tpot, itl_p95_s=st.tpot * eff.itl_p95_ratio, latency_s=inf, running=cap,
                          decode_bound=st.decode_bound, prefill_bound=st.prefill_bound, capped_by=cap_name,
                          saturated=True)
    ttft = st.ttft + eff.ttft_front * fe
    latency = st.ttft + fe + (osl - 1) * st.tpot
    return Prediction(concurrency=x * latency, rate=x, output_tokens_per_s=x * osl, ttft_s=ttft,
                      ttft_p95_s=ttft * eff.ttft_p95_ratio, itl_s=st.tpot, itl_p95_s=st.tpot * eff.itl_p95_ratio,
                      latency_s=latency, running=x * latency, decode_bound=st.decode_bound,
                      prefill_bound=st.prefill_bound)


def max_sustained_rate(shape: ModelShape, dev: Device, eff: Efficiency, engine: Engine, *, isl: int, osl: int,
                       limit: Optional[float] = None) -> float:
    """The highest request rate the replica sustains (the closed loop at its capacity)."""
    cap, _ = capacity_cap(engine, isl, osl)
    return predict(shape, dev, eff, engine, concurrency=limit or cap, isl=isl, osl=osl).rate
