"""Data-parallel and prefill/decode apps on a real private Ray head with vLLM's
CPU build (issue 40), written by gen-config and deployed by `llmctl up`.

- DP 2 of the tiny mixture of experts (build_dp_openai_app, expert
  parallelism): both ranks start as one gang behind one OpenAI endpoint.
  vLLM's CPU build then cannot run a forward pass over DP ranks: every MoE
  layer all-gathers the ranks' tokens and its CPU communicator has no
  all_gatherv (``NotImplementedError`` in
  ``vllm/distributed/device_communicators/base_device_communicator.py``,
  vLLM 0.32 CPU). The test proves everything up to the engine start and that
  the first request fails with exactly that error of the engine's, which
  `llmctl logs` shows from the ranks' worker processes; if a vLLM
  release runs it, the test sees the answer instead (docs/dp-pd.md).
- P/D 1:1 of the tiny Llama with vLLM's ExampleConnector (NIXL and LMCache
  need CUDA): the decode pool answers through the ingress after the prefill
  pool ran the prompt, and reports the connector's cache hit.
"""

from __future__ import annotations

import json


import httpx
import pytest

from helpers import llmctl, serve_file

pytestmark = [pytest.mark.cluster, pytest.mark.engine, pytest.mark.long]  # make test-long: two apps of gang-scheduled or paired engines

# the engine's own words when the CPU build reaches the MoE all-gather (see the module doc)
CPU_DP_ERROR = ("base_device_communicator.py", "in all_gatherv", "NotImplementedError")


@pytest.fixture(scope="module")
def tiny_moe(tmp_path_factory):
    pytest.importorskip("transformers")
    from llmctl.tinymodel import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("models") / "tiny-moe", moe=True)


def _chat(endpoint: str, model: str) -> httpx.Response:
    return httpx.post(f"{endpoint}/chat/completions", timeout=300,
                      json={"model": model, "messages": [{"role": "user", "content": "Hello there"}], "max_tokens": 8})


def test_dp2_tiny_moe_is_one_gang_behind_one_endpoint(cluster_home, tiny_moe, tmp_path):
    out = tmp_path / "dp"
    r = llmctl("gen-config", "-m", tiny_moe, "--model-id", "tiny-moe-dp", "--gpu", "cpu", "--dp", "2",
               "--min-replicas", "1", "--max-replicas", "1", "--app-name", "dp_app", "--route-prefix", "/dp", "--yes", "-o", out)
    assert r.code == 0, r.err
    ek = next((out / "model_config").glob("*.yaml")).read_text()
    assert "data_parallel_size: 2" in ek and "enable_expert_parallel: true" in ek
    r = llmctl("up", serve_file(out), "--timeout", "900", timeout=1000)
    try:
        assert r.code == 0, (r.out, r.err)
        st = llmctl("status", "--json")
        app = next(a for a in st.json()["applications"] if a["name"] == "dp_app")
        dep = next(d for d in app["deployments"] if d["name"] == "DPServer:tiny-moe-dp")
        assert dep["replicas"] == {"RUNNING": 2}, dep  # one group of two ranks
        assert dep["part"] == "DP groups of 2 ranks: 1 whole group(s) running"
        endpoint = f"{cluster_home.http}/dp/v1"
        models = httpx.get(f"{endpoint}/models", timeout=60)
        assert models.status_code == 200 and [m["id"] for m in models.json()["data"]] == ["tiny-moe-dp"]
        reply = _chat(endpoint, "tiny-moe-dp")
        if reply.status_code == 200:  # a vLLM whose CPU build runs DP over MoE layers
            assert reply.json()["choices"][0]["message"]["content"] is not None
            return
        # the replica answers with the engine's death ...
        assert "EngineDeadError" in reply.text, (reply.status_code, reply.text[-2000:])
        # ... and `llmctl logs` shows the engine's own root cause: the traceback of a rank's worker process
        logs = llmctl("logs", "dp_app", "--lines", "300")
        assert logs.code == 0, logs.err
        rank_lines = [ln for ln in logs.out.splitlines() if ln.startswith("[stdout DPServer:tiny-moe-dp ")]
        assert all(any(part in ln for ln in rank_lines) for part in CPU_DP_ERROR), logs.out[-3000:]
    finally:
        llmctl("down", "dp_app")


def test_pd_1_to_1_answers_through_the_decode_pool(cluster_home, tiny_model, tmp_path):
    store = tmp_path / "kv"
    kv = ('kv_transfer_config={"kv_connector": "ExampleConnector", "kv_role": "kv_both", '
          f'"kv_connector_extra_config": {{"shared_storage_path": "{store}"}}}}')
    out = tmp_path / "pd"
    r = llmctl("gen-config", "-m", tiny_model, "--model-id", "tiny-pd", "--gpu", "cpu", "--pd", "1:1", "--engine-arg", kv,
               "--min-replicas", "1", "--max-replicas", "1", "--app-name", "pd_app", "--route-prefix", "/pd", "--yes", "-o", out)
    assert r.code == 0, r.err
    assert sorted(p.name for p in (out / "model_config").glob("*.yaml")) == ["tiny-pd-decode.yaml", "tiny-pd-prefill.yaml"]
    r = llmctl("up", serve_file(out), "--timeout", "900", timeout=1000)
    try:
        assert r.code == 0, (r.out, r.err)
        st = llmctl("status", "--json")
        app = next(a for a in st.json()["applications"] if a["name"] == "pd_app")
        assert app["model_ids"] == ["tiny-pd"]
        parts = {d["name"]: d["part"] for d in app["deployments"]}
        assert parts == {"Prefill:tiny-pd": "prefill pool", "Decode:tiny-pd": "decode pool", "OpenAiIngress": ""}
        reply = _chat(f"{cluster_home.http}/pd/v1", "tiny-pd")
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert body["model"] == "tiny-pd" and body["usage"]["completion_tokens"] >= 1
        assert any(store.rglob("*.safetensors")), "the prefill pool stored no KV cache"
        logs = llmctl("logs", "pd_app", "--lines", "3000")
        assert "External Cache Hit!" in logs.out  # ExampleConnector on the decode side found prefill's blocks
        # bench reports per pool, from each pool's engine: the prefill pool runs each prompt for one token, the decode pool generates
        b = llmctl("bench", "pd_app", "--requests", "4", "-c", "2", "--max-tokens", "8", "--json", timeout=600)
        assert b.code == 0, b.err
        eng = b.json()["summary"]["engines"]
        pre, dec = eng["Prefill:tiny-pd"], eng["Decode:tiny-pd"]
        assert pre["requests"] >= 4 and dec["requests"] >= 4, eng
        assert pre["generation_tokens"] <= pre["requests"] < dec["generation_tokens"], eng
        text = llmctl("bench", "pd_app", "--requests", "2", "--max-tokens", "4")
        assert text.code == 0 and "Prefill:tiny-pd engines" in text.out and "Decode:tiny-pd engines" in text.out, text.out
        # a sweep step keeps the pools' TTFT histograms apart: each pool counts every request the step answered
        sw = llmctl("bench", "pd_app", "--sweep", "2", "--duration", "4", "--max-tokens", "8", "--prompt-tokens", "32",
                    "--output", tmp_path / "pd_sweep.json", timeout=600)
        assert sw.code == 0, sw.err
        summ = json.loads((tmp_path / "pd_sweep.json").read_text())["steps"][0]["summary"]
        by = summ["engine_ttft_by_deployment_s"]
        assert set(by) == {"Prefill:tiny-pd", "Decode:tiny-pd"} and summ["engine_ttft_s"] is None, summ
        assert by["Prefill:tiny-pd"]["requests"] >= summ["done"] and by["Decode:tiny-pd"]["requests"] >= summ["done"], summ
    finally:
        llmctl("down", "pd_app")
