"""Requests that arrive at once, stepped through vLLM V1's scheduler.

A burst is not a steady state: ``N`` requests sent together (``vllm bench
serve`` without ``--max-concurrency``; the first round of a closed-loop
benchmark, whose N clients start together) queue for their prefill. What
vLLM V1 does with them (vllm/v1/core/sched/scheduler.py, ``schedule``):

- every step has a budget of ``max_num_batched_tokens`` tokens; the running
  requests are scheduled first (one token each when decoding), then the
  waiting ones in arrival order, each taking ``min(prompt left, budget
  left)`` tokens (chunked prefill: a prompt larger than what is left is
  split, the rest goes first in the next step), while fewer than
  ``max_num_seqs`` run and the KV cache has room (below);
- a request's first token is sampled in the step that finishes its prompt;
  every later step gives it one more token until its output is complete;
- a request is admitted when the KV cache has room for the prompt tokens it
  is scheduled (``allocate_slots`` of its chunk), not for its whole sequence;
  when a running request then finds no room for its next token, the last
  admitted running request is preempted (``self.running.pop()``): its KV
  cache is freed, its computed tokens are set to 0 and it goes back to the
  front of the waiting queue (``_preempt_request``, recompute: its prompt and
  the tokens it had generated are prefilled again before it goes on); no
  waiting request is admitted in a step that preempted. With prefix caching
  (V1's default) the freed blocks stay cached until reused: the block pool
  evicts the least recently freed first (``FreeKVCacheBlockQueue``), so a
  preempted request readmitted finds its blocks cached but for as many tokens
  as the others allocated since it was preempted (a request's blocks are
  freed tail first: its prefix is evicted last), and recomputes only those.
  The cache is counted in tokens, not in 16-token blocks.

The API server hands the requests to the engine one after another: each pays
``request_s`` (HTTP, tokenizing) and the serial ``frontend_s`` of those before
it. With ``interval`` the requests are sent that far apart instead of at
once (``vllm bench serve --request-rate R --num-prompts N``: N requests over
N / R seconds, at their mean spacing), the transient an open-loop benchmark
of N requests measures. Step times are :func:`llmctl.perf.roofline.step_time`;
runs of steps with no prompt tokens and nothing arriving, finishing or
overflowing the cache are taken together.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from llmctl.perf.roofline import Device, Efficiency, Engine, ModelShape, step_time


@dataclass(frozen=True)
class Burst:
    requests: int
    mean_ttft_s: float  # from the send to the first token, mean over the requests
    makespan_s: float  # until the last request's last token (math.nan when only the first tokens were stepped)
    mean_tpot_s: float = math.nan  # per request, (its last token − its first) / (osl − 1), mean over the requests


def simulate(shape: ModelShape, dev: Device, eff: Efficiency, engine: Engine, *, requests: int, isl: int, osl: int,
             first_tokens_only: bool = False, interval: float = 0.0, prefix_caching: bool = True) -> Burst:
    """``requests`` requests of ``isl`` prompt and ``osl`` output tokens sent at
    t = 0, or ``interval`` seconds apart (prompts share no prefix)."""
    n = max(1, int(requests))
    if not engine.kv_tokens or n * (isl + osl) <= engine.kv_tokens:
        return _roomy(shape, dev, eff, engine, n=n, isl=isl, osl=osl, first_tokens_only=first_tokens_only,
                      interval=interval)
    return _full_cache(shape, dev, eff, engine, n=n, isl=isl, osl=osl, first_tokens_only=first_tokens_only,
                       interval=interval, prefix_caching=prefix_caching)


def _stepper(shape: ModelShape, dev: Device, eff: Efficiency, isl: int, osl: int):
    """step(decoding sequences, prompt tokens) -> seconds, remembered."""
    ctx = isl + osl / 2
    cache: dict[tuple[int, int], float] = {}

    def step(decode: int, prompt: int) -> float:
        key = (decode, prompt)
        if key not in cache:
            cache[key] = step_time(shape, dev, eff, decode=decode, prompt_tokens=prompt, context=ctx,
                                   prompt_context=isl / 2).seconds
        return cache[key]

    return step


def _arrivals(eff: Efficiency, n: int, interval: float) -> list[float]:
    """When each request reaches the engine: sent ``interval`` apart, handed over by a serial front end."""
    return [k * interval + eff.request_s + k * max(0.0, eff.frontend_s - interval) for k in range(n)]


def _full_cache(shape: ModelShape, dev: Device, eff: Efficiency, engine: Engine, *, n: int, isl: int, osl: int,
                first_tokens_only: bool, interval: float, prefix_caching: bool) -> Burst:
    """The requests through V1's admission and preemption, one by one (the KV cache cannot hold them all)."""
    kv_free = float(engine.kv_tokens)
    step = _stepper(shape, dev, eff, isl, osl)
    arrive = _arrivals(eff, n, interval)
    nxt = 0  # next request to reach the engine
    # a request: [sent, prompt tokens left to compute, tokens generated, KV tokens held, first token's time,
    #             tokens left cached when preempted, tokens allocated in all when preempted]
    waiting: deque[list[float]] = deque()
    allocated = 0.0  # tokens allocated since the start
    running: list[list[float]] = []  # in admission order
    t, ttft_sum, firsts, done, tpot_sum = 0.0, 0.0, 0, 0, 0.0
    while done < n:
        while nxt < n and arrive[nxt] <= t:
            waiting.append([nxt * interval, float(isl), 0.0, 0.0, math.nan, 0.0, 0.0])
            nxt += 1
        if not (waiting or running):
            t = arrive[nxt]
            continue
        budget = float(engine.max_num_batched_tokens)
        sched: list[tuple[list[float], float]] = []
        preempted = False
        i = 0
        while i < len(running):  # the running requests first, in order; a prefill split in the last step goes on
            r = running[i]  # (preemption takes from the end: those before i stay)
            need = min(r[1], budget) if r[1] > 0 else 1.0
            if need <= 0:
                break
            while need > kv_free and running:
                victim = running.pop()
                # recompute: prompt and generated tokens again, less what is still cached when it is readmitted
                # (the free blocks queued before its own are reused first)
                victim[5] = victim[3] if prefix_caching else 0.0
                victim[6] = allocated + kv_free
                kv_free += victim[3]
                victim[1], victim[3] = isl + victim[2], 0.0
                waiting.appendleft(victim)
                preempted = True
                if victim is r:
                    break
            if i >= len(running):  # it was preempted itself
                break
            kv_free -= need
            allocated += need
            r[3] += need
            budget -= need
            sched.append((r, need))
            i += 1
        while not preempted and waiting and budget > 0 and len(running) < engine.max_num_seqs:
            r = waiting[0]
            # readmitted after a preemption: the blocks still cached are taken back, not computed (at least
            # the last token is: KVCacheManager.get_computed_blocks)
            hit = min(max(0.0, r[5] - max(0.0, allocated - r[6])), r[1] - 1) if r[5] else 0.0
            need = min(r[1] - hit, budget)
            if hit + need > kv_free:
                break
            waiting.popleft()
            running.append(r)
            r[5] = 0.0
            r[1] -= hit
            kv_free -= hit + need
            allocated += need
            r[3] += hit + need
            budget -= need
            sched.append((r, need))
        decoding = sum(1 for r, _ in sched if r[1] <= 0)
        prompt = int(sum(k for r, k in sched if r[1] > 0))
        if not sched:
            if preempted:  # the preempted ones are admitted again in the next step
                continue
            if nxt < n:  # nothing fits until a request arrives
                t = max(t, arrive[nxt])
                continue
            return Burst(n, math.inf, math.inf, math.inf)  # a prompt chunk larger than the whole KV cache
        dt = step(decoding, prompt)
        k = 1
        if prompt == 0 and not (waiting and len(running) < engine.max_num_seqs and kv_free >= min(waiting[0][1], budget)):
            # decode-only steps that change nothing but the KV held: taken together until a request finishes,
            # arrives or the cache is full
            k = min(min(osl - int(r[2]) for r in running), 1 + int(kv_free // max(1, len(running))))
            if nxt < n:
                k = min(k, max(1, math.ceil((arrive[nxt] - t) / dt)))
            k = max(1, k)
            for r in running:
                r[3] += k - 1
            kv_free -= (k - 1) * len(running)
            allocated += (k - 1) * len(running)
        t += k * dt
        for r, used in sched:
            if r[1] > 0:  # a prompt chunk
                r[1] -= used
                if r[1] > 0:
                    continue
                gained = 1
            else:
                gained = k
            if r[2] == 0:
                ttft_sum += t - (k - 1) * dt - r[0]
                r[4] = t - (k - 1) * dt
                firsts += 1
            r[2] += gained
            if r[2] >= osl:
                running.remove(r)
                kv_free += r[3]
                done += 1
                if osl > 1:
                    tpot_sum += (t - r[4]) / (osl - 1)
        if first_tokens_only and firsts >= n:
            return Burst(n, ttft_sum / n, math.nan)
    return Burst(n, ttft_sum / n, t, tpot_sum / n if osl > 1 else math.nan)


def _roomy(shape: ModelShape, dev: Device, eff: Efficiency, engine: Engine, *, n: int, isl: int, osl: int,
           first_tokens_only: bool, interval: float) -> Burst:
    """The requests when the KV cache holds every one whole: no admission waits for the cache and nothing is
    preempted, so the decoding requests are counted, not followed one by one (the same steps as
    :func:`_full_cache`, far fewer operations)."""
    cap = engine.max_num_seqs
    step = _stepper(shape, dev, eff, isl, osl)
    arrive = _arrivals(eff, n, interval)
    nxt = 0  # next request to reach the engine
    waiting: deque[list[float]] = deque()
    prefilling: list[list[float]] = []
    finish: deque[tuple[int, float]] = deque()  # (the step each decoding request ends in, its first token's time)
    t, steps, ttft_sum, firsts, done, tpot_sum = 0.0, 0, 0.0, 0, 0, 0.0
    while done < n:
        while nxt < n and arrive[nxt] <= t:
            waiting.append([float(isl), nxt * interval])  # [prompt tokens left, sent]
            nxt += 1
        if not (waiting or prefilling or finish):
            t = arrive[nxt]
            continue
        budget = engine.max_num_batched_tokens - len(finish)
        prompt = 0
        sched = []
        for r in prefilling:  # running requests first: a prompt split in the last step goes on
            if budget <= 0:
                break
            k = int(min(r[0], budget))
            budget -= k
            prompt += k
            sched.append((r, k))
        while waiting and budget > 0 and len(finish) + len(prefilling) < cap:
            r = waiting.popleft()
            prefilling.append(r)
            k = int(min(r[0], budget))
            budget -= k
            prompt += k
            sched.append((r, k))
        t0, s0 = t, steps
        if prompt == 0:  # decode-only steps until something arrives or finishes
            dt = step(len(finish), 0)
            k = finish[0][0] - steps
            if nxt < n:
                k = min(k, max(1, math.ceil((arrive[nxt] - t) / dt)))
        else:
            k = 1
            dt = step(len(finish), prompt)
        t += k * dt
        steps += k
        while finish and finish[0][0] <= steps:
            end, first = finish.popleft()
            tpot_sum += (t0 + (end - s0) * dt - first) / (osl - 1)
            done += 1
        for r, used in sched:
            r[0] -= used
            if r[0] <= 0:
                prefilling.remove(r)
                ttft_sum += t - r[1]
                firsts += 1
                if osl > 1:
                    finish.append((steps + osl - 1, t))
                else:
                    done += 1
        if first_tokens_only and firsts >= n:
            return Burst(n, ttft_sum / n, math.nan)
    return Burst(n, ttft_sum / n, t, tpot_sum / n if osl > 1 else math.nan)
