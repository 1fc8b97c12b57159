"""Write vLLM's engine and frontend argument tables (kind, choices,
nullability, default and CLI flag of every argument), by introspecting vLLM
itself (llmctl/engine_args/introspect.py).

The tables llmctl ships, one per vLLM release:

    python tools/build_engine_args.py --release 0.29.0 [0.30.0 ...] [--check]

installs each published ``vllm`` wheel with ``--no-deps`` into a throwaway
venv that sees this interpreter's packages (torch, transformers, pydantic, …)
behind it, introspects it there (``VLLM_TARGET_DEVICE=cpu``: the CUDA wheel
imports on a CPU-only machine) and writes
llmctl/engine_args/tables/vllm-X.Y.Z.json. ``--release`` without versions
redoes every shipped table. About 20 s and one wheel download (~300 MB) per
release; the venv is deleted afterwards.

The installed vLLM (the reference the CPU build is tested against):

    python tools/build_engine_args.py [--check]

imports the installed vllm (5–15 s), as llmctl itself does for an installed
vLLM that is the target and has no shipped table, and writes
tests/data/engine_args/introspected-<dist>-<version>.json.

``--check`` writes nothing and exits 1 if a table on disk differs from what
would be written (arguments, config classes, format and version; the date
and provenance lines are not compared).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from llmctl.engine_args import TABLES_DIR, shipped_versions  # noqa: E402

INTROSPECTED_DIR = ROOT / "tests" / "data" / "engine_args"
INSTALL_TIMEOUT_S = 900
INTROSPECT_TIMEOUT_S = 300


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


def differences(path: Path, table: dict[str, Any]) -> Optional[str]:
    """None when the table on disk holds the same arguments, config classes,
    format and version as ``table``; else what differs, in one line."""
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "missing or unreadable"
    keys = ("vllm_version", "format", "frontend_class", "args", "configs")
    changed = [k for k in keys if old.get(k) != table.get(k)]
    if not changed:
        return None
    if "args" in changed:
        a, b = ({x["name"]: x for x in t.get("args") or []} for t in (old, table))
        detail = [f"added {sorted(set(b) - set(a))}"] if set(b) - set(a) else []
        detail += [f"removed {sorted(set(a) - set(b))}"] if set(a) - set(b) else []
        detail += [f"changed {sorted(n for n in a.keys() & b.keys() if a[n] != b[n])}"]
        return f"{', '.join(changed)} differ ({'; '.join(detail)})"
    return f"{', '.join(changed)} differ"


def write_or_check(path: Path, header: dict, table: dict[str, Any], check: bool) -> bool:
    """Write (or, with check, compare); True when the file is (or would be) unchanged in its arguments."""
    if check:
        diff = differences(path, table)
        print(f"{path}: {'up to date' if diff is None else diff + '; rebuild it'}")
        return diff is None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(header, table["args"], table["configs"]), encoding="utf-8")
    kinds: dict[str, int] = {}
    for a in table["args"]:
        kinds[a["kind"]] = kinds.get(a["kind"], 0) + 1
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {len(table['args'])} arguments of "
          f"vLLM {header['vllm_version']} ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))}); "
          f"{len(table['configs'])} config classes, {sum(len(c['fields']) for c in table['configs'].values())} fields")
    return True


def _header(table: dict[str, Any], generated_by: str, source: Optional[str] = None) -> dict[str, Any]:
    header = {"vllm_version": table["vllm_version"], "vllm_distribution": table["vllm_distribution"],
              "generated_by": generated_by}
    if source:
        header["source"] = source
    header.update(date=datetime.datetime.now(datetime.timezone.utc).date().isoformat(), format=table["format"],
                  frontend_class=table["frontend_class"])
    return header


def _run(cmd: list[str], *, env: Optional[dict] = None, timeout: float) -> None:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or proc.stdout).strip().splitlines() if ln.strip()]
        raise RuntimeError(f"{' '.join(cmd[:4])} …: {lines[-1] if lines else f'exit code {proc.returncode}'}")


def introspect_release(version: str, workdir: Path) -> dict[str, Any]:
    """The table of the published ``vllm==version``, introspected in a throwaway
    venv under ``workdir``: the wheel alone (--no-deps) in front, this
    interpreter's packages behind it (a ``.pth`` file)."""
    venv = workdir / f"vllm-{version}"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=120)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    base = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (site / "zz_llmctl_base.pth").write_text("\n".join(base) + "\n", encoding="utf-8")
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--quiet", "--no-deps", "--no-input",
          f"vllm=={version}"], timeout=INSTALL_TIMEOUT_S)
    out = workdir / f"vllm-{version}.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VLLM_TARGET_DEVICE": "cpu", "VLLM_LOGGING_LEVEL": "ERROR"}
    _run([str(py), "-m", "llmctl.engine_args.introspect", str(out)], env=env, timeout=INTROSPECT_TIMEOUT_S)
    table = json.loads(out.read_text(encoding="utf-8"))
    if table["vllm_version"] != version:
        raise RuntimeError(f"the throwaway venv imported vLLM {table['vllm_version']}, not {version}")
    return table


def from_releases(versions: list[str], check: bool) -> int:
    ok = True
    for version in versions or [v.label for v in shipped_versions()]:
        with tempfile.TemporaryDirectory(prefix="llmctl-vllm-") as tmp:
            try:
                table = introspect_release(version, Path(tmp))
            except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                print(f"vLLM {version}: {e}", file=sys.stderr)
                ok = False
                continue
        header = _header(table, "tools/build_engine_args.py --release (llmctl.engine_args.introspect)",
                         f"the published wheel vllm=={version}, installed --no-deps in a throwaway venv and introspected")
        ok &= write_or_check(TABLES_DIR / f"vllm-{version}.json", header, table, check)
    return 0 if ok else 1


def from_installed(output: Optional[Path], check: bool) -> int:
    from llmctl.engine_args.introspect import introspect

    table = introspect()
    dist = table["vllm_distribution"] or "vllm"
    path = output or INTROSPECTED_DIR / f"introspected-{dist}-{table['vllm_version']}.json"
    header = _header(table, "tools/build_engine_args.py (llmctl.engine_args.introspect)")
    return 0 if write_or_check(path, header, table, check) else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", nargs="*", metavar="VERSION",
                    help="published vLLM releases to introspect in throwaway venvs (none given: every shipped table)")
    ap.add_argument("--check", action="store_true", help="compare with the tables on disk, write nothing")
    ap.add_argument("--output", type=Path, help="where the installed vLLM's table goes (default: tests/data/engine_args/)")
    args = ap.parse_args()
    if args.release is not None:
        return from_releases(args.release, args.check)
    return from_installed(args.output, args.check)


if __name__ == "__main__":
    sys.exit(main())
