"""Issue 22 end to end on the session's local head and the tiny model: an app
generated with ``--api-key-env`` (the session's shared app, conftest.day2_app,
once tests/test_scale_e2e.py has scaled and rolled it) refuses every route
without the key (401 in OpenAI's shape) and serves with it; the key reaches
the ingress by reference only; llmctl's own calls (up's model check, bench,
status) use it; ``check --security`` passes on it (its findings on an app
without a key are checked on the app of tests/test_fix_e2e.py, which saves a
vLLM start)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from conftest import DAY2_APP as APP, DAY2_MODEL as MODEL, DAY2_ROUTE as ROUTE, TEST_API_KEY as KEY, TEST_API_KEY_VAR as KEY_VAR
from conftest import llmctl_without_key as llmctl

# a (fake) Hub token the leak checks look for: no app here holds it
SECRET = "hf_security_check_leak_" + __import__("secrets").token_hex(12)

pytestmark = [pytest.mark.cluster, pytest.mark.engine]

# Ray Serve LLM 2.60's OpenAI ingress routes (DEFAULT_ENDPOINTS), and vLLM-server routes it does not mount
INGRESS_ROUTES = [("GET", "/v1/models"), ("GET", f"/v1/models/{MODEL}"), ("POST", "/v1/completions"),
                  ("POST", "/v1/chat/completions"), ("POST", "/v1/embeddings"), ("POST", "/v1/audio/transcriptions"),
                  ("POST", "/v1/score"), ("POST", "/tokenize"), ("POST", "/detokenize")]
NOT_MOUNTED = [("POST", "/invocations"), ("GET", "/health"), ("GET", "/metrics"), ("GET", "/version")]


@pytest.fixture(scope="module")
def keyed_app(day2_app, ray_head, tiny_model, tmp_path_factory):
    # a variable the head was not started with: refused before anything is deployed
    out = tmp_path_factory.mktemp("other")
    r = llmctl("gen-config", "--model", tiny_model, "--model-id", "tiny", "--gpu", "cpu", "--min-replicas", "1",
               "--max-replicas", "1", "--app-name", "secure_app", "--route-prefix", "/secure", "--yes",
               "--output-dir", out, "--api-key-env", "LLMCTL_KEY_NOT_ON_THE_HEAD")
    assert r.code == 0, r.err
    env = {"LLMCTL_HOME": str(ray_head.home), "LLMCTL_KEY_NOT_ON_THE_HEAD": "x" * 32}
    refused = llmctl("up", next(out.glob("serve_*.yaml")), env=env)
    assert refused.code == 2 and "started without it" in refused.err and "LLMCTL_KEY_NOT_ON_THE_HEAD" in refused.err, refused.err
    return day2_app


def _mounted_routes(base: str) -> list[tuple[str, str]]:
    """Every (method, path) in the app's OpenAPI schema (read with the key), path parameters filled."""
    schema = httpx.get(base + "/openapi.json", headers={"Authorization": f"Bearer {KEY}"}, timeout=30).json()
    routes = [(m.upper(), p.replace("{model}", MODEL).replace("{model:path}", MODEL))
              for p, ops in schema["paths"].items() for m in ops]
    return sorted(set(routes) | set(INGRESS_ROUTES) | {("GET", "/openapi.json"), ("GET", "/docs")})


def _call(base: str, method: str, path: str, key: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    return httpx.request(method, base + path, headers=headers, json={} if method == "POST" else None, timeout=60)


def test_every_route_refuses_a_request_without_the_key(keyed_app):
    base = keyed_app["http"]
    routes = _mounted_routes(base)
    assert {("POST", "/tokenize"), ("POST", "/v1/embeddings"), ("POST", "/v1/chat/completions")} <= set(routes)
    for method, path in routes + NOT_MOUNTED:
        for key in (None, "wrong-" + KEY):
            r = _call(base, method, path, key)
            assert r.status_code == 401, (method, path, key is not None, r.status_code)
            err = r.json()["error"]  # OpenAI's error shape
            assert err["code"] == "invalid_api_key" and err["type"] == "invalid_request_error" and err["message"]
        right = _call(base, method, path, KEY)
        assert right.status_code not in (401, 403), (method, path, right.status_code)
    # with the key: the models listed, a real completion (text is random: only its shape)
    auth = {"Authorization": f"Bearer {KEY}"}
    assert [m["id"] for m in httpx.get(base + "/v1/models", headers=auth, timeout=30).json()["data"]] == [MODEL]
    c = httpx.post(base + "/v1/chat/completions", headers=auth, timeout=120,
                   json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
    assert c.status_code == 200 and isinstance(c.json()["choices"][0]["message"]["content"], str)
    # Serve's proxy health checks are the proxy's own: they stay open
    root = base[: -len(ROUTE)]
    assert httpx.get(root + "/-/healthz", timeout=30).status_code == 200


def test_key_reaches_the_ingress_by_reference_only(keyed_app, cluster_home):
    api = httpx.get(cluster_home.dashboard_url + "/api/serve/applications/", headers=cluster_home.headers, timeout=30)
    assert KEY not in api.text
    cfg = api.json()["applications"][APP]["deployed_app_config"]
    assert cfg["args"]["ingress_cls_config"] == {"ingress_cls": "llmctl_apikey:ApiKeyIngress",
                                                 "ingress_extra_kwargs": {"api_key_env": KEY_VAR}}
    mods = cfg["runtime_env"]["py_modules"]
    assert len(mods) == 1 and mods[0].startswith("gcs://_ray_pkg_")
    for path in ("/api/v0/tasks?detail=1&limit=10000", "/api/v0/actors?detail=1&limit=10000", "/api/v0/runtime_envs?detail=1"):
        assert KEY not in httpx.get(cluster_home.dashboard_url + path, headers=cluster_home.headers, timeout=60).text, path
    session = Path(cluster_home.state.temp_dir)
    leaked = [str(p) for p in session.rglob("*") if p.is_file() and not p.is_symlink() and KEY.encode() in p.read_bytes()]
    assert not leaked, leaked


def test_llmctl_uses_the_key(keyed_app, cluster_home):
    up = keyed_app["up"]
    assert f'Authorization: Bearer ${KEY_VAR}' in up.out and f'os.environ["{KEY_VAR}"]' in up.out
    assert "uploaded to the cluster" in up.err and KEY not in up.out + up.err
    env = {"LLMCTL_HOME": str(cluster_home.home)}
    st = llmctl("status", "--json", env=env)
    app = next(a for a in st.json()["applications"] if a["name"] == APP)
    assert app["api_key_env"] == KEY_VAR and KEY not in st.out
    b = llmctl("bench", APP, "--requests", "2", "--concurrency", "1", "--max-tokens", "4", "--json", env=env)
    assert b.code == 0, b.err
    data = b.json()
    assert data["summary"]["done"] == 2 and data["summary"]["failed"] == 0 and KEY not in b.out
    # the engines' prefix-cache lookups, read once Ray exported them: every answered prompt token looked up once
    pc, s = data["summary"]["prefix_cache"], data["summary"]
    assert pc["complete"] is True and pc["queries"] >= s["done"] * s["prompt_tokens_mean"] > 0, pc
    # ... and what the app's one engine counted, by deployment
    (llm,) = [d for d in s["engines"] if d.startswith("LLMServer:")]
    e = s["engines"][llm]
    assert e["replicas"] == 1 and e["requests"] >= 2 and e["generation_tokens"] >= 2 and e["ttft_mean_s"] > 0, e
    # an endpoint given by URL: the key by --api-key-env, or a one-line refusal naming the flag
    nokey = llmctl("bench", "--url", keyed_app["endpoint"], "--requests", "1", env=env)
    assert nokey.code == 2 and "--api-key-env" in nokey.err and "401" in nokey.err, nokey.err
    withkey = llmctl("bench", "--url", keyed_app["endpoint"], "--requests", "1", "--max-tokens", "4", "--api-key-env", "MY_KEY",
                     "--json", env={**env, "MY_KEY": KEY})
    assert withkey.code == 0 and withkey.json()["summary"]["done"] == 1, withkey.err


def _rows(run) -> list[dict]:
    return run.json()["rows"]


def test_check_security_passes_on_the_keyed_app(keyed_app, cluster_home):
    env = {"LLMCTL_HOME": str(cluster_home.home), "HF_TOKEN": SECRET}
    r = llmctl("security", APP, "--json", env=env)
    assert r.code == 0, r.out + r.err
    rows = _rows(r)
    (length,) = [row for row in rows if row["area"] == "endpoint" and row["check"] == "API key length"]
    assert "characters" in length["result"] and not length["finding"], length
    route_rows = [row for row in rows if row["area"] == "endpoint" and row is not length]
    routes = {row["target"].split(" ", 1)[1] for row in route_rows}
    assert {"POST /tokenize", "POST /v1/embeddings", "POST /invocations", "GET /v1/models", "GET /openapi.json"} <= routes
    assert all("no key 401, wrong key 401" in row["result"] for row in route_rows)
    dash = [row for row in rows if row["area"] == "dashboard"]
    assert dash and all(row["result"].startswith(("HTTP 401", "HTTP 403")) for row in dash)
    leaks = [row for row in rows if row["area"] == "leak"]
    assert len(leaks) >= 5 and all(row["result"] == "clean" for row in leaks), leaks
    assert KEY not in r.out and SECRET not in r.out
    table = llmctl("check", "--security", APP, env=env)  # the table, through the old spelling (an alias)
    assert table.code == 0 and "no findings" in table.out and "POST /invocations" in table.out
    assert table.err.splitlines()[0] == "note: `llmctl check --security` is now `llmctl security`"
