"""Write the table of model architectures a vLLM release serves, read from its
source (build tooling: not part of the llmctl package).

    python tools/build_vllm_registry.py --from-source /tmp/vllm-src/vllm-0.29.0 [--check]

reads ``vllm/model_executor/models/registry.py`` of an unpacked sdist with
``ast`` (nothing is imported) and writes tests/data/vllm_registry-X.Y.Z.json:
every architecture name of the dictionaries ``_VLLM_MODELS`` is built from
(text generation, embedding, late interaction, reward, token and sequence
classification, multimodal, speculative decoding, Transformers-backed), with
its dictionary and the module / class vLLM loads for it.
tests/test_sizing_registry.py checks that llmctl's converter either models
each one or reports it as approximate. ``--check`` writes nothing and exits 1
if the table on disk differs.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools import sdist_version  # noqa: E402

OUT_DIR = ROOT / "tests" / "data"


def read_registry(src: Path) -> tuple[str, dict[str, dict[str, str]]]:
    """(version, {architecture: {"table", "module", "class"}}) of an unpacked vLLM sdist."""
    try:
        version = sdist_version(src)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    tree = ast.parse((src / "vllm" / "model_executor" / "models" / "registry.py").read_text(encoding="utf-8"))
    tables: dict[str, ast.Dict] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else (
            node.target if isinstance(node, ast.AnnAssign) else None)
        if isinstance(target, ast.Name) and isinstance(node.value, ast.Dict):
            tables[target.id] = node.value
    merged = tables["_VLLM_MODELS"]
    out: dict[str, dict[str, str]] = {}
    for key, value in zip(merged.keys, merged.values):
        if key is not None or not isinstance(value, ast.Name):  # only ** entries make _VLLM_MODELS
            raise SystemExit(f"unexpected entry in _VLLM_MODELS: {ast.dump(value)[:80]}")
        table = tables[value.id]
        for k, v in zip(table.keys, table.values):
            if not isinstance(k, ast.Constant):
                continue
            parts = [e.value for e in v.elts if isinstance(e, ast.Constant)] if isinstance(v, ast.Tuple) else []
            out.setdefault(k.value, {"table": value.id.strip("_").lower(),
                                     "module": parts[0] if parts else "", "class": parts[-1] if parts else ""})
    return version, dict(sorted(out.items()))


def render(version: str, archs: dict[str, dict[str, str]]) -> str:
    lines = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in archs.items())
    head = {"vllm": version, "source": "vllm/model_executor/models/registry.py (_VLLM_MODELS), read by tools/build_vllm_registry.py"}
    return json.dumps(head)[:-1] + ', "architectures": {\n' + lines + "\n}}\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from-source", type=Path, required=True, help="an unpacked vLLM sdist")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    version, archs = read_registry(a.from_source)
    text = render(version, archs)
    path = OUT_DIR / f"vllm_registry-{version}.json"
    if a.check:
        same = path.is_file() and path.read_text(encoding="utf-8") == text
        print(f"{path}: {'current' if same else 'differs'}")
        return 0 if same else 1
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}: {len(archs)} architectures of vLLM {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
