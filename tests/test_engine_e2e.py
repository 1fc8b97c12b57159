"""Engine settings reach vLLM, and an embedding model answers /v1/embeddings
(issue 12), on a real private Ray head with vLLM's CPU build: the tiny model
under vLLM's pooling runner, with engine settings given through --engine-arg
(one engine: a generating model answers in tests/test_launch.py, and
--engine-arg's MODEL: targeting is checked on the files in
tests/test_engine_settings.py)."""

from __future__ import annotations

import json

import httpx
import pytest

from helpers import serve_file
from helpers import llmctl

pytestmark = [pytest.mark.cluster, pytest.mark.engine]


def test_engine_args_reach_vllm_and_embeddings_answer(cluster_home, tiny_model, tmp_path):
    out = tmp_path / "gen"
    r = llmctl("gen-config", "-m", tiny_model, "--model-id", "tiny-embed", "--gpu", "cpu", "--min-replicas", "1",
               "--max-replicas", "1", "--engine-arg", "seed=4321", "--engine-arg", "max_num_seqs=3",
               "--engine-arg", "runner=pooling", "--engine-arg", "convert=embed",
               "--app-name", "eng_app", "--route-prefix", "/eng", "--yes", "-o", out)
    assert r.code == 0, r.err
    r = llmctl("up", serve_file(out), "--timeout", "600")
    try:
        assert r.code == 0, (r.out, r.err)
        endpoint = f"{cluster_home.http}/eng/v1"
        assert f"curl {endpoint}/embeddings" in r.out
        assert "client.embeddings.create(model=\"tiny-embed\"" in r.out

        # the embedding model: one vector of the model's hidden size per input
        hidden = json.loads((tiny_model / "config.json").read_text())["hidden_size"]
        e = httpx.post(f"{endpoint}/embeddings", json={"model": "tiny-embed", "input": ["hello", "world"]}, timeout=60)
        assert e.status_code == 200, e.text
        vectors = [d["embedding"] for d in e.json()["data"]]
        assert len(vectors) == 2 and all(len(v) == hidden and all(isinstance(x, float) for x in v) for v in vectors)

        # its engine runs with the settings given: vLLM's own config line, from the replica's log
        logs = llmctl("logs", "eng_app", "--lines", "400")
        assert logs.code == 0, logs.err
        config_lines = [ln for ln in logs.out.splitlines() if "Initializing a V1 LLM engine" in ln and "with config:" in ln]
        found = [ln for ln in config_lines if "served_model_name=tiny-embed" in ln]
        assert len(found) == 1, config_lines
        embed = found[0]
        assert "seed=4321" in embed and "pooler_config=PoolerConfig" in embed, embed
    finally:
        llmctl("down", "eng_app")
