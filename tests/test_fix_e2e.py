"""The closed loop (issue 11): a tiny-model config whose KV cache is too small
for its max_model_len makes the real vLLM CPU engine fail with its real
message; `up` names max_model_len and vLLM's estimate; `up --fix --yes`
rewrites max_model_len (the old file kept as .bak), the app reaches RUNNING
and answers a chat."""

from __future__ import annotations

import httpx
import pytest
import yaml

from test_launch import cpu_llm, llmctl, write_app

pytestmark = [pytest.mark.cluster, pytest.mark.engine]


def test_up_fix_closes_the_loop(cluster_home, tiny_model, tmp_path):
    llm = cpu_llm("tiny-fix", str(tiny_model))
    llm["engine_kwargs"]["kv_cache_memory_bytes"] = 262144  # 256 KiB: the tiny model needs more for 512 tokens
    llm["deployment_config"]["max_constructor_retry_count"] = 1  # fail after one attempt, not three
    serve = write_app(tmp_path, "fix_app", "/fix", llm)
    model_file = tmp_path / "model_config" / "tiny-fix.yaml"
    try:
        r = llmctl("up", serve, "--timeout", "600")
        assert r.code == 1, (r.out, r.err)
        assert "cause: max_model_len 512 needs" in r.err and "vLLM estimates the longest context that fits at" in r.err, r.err
        assert "fix: set engine_kwargs.max_model_len:" in r.err and "`llmctl up FILE --fix` applies it" in r.err
        assert yaml.safe_load(model_file.read_text())["engine_kwargs"]["max_model_len"] == 512  # nothing changed by itself
        # status and logs say the same for the failed app (from the ended replica's own log)
        st = llmctl("status", "--json")
        (diag,) = st.json()["diagnoses"]["fix_app"]
        assert diag["code"] == "kv-cache-too-small" and diag["changes"]["engine_kwargs.max_model_len"] < 512
        assert "fix_app/tiny-fix: cause: max_model_len 512 needs" in llmctl("status").out
        logs = llmctl("logs", "fix_app", "--lines", "50")
        assert "(ended)]" in logs.out and "fix_app/tiny-fix: fix: set engine_kwargs.max_model_len" in logs.err

        r = llmctl("up", serve, "--fix", "--timeout", "600")  # no terminal, no --yes: shows the diff, changes nothing
        assert r.code == 2 and "+  max_model_len:" in r.err and "pass --yes" in r.err, r.err
        assert yaml.safe_load(model_file.read_text())["engine_kwargs"]["max_model_len"] == 512

        r = llmctl("up", serve, "--fix", "--yes", "--timeout", "600")
        assert r.code == 0, (r.out, r.err)
        fixed = yaml.safe_load(model_file.read_text())["engine_kwargs"]["max_model_len"]
        assert 0 < fixed < 512
        assert yaml.safe_load((tmp_path / "model_config" / "tiny-fix.yaml.bak").read_text())["engine_kwargs"]["max_model_len"] == 512
        assert "fix_app is RUNNING" in r.out and "deploying again" in r.err

        c = httpx.post(f"{cluster_home.http}/fix/v1/chat/completions", timeout=60,
                       json={"model": "tiny-fix", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})
        assert c.status_code == 200 and c.json()["choices"][0]["message"]["role"] == "assistant"
    finally:
        llmctl("down", "fix_app")
