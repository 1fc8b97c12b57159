"""LoRA without an engine (issue 25): tiny adapters built offline, gen-config's
LoRA settings, the store checks of validate --remote against the loopback S3
store (tests/s3store.py), and ray-project/ray#55502 reproduced with Ray's own
LoRA loader: a wrong region or endpoint makes it answer 404."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from helpers import load_yaml, run_cli, serve_file

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _gen(capsys, tmp_path, tiny_model, *extra, env=None, monkeypatch=None):
    out = tmp_path / "gen"
    if monkeypatch is not None:
        for k in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_ACCESS_KEY_ID",
                  "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            monkeypatch.delenv(k, raising=False)
        for k, v in (env or {}).items():
            monkeypatch.setenv(k, v)
    r = run_cli(capsys, "gen-config", "--model", tiny_model, "--model-id", "tiny", "--gpu", "cpu", "--min-replicas", "1",
                "--max-replicas", "1", *extra, "--yes", "-o", out)
    return r, out


# --------------------------------------------------------------------------
# adapters built offline


def test_tiny_adapters(tiny_model, tiny_loras):
    from safetensors import safe_open

    cfgs = {n: json.loads((d / "adapter_config.json").read_text()) for n, d in tiny_loras.items()}
    assert cfgs["adapter-a"]["r"] == 8 and sorted(cfgs["adapter-a"]["target_modules"]) == ["q_proj", "v_proj"]
    assert cfgs["adapter-a"]["base_model_name_or_path"] == str(tiny_model)
    assert cfgs["adapter-b"]["r"] == 4 and len(cfgs["adapter-b"]["target_modules"]) == 7
    assert cfgs["adapter-big"]["r"] == 16
    assert cfgs["adapter-other"]["base_model_name_or_path"] == "llmctl-test/other-tiny-llama"
    for name, d in tiny_loras.items():
        assert sorted(p.name for p in d.iterdir()) == ["adapter_config.json", "adapter_model.safetensors"], name
    with safe_open(str(tiny_loras["adapter-other"] / "adapter_model.safetensors"), "pt") as f:
        key = next(k for k in f.keys() if "q_proj.lora_A" in k)
        assert list(f.get_tensor(key).shape) == [8, 128]  # hidden 128: not the tiny model's 64
    with safe_open(str(tiny_loras["adapter-a"] / "adapter_model.safetensors"), "pt") as f:
        b = f.get_tensor(next(k for k in f.keys() if "lora_B" in k))
        assert float(b.abs().sum()) > 0  # not peft's zero init: the adapter changes the output


def test_tiny_lora_command(capsys, tiny_model, tmp_path):
    r = run_cli(capsys, "tiny-lora", tiny_model, tmp_path / "x", "--rank", "4", "--target-modules", "q_proj,o_proj")
    assert r.code == 0, r.err
    assert "rank 4, targets o_proj, q_proj" in r.out and "next: llmctl lora push" in r.out
    r = run_cli(capsys, "tiny-lora", tiny_model, tmp_path / "x", "--rank", "4")
    assert r.code != 0 and "--force" in r.err
    r = run_cli(capsys, "tiny-lora", tiny_model, tmp_path / "y", "--target-modules", "c_attn")
    assert r.code == 2 and "peft refused the adapter" in r.err and "Traceback" not in r.err


# --------------------------------------------------------------------------
# gen-config


def test_gen_config_lora_settings(capsys, tmp_path, tiny_model, monkeypatch):
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "k",
           "AWS_SECRET_ACCESS_KEY": "dummy-secret-value"}
    r, out = _gen(capsys, tmp_path, tiny_model, "--lora-path", "s3://bucket/loras/", "--max-lora-rank", "8",
                  "--max-lora-adapters", "4", "--max-cpu-loras", "8", env=env, monkeypatch=monkeypatch)
    assert r.code == 0, r.err
    assert "LoRA adapters from s3://bucket/loras, requested as tiny:ADAPTER" in r.out
    assert "AWS_DEFAULT_REGION=${AWS_REGION}" in r.out
    serve = load_yaml(serve_file(out))
    app = serve["applications"][0]
    # by reference, never values; boto3 reads AWS_DEFAULT_REGION only, so it is filled from AWS_REGION
    assert app["runtime_env"] == {"env_vars": {"AWS_ACCESS_KEY_ID": "${AWS_ACCESS_KEY_ID}", "AWS_DEFAULT_REGION": "${AWS_REGION}",
                                               "AWS_ENDPOINT_URL": "${AWS_ENDPOINT_URL}",
                                               "AWS_SECRET_ACCESS_KEY": "${AWS_SECRET_ACCESS_KEY}"}}
    text = "".join(p.read_text() for p in out.rglob("*.yaml"))
    assert "dummy-secret-value" not in text and "127.0.0.1:9" not in text
    cfg = load_yaml(next((out / "model_config").glob("*.yaml")))
    assert cfg["lora_config"] == {"dynamic_lora_loading_path": "s3://bucket/loras", "max_num_adapters_per_replica": 4}
    ek = cfg["engine_kwargs"]
    assert (ek["enable_lora"], ek["max_loras"], ek["max_cpu_loras"], ek["max_lora_rank"]) == (True, 4, 8, 8)
    r = run_cli(capsys, "validate", serve_file(out))
    assert r.code == 0, r.err
    assert "lora-not-checked" not in r.err and "not checked; `llmctl check` or validate --remote reads them" in r.err


@pytest.mark.parametrize("extra,needle", [
    (["--max-loras", "4", "--max-cpu-loras", "2"], "max CPU LoRAs (2) must be >= max LoRAs per batch (4)"),
    (["--lora-env", "AWS_DEFAULT_REGION=eu-west-1"], "--lora-env: 'AWS_DEFAULT_REGION=eu-west-1': expected KEY or KEY=VAR"),
    (["--max-lora-rank", "12"], "max_lora_rank: must be one of 1, 8, 16, 32, 64, 128, 256, 320, 512; got 12"),
])
def test_gen_config_lora_refusals(capsys, tmp_path, tiny_model, monkeypatch, extra, needle):
    r, _ = _gen(capsys, tmp_path, tiny_model, "--lora-path", "s3://bucket/loras", *extra, monkeypatch=monkeypatch)
    assert r.code == 2 and needle in r.err, r.err


def test_gen_config_lora_env_flag_and_none(capsys, tmp_path, tiny_model, monkeypatch):
    r, out = _gen(capsys, tmp_path, tiny_model, "--lora-path", "s3://b/l", "--lora-env", "none",
                  env={"AWS_DEFAULT_REGION": "eu-west-1"}, monkeypatch=monkeypatch)
    assert r.code == 0 and "runtime_env" not in load_yaml(serve_file(out))["applications"][0]
    r = run_cli(capsys, "gen-config", "--model", tiny_model, "--gpu", "cpu", "--max-loras", "2", "--yes", "-o", tmp_path / "n")
    assert r.code == 2 and "--max-loras: needs --lora-path" in r.err


def test_max_loras_above_adapters_per_replica_is_a_warning(capsys, tmp_path, tiny_model, monkeypatch):
    r, out = _gen(capsys, tmp_path, tiny_model, "--lora-path", "s3://b/l", "--max-lora-adapters", "2", "--max-loras", "4",
                  monkeypatch=monkeypatch)
    assert r.code == 0, r.err
    r = run_cli(capsys, "validate", serve_file(out))
    assert r.code == 0 and "max_loras: warning: 4 is above lora_config.max_num_adapters_per_replica (2)" in r.err


# --------------------------------------------------------------------------
# the store, checked before deploying


@pytest.fixture(scope="module")
def loaded_store(s3_store, tiny_loras, tmp_path_factory):
    """The adapters uploaded under s3://llmctl-loras/check/, plus one whose
    target_modules the tiny Llama lacks (a GPT-2 layer name)."""
    odd = tmp_path_factory.mktemp("odd") / "adapter-gpt2"
    odd.mkdir()
    cfg = json.loads((tiny_loras["adapter-a"] / "adapter_config.json").read_text())
    (odd / "adapter_config.json").write_text(json.dumps({**cfg, "target_modules": ["c_attn", "q_proj"]}))
    for name, d in {**tiny_loras, "adapter-gpt2": odd}.items():
        s3_store.upload(d, f"check/{name}")
    return s3_store


def _serve_for(capsys, tmp_path, tiny_model, store, monkeypatch, *extra, **env_over):
    r, out = _gen(capsys, tmp_path, tiny_model, "--lora-path", f"s3://{store.bucket}/check", "--max-lora-rank", "8",
                  "--max-lora-adapters", "4", *extra, env=store.env(**env_over), monkeypatch=monkeypatch)
    assert r.code == 0, r.err
    return serve_file(out)


def test_validate_remote_names_each_bad_adapter(capsys, tmp_path, tiny_model, loaded_store, monkeypatch):
    serve = _serve_for(capsys, tmp_path, tiny_model, loaded_store, monkeypatch)
    r = run_cli(capsys, "validate", "--remote", serve, "--json")
    assert r.code == 2, r.err
    found = {(d["field"], d["code"]) for d in r.json()["diagnostics"] if d["severity"] == "error"}
    assert found == {("adapter tiny:adapter-big", "lora-rank"), ("adapter tiny:adapter-other", "lora-base-model"),
                     ("adapter tiny:adapter-gpt2", "lora-target-modules")}
    r = run_cli(capsys, "validate", "--remote", serve)
    assert f"{serve}: adapter tiny:adapter-big: rank 16 is above engine_kwargs.max_lora_rank (8)" in r.err
    assert "set engine_kwargs.max_lora_rank: 16" in r.err
    assert "adapter tiny:adapter-other: its tensors do not fit tiny (model.layers.0.self_attn.q_proj.lora_A is 8x128, " \
           "the layer is 128x64): trained for another base model (llmctl-test/other-tiny-llama)" in r.err
    assert "adapter tiny:adapter-gpt2: targets c_attn, which LlamaForCausalLM does not have" in r.err
    assert "adapter tiny:adapter-a:" not in r.err and "adapter tiny:adapter-b:" not in r.err
    assert "Traceback" not in r.err and "Found credentials" not in r.err


@pytest.mark.parametrize("over,kind", [
    ({"AWS_DEFAULT_REGION": "us-east-1"}, "region"),
    ({"AWS_DEFAULT_REGION": None, "AWS_REGION": "eu-west-1"}, "region-trap"),
    ({"AWS_ENDPOINT_URL": "http://127.0.0.1:9"}, "endpoint"),
])
def test_55502_wrong_region_or_endpoint_404s_in_ray_and_validate_names_it(capsys, tmp_path, tiny_model, loaded_store,
                                                                          monkeypatch, over, kind):
    """ray-project/ray#55502 on loopback: Ray's own LoRA loader, with the
    replica's settings, answers 404 for an adapter that is in the store; with
    the same settings validate --remote names the cause before any deploy."""
    env = loaded_store.env(**over)
    script = ("import asyncio, sys\nfrom ray.llm._internal.serve.utils.lora_serve_utils import get_lora_model_metadata\n"
              "try:\n    print(asyncio.run(get_lora_model_metadata(sys.argv[1], sys.argv[2])))\n"
              "except Exception as e:\n    print('HTTP', getattr(e, 'status_code', None), getattr(e, 'detail', e))\n")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    p = subprocess.run([sys.executable, "-c", script, "tiny:adapter-a", f"s3://{loaded_store.bucket}/check"],
                       env={**clean, **env}, capture_output=True, text=True, timeout=120)
    last = p.stdout.strip().splitlines()[-1]
    assert last.startswith("HTTP 404 Unable to find LoRA adapter config file"), p.stdout + p.stderr
    if kind == "region":  # and with the right settings, the same loader finds it
        ok = subprocess.run([sys.executable, "-c", script, "tiny:adapter-b", f"s3://{loaded_store.bucket}/check"],
                            env={**clean, **loaded_store.env()}, capture_output=True, text=True, timeout=120)
        assert "'bucket_uri': 's3://llmctl-loras/check/adapter-b'" in ok.stdout, ok.stdout + ok.stderr

    # the region trap: a config that sets AWS_REGION (the workaround #55502 suggests), which boto3 ignores
    extra = ["--lora-env", "AWS_ENDPOINT_URL,AWS_REGION,AWS_ACCESS_KEY_ID,AWS_SECRET_ACCESS_KEY"] if kind == "region-trap" else []
    serve = _serve_for(capsys, tmp_path, tiny_model, loaded_store, monkeypatch, *extra, **over)
    r = run_cli(capsys, "validate", "--remote", serve)
    assert r.code == 2, r.err
    line = next((ln for ln in r.err.splitlines() if "lora_config.dynamic_lora_loading_path" in ln and "404" in ln), r.err)
    assert "every adapter request answers 404 (ray-project/ray#55502)" in line
    if kind == "region":
        assert "the store refused a request signed for region us-east-1 (SignatureDoesNotMatch)" in line
        assert "set AWS_DEFAULT_REGION to the bucket's region" in line
    elif kind == "region-trap":
        assert "AWS_REGION is 'eu-west-1' but boto3, which Ray's LoRA loader uses, reads only AWS_DEFAULT_REGION" in line
    else:
        assert "cannot reach the store at http://127.0.0.1:9" in line and "set AWS_ENDPOINT_URL" in line


def test_an_unset_reference_is_named(capsys, tmp_path, tiny_model, loaded_store, monkeypatch):
    serve = _serve_for(capsys, tmp_path, tiny_model, loaded_store, monkeypatch)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    r = run_cli(capsys, "validate", "--remote", serve)
    assert r.code == 2 and "runtime_env takes AWS_ACCESS_KEY_ID from the environment, where it is unset" in r.err


def test_an_empty_store_is_a_warning(capsys, tmp_path, tiny_model, loaded_store, monkeypatch):
    r, out = _gen(capsys, tmp_path, tiny_model, "--lora-path", f"s3://{loaded_store.bucket}/empty", env=loaded_store.env(),
                  monkeypatch=monkeypatch)
    r = run_cli(capsys, "validate", "--remote", serve_file(out))
    assert r.code == 0 and "no adapters in the store yet" in r.err, r.err


def test_a_gs_store_is_a_note(capsys, tmp_path, tiny_model, monkeypatch):
    r, out = _gen(capsys, tmp_path, tiny_model, "--lora-path", "gs://bucket/loras", monkeypatch=monkeypatch)
    r = run_cli(capsys, "validate", "--remote", serve_file(out))
    assert r.code == 0 and "adapters not checked (llmctl reads s3:// stores" in r.err


# --------------------------------------------------------------------------
# the diagnoses of a refused adapter (vLLM 0.32 / Ray 2.60 messages, captured here)


@pytest.mark.parametrize("text,code,needle,changes", [
    ("ValueError: Failed to load lora model: Call to add_lora method failed: Worker failed with error 'LoRA rank 16 is "
     "greater than max_lora_rank 8.', please check the stack trace above for the root cause",
     "lora-rank", "rank 16 is above engine_kwargs.max_lora_rank 8", {"engine_kwargs.max_lora_rank": 16}),
    ("ValueError: Failed to load lora model: Call to add_lora method failed: Worker failed with error 'The size of tensor "
     "a (64) must match the size of tensor b (128) at non-singleton dimension 1'", "lora-base-model",
     "trained for another base model", None),
    ('{"detail":"Unable to find LoRA adapter config file \\"adapter_config.json\\" in folder s3://b/l/x. Check that the file '
     'exists and that you have read permissions."}', "lora-not-found", "Ray could not read s3://b/l/x/adapter_config.json", None),
])
def test_lora_failure_diagnoses(text, code, needle, changes):
    from llmctl.launch.failures import diagnose

    (d,) = diagnose(text)
    assert d.code == code and needle in d.cause and d.changes == changes


def test_local_adapter_check_before_push(tiny_model, tiny_loras):
    from llmctl.launch.lora import check_local_adapter
    from helpers import cpu_llm

    llm = cpu_llm("tiny", str(tiny_model), engine_kwargs={"enable_lora": True, "max_lora_rank": 8})
    assert check_local_adapter(tiny_loras["adapter-a"], llm, "adapter-a") == []
    assert [c for _, c, _ in check_local_adapter(tiny_loras["adapter-big"], llm, "adapter-big")] == ["lora-rank"]
    assert [c for _, c, _ in check_local_adapter(tiny_loras["adapter-other"], llm, "x")] == ["lora-base-model"]
    assert yaml.safe_dump(llm)  # plain data


def test_push_to_a_store_before_deploying(capsys, s3_store, tiny_loras, monkeypatch):
    for k, v in s3_store.env().items():
        monkeypatch.setenv(k, v)
    r = run_cli(capsys, "lora", "push", tiny_loras["adapter-a"], f"s3://{s3_store.bucket}/pushed/adapter-a")
    assert r.code == 0, r.err
    assert r.out.startswith(f"pushed {tiny_loras['adapter-a']} to s3://{s3_store.bucket}/pushed/adapter-a/ (2 objects)")
    listed = s3_store.client().list_objects_v2(Bucket=s3_store.bucket, Prefix="pushed/adapter-a/")["Contents"]
    assert sorted(o["Key"] for o in listed) == ["pushed/adapter-a/adapter_config.json", "pushed/adapter-a/adapter_model.safetensors"]
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    r = run_cli(capsys, "lora", "push", tiny_loras["adapter-a"], f"s3://{s3_store.bucket}/pushed/adapter-a")
    assert r.code == 2 and "the store refused a request signed for region us-east-1" in r.err
