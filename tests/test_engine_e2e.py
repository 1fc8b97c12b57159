"""Engine settings reach vLLM, and an embedding model answers /v1/embeddings
(issue 12), on a real private Ray head with vLLM's CPU build: one app, the
tiny model twice — once generating with engine settings given through
--engine-arg, once under vLLM's pooling runner."""

from __future__ import annotations

import json

import httpx
import pytest

from helpers import serve_file
from test_launch import llmctl

pytestmark = [pytest.mark.cluster, pytest.mark.engine]


def test_engine_args_reach_vllm_and_embeddings_answer(cluster_home, tiny_model, tmp_path):
    out = tmp_path / "gen"
    r = llmctl("gen-config", "-m", tiny_model, "-m", tiny_model, "--model-id", "tiny-chat", "--model-id", "tiny-embed",
               "--gpu", "cpu", "--min-replicas", "1", "--max-replicas", "1",
               "--engine-arg", "1:seed=4321", "--engine-arg", "1:max_num_seqs=3", "--engine-arg", "1:enable_prefix_caching=false",
               "--engine-arg", "2:runner=pooling", "--engine-arg", "2:convert=embed",
               "--app-name", "eng_app", "--route-prefix", "/eng", "--yes", "-o", out)
    assert r.code == 0, r.err
    r = llmctl("up", serve_file(out), "--timeout", "600")
    try:
        assert r.code == 0, (r.out, r.err)
        endpoint = f"{cluster_home.http}/eng/v1"
        assert f"curl {endpoint}/chat/completions" in r.out and f"curl {endpoint}/embeddings" in r.out
        assert "client.embeddings.create(model=\"tiny-embed\"" in r.out

        # the embedding model: one vector of the model's hidden size per input
        hidden = json.loads((tiny_model / "config.json").read_text())["hidden_size"]
        e = httpx.post(f"{endpoint}/embeddings", json={"model": "tiny-embed", "input": ["hello", "world"]}, timeout=60)
        assert e.status_code == 200, e.text
        vectors = [d["embedding"] for d in e.json()["data"]]
        assert len(vectors) == 2 and all(len(v) == hidden and all(isinstance(x, float) for x in v) for v in vectors)

        # the generating model answers, and its engine runs with the settings given
        c = httpx.post(f"{endpoint}/chat/completions", timeout=60,
                       json={"model": "tiny-chat", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})
        assert c.status_code == 200 and c.json()["choices"][0]["message"]["role"] == "assistant"
        logs = llmctl("logs", "eng_app", "--lines", "400")
        assert logs.code == 0, logs.err
        config_lines = [ln for ln in logs.out.splitlines() if "Initializing a V1 LLM engine" in ln and "with config:" in ln]
        chat = [ln for ln in config_lines if "served_model_name=tiny-chat" in ln]
        embed = [ln for ln in config_lines if "served_model_name=tiny-embed" in ln]
        assert chat and embed, config_lines
        assert "seed=4321" in chat[0] and "enable_prefix_caching=False" in chat[0]
        assert "pooler_config=PoolerConfig" in embed[0] and "seed=4321" not in embed[0]
    finally:
        llmctl("down", "eng_app")
