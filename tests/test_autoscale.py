"""Autoscaling targets from the sizing plan (issue 8): the derivation with
hand-computed values, what gen-config writes, and validate's view of it."""

from __future__ import annotations

import dataclasses

import pytest

import llmctl
from llmctl import sizing
from llmctl.catalog import load_catalog
from llmctl.hardware import GPUS

from helpers import load_yaml, run_cli, serve_file

CATALOG = load_catalog()


def _plan(model: str, gpu: str, tp: int, length: int):
    return sizing.plan_for_gpu(CATALOG[model].architecture, GPUS[gpu], tp=tp, max_model_len=length)


def test_llama_8b_on_l4_tp2_8k_by_hand():
    # Suppose the plan holds 142,560 KV-cache tokens per replica. With 2,048
    # tokens per request: 142,560 / 2,048 = 69.6 -> 69 requests at once (vLLM's
    # max_num_seqs on a 24 GB card is 256, not the limit); target = 69 / 1.25
    # = 55.2 -> 55.
    plan = dataclasses.replace(_plan("llama-3.1-8b-instruct", "L4", 2, 8192), kv_cache_tokens=142_560)
    t = sizing.derive_targets(plan, max_model_len=8192)
    assert (t.capacity, t.max_ongoing_requests, t.target_ongoing_requests) == (69, 69, 55)
    assert "142,560 KV-cache tokens / 2,048 tokens per request = 69" in t.basis and "KV cache bound" in t.basis
    assert t.upscale_delay_s is None  # Serve's default for GPUs


def test_max_num_seqs_caps_the_capacity():
    # 1,000,000 tokens / 1,000 per request = 1,000 > max_num_seqs 256 -> 256; 256 / 1.25 = 204.8 -> 204
    plan = dataclasses.replace(_plan("llama-3.1-8b-instruct", "H100", 1, 8192), kv_cache_tokens=1_000_000)
    t = sizing.derive_targets(plan, max_model_len=8192, expected_tokens=1000, max_num_seqs=256)
    assert (t.max_ongoing_requests, t.target_ongoing_requests) == (256, 204)
    assert "max_num_seqs bound" in t.basis


def test_a_request_never_counts_more_than_max_model_len():
    # expected 8,192 tokens but max_model_len 4,096: 40,960 / 4,096 = 10; 10 / 1.25 = 8
    plan = dataclasses.replace(_plan("qwen2.5-7b-instruct", "L4", 1, 4096), kv_cache_tokens=40_960)
    t = sizing.derive_targets(plan, max_model_len=4096, expected_tokens=8192)
    assert (t.max_ongoing_requests, t.target_ongoing_requests) == (10, 8)


def test_one_request_per_replica_still_scales():
    # 3,000 tokens / 2,048 = 1.46 -> 1; target max(1, 1 / 1.25 -> 0) = 1
    plan = dataclasses.replace(_plan("qwen2.5-7b-instruct", "L4", 1, 4096), kv_cache_tokens=3000)
    t = sizing.derive_targets(plan, max_model_len=4096)
    assert (t.max_ongoing_requests, t.target_ongoing_requests) == (1, 1)


def test_cpu_targets_let_the_tiny_model_scale():
    t = sizing.derive_targets(None, max_model_len=512, cpu=True)
    assert (t.target_ongoing_requests, t.max_ongoing_requests, t.upscale_delay_s) == (2, 3, 5.0)


def test_nothing_derived_without_a_plan_that_fits():
    assert sizing.derive_targets(None, max_model_len=None) is None
    bad = _plan("llama-3.1-70b-instruct", "L4", 1, 8192)
    assert bad.verdict == "does_not_fit" and sizing.derive_targets(bad, max_model_len=8192) is None


def test_ingress_scales_only_for_large_apps():
    assert sizing.ingress_autoscaling([2, 2], [1, 1], [10, 20]) is None  # 4 LLM replicas at most: one ingress
    big = sizing.ingress_autoscaling([4, 2], [1, 1], [10, 20])  # 6 -> ceil(6 / 4) = 2 ingress replicas
    assert (big.min_replicas, big.max_replicas, big.target_ongoing_requests) == (1, 2, 80)  # 4 x 20
    assert sizing.ingress_autoscaling([12], [0], [5]).min_replicas == 0  # scale-to-zero apps keep the ingress at zero too
    assert sizing.ingress_autoscaling([12], [1], [5]).max_replicas == 3


def test_gen_config_writes_targets_with_their_reasons(capsys, tmp_path):
    r = run_cli(capsys, "gen-config", "-m", "llama-3.1-8b-instruct", "--gpu", "L4", "--tp", "2", "--max-model-len", "8k",
                "--min-replicas", "1", "--max-replicas", "8", "--yes", "-o", tmp_path)
    assert r.code == 0, r.err
    path = tmp_path / "model_config" / "llama-3.1-8b-instruct.yaml"
    cfg = load_yaml(path)
    expected = sizing.derive_targets(_plan("llama-3.1-8b-instruct", "L4", 2, 8192), max_model_len=8192)
    assert cfg["deployment_config"]["max_ongoing_requests"] == expected.max_ongoing_requests
    assert cfg["deployment_config"]["autoscaling_config"]["target_ongoing_requests"] == expected.target_ongoing_requests
    assert "# Autoscaling: one replica holds" in path.read_text()
    serve = load_yaml(serve_file(tmp_path))
    ingress = serve["applications"][0]["args"]["ingress_deployment_config"]["autoscaling_config"]
    assert (ingress["min_replicas"], ingress["max_replicas"]) == (1, 2)  # 8 LLM replicas: 2 ingress replicas
    assert "# Ingress autoscaling:" in serve_file(tmp_path).read_text()
    assert run_cli(capsys, "validate", serve_file(tmp_path)).code == 0


def test_flags_win_and_cpu_gets_its_delay(capsys, tmp_path, config_model):
    gen = llmctl.generate(str(config_model), gpu="cpu", min_replicas=1, max_replicas=2, target_ongoing_requests=3,
                          max_ongoing_requests=6, initial_replicas=2, downscale_delay="10s", output_dir=tmp_path)
    cfg = load_yaml(gen.model_files[0])
    asc = cfg["deployment_config"]["autoscaling_config"]
    assert asc == {"min_replicas": 1, "max_replicas": 2, "initial_replicas": 2, "target_ongoing_requests": 3,
                   "upscale_delay_s": 5.0, "downscale_delay_s": 10.0}
    assert cfg["deployment_config"]["max_ongoing_requests"] == 6
    assert "as given" in gen.model_files[0].read_text()


def test_scale_to_zero_is_allowed_with_a_warning(capsys, tmp_path):
    r = run_cli(capsys, "gen-config", "-m", "qwen3-0.6b", "--gpu", "L4", "--min-replicas", "0", "--max-replicas", "2",
                "--yes", "-o", tmp_path)
    assert r.code == 0, r.err
    assert "min_replicas: warning: 0 (scale to zero): after an idle period the first request waits" in r.err
    assert load_yaml(tmp_path / "model_config" / "qwen3-0.6b.yaml")["deployment_config"]["autoscaling_config"]["min_replicas"] == 0


@pytest.mark.parametrize("target,max_ongoing", [(4, 2)])
def test_python_api_refuses_max_below_target(tmp_path, target, max_ongoing):
    from llmctl.errors import UsageError

    with pytest.raises(UsageError, match="max_ongoing_requests .2. must be >= target_ongoing_requests .4."):
        llmctl.generate("qwen3-0.6b", gpu="L4", target_ongoing_requests=target, max_ongoing_requests=max_ongoing,
                        write_files=False)
