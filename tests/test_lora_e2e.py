"""LoRA served end to end (issue 25) on the session's Ray head with vLLM's CPU
build: the tiny model with a LoRA path on the loopback S3 store, one deploy.

- `llmctl check` refuses the adapters vLLM would refuse (rank above
  max_lora_rank, another base model) and names a wrong region (#55502)
  before anything is deployed;
- deployed anyway: a chat completion to ``tiny:adapter-a`` answers;
- an adapter pushed with `llmctl lora push` after the app is RUNNING answers
  on its first request, no redeploy;
- the too-high-rank adapter's request fails, and `llmctl bench` names the cause
  and the fix; `llmctl lora ls` shows what each replica loaded.
Generated text is random: only structure is asserted.
"""

from __future__ import annotations

import time

import httpx
import pytest
import yaml

from helpers import serve_file
from helpers import llmctl

pytestmark = [pytest.mark.cluster, pytest.mark.engine]


def _chat(endpoint: str, model: str) -> httpx.Response:
    return httpx.post(f"{endpoint}/chat/completions", timeout=120, trust_env=False,
                      json={"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})


def test_lora_end_to_end(cluster_home, tiny_model, tiny_loras, s3_store, tmp_path):
    prefix = f"e2e-{s3_store.port}"
    for name in ("adapter-a", "adapter-big", "adapter-other"):
        s3_store.upload(tiny_loras[name], f"{prefix}/{name}")
    env = s3_store.env()  # the shell has the store's settings, as the session's head does
    out = tmp_path / "gen"
    r = llmctl("gen-config", "--model", tiny_model, "--model-id", "tiny", "--gpu", "cpu", "--min-replicas", "1",
               "--max-replicas", "1", "--lora-path", f"s3://{s3_store.bucket}/{prefix}", "--max-lora-rank", "8",
               "--max-lora-adapters", "4", "--app-name", "lora_app", "--route-prefix", "/lora", "--yes", "-o", out, env=env)
    assert r.code == 0, r.err
    serve = serve_file(out)
    assert yaml.safe_load(serve.read_text())["applications"][0]["runtime_env"]["env_vars"]["AWS_DEFAULT_REGION"] == \
        "${AWS_DEFAULT_REGION}"

    # before deploying: check reads the store with the replicas' settings and refuses what vLLM would
    t0 = time.monotonic()
    r = llmctl("check", serve, "--no-versions", env=env)
    check_s = time.monotonic() - t0
    assert r.code == 2, (r.out, r.err)
    assert "adapter tiny:adapter-big: rank 16 is above engine_kwargs.max_lora_rank (8)" in r.err
    assert "adapter tiny:adapter-other: its tensors do not fit tiny" in r.err
    assert "servable: adapter-a" in r.out and "2 LoRA error(s)" in r.err
    j = llmctl("check", serve, "--no-versions", "--json", env=env)  # its JSON: the verdict the exit code gives
    data = j.json()
    assert j.code == 2 and data["ok"] is False and data["preflight_ok"] is True and data["lora"]["ok"] is False, j.out

    # #55502 before deploying: the same app with the region the bucket is not in
    wrong = tmp_path / "serve_wrong_region.yaml"
    doc = yaml.safe_load(serve.read_text())
    doc["applications"][0]["runtime_env"]["env_vars"]["AWS_DEFAULT_REGION"] = "us-east-1"
    wrong.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = llmctl("check", wrong, "--no-versions", env=env)
    assert r.code == 2 and "the store refused a request signed for region us-east-1 (SignatureDoesNotMatch)" in r.err, r.err
    assert "every adapter request answers 404 (ray-project/ray#55502)" in r.err

    # deployed anyway (check is advice; up deploys what is valid)
    t0 = time.monotonic()
    r = llmctl("up", serve, "--timeout", "600", env=env)
    up_s = time.monotonic() - t0
    try:
        assert r.code == 0, (r.out, r.err)
        endpoint = f"{cluster_home.http}/lora/v1"
        assert "LoRA adapters of tiny (request one as model \"tiny:ADAPTER\"): adapter-a, adapter-big, adapter-other" in r.out
        assert '"model": "tiny:adapter-a"' in r.out

        t0 = time.monotonic()
        c = _chat(endpoint, "tiny:adapter-a")
        first_a = time.monotonic() - t0
        assert c.status_code == 200, c.text
        body = c.json()
        assert body["model"] == "tiny:adapter-a" and body["choices"][0]["message"]["role"] == "assistant"
        assert body["usage"]["completion_tokens"] >= 1

        # pushed while RUNNING: its first request answers, nothing redeployed
        before = httpx.get(f"{cluster_home.dashboard_url}/api/serve/applications/", timeout=30, headers=cluster_home.headers).json()
        deployed_at = before["applications"]["lora_app"]["last_deployed_time_s"]
        r = llmctl("lora", "push", tiny_loras["adapter-b"], "lora_app/adapter-b", env=env)
        assert r.code == 0, r.err
        assert 'request it as model "tiny:adapter-b" (no redeploy)' in r.out
        t0 = time.monotonic()
        c = _chat(endpoint, "tiny:adapter-b")
        first_b = time.monotonic() - t0
        assert c.status_code == 200, c.text
        assert c.json()["model"] == "tiny:adapter-b"
        after = httpx.get(f"{cluster_home.dashboard_url}/api/serve/applications/", timeout=30, headers=cluster_home.headers).json()
        assert after["applications"]["lora_app"]["last_deployed_time_s"] == deployed_at
        assert {m["id"] for m in httpx.get(f"{endpoint}/models", timeout=60).json()["data"]} >= {"tiny", "tiny:adapter-b"}

        # an adapter llmctl knows vLLM refuses is not pushed without --force
        r = llmctl("lora", "push", tiny_loras["adapter-big"], "lora_app/adapter-big2", env=env)
        assert r.code == 2 and "not pushed: rank 16 is above engine_kwargs.max_lora_rank (8)" in r.err, r.err

        # deployed anyway, the high-rank adapter fails at query time, and llmctl names why
        c = _chat(endpoint, "tiny:adapter-big")
        assert c.status_code >= 400
        r = llmctl("bench", "lora_app", "--model-id", "tiny:adapter-big", "--requests", "1", "-c", "1", "--max-tokens", "4", env=env)
        assert r.code == 1, (r.out, r.err)
        assert "error: the adapter's LoRA rank 16 is above engine_kwargs.max_lora_rank 8" in r.err
        assert "fix: set engine_kwargs.max_lora_rank: 16 and redeploy" in r.err
        r = llmctl("bench", "lora_app", "--model-id", "tiny:adapter-a", "--requests", "2", "-c", "1", "--max-tokens", "4", "--json", env=env)
        assert r.code == 0 and r.json()["summary"]["done"] == 2, r.err

        # what each replica loaded, and what was refused
        r = llmctl("lora", "ls", "lora_app", env=env)
        assert r.code == 0, r.err
        js = llmctl("lora", "ls", "lora_app", "--json", env=env).json()["models"][0]
        assert js["model_id"] == "tiny" and set(js["available"]) == {"adapter-a", "adapter-b", "adapter-big", "adapter-other"}
        (loaded,) = js["loaded"].values()
        assert {"adapter-a", "adapter-b"} <= set(loaded) and "adapter-big" not in loaded
        assert set(js["problems"]) == {"adapter-big", "adapter-other"}
        assert "lora-rank" in {f["code"] for f in js["failures"]}
        assert "tiny:adapter-a" in r.out and "loaded on" in r.out
        print(f"\nLoRA e2e timings: check {check_s:.1f}s, up {up_s:.1f}s, first tiny:adapter-a {first_a:.2f}s, "
              f"first tiny:adapter-b after push {first_b:.2f}s")
    finally:
        llmctl("down", "lora_app")
