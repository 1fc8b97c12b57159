"""The performance model against measurements (issues 24 and 37).

    .venv/bin/python bench/published.py          # print, rewrite docs/capacity.md's tables and llmctl/perf/accuracy.json
    .venv/bin/python bench/published.py --check  # exit 1 when either is not what this computes

Two data sets, no GPU needed (it is arithmetic):

- tests/data/gpu_serving_measurements.yaml: 144 measured closed-loop series
  (751 points) of vLLM on H100/H200/B200/B300; predicted output tokens/s at
  each point's concurrency, per concurrency range, GPU, model kind,
  precision, TP and model, the training and the held-out series apart, and
  per series the highest rate within TTFT <= 2 s & TPOT <= 50 ms and within
  TTFT <= 1 s & TPOT <= 30 ms;
- tests/data/perf_published.yaml: the project's earlier published points;
- bench/collected/gpustack_lab.yaml: the baseline runs of the lab whose H100
  page gave five of those points, on its H100 and its A100 boxes (analysis
  only: nothing is fitted on it, no band comes from it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from llmctl.perf import bands  # noqa: E402
from llmctl.perf.measured import evaluate, load_series, summarize  # noqa: E402
from llmctl.perf.published import load_points, predict_point, summary  # noqa: E402

DATA = REPO / "tests" / "data" / "perf_published.yaml"
GPU_DATA = REPO / "tests" / "data" / "gpu_serving_measurements.yaml"
LAB_DATA = REPO / "bench" / "collected" / "gpustack_lab.yaml"
DOC = REPO / "docs" / "capacity.md"
MARKS = {"published": ("<!-- published:begin -->", "<!-- published:end -->"),
         "gpu": ("<!-- gpu-accuracy:begin -->", "<!-- gpu-accuracy:end -->"),
         "same-lab": ("<!-- same-lab:begin -->", "<!-- same-lab:end -->")}


def _pct(a: int, b: int) -> str:
    return f"{a} of {b} ({a / b:.0%})" if b else "-"


def gpu_results():
    series = load_series(GPU_DATA)
    return evaluate(series)


def gpu_tables(points, slos) -> str:
    lines = ["Output tokens/s predicted at each point's concurrency, within ±30 % of the measured:", "",
             "| group | points | within ±30 % | median error |", "| --- | ---: | ---: | ---: |"]
    for key, title in ((None, "all"), ("split", "split"), ("range", "concurrency"), ("gpu", "GPU"), ("kind", "kind"),
                       ("quant", "precision"), ("tp", "TP"), ("model", "model")):
        for name, s in summarize(points, key).items():
            label = "all points" if key is None else f"{title} {name}"
            lines.append(f"| {label} | {s['n']} | {_pct(s['within'], s['n'])} | {s['median_error']:+.0%} |")
    held = [p for p in points if p.tags["split"] == "held-out"]
    lines += ["", "Held-out series only, by concurrency range:", "", "| range | points | within ±30 % |",
              "| --- | ---: | ---: |"]
    for name, s in summarize(held, "range").items():
        lines.append(f"| {name} | {s['n']} | {_pct(s['within'], s['n'])} |")
    lines += ["", "The highest request rate within a target (series whose measured points cross it; the model read off "
              "at the series' concurrencies like the measurement, and its continuous curve's crossing):", "",
              "| target | series | within ±30 % | of them held out | median error | continuous curve within ±30 % |",
              "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for target in sorted({s.target for s in slos}) + [None]:
        rs = [s for s in slos if target is None or s.target == target]
        within = [s for s in rs if abs(s.error) <= 0.30]
        ho = [s for s in rs if s.tags["split"] == "held-out"]
        errs = sorted(s.error for s in rs)
        lines.append(f"| {target or 'both'} | {len(rs)} | {_pct(len(within), len(rs))} | "
                     f"{_pct(sum(abs(s.error) <= 0.30 for s in ho), len(ho))} | {errs[len(errs) // 2]:+.0%} | "
                     f"{_pct(sum(abs(s.error_curve) <= 0.30 for s in rs), len(rs))} |")
    misses = [s for s in slos if abs(s.error) > 0.30]
    if misses:
        lines += ["", "SLO-rate misses: " + "; ".join(f"{s.series} {s.target.split(',')[0].replace('_p50', '')}: "
                                                       f"{s.predicted:.2f} vs {s.measured:.2f} req/s ({s.error:+.0%})"
                                                       for s in misses)]
    return "\n".join(lines)


def published_tables() -> str:
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


def same_lab_tables() -> str:
    """Every baseline run of bench/collected/gpustack_lab.yaml predicted as the earlier points are; per box and
    model, the runs within ±30 % and the median error."""
    import statistics

    runs = load_points(LAB_DATA)
    results = [predict_point(p) for p in runs]
    lines = ["| box | model | runs | within ±30 % | median error | errors (ShareGPT, 32k, 4k, 2k, 128/4) |",
             "| --- | --- | ---: | ---: | ---: | --- |"]
    groups: dict[tuple[str, str], list] = {}
    for p, r in zip(runs, results):
        groups.setdefault((p["gpu"], p["model"]), []).append(r)
    for box in sorted({g for g, _ in groups}, reverse=True):
        for (gpu, model), rs in groups.items():
            if gpu == box:
                errs = [r.error for r in rs]
                lines.append(f"| {gpu} | {model} | {len(rs)} | {_pct(sum(abs(e) <= 0.30 for e in errs), len(rs))} | "
                             f"{statistics.median(errs):+.0%} | {', '.join(f'{e:+.0%}' for e in errs)} |")
        every = [r.error for (gpu, _), rs in groups.items() if gpu == box for r in rs]
        lines.append(f"| {box} | all | {len(every)} | {_pct(sum(abs(e) <= 0.30 for e in every), len(every))} | "
                     f"{statistics.median(every):+.0%} | |")
    return "\n".join(lines)


def _replace(doc: str, mark: str, text: str) -> str:
    begin, end = MARKS[mark]
    head, rest = doc.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{text}\n{end}{tail}"


def bf16_checks() -> list[tuple[dict[str, str], str, float]]:
    """The 16-bit check's comparisons as (tags, metric, measured / predicted), for the kinds the calibration lacks."""
    import yaml

    import published16

    metric = {"output tok/s": "tok_s", "TTFT": "ttft", "TPOT": "tpot"}
    out = []
    for run in yaml.safe_load(published16.DATA.read_text()):
        o = published16.evaluate(run)
        for c in o["checks"]:
            m = next(v for k, v in metric.items() if k in c["figure"])
            tags = {"gpu": o["gpu"], "kind": "dense", "quant": "bf16", "tp": str(o["tp"])}
            out.append((tags, m, c["measured"] / c["predicted"]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    points, slos = gpu_results()
    gpu_text = gpu_tables(points, slos)
    pub_text = published_tables()
    lab_text = same_lab_tables()
    print(gpu_text)
    print()
    print(pub_text)
    print()
    print(lab_text)
    doc = DOC.read_text()
    new = _replace(_replace(_replace(doc, "gpu", gpu_text), "published", pub_text), "same-lab", lab_text)
    acc = json.dumps(bands.with_checks(bands.compute(points), bf16_checks(),
                                       "bench/published16.py on bench/collected/bf16_serving_2026-11.yaml (every check)"),
                     indent=1, sort_keys=True) + "\n"
    if args.check:
        old_acc = bands.ACCURACY_FILE.read_text() if bands.ACCURACY_FILE.exists() else ""
        return 0 if new == doc and acc == old_acc else 1
    DOC.write_text(new)
    bands.ACCURACY_FILE.write_text(acc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
