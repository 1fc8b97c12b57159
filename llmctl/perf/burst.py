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
  ``max_num_seqs`` run and the KV cache holds them;
- a request's first token is sampled in the step that finishes its prompt;
  every later step gives it one more token until its output is complete.

The API server hands the requests to the engine one after another: each pays
``request_s`` (HTTP, tokenizing) and the serial ``frontend_s`` of those before
it. With ``interval`` the requests are sent that far apart instead of at
once (``vllm bench serve --request-rate R --num-prompts N``: N requests over
N / R seconds, at their mean spacing), the transient an open-loop benchmark
of N requests measures. Step times are :func:`llmctl.perf.roofline.step_time`; runs of steps with
no prompt tokens and nothing arriving or finishing are taken together.
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
             first_tokens_only: bool = False, interval: float = 0.0) -> Burst:
    """``requests`` requests of ``isl`` prompt and ``osl`` output tokens sent at
    t = 0, or ``interval`` seconds apart."""
    n = max(1, int(requests))
    cap = engine.max_num_seqs
    if engine.kv_tokens:
        cap = max(1, min(cap, int(engine.kv_tokens // max(1, isl + osl))))
    ctx = isl + osl / 2
    cache: dict[tuple[int, int], float] = {}

    def step(decode: int, prompt: int) -> float:
        key = (decode, prompt)
        if key not in cache:
            cache[key] = step_time(shape, dev, eff, decode=decode, prompt_tokens=prompt, context=ctx,
                                   prompt_context=isl / 2).seconds
        return cache[key]

    arrive = [k * interval + eff.request_s + k * max(0.0, eff.frontend_s - interval) for k in range(n)]
    nxt = 0  # next request to reach the engine
    waiting: deque[list[float]] = deque()
    prefilling: list[list[float]] = []
    finish: deque[tuple[int, float]] = deque()  # (the step each decoding request ends in, its first token's time)
    t, steps, ttft_sum, firsts, done, tpot_sum = 0.0, 0, 0.0, 0, 0, 0.0
    while done < n:
        while nxt < n and arrive[nxt] <= t:
            waiting.append([arrive[nxt], float(isl), nxt * interval])  # [reaches the engine, prompt left, sent]
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
            k = int(min(r[1], budget))
            budget -= k
            prompt += k
            sched.append((r, k))
        while waiting and budget > 0 and len(finish) + len(prefilling) < cap:
            r = waiting.popleft()
            prefilling.append(r)
            k = int(min(r[1], budget))
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
            r[1] -= used
            if r[1] <= 0:
                prefilling.remove(r)
                ttft_sum += t - r[2]
                firsts += 1
                if osl > 1:
                    finish.append((steps + osl - 1, t))
                else:
                    done += 1
        if first_tokens_only and firsts >= n:
            return Burst(n, ttft_sum / n, math.nan)
    return Burst(n, ttft_sum / n, t, tpot_sum / n if osl > 1 else math.nan)
