"""Accuracy of llmctl.sizing against published vLLM start-up figures.

    .venv/bin/python bench/sizing.py          # error table
    .venv/bin/python bench/sizing.py --json   # the same as JSON

The figures and their sources are in tests/data/vllm_startup_figures.yaml;
tests/test_sizing.py runs the same comparison with the tolerances
(weights ±5 %, KV capacity ±15 %).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from llmctl.catalog import ModelArch, arch_from_hf_config  # noqa: E402
from llmctl.sizing import BLOCK_SIZE, GIB, Plan, plan  # noqa: E402

DATA = ROOT / "tests" / "data" / "vllm_startup_figures.yaml"

WEIGHTS_TOLERANCE = 0.05
KV_TOLERANCE = 0.15


def load_cases(path: Path = DATA) -> list[dict[str, Any]]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    configs = doc["configs"]
    cases = []
    for case in doc["cases"]:
        case = dict(case)
        case["config_dict"] = configs[case["config"]]
        cases.append(case)
    return cases


def case_arch(case: dict[str, Any]) -> ModelArch:
    return arch_from_hf_config(dict(case["config_dict"]))


def case_plan(case: dict[str, Any]) -> Plan:
    arch = case_arch(case)
    return plan(
        arch,
        gpu_memory_bytes=int(case["gpu"]["memory_gib"] * GIB),
        tp=case["tp"],
        pp=case.get("pp", 1),
        max_model_len=case.get("max_model_len"),
        gpu_memory_utilization=case["gpu_memory_utilization"],
        dtype=case.get("dtype", "auto"),
        kv_cache_dtype=case.get("kv_cache_dtype", "auto"),
        max_num_batched_tokens=case.get("max_num_batched_tokens"),
        max_num_seqs=case.get("max_num_seqs"),
        count_cuda_graphs=case.get("count_cuda_graphs", True),
    )


@dataclass
class Row:
    case: str
    quantity: str  # weights_gib | kv_tokens | kv_blocks_x16 | kv_cache_gib | verdict
    vllm: Any
    estimate: Any
    error: Optional[float]  # relative, None for the verdict
    tolerance: Optional[float]

    @property
    def ok(self) -> bool:
        if self.error is None:
            return self.vllm == self.estimate
        return abs(self.error) <= (self.tolerance or 0)


def _err(est: float, ref: float) -> float:
    return (est - ref) / ref


def evaluate(case: dict[str, Any]) -> list[Row]:
    p = case_plan(case)
    v = case["vllm"]
    rows: list[Row] = []
    for check in case["checks"]:
        if check == "weights":
            rows.append(Row(case["id"], "weights_gib", v["weights_gib"], p.weights_gib_per_gpu,
                            _err(p.weights_gib_per_gpu, v["weights_gib"]), WEIGHTS_TOLERANCE))
        elif check == "kv":
            if "kv_tokens" in v:
                rows.append(Row(case["id"], "kv_tokens", v["kv_tokens"], p.kv_cache_tokens,
                                _err(p.kv_cache_tokens, v["kv_tokens"]), KV_TOLERANCE))
            elif "num_gpu_blocks" in v:
                est_blocks = _pool_blocks(case, p)
                rows.append(Row(case["id"], "kv_blocks_x16", v["num_gpu_blocks"] * BLOCK_SIZE, est_blocks * BLOCK_SIZE,
                                _err(est_blocks, v["num_gpu_blocks"]), KV_TOLERANCE))
            else:
                rows.append(Row(case["id"], "kv_cache_gib", v["kv_cache_gib"], p.kv_cache_gib,
                                _err(p.kv_cache_gib, v["kv_cache_gib"]), KV_TOLERANCE))
        elif check == "verdict":
            rows.append(Row(case["id"], "verdict", v["verdict"], p.verdict, None, None))
        else:  # pragma: no cover - data error
            raise ValueError(f"{case['id']}: unknown check {check}")
    return rows


def _pool_blocks(case: dict[str, Any], p: Plan) -> int:
    """KV blocks in the pool as vLLM counts num_gpu_blocks (per GPU): the KV
    bytes over the bytes of one block across the layers that share it."""
    from llmctl.sizing import kv_capacity

    arch = case_arch(case)
    cap = kv_capacity(
        arch, p.kv_cache_gib * GIB, max_model_len=p.max_model_len, tp=p.tp, pp=p.pp,
        kv_cache_dtype=case.get("kv_cache_dtype", "auto"), dtype=case.get("dtype", "auto"),
        max_num_batched_tokens=p.max_num_batched_tokens,
    )
    return cap.blocks


def all_rows() -> list[Row]:
    rows: list[Row] = []
    for case in load_cases():
        rows.extend(evaluate(case))
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    rows = all_rows()
    if "--json" in argv:
        print(json.dumps([r.__dict__ | {"ok": r.ok} for r in rows], indent=2))
        return 0
    print(f"{'case':34} {'quantity':14} {'vLLM':>14} {'estimate':>14} {'error':>8}  ok")
    for r in rows:
        err = "" if r.error is None else f"{r.error * 100:+.1f}%"
        fmt = (lambda x: f"{x:,}") if isinstance(r.vllm, int) else (lambda x: f"{x}")
        print(f"{r.case:34} {r.quantity:14} {fmt(r.vllm):>14} {fmt(r.estimate):>14} {err:>8}  {'yes' if r.ok else 'NO'}")
    bad = [r for r in rows if not r.ok]
    print(f"\n{len(rows) - len(bad)} of {len(rows)} within tolerance (weights ±{WEIGHTS_TOLERANCE:.0%}, KV ±{KV_TOLERANCE:.0%})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
