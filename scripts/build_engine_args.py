"""Write vLLM's engine and frontend argument tables (kind, choices,
nullability, default and CLI flag of every argument).

From published source (the tables llmctl ships, one per vLLM minor):

    python scripts/build_engine_args.py --from-source /tmp/vllm-src/vllm-0.29.0 [DIR ...] [--check]

reads each unpacked sdist with ``ast`` (llmctl/engine_args/source.py; nothing
is imported or installed) and writes llmctl/engine_args/tables/vllm-X.Y.Z.json.
A DIR may also be a folder of unpacked sdists (every vllm-*/ in it). It exits 1
if the reader met something it could not read and does not know to be harmless
(``--allow-problems`` writes anyway).

From the installed vLLM (the reference the source reader is tested against):

    flock /tmp/llmctl-heavy.lock python scripts/build_engine_args.py [--check]

imports vllm (5–15 s) through llmctl/engine_args/introspect.py, which llmctl
also runs for an installed vLLM that is the target and has no shipped table,
and writes tests/data/engine_args/introspected-<dist>-<version>.json.

``--check`` writes nothing and exits 1 if a table on disk differs from what
would be written.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmctl.engine_args import TABLE_FORMAT, TABLES_DIR  # noqa: E402

INTROSPECTED_DIR = ROOT / "tests" / "data" / "engine_args"


def render(header: dict, args: list[dict], configs: dict) -> str:
    """One argument, and one field of a config class, per line: readable diffs when vLLM changes."""
    lines = ",\n".join("  " + json.dumps(a, ensure_ascii=False) for a in args)
    classes = []
    for key, c in configs.items():
        head = json.dumps({k: v for k, v in c.items() if k != "fields"}, ensure_ascii=False)[:-1]
        fields = ",\n".join("   " + json.dumps(f, ensure_ascii=False) for f in c["fields"])
        classes.append(f"  {json.dumps(key)}: {head}, \"fields\": [" + (f"\n{fields}\n  ]}}" if fields else "]}"))
    text = (json.dumps(header, indent=1, ensure_ascii=False)[:-2] + ',\n "args": [\n' + lines + "\n ],\n"
            + ' "configs": {\n' + ",\n".join(classes) + "\n }\n}\n")
    json.loads(text)  # well-formed
    return text


def _write(path: Path, header: dict, args: list[dict], configs: dict, check: bool) -> bool:
    """Write (or, with check, compare); True when the file is (or would be) unchanged in its arguments."""
    if check:
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            print(f"{path}: missing or unreadable")
            return False
        same = (old.get("args") == args and old.get("configs") == configs and old.get("format") == header["format"]
                and old.get("vllm_version") == header["vllm_version"])
        print(f"{path}: {'up to date' if same else 'differs; rebuild it'}")
        return same
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(header, args, configs), encoding="utf-8")
    kinds: dict[str, int] = {}
    for a in args:
        kinds[a["kind"]] = kinds.get(a["kind"], 0) + 1
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {len(args)} arguments of vLLM "
          f"{header['vllm_version']} ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))}); "
          f"{len(configs)} config classes, {sum(len(c['fields']) for c in configs.values())} fields")
    return True


def _source_dirs(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if (p / "vllm" / "__init__.py").is_file():
            out.append(p)
        elif p.is_dir():
            out += sorted(d for d in p.glob("vllm-*") if (d / "vllm" / "__init__.py").is_file())
        else:
            raise SystemExit(f"{p}: not an unpacked vLLM sdist (no vllm/__init__.py) nor a folder of them")
    return out


def from_source(dirs: list[Path], check: bool, allow_problems: bool) -> int:
    from llmctl.engine_args.source import build

    ok = True
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    for d in _source_dirs(dirs):
        table = build(d)
        for note in table.notes:
            print(f"  note ({table.version}): {note}")
        for problem in table.problems:
            print(f"  PROBLEM ({table.version}): {problem}")
        if table.problems and not allow_problems:
            print(f"vLLM {table.version}: {len(table.problems)} unexplained problem(s); not written (--allow-problems)")
            ok = False
            continue
        header = {
            "vllm_version": table.version,
            "vllm_distribution": "vllm",
            "generated_by": "scripts/build_engine_args.py --from-source (llmctl.engine_args.source)",
            "source": f"the published sdist vllm-{table.version}.tar.gz, read with ast",
            "date": today,
            "format": TABLE_FORMAT,
            "frontend_class": table.frontend_class,
            "unread": table.notes,
        }
        ok &= _write(TABLES_DIR / f"vllm-{table.version}.json", header, table.args, table.configs, check)
    return 0 if ok else 1


def from_installed(output: Path | None, check: bool) -> int:
    from llmctl.engine_args.introspect import introspect

    table = introspect()
    dist = table["vllm_distribution"] or "vllm"
    path = output or INTROSPECTED_DIR / f"introspected-{dist}-{table['vllm_version']}.json"
    header = {
        "vllm_version": table["vllm_version"],
        "vllm_distribution": table["vllm_distribution"],
        "generated_by": "scripts/build_engine_args.py (llmctl.engine_args.introspect)",
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "format": table["format"],
        "frontend_class": table["frontend_class"],
    }
    return 0 if _write(path, header, table["args"], table["configs"], check) else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from-source", "--from-sdist", dest="source", nargs="+", type=Path, metavar="DIR",
                    help="unpacked vLLM sdists (or folders of them) to read with ast")
    ap.add_argument("--check", action="store_true", help="compare with the tables on disk, write nothing")
    ap.add_argument("--allow-problems", action="store_true", help="write a table even if the reader met something unexplained")
    ap.add_argument("--output", type=Path, help="where the introspected table goes (introspection mode)")
    args = ap.parse_args()
    if args.source:
        return from_source(args.source, args.check, args.allow_problems)
    return from_installed(args.output, args.check)


if __name__ == "__main__":
    sys.exit(main())
