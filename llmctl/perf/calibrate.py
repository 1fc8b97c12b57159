"""Fit the roofline's efficiencies to a measurement (``bench --sweep --output``).

Per sweep step (one replica count, closed-loop concurrency), what was
measured gives, per replica: the rate X, the mean inter-token time (TPOT) and
TTFT, the prompt length. Little's law turns them into what each engine step
held: B = X·(osl−1)·TPOT sequences decoding and P = X·isl·TPOT prompt tokens.
Then, by non-negative least squares:

- TPOT = t_0 + B·t_seq + P·t_tok (+ the roofline terms scaled by 1/η_mem or
  1/η_flop, when the device has a datasheet roofline: a GPU);
- TTFT − (its own prefill step) − (its wait in the front end's queue) =
  t_request + (ttft_steps − 1)·TPOT;
- p95 / mean of TTFT and of TPOT: the geometric mean of the steps' ratios.

A sweep with more than one replica (all on one host) is fitted on its own
(``per_replicas[R]``: the same terms from that sweep's steps, per replica
concurrency N/R), and also as one number, how much the replicas slow each
other down (``replica_stretch[R]``, every time of the 1-replica model × that
factor), which is what extrapolates to replica counts not measured. On GPUs
each replica has its own GPUs and the factor is 1; on this project's 2-core
CPU machine the replicas, the Serve proxy, the ingress and the load
generator share the same cores, and a 1-replica sweep cannot know how much.
One factor was too coarse there (2026-11-25: it put 2 replicas at 6.1 req/s
where their own sweep levelled off at 4-5): the shared proxy and the
replicas' queues change the shape of the curve, not only its scale.

What a CPU calibration means: the tiny model's weights (0.7 MB) and FLOPs
are too small for any roofline term to matter, so the fit measures vLLM's
and Ray Serve's overheads per step, per sequence, per prompt token and per
request on this CPU — a model of *this* deployment, not of a GPU.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Optional, Sequence

from llmctl.errors import UsageError, param
from llmctl import serve_facts as sf
from llmctl.perf.roofline import Device, Efficiency, Engine, ModelShape, step_time
from llmctl.perf.steady import predict


@dataclass
class Calibration:
    efficiency: Efficiency
    device: str  # what was measured: "cpu" or a GPU name
    replica_stretch: dict[int, float] = field(default_factory=lambda: {1: 1.0})
    per_replicas: dict[int, Efficiency] = field(default_factory=dict)  # fitted on that replica count's own sweep
    fit: list[dict[str, Any]] = field(default_factory=list)  # per step: measured vs fitted
    sources: list[str] = field(default_factory=list)
    shared_host: bool = False
    ttft_at: str = "client"  # whose TTFT the fit models: the clients' or the engines' (vLLM's histogram)
    measured: list[dict[str, Any]] = field(default_factory=list)  # per step: replicas, rate, lengths, stats (measured_bounds)

    def stretch(self, replicas: int) -> float:
        """The slowdown of R replicas sharing the measured host (linear beyond what was measured)."""
        if replicas in self.replica_stretch:
            return self.replica_stretch[replicas]
        known = sorted(self.replica_stretch)
        if not self.shared_host or len(known) < 2:
            return 1.0
        r0, r1 = known[-2], known[-1]
        slope = (self.replica_stretch[r1] - self.replica_stretch[r0]) / (r1 - r0)
        return max(1.0, self.replica_stretch[r1] + slope * (replicas - r1))

    def for_replicas(self, replicas: int) -> Efficiency:
        """The model of one of ``replicas`` replicas: fitted on a sweep of that
        many when there is one, else the 1-replica fit stretched."""
        if replicas in self.per_replicas:
            return self.per_replicas[replicas]
        return stretched(self.efficiency, self.stretch(replicas))

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "efficiency": self.efficiency.to_json(), "shared_host": self.shared_host,
                "replica_stretch": {str(k): v for k, v in self.replica_stretch.items()},
                "per_replicas": {str(k): v.to_json() for k, v in self.per_replicas.items()}, "fit": self.fit,
                "sources": self.sources, "ttft_at": self.ttft_at, "measured": self.measured}

    def measured_bounds(self, slo, *, isl: float, osl: float, replicas: int) -> tuple[float, float]:
        """(floor, ceiling) of the rate of ``replicas`` replicas within ``slo``
        that this calibration's own steps measured, at lengths within
        ±LENGTH_MATCH of ``isl``/``osl`` ((0, inf): no step says). With a step
        that failed the targets, the ceiling is the rate the steps sustained
        within them as ``bench --slo`` reads a sweep (llmctl.perf.sweep.
        max_rate_within: between the last step that met them and the next
        that did not, where the binding metric reaches its bound), or the
        slowest failing step's rate when none met them; the floor is the
        fastest step that met them. A step lacking a target's percentile
        (vLLM's TTFT histogram has no p90/p99) says nothing."""
        from llmctl.perf.sweep import max_rate_within

        steps = [{"index": i, "summary": {"done": 1, "req_per_s": m["rate"], **m["stats"]}}
                 for i, m in enumerate(self.measured) if m["replicas"] == replicas and _same_lengths(m, isl, osl)
                 and slo.worst(m["stats"]) is not None]
        met = [st["summary"]["req_per_s"] for st in steps if slo.met(st["summary"])]
        failed = [st["summary"]["req_per_s"] for st in steps if not slo.met(st["summary"])]
        if not failed:
            return max(met, default=0.0), math.inf
        ceiling = max_rate_within(steps, slo)["req_per_s"] or min(failed)
        return min(max(met, default=0.0), ceiling), ceiling


# a measured step bounds a plan only at lengths this close to its own (relative)
LENGTH_MATCH = 0.25


def _same_lengths(step: dict, isl: float, osl: float) -> bool:
    """A step ran the plan's requests: its output length, and its prompt as the engine counted it or as the
    sweep asked for it (``bench --prompt-tokens N`` sends about N words, which a model's tokenizer may count as
    more tokens; a trace replayed by ``bench`` asks for its lengths the same way), within ±LENGTH_MATCH."""
    def near(a: float, b: float) -> bool:
        return abs(a / max(b, 1) - 1) <= LENGTH_MATCH

    return near(step["osl"], osl) and any(near(v, isl) for v in (step["isl"], step.get("isl_asked") or 0) if v)


def load_sweeps(paths: Sequence[Path | str]) -> list[dict]:
    out = []
    for p in paths:
        try:
            data = json.loads(Path(p).read_text())
        except (OSError, ValueError) as e:
            raise UsageError(f"profile: {p}: cannot read it as JSON ({e})") from None
        items = data if isinstance(data, list) else [data]
        for d in items:
            if not isinstance(d, dict) or d.get("kind") != "llmctl-bench-sweep" or not d.get("steps"):
                raise UsageError(f"profile: {p}: not the JSON of `llmctl bench --sweep ... --output FILE`")
            d.setdefault("_path", str(p))
            out.append(d)
    return out


def replicas_of(sweep: dict) -> int:
    runs = [p["running"] for dep, pts in (sweep.get("replicas") or {}).items() if sf.is_llm_server(dep) for p in pts]
    if runs:
        return max(1, round(statistics.median(runs)))
    cfg = ((sweep.get("provenance") or {}).get("serve_config") or {})
    try:
        auto = cfg["args"]["llm_configs"][0]["deployment_config"]["autoscaling_config"]
        return int(auto.get("min_replicas") or 1)
    except (KeyError, IndexError, TypeError):
        return 1


def device_of_sweep(sweep: dict) -> str:
    cfg = ((sweep.get("provenance") or {}).get("serve_config") or {})
    try:
        return cfg["args"]["llm_configs"][0].get("accelerator_type") or "cpu"
    except (KeyError, IndexError, TypeError, AttributeError):
        return "cpu"


def engine_kwargs_of(sweep: dict) -> dict:
    cfg = ((sweep.get("provenance") or {}).get("serve_config") or {})
    try:
        return dict(cfg["args"]["llm_configs"][0].get("engine_kwargs") or {})
    except (KeyError, IndexError, TypeError, AttributeError):
        return {}


def nnls(rows: list[list[float]], y: list[float], iters: int = 4000) -> list[float]:
    """Non-negative least squares by cyclic coordinate descent on scaled columns (a handful of unknowns)."""
    n = len(rows[0]) if rows else 0
    scale = [math.sqrt(sum(r[j] ** 2 for r in rows)) or 1.0 for j in range(n)]
    a = [[r[j] / scale[j] for j in range(n)] for r in rows]
    x = [0.0] * n
    resid = list(y)
    for _ in range(iters):
        moved = 0.0
        for j in range(n):
            g = sum(a[i][j] * resid[i] for i in range(len(a)))
            new = max(0.0, x[j] + g)  # columns have unit norm
            d = new - x[j]
            if d:
                for i in range(len(a)):
                    resid[i] -= a[i][j] * d
                x[j] = new
                moved = max(moved, abs(d))
        if moved < 1e-12:
            break
    return [x[j] / scale[j] for j in range(n)]


TTFT_AT = ("client", "engine")


def _steps(sweep: dict, replicas: int, ttft_at: str = "client") -> list[dict]:
    """The sweep's concurrency steps, per replica. ``ttft_at="engine"``: TTFT
    as the engines measured it (the step's ``engine_ttft_s``, vLLM's
    histogram: from the request's arrival at the engine, Serve's proxy and
    router left out) instead of the clients' (from the request's send)."""
    s = sweep["settings"]
    out = []
    for st in sweep["steps"]:
        m = st["summary"]
        if not m.get("done") or st.get("mode") != "concurrency" or m["tpot_s"].get("mean") is None:
            continue
        ttft = m["ttft_s"]
        if ttft_at == "engine":
            ttft = m.get("engine_ttft_s")
            if not ttft or not ttft.get("mean") or not ttft.get("p95"):
                raise UsageError(f"profile: {sweep.get('_path', '?')}: step {st['value']} has no engine-side TTFT "
                                 "(engine_ttft_s: the sweep ran where llmctl could not read the engines' metrics, or "
                                 f"by an older llmctl); run the sweep again (with {param('metrics_url')} on a "
                                 f"cluster llmctl did not start), or plan with {param('slo_at', 'client')}")
        stats = {"ttft_s": ttft, "tpot_s": m["tpot_s"], "latency_s": m.get("latency_s") or {}}
        out.append({"n": st["concurrency"] / replicas, "x": m["req_per_s"] / replicas, "itl": m["tpot_s"]["mean"], "stats": stats,
                    "itl_p95": m["tpot_s"]["p95"], "ttft": ttft["mean"], "ttft_p95": ttft["p95"],
                    "isl": m.get("prompt_tokens_mean") or s["prompt_tokens"], "isl_asked": s.get("prompt_tokens"),
                    "osl": s["max_tokens"], "value": st["value"]})
    return out


def fit(sweeps: list[dict], shape: ModelShape, dev: Device, engine: Engine, *,
        base: Optional[Efficiency] = None, ttft_at: str = "client") -> Calibration:
    """Fit an Efficiency to the sweeps' 1-replica steps (the lowest replica
    count measured); for each other replica count, its own Efficiency (from
    two steps up) and a stretch factor of the first. ``ttft_at``: whose TTFT
    the model is of, the clients' or the engines' (:func:`_steps`)."""
    base = base or Efficiency()
    if ttft_at == "engine":  # vLLM's clock starts after Serve's proxy and router: their queue is not in its TTFT
        base = replace(base, ttft_front=0.0)
    if not dev.known:  # a CPU: no datasheet; the front end's queue is fitted from the sweep (_fit_ttft_and_frontend)
        base = replace(base, frontend_s=0.0, compute_half_tokens=0.0)
    by_r: dict[int, list[dict]] = {}
    for sw in sweeps:
        by_r.setdefault(replicas_of(sw), []).extend(_steps(sw, replicas_of(sw), ttft_at))
    if not by_r or not any(by_r.values()):
        raise UsageError("profile: no concurrency step with finished streaming requests to fit (run bench --sweep 1,2,4,8)")
    r1 = min(r for r, v in by_r.items() if v)
    if len(by_r[r1]) < 2:
        raise UsageError("profile: at least two concurrency steps are needed to fit (e.g. --sweep 1,4,16)")
    eff = _fit_efficiency(by_r[r1], shape, dev, engine, base)
    cal = Calibration(eff, device_of_sweep(sweeps[0]), {r1: 1.0}, sources=[sw.get("_path", "?") for sw in sweeps],
                      shared_host=not dev.known, ttft_at=ttft_at)
    for r, rpts in sorted(by_r.items()):
        if r == r1 or not rpts:
            continue
        cal.replica_stretch[r] = _fit_stretch(rpts, shape, dev, eff, engine)
        if cal.shared_host and len(rpts) >= 2:
            cal.per_replicas[r] = _fit_efficiency(rpts, shape, dev, engine, base)
    for r, rpts in sorted(by_r.items()):
        e = eff if r == r1 else cal.for_replicas(r)
        for p in rpts:
            cal.measured.append({"replicas": r, "concurrency": p["value"], "rate": p["x"] * r, "isl": p["isl"],
                                 "isl_asked": p["isl_asked"], "osl": p["osl"], "stats": p["stats"]})
            pr = predict(shape, dev, e, engine, concurrency=p["n"], isl=round(p["isl"]), osl=p["osl"])
            cal.fit.append({"replicas": r, "concurrency": p["value"], "rate": p["x"] * r, "rate_fit": pr.rate * r,
                            "itl_p95": p["itl_p95"], "itl_p95_fit": pr.itl_p95_s, "ttft_p95": p["ttft_p95"],
                            "ttft_p95_fit": pr.ttft_p95_s})
    return cal


def _fit_efficiency(pts: list[dict], shape: ModelShape, dev: Device, engine: Engine, base: Efficiency) -> Efficiency:
    """TPOT = t_0 + B·t_seq + P·t_tok (+ roofline terms) by NNLS on relative
    errors, then the TTFT terms, the p95 ratios and the front end's queue."""
    roof = dev.known
    rows, y = [], []
    for p in pts:
        b, pr = p["x"] * (p["osl"] - 1) * p["itl"], p["x"] * p["isl"] * p["itl"]
        row = [1.0, b, pr]
        if roof:
            st = step_time(shape, dev, replace(base, mem=1.0, kv_mem=1.0, compute=1.0, step_s=0, seq_s=0, token_s=0),
                           decode=b, prompt_tokens=pr, context=p["isl"] + p["osl"] / 2)
            row += [st.mem_s if st.mem_s >= st.compute_s else 0.0, st.compute_s if st.compute_s > st.mem_s else 0.0]
        rows.append([v / p["itl"] for v in row])  # relative errors: every step counts alike
        y.append(1.0)
    coef = nnls(rows, y)
    eff = replace(base, step_s=coef[0], seq_s=coef[1], token_s=coef[2], source="fitted")
    if roof:
        mem = 1 / coef[3] if coef[3] > 0 else base.mem  # one bandwidth share for weights and KV reads: a profile's steps do not tell them apart
        eff = replace(eff, mem=mem, kv_mem=mem if coef[3] > 0 else base.kv_mem,
                      compute=1 / coef[4] if coef[4] > 0 else base.compute)
    return _fit_ttft_and_frontend(pts, shape, dev, eff, engine)


def _geomean(values) -> float:
    vals = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else 1.0


def _front_wait_at(s: float, p: dict) -> float:
    """The front end's residence time at a measured step (rate x, n clients):
    R = s·(1 + x·R·(n−1)/n), the same queue as roofline.frontend_wait."""
    if s <= 0:
        return 0.0
    a = (p["n"] - 1) / p["n"] if p["n"] > 1 else 0.0
    busy = a * s * p["x"]
    return s / (1 - busy) if busy < 0.95 else s / 0.05


def _fit_ttft(pts: list[dict], shape, dev, eff: Efficiency) -> Efficiency:
    """TTFT − (the request's own prefill step) − (its wait at the front end)
    = t_request + (ttft_steps − 1)·TPOT, relative errors."""
    rows, y = [], []
    for p in pts:
        b = p["x"] * (p["osl"] - 1) * p["itl"]
        pf = step_time(shape, dev, eff, decode=b, prompt_tokens=p["isl"], context=p["isl"] + p["osl"] / 2).seconds
        rest = max(1e-6, p["ttft"] - pf - eff.ttft_front * _front_wait_at(eff.frontend_s, p))
        rows.append([1.0 / rest, p["itl"] / rest])
        y.append(1.0)
    tc = nnls(rows, y)
    return replace(eff, request_s=tc[0], ttft_steps=1.0 + tc[1])


def _fit_ttft_and_frontend(pts: list[dict], shape, dev, eff: Efficiency, engine) -> Efficiency:
    """The TTFT terms, and the serial per-request cost in front of the engine
    (``frontend_s``: Serve's proxy and ingress, the API server), a queue
    whose wait grows with the rate and makes the rate level off while TTFT
    keeps growing: the candidate whose fitted model reproduces the measured
    rates and TTFTs best (TTFT terms fitted on the steps where that queue is
    not saturated)."""
    xmax = max(p["x"] for p in pts)
    eff = replace(eff, ttft_p95_ratio=_geomean(p["ttft_p95"] / p["ttft"] for p in pts if p["ttft"]),
                  itl_p95_ratio=_geomean(p["itl_p95"] / p["itl"] for p in pts if p["itl"]))
    best = None
    for k in (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1):
        s = k / xmax
        free = [p for p in pts if not s or p["x"] * s < 0.9] or pts
        e = _fit_ttft(free if len(free) >= 2 else pts, shape, dev, replace(eff, frontend_s=s))
        err = 0.0
        for p in pts:
            pr = predict(shape, dev, e, engine, concurrency=p["n"], isl=round(p["isl"]), osl=p["osl"])
            err += math.log(pr.rate / p["x"]) ** 2 + math.log(max(pr.ttft_s, 1e-9) / p["ttft"]) ** 2
        if best is None or err < best[0]:
            best = (err, e)
    return best[1]


def stretched(eff: Efficiency, k: float) -> Efficiency:
    """Every time of the model × k (replicas sharing a host's cores)."""
    if k == 1.0:
        return eff
    return replace(eff, mem=eff.mem / k, kv_mem=eff.kv_mem / k, compute=eff.compute / k, step_s=eff.step_s * k, seq_s=eff.seq_s * k,
                   token_s=eff.token_s * k, request_s=eff.request_s * k, frontend_s=eff.frontend_s * k)


def _fit_stretch(pts: list[dict], shape, dev, eff, engine) -> float:
    def err(k: float) -> float:
        e = 0.0
        for p in pts:
            pr = predict(shape, dev, stretched(eff, k), engine, concurrency=p["n"], isl=round(p["isl"]), osl=p["osl"])
            for a, b in ((pr.rate, p["x"]), (pr.itl_s, p["itl"]), (pr.ttft_s, p["ttft"])):
                if a > 0 and b > 0:
                    e += math.log(a / b) ** 2
        return e

    lo, hi = 0.5, 8.0  # golden-section search on log k
    import math as _m

    a, b = _m.log(lo), _m.log(hi)
    g = (5 ** 0.5 - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    for _ in range(40):
        if err(_m.exp(c)) < err(_m.exp(d)):
            b = d
        else:
            a = c
        c, d = b - g * (b - a), a + g * (b - a)
    return round(_m.exp((a + b) / 2), 4)


def calibration_json(cal: Calibration) -> str:
    return json.dumps(cal.to_json(), indent=1)


__all__ = ["Calibration", "fit", "load_sweeps", "nnls", "replicas_of", "engine_kwargs_of", "stretched", "asdict"]
