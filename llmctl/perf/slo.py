"""Service-level objectives, price overrides and sweep steps: parsed once,
for plan, gen-config and bench alike.

An SLO is ``ttft_p95=500ms,itl_p95=40ms``: a metric, a percentile and a
bound. Metrics: ``ttft`` (time to first token), ``itl`` (inter-token latency),
``latency`` (whole request). llmctl's ``itl`` is each request's mean gap
between output tokens after the first — ``(latency - ttft) / (tokens - 1)``,
what vLLM's benchmark calls TPOT — and ``itl_p95`` its 95th percentile over
requests: Ray Serve LLM sends stream chunks in batches, so the gap between
two chunks is mostly zero and says little about the token rate a user sees.
``tpot`` is accepted as the same metric.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Optional

from llmctl.errors import UsageError

METRICS = {"ttft": "ttft", "itl": "itl", "tpot": "itl", "latency": "latency", "e2e": "latency"}
PERCENTILES = (50, 90, 95, 99)
_UNITS = {"ms": 1e-3, "s": 1.0, "us": 1e-6}
# where each metric sits in a bench summary (llmctl.loadgen): itl is the per-request TPOT
STAT_KEYS = {"ttft": "ttft_s", "itl": "tpot_s", "latency": "latency_s"}


@dataclass(frozen=True)
class Target:
    metric: str  # ttft | itl | latency
    percentile: int
    seconds: float

    @property
    def key(self) -> str:
        return f"{self.metric}_p{self.percentile}"

    def text(self) -> str:
        ms = self.seconds * 1000
        return f"{self.key}={ms:g}ms" if ms < 10_000 else f"{self.key}={self.seconds:g}s"


@dataclass(frozen=True)
class SLO:
    targets: tuple[Target, ...]

    def get(self, metric: str) -> Optional[Target]:
        return next((t for t in self.targets if t.metric == metric), None)

    def text(self) -> str:
        return ",".join(t.text() for t in self.targets)

    def ratios(self, stats: dict) -> Optional[list[tuple["Target", float]]]:
        """Each target with value / bound for a bench summary's stats
        ({"ttft_s": {"p95": …}, "tpot_s": …, "latency_s": …}); None when a
        target's percentile is missing from them."""
        out = []
        for t in self.targets:
            v = (stats.get(STAT_KEYS[t.metric]) or {}).get(f"p{t.percentile}")
            if v is None:
                return None
            out.append((t, v / t.seconds))
        return out

    def worst(self, stats: dict) -> Optional[float]:
        """The largest value / bound over the targets (:meth:`ratios`); None when one is missing."""
        r = self.ratios(stats)
        return None if r is None else max((x for _, x in r), default=0.0)

    def met(self, stats: dict) -> bool:
        """True when every target holds for a bench summary's stats (:meth:`worst`)."""
        w = self.worst(stats)
        return w is not None and w <= 1

    def to_json(self) -> dict:
        return {t.key: t.seconds for t in self.targets}


def parse_duration(text: str, *, what: str = "slo") -> float:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s|us)?\s*", text)
    if not m:
        raise UsageError(f"{what}: '{text}' is not a duration (500ms, 0.5s)")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def parse_slo(text: str) -> SLO:
    """``ttft_p95=500ms,itl_p95=40ms`` → SLO; a bad entry raises UsageError naming it."""
    targets: dict[str, Target] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        key, sep, value = part.partition("=")
        m = re.fullmatch(r"([a-z0-9]+)_p(\d+)", key.strip().lower())
        if not sep or not m or m.group(1) not in METRICS:
            raise UsageError(f"slo: '{part}' is not METRIC_pNN=DURATION (metrics: ttft, itl, latency; e.g. ttft_p95=500ms)")
        pct = int(m.group(2))
        if pct not in PERCENTILES:
            raise UsageError(f"slo: percentile p{pct} in '{part}': choose one of {', '.join(f'p{p}' for p in PERCENTILES)}")
        secs = parse_duration(value, what=f"slo: {key}")
        if secs <= 0:
            raise UsageError(f"slo: '{part}': the bound must be positive")
        t = Target(METRICS[m.group(1)], pct, secs)
        targets[t.metric] = t
    if not targets:
        raise UsageError("slo: no target given (e.g. ttft_p95=500ms,itl_p95=40ms)")
    return SLO(tuple(targets[k] for k in ("ttft", "itl", "latency") if k in targets))


def parse_prices(text: Optional[str], known: Iterable[str]) -> dict[str, float]:
    """``L4=0.70,H100=2.99`` → {"L4": 0.7, "H100": 2.99} (GPU names as the table spells them)."""
    names = {n.lower(): n for n in known}
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        name, sep, value = part.partition("=")
        if not sep:
            raise UsageError(f"price: '{part}' is not GPU=USD_PER_HOUR (e.g. L4=0.70)")
        key = names.get(name.strip().lower())
        if key is None:
            raise UsageError(f"price: unknown GPU type '{name.strip()}'; choose one of: {', '.join(names.values())}")
        try:
            usd = float(value)
        except ValueError:
            raise UsageError(f"price: '{value}' for {key} is not a number of USD per hour") from None
        if usd <= 0:
            raise UsageError(f"price: {key}: must be positive (got {usd:g})")
        out[key] = usd
    return out


@dataclass(frozen=True)
class Sweep:
    """Load steps held one after another: closed-loop concurrencies or open-loop request rates."""

    mode: str  # "concurrency" | "rate"
    values: tuple[float, ...]


def parse_sweep(text: str) -> Sweep:
    """``1,2,4,8`` or ``concurrency=1,2,4`` (concurrent streams), or ``rate=0.5,1,2`` (requests per second)."""
    mode, sep, rest = (text or "").partition("=")
    if not sep:
        mode, rest = "concurrency", text or ""
    mode = mode.strip().lower()
    if mode not in ("concurrency", "rate"):
        raise UsageError(f"sweep: '{mode}' is neither concurrency nor rate (e.g. 1,2,4,8 or rate=0.5,1,2)")
    vals = []
    for v in filter(None, (p.strip() for p in rest.split(","))):
        try:
            x = float(v)
        except ValueError:
            raise UsageError(f"sweep: '{v}' is not a number") from None
        if x <= 0 or (mode == "concurrency" and x != int(x)):
            raise UsageError(f"sweep: '{v}': {'a positive integer' if mode == 'concurrency' else 'a positive rate'} expected")
        vals.append(int(x) if mode == "concurrency" else x)
    if not vals:
        raise UsageError("sweep: no step given (e.g. 1,2,4,8)")
    return Sweep(mode, tuple(vals))
