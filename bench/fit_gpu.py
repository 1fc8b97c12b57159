"""Fit the step model's efficiencies and overheads (llmctl.perf.roofline.Efficiency)
to the TRAINING series of tests/data/gpu_serving_measurements.yaml.

    .venv/bin/python bench/fit_gpu.py                 # from Efficiency's defaults, prints each improvement
    .venv/bin/python bench/fit_gpu.py --start attn=0.3,kv_mem=0.6 --seed 2

The held-out series (llmctl.perf.measured.held_out) are never read here.
A (1+1) random search in log space: each try multiplies one to three fields
by exp(N(0, sigma)) (sigma halves after half the tries) and keeps the try
when the loss falls. Moving fields together crosses the valleys that a
one-field-at-a-time search stalls in (prefill attention's efficiency and the
KV-read bandwidth trade against each other). The loss per point is the
squared log-ratio of predicted to measured output tokens/s, TPOT (weight
1/2) and TTFT (weight 1/2), each clipped at a factor of 2 (a point far off
moves the fit no more than one off by 2x). The 16-bit GEMM efficiency is tied
to fp8's (the data has no 16-bit dense model: docs/capacity.md). The result
is what Efficiency's defaults hold (copied there by hand, rounded to four
digits, with this file named as the source); docs/capacity.md says which
fields were set on which data.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from llmctl.perf.measured import HARNESS_ROUNDS, evaluate, held_out, load_series  # noqa: E402
from llmctl.perf.roofline import Efficiency  # noqa: E402

DATA = REPO / "tests" / "data" / "gpu_serving_measurements.yaml"
FIELDS_ALL = ("attn", "kv_mem", "gemm_fp8", "gemm_fp4", "moe_fp8", "moe_nvfp4", "moe_mxfp4", "ttft_steps", "request_s",
              "step_s", "seq_s", "compute_half_tokens", "ar_s", "mem", "moe_mem", "layer_s", "moe_layer_s", "token_s")
FIELDS = FIELDS_ALL
CAPS = {"mem": 0.95, "kv_mem": 0.95, "moe_mem": 0.95, "gemm_fp8": 0.95, "gemm_fp4": 0.95, "gemm_bf16": 0.95,
        "moe_fp8": 0.95, "moe_mxfp4": 0.95, "moe_nvfp4": 0.95, "attn": 0.95}
CLIP = math.log(2.0)


def tied(eff: Efficiency) -> Efficiency:
    """The rules the fit keeps: 16-bit dense GEMMs at fp8's share of the peak."""
    return replace(eff, gemm_bf16=eff.gemm_fp8)


def loss(series, eff: Efficiency, rounds: float = HARNESS_ROUNDS) -> float:
    pts, _ = evaluate(series, eff, slo=False, rounds=rounds)
    total = 0.0
    for p in pts:
        for w, a, b in ((1.0, p.predicted, p.measured), (0.5, p.tpot_pred, p.tpot), (0.5, p.ttft_pred, p.ttft)):
            if a > 0 and b > 0 and math.isfinite(a):
                total += w * min(abs(math.log(a / b)), CLIP) ** 2
            else:
                total += w * CLIP ** 2
    return total / len(pts)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tries", type=int, default=600)
    ap.add_argument("--sigma", type=float, default=0.25, help="the log-space step of a try (halved after half the tries)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fields", default=",".join(FIELDS_ALL), help="the fields to fit, comma-separated (default: all)")
    ap.add_argument("--harness-rounds", type=float, default=HARNESS_ROUNDS, help="requests per client in a measured run")
    ap.add_argument("--start", default="", help="starting values, field=value comma-separated (default: Efficiency's)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    fields = args.fields.split(",")
    train = [s for s in load_series(DATA) if not held_out(s["id"])]
    eff = tied(replace(Efficiency(), **{k: float(v) for k, v in (kv.split("=") for kv in args.start.split(",") if kv)}))
    best = loss(train, eff, args.harness_rounds)
    print(f"start {best:.5f}", flush=True)
    sigma = args.sigma
    for i in range(args.tries):
        if i == args.tries // 2:
            sigma /= 2
        moves = {}
        for f in rng.sample(fields, rng.choice((1, 2, 2, 3))):
            moves[f] = min(getattr(eff, f) * math.exp(rng.gauss(0, sigma)), CAPS.get(f, math.inf))
        cand = tied(replace(eff, **moves))
        lv = loss(train, cand, args.harness_rounds)
        if lv < best - 1e-6:
            best, eff = lv, cand
            print(f"try {i} loss {best:.5f} " + " ".join(f"{k}={v:.4g}" for k, v in moves.items()), flush=True)
    print(f"loss {best:.5f}")
    print({f: float(f"{getattr(eff, f):.4g}") for f in FIELDS})
    return 0


if __name__ == "__main__":
    sys.exit(main())
