"""The performance model against published vLLM measurements (issue 24).

    .venv/bin/python bench/published.py          # print, and rewrite docs/capacity.md's table
    .venv/bin/python bench/published.py --check  # exit 1 when docs/capacity.md is not what this prints

Predicted output-token throughput at each point of tests/data/perf_published.yaml
(the published concurrency and lengths, the default efficiencies), its error,
and per GPU type how many are within ±30 %. No GPU needed: it is arithmetic.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from llmctl.perf.published import load_points, predict_point, summary  # noqa: E402

DATA = REPO / "tests" / "data" / "perf_published.yaml"
DOC = REPO / "docs" / "capacity.md"
BEGIN, END = "<!-- published:begin -->", "<!-- published:end -->"


def tables() -> str:
    pts = load_points(DATA)
    results = [predict_point(p) for p in pts]
    lines = ["| point | GPU | split | measured tok/s | predicted tok/s | error | model's bound |",
             "| --- | --- | --- | ---: | ---: | ---: | --- |"]
    for p, r in zip(pts, results):
        lines.append(f"| {r.id} ({p['model']}, TP {p.get('tp', 1)}, {p['isl']}/{p['osl']}, "
                     f"{'c=' + str(p['concurrency']) if p['mode'] == 'concurrency' else str(p['requests']) + ' at once'}) "
                     f"| {r.gpu} | {r.split} | {r.measured:,.1f} | {r.predicted:,.1f} | {r.error:+.0%} | {r.bound} |")
    lines += ["", "| GPU | points | within ±30 % | median abs. error | held-out within ±30 % |", "| --- | ---: | ---: | ---: | ---: |"]
    for gpu, s in summary(results).items():
        lines.append(f"| {gpu} | {s['points']} | {s['within']} ({s['within'] / s['points']:.0%}) | {s['median_abs_error']:.0%} | "
                     f"{s['holdout_within']} of {s['holdout']} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = tables()
    print(text)
    doc = DOC.read_text()
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{text}\n{END}{tail}"
    if args.check:
        return 0 if new == doc else 1
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
