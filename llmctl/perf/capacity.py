"""The capacity plan: for a latency goal, per GPU type and TP size, the
highest request rate one replica sustains within the targets, the replicas a
rate needs, what it costs and which bound limits it.

The search is over the per-replica concurrency N (closed loop): the model
(:mod:`llmctl.perf.roofline`) gives the steady state at N; the highest N
whose predicted p95s meet every target — or the engine's cap, vLLM's
``max_num_seqs`` or the KV cache's ``KV tokens / (isl + osl)`` — gives the
rate. ``bench --slo`` measures the same quantity (llmctl.perf.sweep).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from llmctl.perf.calibrate import Calibration
from llmctl.perf.roofline import Device, Efficiency, Engine, ModelShape
from llmctl.perf.steady import Prediction, capacity_cap, predict, predict_rate
from llmctl.perf.slo import SLO

HEADROOM = 1.25  # max_ongoing_requests / target_ongoing_requests (llmctl.sizing.autoscale)
MAX_REPLICAS = 1000

BOUND_TEXT = {
    "kv_capacity": "KV cache capacity",
    "max_num_seqs": "vLLM max_num_seqs",
    "memory_bandwidth": "memory bandwidth (decode)",
    "compute": "compute",
    "compute_prefill": "compute (prefill: TTFT)",
    "memory_bandwidth_prefill": "weights read (prefill step: TTFT)",
    "engine_overhead": "engine overhead (per step / sequence)",
    "engine_overhead_prefill": "engine and request overhead (TTFT)",
    "interconnect": "TP interconnect",
    "frontend": "API server / ingress (per-request overhead)",
    "unreachable": "target unreachable at any load",
    "measured_fail": "the profile's own sweep (where its steps crossed the targets)",
    "measured_pass": "the profile's own sweep (a step met the targets at this rate)",
}


@dataclass
class Capacity:
    """One replica setup (GPU, TP) against a goal."""

    gpu: str
    tp: int
    max_rate: float  # requests/s one replica (of `replicas`) sustains within the targets; 0: unreachable
    concurrency: float  # per replica at that rate
    prediction: Optional[Prediction]
    bound: str  # BOUND_TEXT key
    replicas: Optional[int] = None  # for the goal's rate
    rate_total: Optional[float] = None  # what those replicas sustain
    usd_per_hour: Optional[float] = None
    usd_per_m_output_tokens: Optional[float] = None
    price: Optional[float] = None
    meets: bool = False
    cheapest: bool = False
    note: str = ""
    by_replicas: Optional[dict] = None  # a shared-host (CPU) calibration: replicas -> rate of all of them
    band: Optional[dict] = None  # measured / predicted on the calibration data for this kind (llmctl.perf.bands)
    extrapolates: list = field(default_factory=list)  # why the figure leaves the calibration data

    @property
    def max_ongoing_requests(self) -> int:
        return max(1, math.floor(self.concurrency + 1e-9))

    @property
    def target_ongoing_requests(self) -> int:
        return max(1, math.floor(self.max_ongoing_requests / HEADROOM))

    def to_json(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k != "prediction"}
        d["bound_text"] = BOUND_TEXT.get(self.bound, self.bound)
        d["max_ongoing_requests"] = self.max_ongoing_requests
        d["target_ongoing_requests"] = self.target_ongoing_requests
        p = self.prediction
        if p is not None:
            d.update(output_tokens_per_s=p.output_tokens_per_s, ttft_p95_s=p.ttft_p95_s, itl_p95_s=p.itl_p95_s,
                     latency_s=p.latency_s)
        return d


def _met(slo: SLO, p: Prediction) -> bool:
    return slo.met(p.stats())


def _failing(slo: SLO, p: Prediction) -> str:
    """The metric of the target the prediction misses most (SLO.ratios; the first of equals)."""
    worst, metric = 0.0, "itl"
    for t, ratio in slo.ratios(p.stats()) or []:
        if ratio > worst:
            worst, metric = ratio, t.metric
    return metric


def at_load(shape: ModelShape, dev: Device, eff: Efficiency, engine: Engine, *, isl: int, osl: int,
            concurrency: Optional[float] = None, rate: Optional[float] = None, rounds: float = math.inf) -> Prediction:
    """One replica at a load: ``concurrency`` closed-loop clients, or ``rate``
    requests per second (open loop). What plan --concurrency / --rate show and
    what --slo searches over."""
    if rate is not None:
        return predict_rate(shape, dev, eff, engine, rate=rate, isl=isl, osl=osl)
    return predict(shape, dev, eff, engine, concurrency=float(concurrency or 1), isl=isl, osl=osl, rounds=rounds)


def max_rate(shape: ModelShape, dev: Device, eff: Efficiency, engine: Engine, slo: SLO, *, isl: int, osl: int,
             replicas: int = 1, cal: Optional[Calibration] = None, rounds: float = math.inf
             ) -> tuple[float, float, Optional[Prediction], str]:
    """(rate of all ``replicas``, concurrency per replica, prediction, bound);
    ``rounds``: the closed loop as a benchmark of that many requests per client
    measures it (llmctl.perf.steady.predict), by default the steady state.
    With a calibration, the rate stays within what the calibration's own steps
    measured at these lengths (Calibration.measured_bounds): never above a rate
    a step failed the targets at, never below one a step met them at."""
    e = cal.for_replicas(replicas) if cal is not None else eff

    def at(n: float) -> Prediction:
        return at_load(shape, dev, e, engine, isl=isl, osl=osl, concurrency=n, rounds=rounds)

    total, n, p, bound = _model_max_rate(at, engine, slo, isl=isl, osl=osl, replicas=replicas)
    if cal is None:
        return total, n, p, bound
    floor, ceiling = cal.measured_bounds(slo, isl=isl, osl=osl, replicas=replicas)
    if floor <= total <= ceiling:
        return total, n, p, bound
    want, bound = (ceiling, "measured_fail") if total > ceiling else (floor, "measured_pass")
    n = _concurrency_for(at, want / replicas, capacity_cap(engine, isl, osl)[0])
    return want, n, at(n), bound


def _concurrency_for(at, rate: float, cap: float) -> float:
    """The concurrency at which the model's closed loop runs ``rate`` requests/s
    (its rate grows with the concurrency; ``cap`` when it never gets there)."""
    lo, hi = 0.0, cap
    if at(hi).rate <= rate:
        return hi
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if at(mid).rate < rate else (lo, mid)
    return max(hi, 1e-3)


def _model_max_rate(at, engine: Engine, slo: SLO, *, isl: int, osl: int, replicas: int
                    ) -> tuple[float, float, Optional[Prediction], str]:
    """max_rate as the model alone answers it."""
    cap, cap_name = capacity_cap(engine, isl, osl)
    lo_n = min(1.0, cap)
    p = at(lo_n)
    if not _met(slo, p):
        # below one concurrent request: a lone client waits between requests
        for n in (0.5, 0.25, 0.1):
            p = at(n)
            if _met(slo, p):
                lo_n = n
                break
        else:
            return 0.0, 0.0, p, "unreachable"
    hi_n = lo_n
    while hi_n < cap:
        nxt = min(cap, hi_n * 2)
        if not _met(slo, at(nxt)):
            break
        lo_n = hi_n = nxt
    else:
        best = at(lo_n)
        return best.rate * replicas, lo_n, best, cap_name
    fail_n = min(cap, hi_n * 2)
    for _ in range(30):
        if fail_n - lo_n <= 1e-3 * fail_n:
            break
        mid = (lo_n + fail_n) / 2
        if _met(slo, at(mid)):
            lo_n = mid
        else:
            fail_n = mid
    best, bad = at(lo_n), at(fail_n)
    metric = _failing(slo, bad)
    if metric == "ttft" and bad.decode_bound == "frontend":
        bound = "frontend"  # the wait in the front end's queue is what crossed the target
    elif metric == "ttft":
        b = bad.prefill_bound
        bound = {"compute": "compute_prefill", "memory_bandwidth": "memory_bandwidth_prefill",
                 "engine_overhead": "engine_overhead_prefill"}.get(b, b)
    else:
        bound = bad.decode_bound
    return best.rate * replicas, lo_n, best, bound


def plan_capacity(setups: list[tuple[str, int, ModelShape, Device, Engine]], slo: SLO, *, isl: int, osl: int,
                  rate: Optional[float], prices: dict[str, float], eff: Optional[Efficiency] = None,
                  cal: Optional[Calibration] = None) -> list[Capacity]:
    """A Capacity per (gpu, tp) setup; with ``rate`` the replicas it needs and
    the cheapest priced setup that meets it marked."""
    eff = cal.efficiency if cal is not None else (eff or Efficiency())
    rows: list[Capacity] = []
    for gpu, tp, shape, dev, engine in setups:
        if not dev.known and cal is None:
            rows.append(Capacity(gpu, tp, 0.0, 0.0, None, "unreachable",
                                 note="no roofline for this device: calibrate with `llmctl bench --sweep` and pass --profile"))
            continue
        r1, n, p, bound = max_rate(shape, dev, eff, engine, slo, isl=isl, osl=osl, replicas=1, cal=cal)
        row = Capacity(gpu, tp, r1, n, p, bound, price=prices.get(gpu))
        if cal is None:
            row.band, row.extrapolates = uncertainty(gpu, shape, n if r1 > 0 else None)
        if cal is not None and cal.shared_host:
            row.by_replicas = {r: max_rate(shape, dev, eff, engine, slo, isl=isl, osl=osl, replicas=r, cal=cal)[0]
                               for r in sorted(set(cal.replica_stretch) | {1, 2})}
        if r1 > 0 and rate:
            reps = max(1, math.ceil(rate / r1 - 1e-9))
            if cal is not None and cal.shared_host:  # replicas slow each other down: search
                reps, total, seen = None, 0.0, {}
                for r in range(1, 65):
                    total, n_r, _, _ = max_rate(shape, dev, eff, engine, slo, isl=isl, osl=osl, replicas=r, cal=cal)
                    seen[r] = total
                    if total >= rate:
                        reps = r
                        row.by_replicas.update(seen)  # up to the count found: a lower rate (a trace's window) reads it
                        break
                row.replicas, row.rate_total = reps, total if reps else None
                if reps is None:
                    row.note = "the measured host saturates before this rate (replicas share its cores)"
            else:
                row.replicas, row.rate_total = (reps, reps * r1) if reps <= MAX_REPLICAS else (None, None)
        elif r1 > 0:
            row.replicas, row.rate_total = 1, r1
        row.meets = r1 > 0 and (not rate or row.replicas is not None)
        if row.price is not None and row.replicas is not None:
            row.usd_per_hour = row.price * tp * row.replicas
            served = min(rate, row.rate_total or 0) if rate else r1
            if served > 0:
                row.usd_per_m_output_tokens = row.usd_per_hour / (served * osl * 3600) * 1e6
        rows.append(row)
    priced = [r for r in rows if r.meets and r.usd_per_hour is not None]
    if priced:
        min(priced, key=lambda r: (r.usd_per_hour, r.tp)).cheapest = True
    return rows


def uncertainty(gpu: str, shape: ModelShape, concurrency: Optional[float]) -> tuple[dict, list[str]]:
    """The bands (measured / predicted, 10th-90th percentile) of the setup's kinds on the calibration data, per
    figure, and why it extrapolates."""
    from llmctl.perf import bands

    kinds = bands.kinds_of(gpu, shape)
    out = {m: b.to_json() for m in bands.METRICS if (b := bands.band(m, kinds)) is not None}
    return out, bands.extrapolation(kinds, concurrency)


@dataclass
class LoadRow:
    """One replica setup (GPU, TP) at one load."""

    gpu: str
    tp: int
    load: float  # concurrency (closed loop) or requests/s (open loop)
    prediction: Prediction
    band: dict = field(default_factory=dict)
    extrapolates: list = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        p = self.prediction

        def num(v: float) -> Optional[float]:
            return round(v, 6) if math.isfinite(v) else None

        return {"gpu": self.gpu, "tp": self.tp, "load": self.load, "saturated": p.saturated,
                "concurrency": num(p.concurrency), "requests_per_s": num(p.rate),
                "output_tokens_per_s": num(p.output_tokens_per_s), "ttft_s": num(p.ttft_s),
                "ttft_p95_s": num(p.ttft_p95_s), "itl_s": num(p.itl_s), "itl_p95_s": num(p.itl_p95_s),
                "latency_s": num(p.latency_s), "running": num(p.running), "queued_beyond": p.capped_by or None,
                "decode_bound": p.decode_bound, "prefill_bound": p.prefill_bound, "band": self.band,
                "extrapolates": self.extrapolates}


def load_rows(setups: list[tuple[str, int, ModelShape, Device, Engine]], *, mode: str, values: tuple, isl: int,
              osl: int, eff: Optional[Efficiency] = None) -> list[LoadRow]:
    """A LoadRow per setup and load value (mode: "concurrency" or "rate")."""
    eff = eff or Efficiency()
    rows = []
    for gpu, tp, shape, dev, engine in setups:
        for v in values:
            kw = {"concurrency": v} if mode == "concurrency" else {"rate": v}
            p = at_load(shape, dev, eff, engine, isl=isl, osl=osl, **kw)
            band, why = uncertainty(gpu, shape, p.concurrency)
            rows.append(LoadRow(gpu, tp, v, p, band, why))
    return rows
