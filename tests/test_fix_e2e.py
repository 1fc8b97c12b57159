"""The closed loop (issue 11): a tiny-model config whose KV cache is too small
for its max_model_len makes the real vLLM CPU engine fail with its real
message; `up` names max_model_len and vLLM's estimate; `up --fix --yes`
rewrites max_model_len (the old file kept as .bak), the app reaches RUNNING
and answers a chat.

The app has no API key and carries a (fake) Hub token sent as a value (`up
--send-token`): once it runs, `check --security` names each finding on it
(issue 22; the keyed app's clean check is in tests/test_security_e2e.py).
One app for both saves the suite a vLLM start."""

from __future__ import annotations

import secrets

import httpx
import pytest
import yaml

from helpers import cpu_llm, llmctl, write_app

pytestmark = [pytest.mark.cluster, pytest.mark.engine]

APP = "fix_app"
TOKEN_VAR = "LLMCTL_LEAKED_TOKEN"
# a (fake) Hub token sent as a value: its own, so no other module's leak checks see it
SECRET = "hf_security_check_leak_" + secrets.token_hex(12)


@pytest.fixture(scope="module")
def fix_app(ray_head):
    """The app's state, filled by the closed loop; deleted after the module."""
    state: dict = {}
    yield state
    llmctl("down", APP, env={"LLMCTL_HOME": str(ray_head.home)})


def test_up_fix_closes_the_loop(fix_app, cluster_home, tiny_model, tmp_path, monkeypatch):
    monkeypatch.setenv(TOKEN_VAR, SECRET)
    llm = cpu_llm("tiny-fix", str(tiny_model))
    llm["engine_kwargs"]["kv_cache_memory_bytes"] = 262144  # 256 KiB: the tiny model needs more for 512 tokens
    llm["deployment_config"]["max_constructor_retry_count"] = 1  # fail after one attempt, not three
    llm["runtime_env"] = {"env_vars": {"HF_TOKEN": "${%s}" % TOKEN_VAR}}
    serve = write_app(tmp_path, APP, "/fix", llm)
    model_file = tmp_path / "model_config" / "tiny-fix.yaml"
    # (the app is deleted by the fixture, after the security check below)
    r = llmctl("up", serve, "--send-token", "--timeout", "600")
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

    r = llmctl("up", serve, "--send-token", "--fix", "--timeout", "600")  # no terminal, no --yes: shows the diff, changes nothing
    assert r.code == 2 and "+  max_model_len:" in r.err and "pass --yes" in r.err, r.err
    assert yaml.safe_load(model_file.read_text())["engine_kwargs"]["max_model_len"] == 512

    r = llmctl("up", serve, "--send-token", "--fix", "--yes", "--timeout", "600")
    assert r.code == 0, (r.out, r.err)
    fixed = yaml.safe_load(model_file.read_text())["engine_kwargs"]["max_model_len"]
    assert 0 < fixed < 512
    assert yaml.safe_load((tmp_path / "model_config" / "tiny-fix.yaml.bak").read_text())["engine_kwargs"]["max_model_len"] == 512
    assert "fix_app is RUNNING" in r.out and "deploying again" in r.err

    c = httpx.post(f"{cluster_home.http}/fix/v1/chat/completions", timeout=60,
                   json={"model": "tiny-fix", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})
    assert c.status_code == 200 and c.json()["choices"][0]["message"]["role"] == "assistant"
    assert SECRET not in r.out + r.err
    fix_app["running"] = True


def test_check_security_names_each_finding_on_an_app_without_a_key(fix_app, cluster_home):
    """The fixed app: no API key, the Hub token sent as a value."""
    if not fix_app.get("running"):
        pytest.skip("fix_app is not running: test_up_fix_closes_the_loop failed before it was")
    r = llmctl("security", APP, "--json", env={"HF_TOKEN": SECRET})
    assert r.code == 2, r.out + r.err
    found = {(row["area"], row["target"]) for row in r.json()["rows"] if row["finding"]}
    for method, path in (("GET", "/v1/models"), ("POST", "/v1/chat/completions"), ("POST", "/tokenize"),
                         ("POST", "/v1/embeddings"), ("GET", "/openapi.json")):
        assert ("endpoint", f"{APP} {method} {path}") in found, (method, path, found)
    assert ("endpoint", f"{APP} POST /invocations") not in found  # not mounted: 404 is not a finding
    assert ("leak", "the deployed configs (GET /api/serve/applications/)") in found, found
    assert not any(area == "dashboard" for area, _ in found)  # the head keeps its token
    assert SECRET not in r.out + r.err
    table = llmctl("check", "--security", APP, env={"HF_TOKEN": SECRET})
    assert table.code == 2 and "FINDING" in table.out and "finding(s)" in table.err and SECRET not in table.out
