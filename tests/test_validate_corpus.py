"""The validate corpus (issue 14): configs that follow the patterns of public
Ray Serve LLM configs (Ray's release tests and docs, KubeRay samples), each
with the verdict a reader of Ray 2.60's source gives it (tests/data/
validate_corpus/corpus.yaml). validate, run through its real entry point from
the directory the deploy would run from, must accept every valid one (exit 0,
warnings allowed) and reject every broken one (exit 2) — no other exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from helpers import run_cli

CORPUS = Path(__file__).parent / "data" / "validate_corpus"
CASES = yaml.safe_load((CORPUS / "corpus.yaml").read_text())["cases"]


def test_corpus_size_and_sources():
    assert len(CASES) >= 25
    assert {c["verdict"] for c in CASES} == {"valid", "broken"}
    for c in CASES:
        d = CORPUS / c["name"]
        for f in d.rglob("*.yaml"):
            first = f.read_text().splitlines()[0]
            assert first.startswith("# Follows the pattern of https://github.com/"), f
            assert not first.split()[5].endswith("/"), f"{f}: cite a file, not a folder"


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_corpus_verdict(capsys, monkeypatch, case):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(CORPUS / case["name"] / case["cwd"])
    r = run_cli(capsys, "validate", case["file"])
    assert r.code in (0, 2), f"exit {r.code}: {r.err}"
    assert "internal error" not in r.err and "check-failed" not in r.err, r.err
    diags = json.loads(run_cli(capsys, "validate", "--json", case["file"]).out)["diagnostics"]
    if case["verdict"] == "valid":
        assert r.code == 0, f"false positive: {case['reason']}\n{r.err}"
        # the warnings a valid config gets are the ones its table row lists (issue 20)
        assert sorted({d["code"] for d in diags if d["severity"] == "warning"}) == sorted(case.get("warnings", [])), r.err
    else:
        assert r.code == 2, f"missed: {case['reason']}\n{r.err}"
        assert case["expect"].lower() in r.err.lower(), r.err
