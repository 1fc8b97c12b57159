"""What ``llmctl bench`` sends: prompts with shared prefixes, and request traces (issue 41).

A core with no UI.

Prefix pool
    ``PrefixPool(count=N, tokens=L)``: N distinct prefixes of about L tokens
    (plain words, as :func:`prompt_of` writes them; the
    server's usage gives the real count). Each request draws one (uniformly,
    from the run's salt and its number) and appends a part of its own, so
    requests that share a prefix share the KV-cache blocks of it — what a
    system prompt, a chat history or an agent's context does — and a
    prefix-aware router has something to route on. The prefixes are new
    every run (the run's salt), so every run starts with a cold cache.

Traces
    :func:`read_trace` reads a request trace (a timestamp, prompt and output
    tokens per request) in the column layouts of the public traces:

    - Azure LLM inference traces (2023, 2024): ``TIMESTAMP, ContextTokens,
      GeneratedTokens``, timestamps as dates (``2023-11-16 18:15:46.6805900``);
    - BurstGPT: ``Timestamp, Model, Request tokens, Response tokens, Total
      tokens, Log Type``, timestamps in seconds; rows with no response tokens
      (failed requests) are skipped;
    - llmctl's own: ``timestamp, input_tokens, output_tokens[, prefix_id]`` as
      CSV (with that header) or JSON Lines (one object per line with those
      keys); timestamps in seconds or ISO dates.

    Times start at 0 (the first request); rows are sorted by time. A bad
    cell raises UsageError naming the file, line and column.
"""

from __future__ import annotations

import csv
import json
import math
import random
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Optional

# Prompt and output tokens per request the latency estimates assume when not told
# (plan --slo / --concurrency / --rate, gen-config --slo: --isl, --osl).
DEFAULT_ISL, DEFAULT_OSL = 1000, 200

from llmctl.errors import UsageError, param

# The layouts: (name, time column, input column, output column, prefix column or None), header names lower-cased.
WORDS = ("ray serve runs large language models behind an openai compatible endpoint the replicas scale "
         "with the load and the router balances traffic across them").split()
_VOCAB = list(dict.fromkeys(WORDS))  # each word once: prompt_of draws from it and spells numbers in its base


def prompt_of(n: int, seed: int, salt: str = "") -> str:
    """About ``n`` tokens of plain words (the server's usage gives the real
    count), drawn at random for (``salt``, ``seed``): each request of a run
    its own prompt, so vLLM's prefix cache does not serve one prompt's
    blocks to the next (a cycle of the same few prompts measured cache hits,
    not prefills, wherever the engine caches prefixes)."""
    vocab = _VOCAB
    rng = random.Random(f"{salt}:{seed}")
    words = [rng.choice(vocab) for _ in range(max(1, n))]
    k = seed  # the first (up to) 5 words spell the seed in base len(vocab): a run's prompts differ even when short
    for i in range(min(5, len(words))):
        words[i], k = vocab[k % len(vocab)], k // len(vocab)
    return " ".join(words)


def _pair(a: int, b: int) -> int:
    """Cantor's pairing: one number per (a, b), for any two naturals."""
    return (a + b) * (a + b + 1) // 2 + b


LAYOUTS = (
    ("azure", "timestamp", "contexttokens", "generatedtokens", None),
    ("burstgpt", "timestamp", "request tokens", "response tokens", None),
    ("llmctl", "timestamp", "input_tokens", "output_tokens", "prefix_id"),
)
LAYOUT_TEXT = ("Azure (TIMESTAMP, ContextTokens, GeneratedTokens), BurstGPT (Timestamp, Request tokens, Response tokens, ...) "
               "or timestamp, input_tokens, output_tokens[, prefix_id]")


@dataclass(frozen=True)
class PrefixPool:
    count: int
    tokens: int

    def __post_init__(self):
        if self.count < 1 or self.tokens < 1:
            raise UsageError(f"prefix pool: needs at least one prefix of at least one token (got {self.count} of {self.tokens})")

    def draw(self, seed: int, salt: str) -> int:
        return random.Random(f"{salt}:draw:{seed}").randrange(self.count)

    def text(self, prefix_id: int, salt: str) -> str:
        return prompt_of(self.tokens, prefix_id % self.count, f"{salt}:prefix")

    def to_json(self) -> dict[str, int]:
        return {"count": self.count, "tokens": self.tokens}


@dataclass(frozen=True)
class TraceRequest:
    t: float  # seconds after the first request
    input_tokens: int
    output_tokens: int
    prefix_id: Optional[int] = None


@dataclass
class Trace:
    path: str
    layout: str
    requests: list[TraceRequest]
    skipped: int = 0  # rows left out (BurstGPT's failed requests: no response tokens)

    @property
    def duration(self) -> float:
        return self.requests[-1].t if self.requests else 0.0

    def scaled(self, speedup: float) -> "Trace":
        return Trace(self.path, self.layout, [TraceRequest(r.t / speedup, r.input_tokens, r.output_tokens, r.prefix_id)
                                              for r in self.requests], self.skipped)

    def peak(self, window: float) -> tuple[float, float, list[TraceRequest]]:
        """(start, requests/s, the requests) of the busiest ``window`` seconds
        (a sliding window over the arrivals): what a deployment must hold."""
        rs = self.requests
        if not rs:
            return 0.0, 0.0, []
        best, lo, start = 0, 0, 0.0
        for hi in range(len(rs)):
            while rs[hi].t - rs[lo].t >= window:
                lo += 1
            if hi - lo + 1 > best:
                best, start = hi - lo + 1, rs[lo].t
        chosen = [r for r in rs if start <= r.t < start + window]
        return start, len(chosen) / window, chosen

    def rate_series(self, window: float) -> list[tuple[float, float]]:
        """Requests/s in consecutive windows of ``window`` seconds: (start, rate)."""
        if not self.requests:
            return []
        n = max(1, math.ceil((self.duration + 1e-9) / window))
        counts = [0] * n
        for r in self.requests:
            counts[min(n - 1, int(r.t // window))] += 1
        return [(i * window, c / window) for i, c in enumerate(counts)]

    def summary(self, window: float) -> dict[str, Any]:
        start, rate, peak = self.peak(window)
        n = len(self.requests)
        return {
            "path": self.path, "layout": self.layout, "requests": n, "skipped": self.skipped,
            "duration_s": round(self.duration, 3),
            "mean_rate": n / max(self.duration, window) if n else 0.0, "window_s": window,
            "peak": {"start_s": round(start, 3), "rate": rate, "requests": len(peak),
                     "input_tokens_mean": _mean([r.input_tokens for r in peak]),
                     "output_tokens_mean": _mean([r.output_tokens for r in peak])},
            "input_tokens_mean": _mean([r.input_tokens for r in self.requests]),
            "output_tokens_mean": _mean([r.output_tokens for r in self.requests]),
        }


def _mean(vs: list[int]) -> Optional[float]:
    return sum(vs) / len(vs) if vs else None


def _time(text: str, where: str) -> float:
    s = (text or "").strip()
    try:
        return float(s)
    except ValueError:
        pass
    try:
        # Azure's timestamps carry 7 fractional digits; Python reads at most 6
        head, dot, frac = s.partition(".")
        if dot:
            digits = "".join(c for c in frac if c.isdigit())
            s = f"{head}.{digits[:6]}{frac[len(digits):]}"
        return datetime.fromisoformat(s).timestamp()
    except ValueError:
        raise UsageError(f"{where}: '{text}' is neither seconds nor a date (2023-11-16 18:15:46.68)") from None


def _count(value: Any, where: str, *, minimum: int = 0) -> int:
    try:
        f = float(value)
        if f != int(f):
            raise ValueError
        n = int(f)
    except (TypeError, ValueError, OverflowError):
        raise UsageError(f"{where}: '{value}' is not a whole number of tokens") from None
    if n < minimum:
        raise UsageError(f"{where}: {n} is below {minimum}")
    return n


def _layout(columns: list[str], where: str) -> tuple[str, str, str, str, Optional[str]]:
    names = {c.strip().lower() for c in columns}
    for layout in LAYOUTS:
        if all(c in names for c in layout[1:4]):
            return layout
    raise UsageError(f"{where}: columns {', '.join(c.strip() for c in columns) or '(none)'} match no trace layout llmctl "
                     f"reads: {LAYOUT_TEXT}")


def read_trace(path: Path | str) -> Trace:
    """The requests of a trace file (CSV or JSON Lines, see the module doc)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UsageError(f"{p}: no such trace file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{p}: cannot read the trace ({type(e).__name__}: {e})") from None
    first = next((line for line in text.splitlines() if line.strip()), "")
    rows: list[tuple[int, dict[str, Any]]] = []
    if first.lstrip().startswith("{"):
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise UsageError(f"{p}:{i}: not a JSON object ({e.msg}, column {e.colno})") from None
            if not isinstance(obj, dict):
                raise UsageError(f"{p}:{i}: not a JSON object (each line holds one request)")
            rows.append((i, {str(k).strip().lower(): v for k, v in obj.items()}))
        if not rows:
            raise UsageError(f"{p}: no requests in the trace")
        layout = _layout(list(rows[0][1]), f"{p}:{rows[0][0]}")
    else:
        reader = csv.reader(text.splitlines())
        header = next(reader, None)
        if not header:
            raise UsageError(f"{p}: empty trace (expected a header row: {LAYOUT_TEXT})")
        layout = _layout(header, f"{p}:1")
        keys = [h.strip().lower() for h in header]
        for values in reader:
            i = reader.line_num
            if not any(v.strip() for v in values):
                continue
            if len(values) != len(keys):
                raise UsageError(f"{p}:{i}: {len(values)} cells where the header has {len(keys)}")
            rows.append((i, dict(zip(keys, values))))
    name, tcol, icol, ocol, pcol = layout
    out: list[TraceRequest] = []
    skipped = 0
    for i, row in rows:
        missing = [c for c in (tcol, icol, ocol) if row.get(c) in (None, "")]
        if missing:
            raise UsageError(f"{p}:{i}: column '{missing[0]}' is empty")
        t = _time(str(row[tcol]), f"{p}:{i}: column '{tcol}'")
        inp = _count(row[icol], f"{p}:{i}: column '{icol}'", minimum=1)
        outp = _count(row[ocol], f"{p}:{i}: column '{ocol}'")
        if outp == 0:
            if name == "burstgpt":  # a failed request in BurstGPT's log
                skipped += 1
                continue
            raise UsageError(f"{p}:{i}: column '{ocol}': 0 output tokens (each request generates at least one)")
        pid = None
        if pcol and row.get(pcol) not in (None, ""):
            pid = _count(row[pcol], f"{p}:{i}: column '{pcol}'")
        out.append(TraceRequest(t, inp, outp, pid))
    if not out:
        raise UsageError(f"{p}: no requests in the trace")
    out.sort(key=lambda r: r.t)
    t0 = out[0].t
    return Trace(str(p), name, [TraceRequest(r.t - t0, r.input_tokens, r.output_tokens, r.prefix_id) for r in out], skipped)


def parse_speedup(value: Optional[float]) -> float:
    if value is None:
        return 1.0
    if not value > 0 or not math.isfinite(value):
        raise UsageError(f"{param('speedup')}: must be a positive factor (2 replays twice as fast; got {value:g})")
    return float(value)


@dataclass
class TracePlan:
    """``plan --trace``: the capacity table at the trace's peak (the busiest
    ``window`` seconds, its rate and its requests' mean tokens), with the
    replicas each setup needs at the trace's mean rate and window by window."""

    trace: dict  # llmctl.workload.Trace.summary
    table: Any  # llmctl.planner.CapacityTable
    windows: list = field(default_factory=list)  # [(start, rate)]
    speedup: float = 1.0

    def replicas_for(self, row, rate: float) -> Optional[int]:
        """Replicas of a setup for ``rate`` requests/s (None: out of reach); 1 for an idle window."""
        if row.max_rate <= 0:
            return None
        if rate <= 0:
            return 1
        if row.by_replicas:  # a shared host: replicas slow each other down, read the measured curve
            return next((r for r, total in sorted(row.by_replicas.items()) if total >= rate), None)
        return max(1, math.ceil(rate / row.max_rate - 1e-9))

    def to_json(self) -> dict[str, Any]:
        rows = []
        for r in self.table.rows:
            rows.append({**r.to_json(), "replicas_at_peak": r.replicas,
                         "replicas_at_mean": self.replicas_for(r, self.trace["mean_rate"]),
                         "replicas_by_window": [self.replicas_for(r, rate) for _, rate in self.windows]})
        return {"trace": self.trace, "speedup": self.speedup, "windows": [[round(s, 3), rate] for s, rate in self.windows],
                "capacity": {**self.table.to_json(), "rows": rows}}
