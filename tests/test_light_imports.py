"""The command line validates without torch and transformers (llmctl.light_imports).

Ray's LLMConfig module try-imports both; validation needs neither. The console
script hides them while that module loads; these tests check that it gives the
same verdicts as a process that loads them, and that the real entry points do
not load them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import LLMCTL, run_cli
from llmctl import light_imports

CORPUS = Path(__file__).parent / "data" / "validate_corpus"
CASES = [c for f in ("corpus.yaml", "corpus_2026.yaml") for c in yaml.safe_load((CORPUS / f).read_text())["cases"]]

# One process with light imports on validates every corpus case through main(),
# then says which of the hidden libraries ended up loaded.
LIGHT = """
import contextlib, io, json, os, sys
from llmctl import light_imports
from llmctl.cli import main
light_imports.enable()
out = {}
for name, cwd, file in json.loads(sys.argv[1]):
    os.chdir(cwd)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        code = main(["validate", "--json", file])
    out[name] = [code, json.loads(buf.getvalue())["diagnostics"]]
out["@loaded"] = sorted(m for m in light_imports.MODEL_LIBRARIES if sys.modules.get(m) is not None)
out["@llm_config"] = "ray.llm._internal.serve.core.configs.llm_config" in sys.modules
print(json.dumps(out))
"""


def _where(case: dict) -> tuple[str, str, str]:
    return case["name"], str(CORPUS / case["name"] / case["cwd"]), case["file"]


def test_same_verdicts_without_model_libraries(capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    p = subprocess.run([sys.executable, "-c", LIGHT, json.dumps([_where(c) for c in CASES])],
                       capture_output=True, text=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    light = json.loads(p.stdout.splitlines()[-1])
    assert light.pop("@llm_config") is True  # Ray's schema did run
    assert light.pop("@loaded") == []
    full = {}
    for name, cwd, file in map(_where, CASES):
        monkeypatch.chdir(cwd)
        r = run_cli(capsys, "validate", "--json", file)
        full[name] = [r.code, json.loads(r.out)["diagnostics"]]
    # this process loaded Ray's schema with the libraries (the reference side of the comparison)
    assert all(sys.modules.get(m) is not None for m in light_imports.MODEL_LIBRARIES)
    assert {c for c, _ in full.values()} == {0, 2}
    assert light == full


def _imported(cmd: list[str], cwd: Path) -> set[str]:
    p = subprocess.run([sys.executable, "-X", "importtime", *cmd], cwd=cwd, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "HF_HUB_OFFLINE": "1"}, stdin=subprocess.DEVNULL)
    assert p.returncode in (0, 2), p.stderr[-2000:]
    return {ln.rsplit("|", 1)[1].strip() for ln in p.stderr.splitlines() if ln.startswith("import time:") and "|" in ln}


@pytest.mark.parametrize("entry", [[LLMCTL], ["-m", "llmctl"]], ids=["console-script", "python-m"])
def test_entry_points_skip_model_libraries(entry):
    case = next(c for c in CASES if c["verdict"] == "valid")
    name, cwd, file = _where(case)
    mods = _imported([*map(str, entry), "validate", file], Path(cwd))
    assert "ray.llm._internal.serve.core.configs.llm_config" in mods
    # by top-level package: -X importtime does not always print the package's own line (torch's is missing)
    assert not {m.split(".")[0] for m in mods} & {"torch", "transformers"}


def test_hiding_is_scoped(monkeypatch):
    """Only imports inside the block see the libraries missing, and only after enable()."""
    monkeypatch.setattr(light_imports, "_enabled", False)
    for m in light_imports.MODEL_LIBRARIES:
        monkeypatch.delitem(sys.modules, m, raising=False)
    with light_imports.without_model_libraries():
        assert all(m not in sys.modules for m in light_imports.MODEL_LIBRARIES)
    light_imports.enable()
    with light_imports.without_model_libraries():
        for m in light_imports.MODEL_LIBRARIES:
            with pytest.raises(ImportError):
                __import__(m)
    assert all(m not in sys.modules for m in light_imports.MODEL_LIBRARIES)
