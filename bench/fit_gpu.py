"""Fit the step model's efficiencies and overheads (llmctl.perf.roofline.Efficiency)
to the TRAINING series of tests/data/gpu_serving_measurements.yaml.

    .venv/bin/python bench/fit_gpu.py            # prints the fitted fields and the loss per round

The held-out series (llmctl.perf.measured.held_out) are never read here.
Coordinate descent on a multiplicative grid, one field at a time; the loss
per point is the squared log-ratio of predicted to measured output tokens/s,
TPOT (weight 1/2) and TTFT (weight 1/4), each clipped at a factor of 2 (a
point far off moves the fit no more than one off by 2x). The result is what
Efficiency's defaults hold (copied there by hand, with this file named as the
source); docs/capacity.md says which fields were set on which data.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from llmctl.perf.measured import HARNESS_ROUNDS, evaluate, held_out, load_series  # noqa: E402
from llmctl.perf.roofline import Efficiency  # noqa: E402

DATA = REPO / "tests" / "data" / "gpu_serving_measurements.yaml"
FIELDS_ALL = ("mem", "moe_mem", "gemm_fp8", "gemm_fp4", "gemm_bf16", "moe_fp8", "moe_mxfp4", "moe_nvfp4", "attn",
          "compute_half_tokens", "layer_s", "moe_layer_s", "ar_s", "step_s", "seq_s", "request_s", "ttft_steps",
          "api_token_s")
FIELDS = FIELDS_ALL
CAPS = {"mem": 0.95, "moe_mem": 0.95, "gemm_fp8": 0.95, "gemm_fp4": 0.95, "gemm_bf16": 0.95, "moe_fp8": 0.95,
        "moe_mxfp4": 0.95, "moe_nvfp4": 0.95, "attn": 0.95}
CLIP = math.log(2.0)


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
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--fields", default=",".join(FIELDS_ALL), help="the fields to fit, comma-separated (default: all)")
    ap.add_argument("--harness-rounds", type=float, default=HARNESS_ROUNDS, help="requests per client in a measured run")
    ap.add_argument("--start", default="", help="starting values, field=value comma-separated (default: Efficiency's)")
    args = ap.parse_args()
    train = [s for s in load_series(DATA) if not held_out(s["id"])]
    eff = replace(Efficiency(), **{k: float(v) for k, v in (kv.split("=") for kv in args.start.split(",") if kv)})
    best = loss(train, eff, args.harness_rounds)
    print(f"start {best:.5f}", flush=True)
    for rnd in range(args.rounds):
        steps = (0.6, 0.8, 1.25, 1.6) if rnd < 2 else (0.9, 1.1)
        improved = False
        for f in args.fields.split(","):
            v0 = getattr(eff, f)
            cands = [v0 * k for k in steps] if v0 else [1e-6, 5e-6, 2e-5]
            for v in cands:
                v = min(v, CAPS.get(f, math.inf))
                e = replace(eff, **{f: v})
                lv = loss(train, e, args.harness_rounds)
                if lv < best - 1e-6:
                    best, eff, improved = lv, e, True
            print(f"round {rnd} {f}={getattr(eff, f):.4g} loss {best:.5f}", flush=True)
        if not improved:
            break
    print({f: round(getattr(eff, f), 8) for f in FIELDS})
    return 0


if __name__ == "__main__":
    sys.exit(main())
