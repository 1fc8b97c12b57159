"""Issue 11's two timings: preflight (cluster answer -> verdict) and failure
diagnosis (vLLM's error line -> llmctl's exit with cause and fix).

    .venv/bin/python bench/diagnose.py [--rounds N]

Starts a private Ray head (127.0.0.1, free ports, own temp dir), builds the
tiny model and writes its CPU config with `llmctl gen-config --gpu cpu`, then:

  1. `llmctl check FILE --json --no-versions` N times: the `seconds` it reports
     (from the cluster's answer to the verdict) and the whole command's time;
  2. per round, the same config with a KV cache too small for max_model_len
     (`kv_cache_memory_bytes: 262144`, one constructor attempt): `llmctl up`
     must exit 1 naming max_model_len; the time of vLLM's own error line is read
     from the replica's log (`llmctl logs`), and compared with the moment
     `llmctl up` exited. vLLM stamps its lines to the second, so the figure is
     +-1 s.

The head is stopped by PID at the end.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(REPO))
LLMCTL = [str(BIN / "python"), "-m", "llmctl"]
# vLLM: "(EngineCore_DP0 pid=123) ERROR 11-24 19:40:01 [core.py:700] ValueError: ... KV cache ..."
VLLM_ERROR = re.compile(r"ERROR (\d\d-\d\d \d\d:\d\d:\d\d)\b.*(?:KV cache|max_model_len|max seq len)", re.I)


def run(cmd: list[str], env: dict, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-2000:]}")
    return p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--checks", type=int, default=5)
    args = ap.parse_args()

    from llmctl.launch import cluster
    from llmctl.tinymodel import build_tiny_model

    work = Path(tempfile.mkdtemp(prefix="llmctl-bench-diag-"))
    env = dict(os.environ, LLMCTL_HOME=str(work / "home"), HF_HUB_OFFLINE="1", RAY_AUTH_MODE="disabled")
    env.pop("RAY_ADDRESS", None)
    os.environ.update({k: env[k] for k in ("LLMCTL_HOME", "HF_HUB_OFFLINE", "RAY_AUTH_MODE")})
    model_dir = build_tiny_model(work / "tiny-llama")
    run(LLMCTL + ["gen-config", "--model", str(model_dir), "--gpu", "cpu", "--min-replicas", "1", "--max-replicas", "1",
                  "--yes", "--output-dir", str(work / "cfg")], env)  # fmt: skip
    serve_file = next((work / "cfg").glob("serve_*.yaml"))
    app = yaml.safe_load(serve_file.read_text())["applications"][0]["name"]
    model_file = Path(yaml.safe_load(serve_file.read_text())["applications"][0]["args"]["llm_configs"][0])

    print("starting a private Ray head …", file=sys.stderr)
    head = cluster.start_head(num_cpus=8, num_gpus=0)
    verdicts, commands, diagnoses = [], [], []
    try:
        for _ in range(args.checks):
            t0 = time.perf_counter()
            p = run(LLMCTL + ["check", str(serve_file), "--json", "--no-versions"], env)
            commands.append(time.perf_counter() - t0)
            verdicts.append(json.loads(p.stdout)["seconds"])
        small = yaml.safe_load(model_file.read_text())
        small["engine_kwargs"]["kv_cache_memory_bytes"] = 262144
        small.setdefault("deployment_config", {})["max_constructor_retry_count"] = 1
        model_file.write_text(yaml.safe_dump(small, sort_keys=False))
        for i in range(args.rounds):
            p = run(LLMCTL + ["up", str(serve_file), "--timeout", "600"], env, check=False)
            exited = dt.datetime.now()
            if p.returncode != 1 or "max_model_len" not in p.stderr:
                raise SystemExit(f"up exited {p.returncode} without the KV diagnosis:\n{p.stderr[-2000:]}")
            logs = run(LLMCTL + ["logs", app, "--lines", "400"], env, check=False).stdout
            stamps = [m.group(1) for m in VLLM_ERROR.finditer(logs)]
            if not stamps:
                raise SystemExit("no vLLM error line with a time stamp in the replica log")
            first = dt.datetime.strptime(f"{exited.year}-{stamps[0]}", "%Y-%m-%d %H:%M:%S")
            diagnoses.append((exited - first).total_seconds())
            print(f"round {i + 1}: vLLM error at {stamps[0]}, llmctl up exited {diagnoses[-1]:.1f}s later", file=sys.stderr)
            run(LLMCTL + ["down", app], env, check=False)
    finally:
        cluster.stop_head(head)
        shutil.rmtree(work, ignore_errors=True)
    print(f"preflight verdict (cluster answer -> verdict): median {statistics.median(verdicts) * 1000:.1f} ms, "
          f"max {max(verdicts) * 1000:.1f} ms (goal < 2 s); whole `llmctl check` median {statistics.median(commands):.2f}s")
    print(f"vLLM error line -> llmctl up exits with cause and fix: median {statistics.median(diagnoses):.1f}s "
          f"(runs: {', '.join(f'{x:.1f}' for x in diagnoses)}; +-1 s, vLLM stamps seconds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
