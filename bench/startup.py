"""Start-up cost of `llmctl --help` and `llmctl models` against `serve --help`.

Goal (issue 2): neither llmctl command imports ray or vllm, and each takes at
most a third of `serve --help`'s time, measured in the same run on the same
machine. Runs are interleaved so that machine noise hits all commands alike;
the median of N runs is compared.

A second table (``validate_times``) times `llmctl validate` of a valid corpus
config through the console script, which imports Ray's LLMConfig without torch
and transformers (llmctl.light_imports), against the same command through
``main()`` with both loaded, as in-process callers have it. Informational.

    .venv/bin/python bench/startup.py [-n 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
COMMANDS = {
    "serve --help": [str(BIN / "serve"), "--help"],
    "llmctl --help": [str(BIN / "llmctl"), "--help"],
    "llmctl models": [str(BIN / "llmctl"), "models"],
}
PROBE = (
    "import sys; from llmctl.cli import main; main({args!r}); "
    "heavy = sorted(m for m in ('ray', 'vllm', 'torch', 'huggingface_hub', 'transformers') if m in sys.modules); "
    "sys.stderr.write('HEAVY=' + ','.join(heavy) + chr(10))"
)


def heavy_imports(args: list[str]) -> list[str]:
    p = subprocess.run([sys.executable, "-c", PROBE.format(args=args)], capture_output=True, text=True, check=False)
    line = [ln for ln in p.stderr.splitlines() if ln.startswith("HEAVY=")][-1]
    return [m for m in line[len("HEAVY="):].split(",") if m]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=15)
    n = ap.parse_args().n
    times: dict[str, list[float]] = {k: [] for k in COMMANDS}
    for name, cmd in COMMANDS.items():  # warm the page cache once
        subprocess.run(cmd, capture_output=True, check=True)
    for _ in range(n):
        for name, cmd in COMMANDS.items():
            t0 = time.perf_counter()
            subprocess.run(cmd, capture_output=True, check=True)
            times[name].append(time.perf_counter() - t0)
    ref = statistics.median(times["serve --help"])
    print(f"{'command':16} {'median s':>9} {'ratio vs serve --help':>22}  heavy modules imported")
    ok = True
    for name, ts in times.items():
        med = statistics.median(ts)
        heavy = heavy_imports(COMMANDS[name][1:]) if name.startswith("llmctl") else ["(reference)"]
        ratio = med / ref
        print(f"{name:16} {med:9.3f} {ratio:22.2f}  {', '.join(heavy) or 'none'}")
        if name.startswith("llmctl"):
            ok = ok and ratio <= 1 / 3 and not heavy
    print(f"target: each llmctl command <= 0.33 of serve --help and no ray/vllm import: {'met' if ok else 'NOT met'}")
    validate_times(n)
    return 0 if ok else 1


CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "validate_corpus"


def validate_times(n: int) -> None:
    import yaml

    case = next(c for c in yaml.safe_load((CORPUS / "corpus.yaml").read_text())["cases"] if c["verdict"] == "valid")
    cwd, file = CORPUS / case["name"] / case["cwd"], case["file"]
    cmds = {
        "llmctl validate (console script)": [str(BIN / "llmctl"), "validate", file],
        "main(['validate']) with torch": [sys.executable, "-c", f"import sys; from llmctl.cli import main; sys.exit(main(['validate', {file!r}]))"],
    }
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(n):
        for name, cmd in cmds.items():
            t0 = time.perf_counter()
            subprocess.run(cmd, cwd=cwd, capture_output=True, check=True)
            times[name].append(time.perf_counter() - t0)
    ref = statistics.median(times["main(['validate']) with torch"])
    print(f"\n{'validate ' + case['name']:34} {'median s':>9} {'ratio':>7}")
    for name, ts in times.items():
        print(f"{name:34} {statistics.median(ts):9.2f} {statistics.median(ts) / ref:7.2f}")


if __name__ == "__main__":
    sys.exit(main())
