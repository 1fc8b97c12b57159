"""Write llmctl/_parsers_vllm-<version>.json: the tool-call and reasoning parser
names a vLLM release registers, and the chat templates its examples/ ships,
read from its source with ``ast`` (nothing is imported or run).

    python tools/build_vllm_parsers.py /tmp/vllm-src/vllm-0.29.0

SOURCE is an unpacked vLLM sdist (or a checkout): the directory holding
``vllm/`` (and ``examples/``, ``PKG-INFO``). Where vLLM registers the names:

- ``vllm/tool_parsers/__init__.py`` (0.12+; earlier
  ``vllm/entrypoints/openai/tool_parsers/__init__.py``): the dict
  ``_TOOL_PARSERS_TO_REGISTER`` {name: (file, class)} fed to
  ``ToolParserManager.register_lazy_module``;
- ``vllm/reasoning/__init__.py``: ``_REASONING_PARSERS_TO_REGISTER``, the same for
  ``ReasoningParserManager``;
- in either directory, any ``@ToolParserManager.register_module("name")`` /
  ``@ReasoningParserManager.register_module(["a", "b"])`` decorator and any
  ``register_lazy_module("name", …)`` call with a literal name (older releases
  registered that way).

llmctl's catalog recipes are checked against the shipped file
(tests/test_recipes.py), so a parser vLLM renames fails a test, not a deployment.
``--check`` writes nothing and exits 1 if the shipped file differs.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools import sdist_version  # noqa: E402

REGISTRIES = {
    "tool_call_parsers": (("vllm/tool_parsers", "vllm/entrypoints/openai/tool_parsers"),
                          "_TOOL_PARSERS_TO_REGISTER", "ToolParserManager"),
    "reasoning_parsers": (("vllm/reasoning",), "_REASONING_PARSERS_TO_REGISTER", "ReasoningParserManager"),
}


def _literal_names(node: ast.AST) -> list[str]:
    """'a' or ['a', 'b'] (a call's first argument or name=) as a list of names."""
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str)]
    return []


def _names_in(tree: ast.AST, table: str, manager: str) -> tuple[set[str], list[str]]:
    """(names, how each kind was found) in one module's syntax tree."""
    names: set[str] = set()
    how: list[str] = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        if any(isinstance(t, ast.Name) and t.id == table for t in targets) and isinstance(value, ast.Dict):
            found = [k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            names.update(found)
            how.append(f"{table} ({len(found)} names)")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("register_module", "register_lazy_module") and \
                isinstance(node.func.value, ast.Name) and node.func.value.id == manager:
            arg = next((kw.value for kw in node.keywords if kw.arg == "name"), node.args[0] if node.args else None)
            if arg is not None:
                found = _literal_names(arg)
                names.update(found)
                if found:
                    how.append(f"{manager}.{node.func.attr}({', '.join(found)})")
    return names, how


def read_registry(source: Path, kind: str) -> tuple[list[str], list[str]]:
    dirs, table, manager = REGISTRIES[kind]
    names: set[str] = set()
    where: list[str] = []
    for d in dirs:
        for path in sorted((source / d).glob("*.py")):
            found, how = _names_in(ast.parse(path.read_text(encoding="utf-8"), str(path)), table, manager)
            if found:
                names |= found
                where.append(f"{path.relative_to(source).as_posix()}: {'; '.join(how)}")
    if not names:
        raise SystemExit(f"{source}: no {kind.replace('_', ' ')} found under {', '.join(dirs)}")
    return sorted(names), where


def vllm_version(source: Path) -> str:
    """The release an unpacked sdist holds (:func:`tools.sdist_version`)."""
    try:
        return sdist_version(source)
    except ValueError as e:
        raise SystemExit(str(e)) from None


def build(source: Path) -> dict:
    version = vllm_version(source)
    out: dict = {"vllm_version": version, "generated_by": "tools/build_vllm_parsers.py (ast, nothing imported)",
                 "source": (f"vLLM {version} sdist ({source.name}/)" if (source / "PKG-INFO").is_file()
                            else f"vLLM {version} installed package (vllm/ under {source.name}/)")}
    registered_in: list[str] = []
    for kind in REGISTRIES:
        out[kind], where = read_registry(source, kind)
        registered_in += where
    out["registered_in"] = registered_in
    examples = source / "examples"
    out["chat_templates"] = sorted(f"examples/{p.name}" for p in examples.glob("*.jinja")) if examples.is_dir() else None
    return out


def output_path(version: str) -> Path:
    return ROOT / "llmctl" / f"_parsers_vllm-{version}.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", type=Path, help="unpacked vLLM sdist or checkout (the directory holding vllm/)")
    ap.add_argument("--check", action="store_true", help="compare with the shipped file, write nothing")
    args = ap.parse_args()
    data = build(args.source.resolve())
    path = output_path(data["vllm_version"])
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    if args.check:
        same = path.is_file() and json.loads(path.read_text(encoding="utf-8")) == data
        print("up to date" if same else f"{path} differs from {args.source}; rebuild it")
        return 0 if same else 1
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)}: {len(data['tool_call_parsers'])} tool-call parsers, "
          f"{len(data['reasoning_parsers'])} reasoning parsers, "
          f"{len(data['chat_templates'] or [])} example chat templates (vLLM {data['vllm_version']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
