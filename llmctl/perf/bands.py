"""How far off a capacity figure may be: the error measured for its kind of
setup on the calibration data, and whether a plan leaves that data.

``accuracy.json`` (next to this module) is written by bench/published.py
from every point of tests/data/gpu_serving_measurements.yaml (a test checks
it is current): for each kind — the GPU, dense or MoE, the weights'
precision, the TP size — and each figure (output tokens/s, TTFT, TPOT), the
10th and 90th percentiles of measured / predicted over that kind's points.
A plan row's band is the widest of its kinds' bands (its GPU's, its model
kind's, its precision's, its TP's): the measured value fell inside it for at
least 80 % of the points of each of those kinds. A GPU the calibration data
lacks (an A100, an H100 PCIe) takes its band from the 16-bit check's runs on
it (bench/published16.py), marked ``"from": "checks"``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Optional

from llmctl.hardware import find_device

ACCURACY_FILE = Path(__file__).with_name("accuracy.json")
KEYS = ("gpu", "kind", "quant", "tp")
METRICS = {"tok_s": ("measured", "predicted"), "ttft": ("ttft", "ttft_pred"), "tpot": ("tpot", "tpot_pred")}


@dataclass(frozen=True)
class Band:
    lo: float  # measured / predicted, 10th percentile
    hi: float  # 90th percentile
    points: int  # of the narrowest kind it was taken from

    def to_json(self) -> dict[str, Any]:
        return {"low": round(self.lo, 3), "high": round(self.hi, 3), "points": self.points}


def _pct(vals: list[float], q: float) -> float:
    v = sorted(vals)
    i = q * (len(v) - 1)
    lo = math.floor(i)
    return v[lo] + (v[min(lo + 1, len(v) - 1)] - v[lo]) * (i - lo)


def compute(points: Iterable[Any]) -> dict[str, Any]:
    """The accuracy file's content from evaluated points (llmctl.perf.measured.PointResult)."""
    pts = list(points)
    bands: dict[str, dict[str, dict[str, Any]]] = {}
    for key in KEYS:
        for value in sorted({p.tags[key] for p in pts}):
            group = [p for p in pts if p.tags[key] == value]
            entry = {}
            for metric, (m, pr) in METRICS.items():
                ratios = [getattr(p, m) / getattr(p, pr) for p in group
                          if getattr(p, pr) > 0 and math.isfinite(getattr(p, pr))]
                if len(ratios) >= 5:
                    entry[metric] = {"low": round(_pct(ratios, 0.1), 3), "high": round(_pct(ratios, 0.9), 3),
                                     "points": len(ratios)}
            bands.setdefault(key, {})[value] = entry
    domain = {"gpu": sorted({p.tags["gpu"] for p in pts}), "quant": sorted({p.tags["quant"] for p in pts}),
              "tp": sorted({int(p.tags["tp"]) for p in pts}),
              "concurrency": [min(p.concurrency for p in pts), max(p.concurrency for p in pts)]}
    return {"source": "bench/published.py on tests/data/gpu_serving_measurements.yaml (every point)",
            "points": len(pts), "bands": bands, "domain": domain}


def with_checks(acc: dict[str, Any], checks: Iterable[tuple[dict[str, str], str, float]], source: str) -> dict[str, Any]:
    """``acc`` with bands for the GPUs the calibration data lacks (an A100, an H100 PCIe) taken from other
    measurements on them: ``checks`` are (the run's tags, metric — tok_s | ttft | tpot —, measured / predicted).
    Only GPU kinds: a precision or TP band from runs on other GPUs would mix their errors into every GPU's
    rows. A GPU the calibration data has keeps its own band; the domain (what is calibrated) does not change."""
    groups: dict[tuple[str, str], list[float]] = {}
    for tags, metric, ratio in checks:
        if ratio > 0 and math.isfinite(ratio):
            groups.setdefault((tags["gpu"], metric), []).append(ratio)
    out = json.loads(json.dumps(acc))
    for (gpu, metric), ratios in sorted(groups.items()):
        if gpu in acc["bands"].get("gpu", {}) or len(ratios) < 5:
            continue
        out["bands"].setdefault("gpu", {}).setdefault(gpu, {})[metric] = {
            "low": round(_pct(ratios, 0.1), 3), "high": round(_pct(ratios, 0.9), 3), "points": len(ratios), "from": "checks"}
    out["checks_source"] = source
    return out


@lru_cache(maxsize=1)
def accuracy() -> dict[str, Any]:
    try:
        return json.loads(ACCURACY_FILE.read_text())
    except (OSError, ValueError):
        return {"bands": {}, "domain": {}}


def kinds_of(gpu: str, shape) -> dict[str, str]:
    """The kinds a setup belongs to (the calibration data's tags)."""
    return {"gpu": gpu, "kind": "moe" if shape.moe else "dense", "quant": shape.quant, "tp": str(shape.tp)}


def band(metric: str, kinds: dict[str, str]) -> Optional[Band]:
    """The widest band of the setup's kinds for ``metric`` (tok_s | ttft | tpot); None: no kind measured."""
    found = [accuracy()["bands"].get(k, {}).get(v, {}).get(metric) for k, v in kinds.items()]
    found = [f for f in found if f]
    if not found:
        return None
    return Band(min(f["low"] for f in found), max(f["high"] for f in found), min(f["points"] for f in found))


def extrapolation(kinds: dict[str, str], concurrency: Optional[float] = None) -> list[str]:
    """Why a figure extrapolates beyond the calibration data (empty: inside it)."""
    dom = accuracy().get("domain") or {}
    out = []
    if dom.get("gpu") and kinds["gpu"] not in dom["gpu"]:
        out.append(f"GPU {kinds['gpu']} is not in the calibration data ({', '.join(dom['gpu'])})")
    if dom.get("quant") and kinds["quant"] not in dom["quant"]:
        out.append(f"{kinds['quant']} weights are not in the calibration data ({', '.join(dom['quant'])})")
    if dom.get("tp") and int(kinds["tp"]) not in dom["tp"]:
        out.append(f"TP {kinds['tp']} is not in the calibration data")
    if int(kinds["tp"]) > 1 and find_device(kinds["gpu"]).interconnect == "pcie":
        # vLLM's own all-reduce runs over PCIe only for 2 GPUs with P2P access, else NCCL (custom_all_reduce.py)
        out.append("TP over PCIe: the calibration data's GPUs are all NVLink-connected (all-reduce cost extrapolated)")
    if concurrency is not None and dom.get("concurrency") and math.isfinite(concurrency):
        lo, hi = dom["concurrency"]
        if not lo <= concurrency <= hi:
            out.append(f"concurrency {concurrency:g} is outside the calibration data's {lo}-{hi}")
    return out
