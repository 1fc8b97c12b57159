"""`llmctl status` vs `serve status` on the same cluster, as one ratio.

    .venv/bin/python bench/status.py                 # starts a private Ray head, stops it after
    .venv/bin/python bench/status.py --address http://127.0.0.1:PORT   # an existing cluster

Both commands are run as a user would run them (a fresh process each time,
``--address`` pointing at the same dashboard); the median wall time of
``--runs`` runs each is compared. Target: llmctl status <= 1/3 of serve status.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(REPO))


def timed(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode not in (0, 1):  # 1 = not all apps RUNNING, still a valid answer
        raise SystemExit(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[:500]}")
    return dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--address", help="dashboard URL of an existing cluster (default: start a private one)")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()

    from llmctl.launch import cluster

    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    started = None
    if args.address:
        url = args.address
    else:
        home = tempfile.mkdtemp(prefix="llmctl-bench-")
        os.environ["LLMCTL_HOME"] = env["LLMCTL_HOME"] = home
        print("starting a private Ray head …", file=sys.stderr)
        started = cluster.start_head(num_cpus=4, num_gpus=0)
        url = started.dashboard_url
    try:
        llmctl = [str(BIN / "python"), "-m", "llmctl", "status", "--address", url]
        serve = [str(BIN / "serve"), "status", "-a", url]
        timed(llmctl, env), timed(serve, env)  # warm the page cache
        ours, theirs = [], []
        for _ in range(args.runs):  # interleaved, so load changes hit both
            ours.append(timed(llmctl, env))
            theirs.append(timed(serve, env))
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"llmctl status: median {a:.3f}s  (runs: {', '.join(f'{x:.2f}' for x in ours)})")
        print(f"serve status:  median {b:.3f}s  (runs: {', '.join(f'{x:.2f}' for x in theirs)})")
        print(f"ratio llmctl/serve = {a / b:.2f}  (target <= 0.33: {'met' if a / b <= 1 / 3 else 'NOT met'})")
    finally:
        if started is not None:
            cluster.stop_head(started)
            shutil.rmtree(env["LLMCTL_HOME"], ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
