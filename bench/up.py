"""`llmctl up` (to RUNNING) vs `serve deploy` + polling `serve status`, same config, same cluster.

    .venv/bin/python bench/up.py [--rounds N]

Starts a private Ray head (127.0.0.1, free ports, own temp dir), builds the
tiny model, writes its CPU config with `llmctl gen-config --gpu cpu`, then per
round:

  A. `serve deploy FILE -a URL`, then `serve status -a URL` back to back until
     the app is RUNNING — what a user of Ray's CLI does;
  B. `llmctl up FILE` (validation, deploy, progress, RUNNING, GET /v1/models);

each followed by deleting the app. Prints the medians and the ratio B/A
(target: within 10 %), and the time from `llmctl up` to the first chat reply.
The head is stopped by PID at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(REPO))


def run(cmd: list[str], env: dict, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-2000:]}")
    return p


def serve_deploy_and_poll(serve_file: Path, url: str, app: str, env: dict, timeout: float = 900) -> float:
    t0 = time.perf_counter()
    run([str(BIN / "serve"), "deploy", str(serve_file), "-a", url], env)
    while time.perf_counter() - t0 < timeout:
        p = run([str(BIN / "serve"), "status", "-a", url], env, check=False)
        try:
            st = (yaml.safe_load(p.stdout) or {}).get("applications", {}).get(app, {}).get("status")
        except yaml.YAMLError:
            st = None
        if st == "RUNNING":
            return time.perf_counter() - t0
        if st in ("DEPLOY_FAILED", "UNHEALTHY"):
            raise SystemExit(f"serve deploy: {app} is {st}")
    raise SystemExit("serve deploy: timed out")


def first_chat(endpoint: str, model: str) -> float:
    t0 = time.perf_counter()
    body = {"model": model, "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 8}
    req = urllib.request.Request(endpoint + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(req, timeout=120) as r:
        json.loads(r.read())
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()

    from llmctl.launch import cluster
    from llmctl.tinymodel import build_tiny_model

    work = Path(tempfile.mkdtemp(prefix="llmctl-bench-up-"))
    env = dict(os.environ, LLMCTL_HOME=str(work / "home"), HF_HUB_OFFLINE="1", RAY_AUTH_MODE="disabled")
    env.pop("RAY_ADDRESS", None)
    os.environ.update({k: env[k] for k in ("LLMCTL_HOME", "HF_HUB_OFFLINE", "RAY_AUTH_MODE")})
    model_dir = build_tiny_model(work / "tiny-llama")
    run([str(BIN / "python"), "-m", "llmctl", "gen-config", "--model", str(model_dir), "--gpu", "cpu",
         "--min-replicas", "1", "--max-replicas", "1", "--yes", "--output-dir", str(work / "cfg")], env)  # fmt: skip
    serve_file = next((work / "cfg").glob("serve_*.yaml"))
    cfg = yaml.safe_load(serve_file.read_text())
    app = cfg["applications"][0]["name"]
    model_id = yaml.safe_load(Path(cfg["applications"][0]["args"]["llm_configs"][0]).read_text())["model_loading_config"]["model_id"]

    print("starting a private Ray head …", file=sys.stderr)
    head = cluster.start_head(num_cpus=8, num_gpus=0)
    url = head.dashboard_url
    # Ray's CLI gets the same file with the proxy pinned where llmctl pins it
    # (127.0.0.1 and the head's free port), so both start the same proxy.
    cfg["http_options"] = {"host": "127.0.0.1", "port": head.serve_http_port}
    ray_file = work / "cfg" / "serve_for_ray_cli.yaml"
    ray_file.write_text(yaml.safe_dump(cfg, sort_keys=False))
    endpoint = f"http://127.0.0.1:{head.serve_http_port}/v1"
    llmctl_cmd = [str(BIN / "python"), "-m", "llmctl"]
    theirs, ours, chats = [], [], []
    try:
        for i in range(args.rounds):
            a = serve_deploy_and_poll(ray_file, url, app, env)
            theirs.append(a)
            print(f"round {i + 1}: serve deploy + poll: {a:.1f}s", file=sys.stderr)
            run(llmctl_cmd + ["down", app], env)

            t0 = time.perf_counter()
            run(llmctl_cmd + ["up", str(serve_file)], env)
            b = time.perf_counter() - t0
            chats.append(time.perf_counter() - t0 + first_chat(endpoint, model_id))
            ours.append(b)
            print(f"round {i + 1}: llmctl up: {b:.1f}s (first chat reply at {chats[-1]:.1f}s)", file=sys.stderr)
            run(llmctl_cmd + ["down", app], env)
    finally:
        cluster.stop_head(head)
        shutil.rmtree(work, ignore_errors=True)
    a, b = statistics.median(theirs), statistics.median(ours)
    print(f"serve deploy + poll serve status: median {a:.1f}s  (runs: {', '.join(f'{x:.1f}' for x in theirs)})")
    print(f"llmctl up to RUNNING:             median {b:.1f}s  (runs: {', '.join(f'{x:.1f}' for x in ours)})")
    print(f"llmctl up to first chat reply:    median {statistics.median(chats):.1f}s")
    print(f"ratio llmctl/serve = {b / a:.2f}  (target <= 1.10: {'met' if b / a <= 1.10 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
