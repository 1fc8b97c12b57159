"""The structure of the package: the layer contracts (import-linter, in
pyproject.toml) name every module of llmctl and hold, no module outside the UI
reaches a UI library even through another module, and no import cycle exists
among llmctl's modules, counting imports inside functions too (which
import-linter also sees, but a cycle inside one layer would not break a layers
contract)."""

from __future__ import annotations

import ast
import pkgutil
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import llmctl

ROOT = Path(__file__).resolve().parents[1]


def _module_graph() -> dict[str, set[str]]:
    mods: dict[str, Path] = {}
    for f in (ROOT / "llmctl").rglob("*.py"):
        rel = f.relative_to(ROOT).with_suffix("")
        mods[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = f
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        for n in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(n, ast.ImportFrom):
                if n.level:
                    base = m.split(".") if f.name == "__init__.py" else m.split(".")[:-1]
                    base = base[: len(base) - n.level + 1]
                    target = ".".join(base + ([n.module] if n.module else []))
                else:
                    target = n.module or ""
                # `from pkg import sub` imports pkg (its __init__) and pkg.sub
                cands = [target] + [f"{target}.{a.name}" for a in n.names]
            elif isinstance(n, ast.Import):
                cands = [a.name for a in n.names]
            else:
                continue
            graph[m].update(c for c in cands if c in mods and c not in (m, "llmctl"))
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(g) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    cycles = import_cycles(_module_graph())
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_layer_contract_holds():
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert exe, "import-linter is a dev dependency (pyproject.toml)"
    r = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout


UI = {"llmctl.cli", "llmctl.__main__"}


def _contracts() -> dict[str, dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    return {c["type"]: c for c in config["contracts"]}


def _top_modules() -> set[str]:
    """Every module and subpackage directly in llmctl/, as pkgutil lists them."""
    return {f"llmctl.{m.name}" for m in pkgutil.iter_modules(llmctl.__path__)}


def test_every_module_is_in_a_layer():
    layers = _contracts()["layers"]["layers"]
    named = [m for layer in layers for m in re.split(r"[|:]", layer) if m.strip()]
    named = [m.strip() for m in named]
    assert len(named) == len(set(named)), "a module is in two layers"
    mods = _top_modules()
    assert {"llmctl.cli", "llmctl.engine_args", "llmctl._version", "llmctl.errors"} <= mods
    assert sorted(mods - set(named)) == [], "modules in no layer of pyproject.toml's [tool.importlinter]"
    assert sorted(set(named) - mods) == [], "layers name modules that do not exist"
    assert layers[:2] == ["llmctl.__main__", "llmctl.cli"]  # the UI on top, alone


def test_nothing_outside_the_ui_may_reach_it_even_indirectly():
    forbidden = _contracts()["forbidden"]
    assert not forbidden.get("allow_indirect_imports", False)
    assert {"rich", "typer", "questionary", "llmctl.cli"} <= set(forbidden["forbidden_modules"])
    assert sorted(_top_modules() - UI - set(forbidden["source_modules"])) == []


def test_version_has_its_own_module():
    """``__version__`` is defined once, in a bottom module the package, the
    renderers and pyproject.toml (hatch's version source) all read."""
    from llmctl import _version

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" in config["project"]["dynamic"] and "version" not in config["project"]
    assert config["tool"]["hatch"]["version"]["path"] == "llmctl/_version.py"
    assert llmctl.__version__ is _version.__version__
    defined = [f for f in (ROOT / "llmctl").rglob("*.py") if re.search(r"^__version__\s*=", f.read_text(encoding="utf-8"), re.M)]
    assert defined == [ROOT / "llmctl" / "_version.py"]
