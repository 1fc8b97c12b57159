"""The model against measured GPU serving series (closed-loop concurrency
sweeps: tests/data/gpu_serving_measurements.yaml, from NVIDIA
AIConfigurator's published measurement file; its header has the source and
the caveats).

A series names a Hugging Face model, a GPU, the AIConfigurator precision
label (bf16 | fp8 | fp4), TP, expert parallelism, input / output lengths and
a vLLM version; each point a concurrency and the TTFT / TPOT / output
tokens per second measured there. :func:`setup_of` turns a series into what
the model needs (one rule, :func:`model_and_dtype`, maps the model and the
precision to a catalog entry and a weight format, so a model the file adds
needs no code); :func:`evaluate` predicts every point and, per series, the
highest rate within two latency targets. No printing: bench/published.py
renders, tests assert.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from llmctl.perf.roofline import Device, Efficiency, Engine, ModelShape, device_of, shape_of
from llmctl.perf.steady import predict

# The two targets of the SLO check (TTFT and TPOT, central values: the file's are)
SLO_TARGETS = (("ttft_p50=2s,itl_p50=50ms", 2.0, 0.050), ("ttft_p50=1s,itl_p50=30ms", 1.0, 0.030))
# Concurrency ranges reported apart
RANGES = (("1-8", 1, 8), ("16-64", 16, 64), ("128+", 128, math.inf))
# vLLM version assumed for a series the file gives none (the file's range is 0.11-0.19)
DEFAULT_VERSION = "0.19.0"
# KV-cache dtype of the series: AIConfigurator's vLLM runs of fp8 / fp4 checkpoints keep the KV cache
# in fp8 (rule set on the training series: with a 16-bit cache, Llama-3.1-70B fp8 on one H200 would hold
# 17 requests of 8192 + 1024 tokens, yet its 32-concurrent point queues nothing: TTFT 3.1 s, 39.8 s at 64)
KV_DTYPE = {"fp8": "fp8", "fp4": "fp8", "bf16": "auto"}
# Requests each client sends in one measured run (the file's harness; its clients start together, so the first
# round is a burst that the run's mean TTFT includes: llmctl.perf.steady.predict). Not recorded in the file:
# its header guesses `aiperf --num-requests 20N`; AIConfigurator's benchmark template of today
# (generator/config/backend_templates/benchmark/bench_run.sh.j2) sends 50N after a 2N warm-up.
HARNESS_ROUNDS = 20.0


def held_out(series_id: str) -> bool:
    """The held-out part of the calibration file, chosen before any fitting:
    the series whose SHA-1 of the id begins with 0, 1 or 2 (32 of 144)."""
    return hashlib.sha1(series_id.encode()).hexdigest()[0] in "012"


def load_series(path: Path | str) -> list[dict[str, Any]]:
    import yaml

    return yaml.safe_load(Path(path).read_text())["series"]


def conc_range(c: float) -> str:
    return next(name for name, lo, hi in RANGES if lo <= c <= hi or (c < lo and name == "1-8"))


def model_and_dtype(model_path: str, precision: str) -> tuple[str, str]:
    """(catalog id, --dtype) of a series: the catalog entry of the HF repo (or
    of its -Instruct sibling: the same architecture), and the weight format
    of the precision label — fp8 / fp4 weights unless the checkpoint already
    is (gpt-oss's MXFP4, a FP8 checkpoint); fp4 means NVFP4 (ModelOpt)."""
    from llmctl.catalog import load_catalog

    by_repo = {p.hf_repo.lower(): p for p in load_catalog().values()}
    prof = next((by_repo[n.lower()] for n in (model_path, model_path + "-Instruct", model_path + "-Instruct-FP8")
                 if n.lower() in by_repo), None)
    if prof is None or prof.architecture is None:
        raise LookupError(f"{model_path}: not in llmctl's catalog")
    scheme = (prof.architecture.quant_info.scheme if prof.architecture.quantization else "") or ""
    if precision == "fp4":
        return prof.id, "auto" if scheme in ("mxfp4", "nvfp4") else "nvfp4"
    if precision == "fp8":
        return prof.id, "auto" if scheme in ("fp8", "mxfp4", "nvfp4") else "fp8"
    return prof.id, "auto"


@dataclass(frozen=True)
class Setup:
    model: str
    dtype: str
    gpu: str
    shape: ModelShape
    device: Device
    engine: Engine


@lru_cache(maxsize=None)
def _setup(model_path: str, precision: str, gpu: str, tp: int, ep: bool, isl: int, osl: int, version: str) -> Setup:
    from llmctl import sizing
    from llmctl.catalog import load_catalog
    from llmctl.hardware import find_device

    mid, dtype = model_and_dtype(model_path, precision)
    arch = load_catalog()[mid].architecture
    g = find_device(gpu)
    kv = KV_DTYPE.get(precision, "auto")
    mml = min(arch.context_limit or 32768, isl + osl + 256)
    plan = sizing.plan(arch, gpu_memory_bytes=g.memory_bytes, tp=tp, max_model_len=mml, dtype=dtype, kv_cache_dtype=kv,
                       gpu_name=g.name, vllm_version=version, enable_expert_parallel=ep, executor="mp")
    shape = shape_of(arch, plan, name=mid, tp=tp, dtype=dtype, ep=ep)
    return Setup(mid, dtype, g.name, shape, device_of(g), Engine(plan.max_num_seqs, plan.max_num_batched_tokens,
                                                                 plan.kv_cache_tokens))


def setup_of(s: dict[str, Any]) -> Setup:
    ver = str(s.get("vllm_version") or DEFAULT_VERSION)
    if not ver[:1].isdigit():
        ver = DEFAULT_VERSION  # a nightly image
    return _setup(s["model_path"], s["precision"], s["gpu"] or s["system"].split("_")[0].upper(), int(s["tp"]),
                  int(s.get("moe_ep") or 1) > 1, int(s["isl"]), int(s["osl"]), ver)


@dataclass
class PointResult:
    series: str
    concurrency: int
    measured: float  # output tokens/s
    predicted: float
    ttft: float
    ttft_pred: float
    tpot: float
    tpot_pred: float
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1

    def within(self, band: float = 0.30) -> bool:
        return abs(self.error) <= band


@dataclass
class SloResult:
    series: str
    target: str
    measured: Optional[float]  # req/s; None: the series does not cross the target
    predicted: float  # the model read off like the measurement: at the series' concurrencies (model_slo_rate)
    tags: dict[str, str] = field(default_factory=dict)
    predicted_curve: float = 0.0  # the crossing of the model's continuous curve (plan --slo's search)

    @property
    def error_curve(self) -> Optional[float]:
        return None if not self.measured else self.predicted_curve / self.measured - 1

    @property
    def error(self) -> Optional[float]:
        return None if not self.measured else self.predicted / self.measured - 1


def tags_of(s: dict[str, Any], setup: Setup) -> dict[str, str]:
    return {"gpu": setup.gpu, "kind": "moe" if s.get("moe") else "dense", "quant": setup.shape.quant, "tp": str(s["tp"]),
            "model": s["model_path"].split("/")[-1], "split": "held-out" if held_out(s["id"]) else "train"}


def model_slo_rate(points: list[dict[str, Any]], osl: int, ttft_max: float, tpot_max: float, curve: float
                   ) -> float:
    """The model's highest rate within the targets, read off as the
    measurement is (:func:`measured_slo_rate`): from its predictions at the
    series' own concurrencies (``points``: concurrency, ttft_ms, tpot_ms,
    output_tok_s as predicted), interpolated the same way. A measured series
    samples the curve at a few concurrencies (4, 8, 16, ... doubling), and the
    straight line between two of them misses a knee between them (TTFT jumps
    where the KV cache fills); the model's own curve read off on the same grid
    has the same bias, so the two compare like with like. Where the predicted
    points do not cross on the grid (within at every concurrency, or beyond at
    the first), ``curve`` (the continuous curve's crossing) is the answer."""
    r = measured_slo_rate(points, osl, ttft_max, tpot_max)
    return curve if r is None else r


def measured_slo_rate(points: list[dict[str, Any]], osl: int, ttft_max: float, tpot_max: float) -> Optional[float]:
    """The highest request rate a series keeps within both targets, read off
    its points (repeats at one concurrency: their median), interpolated
    linearly between the last step within and the first beyond; None when
    the series does not cross the targets (every step within, or none)."""
    by_c: dict[int, list[dict]] = {}
    for p in points:
        by_c.setdefault(int(p["concurrency"]), []).append(p)

    def med(vals):
        v = sorted(vals)
        return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2

    steps = [(c, med([p["ttft_ms"] / 1000 for p in ps]), med([p["tpot_ms"] / 1000 for p in ps]),
              med([p["output_tok_s"] for p in ps]) / osl) for c, ps in sorted(by_c.items())]
    last = None
    for i, (c, ttft, tpot, rate) in enumerate(steps):
        if ttft <= ttft_max and tpot <= tpot_max:
            last = i
            continue
        if last is None or last != i - 1:
            return None
        _, t0, p0, r0 = steps[last]
        frac = min(f for f in ((ttft_max - t0) / (ttft - t0) if ttft > ttft_max and ttft != t0 else 1.0,
                               (tpot_max - p0) / (tpot - p0) if tpot > tpot_max and tpot != p0 else 1.0))
        return r0 + max(0.0, min(1.0, frac)) * (rate - r0)
    return None


def evaluate(series: list[dict[str, Any]], eff: Optional[Efficiency] = None, *, slo: bool = True,
             rounds: float = HARNESS_ROUNDS) -> tuple[list[PointResult], list[SloResult]]:
    """Every point of every series (none left out), and per series and target the SLO rate."""
    from llmctl.perf.capacity import max_rate
    from llmctl.perf.slo import parse_slo

    eff = eff or Efficiency()
    points: list[PointResult] = []
    slos: list[SloResult] = []
    for s in series:
        st = setup_of(s)
        tags = tags_of(s, st)
        isl, osl = int(s["isl"]), int(s["osl"])
        grid: dict[int, dict[str, float]] = {}  # the model at the series' concurrencies, in the file's fields
        for p in s["points"]:
            pr = predict(st.shape, st.device, eff, st.engine, concurrency=p["concurrency"], isl=isl, osl=osl,
                         rounds=rounds)
            points.append(PointResult(s["id"], int(p["concurrency"]), float(p["output_tok_s"]), pr.output_tokens_per_s,
                                      p["ttft_ms"] / 1000, pr.ttft_s, p["tpot_ms"] / 1000, pr.itl_s,
                                      {**tags, "range": conc_range(p["concurrency"])}))
            grid[int(p["concurrency"])] = {"concurrency": int(p["concurrency"]), "ttft_ms": pr.ttft_s * 1000,
                                           "tpot_ms": pr.itl_s * 1000, "output_tok_s": pr.output_tokens_per_s}
        if not slo:
            continue
        for text, ttft_max, tpot_max in SLO_TARGETS:
            m = measured_slo_rate(s["points"], osl, ttft_max, tpot_max)
            if m is None:
                continue
            r, _, _, _ = max_rate(st.shape, st.device, eff, st.engine, parse_slo(text), isl=isl, osl=osl, rounds=rounds)
            g = model_slo_rate(list(grid.values()), osl, ttft_max, tpot_max, r)
            slos.append(SloResult(s["id"], text, m, g, tags, predicted_curve=r))
    return points, slos


def summarize(results: list, key: Optional[str], band: float = 0.30) -> dict[str, dict[str, Any]]:
    """Per value of tag ``key`` (None: all): count, within the band, median error and median |error|."""
    groups: dict[str, list] = {}
    for r in results:
        groups.setdefault(r.tags.get(key, "?") if key else "all", []).append(r)
    out = {}
    for name, rs in sorted(groups.items()):
        errs = sorted(r.error for r in rs)
        abs_errs = sorted(abs(e) for e in errs)
        out[name] = {"n": len(rs), "within": sum(abs(e) <= band for e in errs),
                     "median_error": errs[len(errs) // 2], "median_abs_error": abs_errs[len(abs_errs) // 2]}
    return out
