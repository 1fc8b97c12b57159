"""Bad input: exit 2, one clear line naming the flag / file:line: field, no
traceback, no file written. Flags and files, in one table each."""

from __future__ import annotations

import subprocess
import textwrap

import pytest

from helpers import LLMCTL, files_under, make_model_dir, run_cli

# (id, args, expected stderr line). All run with --yes except the no-TTY ones.
FLAG_CASES = [
    ("unknown-model", ["-m", "nope-model", "--gpu", "L4"],
     "error: --model: unknown model 'nope-model': use a catalog id (`llmctl models`), an HF repo id (org/name), "
     "a local directory with config.json, or s3://… / gs://…"),
    ("close-model-name", ["-m", "qwen3-8", "--gpu", "L4"],
     "error: --model: unknown model 'qwen3-8' (did you mean 'qwen3-8b'?): use a catalog id (`llmctl models`), an HF repo id "
     "(org/name), a local directory with config.json, or s3://… / gs://…"),
    ("missing-local-dir", ["-m", "./missing-dir", "--gpu", "cpu"], "error: --model: ./missing-dir: no such directory"),
    ("dir-without-config", ["-m", "{empty_dir}", "--gpu", "cpu"], "error: --model: {empty_dir}: directory has no config.json"),
    ("tp-3-for-32-heads", ["-m", "llama-3.1-8b-instruct", "--gpu", "L4", "--tp", "3"],
     "error: --tp: TP 3 does not divide the 32 attention heads (valid: 1, 2, 4, 8)"),
    ("tp-not-a-number", ["-m", "qwen3-0.6b", "--gpu", "L4", "--tp", "two"],
     "error: --tp: tensor-parallel size must be an integer, got 'two'"),
    ("tp-over-node", ["-m", "llama-3.1-70b-instruct", "--gpu", "H100", "--tp", "16"],
     "error: --tp: TP 16 is more than one H100 node's 8 GPUs: tensor parallelism stays within a node; use TP <= 8 and pipeline_parallel_size for the other nodes"),
    ("tp-on-cpu", ["-m", "qwen3-0.6b", "--gpu", "cpu", "--tp", "2"],
     "error: --tp: TP 2 x PP 1 = 2 workers, but a CPU-only replica runs one engine worker"),
    ("min-over-max", ["-m", "qwen3-0.6b", "--gpu", "L4", "--min-replicas", "3", "--max-replicas", "2"],
     "error: --max-replicas: min_replicas (3) must be <= max_replicas (2): the autoscaler never goes below min_replicas"),
    ("negative-replicas", ["-m", "qwen3-0.6b", "--gpu", "L4", "--min-replicas", "-1"],
     "error: --min-replicas: min replicas must be >= 0, got -1"),
    ("zero-max-replicas", ["-m", "qwen3-0.6b", "--gpu", "L4", "--max-replicas", "0"],
     "error: --max-replicas: max replicas must be >= 1, got 0"),
    ("unknown-gpu", ["-m", "qwen3-0.6b", "--gpu", "FOO"],
     "error: --gpu: unknown GPU type 'FOO'; choose one of: L4, A10G, L40S, A100-40G, A100-80G, H100, H200, B200, B300, cpu"),
    ("max-model-len-text", ["-m", "qwen3-0.6b", "--gpu", "L4", "--max-model-len", "abc"],
     "error: --max-model-len: max_model_len must be an integer, got 'abc'"),
    ("max-model-len-too-long", ["-m", "llama-3.1-8b-instruct", "--gpu", "H100", "--max-model-len", "200000"],
     "error: --max-model-len: max_model_len 200000 exceeds the model's context of 131072 tokens "
     "(max_position_embeddings 131072, rope_scaling llama3)"),
    ("local-lora-path", ["-m", "qwen3-0.6b", "--gpu", "L4", "--lora-path", "/data/lora"],
     "error: --lora-path: LoRA path '/data/lora' must be a remote URI (s3://, gs://, abfss:// or azure://): "
     "Ray Serve LLM downloads adapters from cloud storage"),
    ("lora-adapters-without-path", ["-m", "qwen3-0.6b", "--gpu", "L4", "--max-lora-adapters", "4"],
     "error: --max-lora-adapters: needs --lora-path (LoRA settings apply only when adapters are served)"),
    ("lora-rank-without-path", ["-m", "qwen3-0.6b", "--gpu", "L4", "--max-lora-rank", "64"],
     "error: --max-lora-rank: needs --lora-path (LoRA settings apply only when adapters are served)"),
    ("gpu-mem-util-on-cpu", ["-m", "qwen3-0.6b", "--gpu", "cpu", "--gpu-memory-utilization", "0.8"],
     "error: --gpu-memory-utilization: does not apply to --gpu cpu (vLLM's CPU build sizes its KV cache with "
     "kv_cache_memory_bytes, which llmctl sets)"),
    ("pp-over-layers", ["-m", "qwen3-0.6b", "--gpu", "H100", "--pp", "40"],
     "error: --pp: PP 40 exceeds the model's 28 layers"),
    ("token-instead-of-name", ["-m", "llama-3.2-1b-instruct", "--gpu", "L4", "--hf-token-env", "hf_" + "a" * 34],
     "error: --hf-token-env: that looks like a token; give the NAME of the environment variable that holds it (e.g. HF_TOKEN)"),
    ("bad-env-name", ["-m", "llama-3.2-1b-instruct", "--gpu", "L4", "--hf-token-env", "1TOKEN"],
     "error: --hf-token-env: '1TOKEN' is not an environment variable name (letters, digits, '_'; not starting with a digit)"),
    ("route-without-slash", ["-m", "qwen3-0.6b", "--gpu", "L4", "--route-prefix", "api"],
     "error: --route-prefix: route prefix 'api' must start with '/'"),
    ("bad-app-name", ["-m", "qwen3-0.6b", "--gpu", "L4", "--app-name", "bad!name"],
     "error: --app-name: app name 'bad!name' must start with a letter or digit and use only letters, digits, '_', '.', '-'"),
    ("duplicate-model-ids", ["-m", "qwen3-0.6b", "-m", "qwen3-4b", "--model-id", "a", "--model-id", "a", "--gpu", "L4"],
     "error: --model-id: duplicate model id 'a'; give each model a distinct --model-id"),
    ("flag-count-mismatch", ["-m", "qwen3-0.6b", "-m", "qwen3-4b", "-m", "qwen3-8b", "--tp", "1", "--tp", "1", "--gpu", "L4"],
     "error: --tp given 2 times for 3 models; give it once (for all) or once per --model"),
    ("gpu-mem-util-range", ["-m", "qwen3-0.6b", "--gpu", "L4", "--gpu-memory-utilization", "1.5"],
     "error: --gpu-memory-utilization: gpu_memory_utilization must be a fraction in (0, 1], got 1.5"),
    ("max-below-target-flags", ["-m", "qwen3-0.6b", "--gpu", "L4", "--target-ongoing-requests", "8", "--max-ongoing-requests", "4"],
     "error: --max-ongoing-requests: max_ongoing_requests (4) must be >= target_ongoing_requests (8): a replica never gets "
     "more than max_ongoing_requests, so the target could never be reached and Serve would not scale up"),
    ("initial-over-max", ["-m", "qwen3-0.6b", "--gpu", "L4", "--max-replicas", "2", "--initial-replicas", "3"],
     "error: --initial-replicas: initial replicas (3) must be between min_replicas (1) and max_replicas (2)"),
    ("bad-delay", ["-m", "qwen3-0.6b", "--gpu", "L4", "--upscale-delay", "soon"],
     "error: --upscale-delay: upscale delay must be a number of seconds (30, 30s, 1m), got 'soon'"),
    ("zero-expected-tokens", ["-m", "qwen3-0.6b", "--gpu", "L4", "--expected-tokens", "0"],
     "error: --expected-tokens: expected tokens per request must be >= 1, got 0"),
    ("unknown-flag", ["-m", "qwen3-0.6b", "--gpu", "L4", "--bogus"],
     "error: No such option: --bogus (Possible options: --gpu, --osl) (see 'llmctl gen-config --help')"),
]

# `llmctl plan` takes the same bad values through the same parsers: the same
# line as gen-config's (the gen-config case of the same id above).
PLAN_CASES = [
    ("tp-3-for-32-heads", ["--model", "llama-3.1-8b-instruct", "--gpu", "L4", "--tp", "3"]),
    ("tp-not-a-number", ["--model", "qwen3-0.6b", "--gpu", "L4", "--tp", "two"]),
    ("tp-over-node", ["--model", "llama-3.1-70b-instruct", "--gpu", "H100", "--tp", "16"]),
    ("unknown-gpu", ["--model", "qwen3-0.6b", "--gpu", "FOO"]),
    ("unknown-model", ["--model", "nope-model", "--gpu", "L4"]),
    ("max-model-len-too-long", ["--model", "llama-3.1-8b-instruct", "--gpu", "H100", "--max-model-len", "200000"]),
    ("max-model-len-text", ["--model", "qwen3-0.6b", "--gpu", "L4", "--max-model-len", "abc"]),
    ("gpu-mem-util-range", ["--model", "qwen3-0.6b", "--gpu", "L4", "--gpu-memory-utilization", "1.5"]),
    ("pp-over-layers", ["--model", "qwen3-0.6b", "--gpu", "H100", "--pp", "40"]),
]

NO_TTY_CASES = [
    ("no-tty-no-model", ["--gpu", "L4"], "error: no model given and no terminal to ask on; pass --model"),
    ("no-tty-no-gpu", ["-m", "qwen3-0.6b", "--yes"], "error: no GPU type given and no terminal to ask on; pass --gpu"),
    ("no-tty-no-yes", ["-m", "qwen3-0.6b", "--gpu", "L4"],
     "error: no model id given and no terminal to ask on; pass --model-id (or --yes to accept the default)"),
]


@pytest.mark.parametrize("case_id,args,expected", FLAG_CASES, ids=[c[0] for c in FLAG_CASES])
def test_bad_flag(capsys, tmp_path, case_id, args, expected):
    empty = tmp_path / "empty"
    empty.mkdir()
    args = [a.replace("{empty_dir}", str(empty)) for a in args]
    expected = expected.replace("{empty_dir}", str(empty))
    out = tmp_path / "out"
    r = run_cli(capsys, "gen-config", *args, "--yes", "-o", out)
    assert r.code == 2
    assert r.err.strip() == expected
    assert "Traceback" not in r.err
    assert files_under(out) == []


@pytest.mark.parametrize("case_id,args", PLAN_CASES, ids=[c[0] for c in PLAN_CASES])
def test_plan_bad_flag_says_what_gen_config_says(capsys, case_id, args):
    expected = next(e for cid, _, e in FLAG_CASES if cid == case_id)
    r = run_cli(capsys, "plan", *args)
    assert r.code == 2 and r.out == ""
    assert r.err.strip() == expected
    assert "Traceback" not in r.err


@pytest.mark.parametrize("case_id,args,expected", NO_TTY_CASES, ids=[c[0] for c in NO_TTY_CASES])
def test_no_terminal_missing_answer_exits_at_once(tmp_path, case_id, args, expected):
    """Real process, stdin not a terminal: exit 2 at once naming the flag, never wait."""
    out = tmp_path / "out"
    p = subprocess.run([LLMCTL, "gen-config", *args, "-o", str(out)], stdin=subprocess.PIPE, capture_output=True,
                       text=True, timeout=60)  # stdin is an open pipe: a read would block, the timeout would fire
    assert p.returncode == 2
    assert p.stderr.strip() == expected
    assert files_under(out) == []


def test_does_not_fit_exits_2_with_numbers_unless_forced(capsys, tmp_path):
    out = tmp_path / "out"
    r = run_cli(capsys, "gen-config", "-m", "llama-3.1-70b-instruct", "--gpu", "L4", "--tp", "1", "--yes", "-o", out)
    assert r.code == 2
    line = r.err.strip()
    assert "\n" not in line
    assert line.startswith("error: --tp: llama-3.1-70b-instruct does not fit on L4 at TP 1: ")
    assert "GiB" in line and line.endswith("(see `llmctl plan --model llama-3.1-70b-instruct --gpu L4`; --force writes it anyway)")
    assert files_under(out) == []
    r = run_cli(capsys, "gen-config", "-m", "llama-3.1-70b-instruct", "--gpu", "L4", "--tp", "1", "--yes", "--force", "-o", out)
    assert r.code == 0 and "does not fit" in r.err
    assert len(files_under(out)) == 2


# ------------------------------------------------------------------ files

MODEL_OK = """\
model_loading_config:
  model_id: llama
  model_source: meta-llama/Llama-3.1-8B-Instruct
accelerator_type: L4
engine_kwargs:
  tensor_parallel_size: 1
  max_model_len: 8192
deployment_config:
  max_ongoing_requests: 14
  autoscaling_config:
    min_replicas: 1
    max_replicas: 2
    target_ongoing_requests: 11
"""


def _patched(old: str, new: str) -> str:
    assert old in MODEL_OK
    return MODEL_OK.replace(old, new)


# (id, file text, expected line without the "file:" prefix)
FILE_CASES = [
    ("accelerator-foo", _patched("accelerator_type: L4", "accelerator_type: FOO"),
     "4: accelerator_type: unknown accelerator type 'FOO'; Ray accepts e.g. L4, A10G, L40S, A100-40G, A100-80G, H100, H200, B200, B300"),
    ("tp-3", _patched("tensor_parallel_size: 1", "tensor_parallel_size: 3"),
     "6: engine_kwargs.tensor_parallel_size: TP 3 does not divide the 32 attention heads (valid: 1, 2, 4, 8)"),
    ("tp-text", _patched("tensor_parallel_size: 1", "tensor_parallel_size: two"),
     "6: engine_kwargs.tensor_parallel_size: expected an integer, got 'two'"),
    ("max-num-seqs-text", _patched("  max_model_len: 8192", "  max_model_len: 8192\n  max_num_seqs: lots"),
     "8: engine_kwargs.max_num_seqs: expected an integer, got 'lots'"),
    ("prefix-caching-maybe", _patched("  max_model_len: 8192", "  max_model_len: 8192\n  enable_prefix_caching: maybe"),
     "8: engine_kwargs.enable_prefix_caching: expected true or false, got 'maybe'"),
    ("quoted-number", _patched("  max_model_len: 8192", "  max_model_len: 8192\n  max_num_seqs: '8'"),
     "8: engine_kwargs.max_num_seqs: expected an integer, got '8' (a string: write it without quotes)"),
    ("dtype-choice", _patched("  max_model_len: 8192", "  max_model_len: 8192\n  dtype: bf17"),
     "8: engine_kwargs.dtype: must be one of auto, half, float16, bfloat16, float, float32; got 'bf17'"),
    ("ray-owned-key", _patched("  max_model_len: 8192", "  max_model_len: 8192\n  served_model_name: x"),
     "8: engine_kwargs.served_model_name: Ray Serve LLM refuses it in engine_kwargs and sets it from model_loading_config.model_id"),
    ("unknown-engine-kwarg", _patched("  max_model_len: 8192", "  max_model_len: 8192\n  max_num_seq: 64"),
     "8: engine_kwargs.max_num_seq: not an engine argument of {origin} (did you mean 'max_num_seqs'?)"),
    ("min-over-max", _patched("min_replicas: 1", "min_replicas: 3"),
     "11: deployment_config.autoscaling_config.min_replicas: min_replicas (3) must be <= max_replicas (2): "
     "the autoscaler never goes below min_replicas"),
    ("negative-min", _patched("min_replicas: 1", "min_replicas: -1"),
     "11: deployment_config.autoscaling_config.min_replicas: must be an integer >= 0, got -1"),
    ("unknown-deployment-key", _patched("deployment_config:", "deployment_config:\n  max_ongoing: 4"),
     "9: deployment_config.max_ongoing: unknown deployment option (did you mean 'max_ongoing_requests'?)"),
    ("unknown-top-level", MODEL_OK + "engine: vllm\n",
     "14: engine: unknown field (did you mean 'llm_engine'?) (Ray's LLMConfig has no such field)"),
    ("max-model-len-too-long", _patched("max_model_len: 8192", "max_model_len: 300000"),
     "7: engine_kwargs.max_model_len: max_model_len 300000 exceeds the model's context of 131072 tokens "
     "(max_position_embeddings 131072, rope_scaling llama3)"),
    ("gpu-util-range", _patched("  max_model_len: 8192", "  max_model_len: 8192\n  gpu_memory_utilization: 1.2"),
     "8: engine_kwargs.gpu_memory_utilization: must be a fraction in (0, 1], got 1.2"),
    ("accelerator-with-cpu-bundles", _patched("accelerator_type: L4", "accelerator_type: L4\nplacement_group_config:\n  bundles:\n  - CPU: 1"),
     "4: accelerator_type: 'L4' cannot be combined with CPU-only placement bundles; remove accelerator_type for a CPU deployment or add GPU to the bundles"),
    ("local-lora", MODEL_OK + "lora_config:\n  dynamic_lora_loading_path: /data/lora\n",
     "15: lora_config.dynamic_lora_loading_path: '/data/lora' is not a remote URI; Ray Serve LLM loads adapters from s3://, gs://, abfss:// or azure://"),
    ("literal-token", MODEL_OK + "runtime_env:\n  env_vars:\n    HF_TOKEN: hf_" + "x" * 34 + "\n",
     "16: runtime_env.env_vars.HF_TOKEN: holds a Hugging Face token in plain text; Ray's dashboard shows configs to every client and logs them: write HF_TOKEN: \"${HF_TOKEN}\" under runtime_env.env_vars and export HF_TOKEN where you deploy"),
    ("missing-model-dir", _patched("model_source: meta-llama/Llama-3.1-8B-Instruct", "model_source: ./no-such-model"),
     "3: model_loading_config.model_source: local model path './no-such-model' does not exist here"),
    ("no-model-id", _patched("  model_id: llama\n", ""),
     "1: model_loading_config.model_id: required: the id clients send as \"model\""),
    ("does-not-fit", _patched("model_source: meta-llama/Llama-3.1-8B-Instruct", "model_source: meta-llama/Llama-3.1-70B-Instruct"),
     "6: engine_kwargs.tensor_parallel_size: does not fit on L4 at TP 1: "),
    ("malformed-yaml", "model_loading_config:\n  model_id: [x\n", "3: malformed YAML: expected ',' or ']', but got '<stream end>'"),
    ("not-a-mapping", "- just\n- a list\n",
     "1: expected a mapping: a serve config (applications: …) or a model config (model_loading_config: …)"),
    ("target-outside-autoscaling", _patched("  max_ongoing_requests: 14", "  max_ongoing_requests: 14\n  upscale_delay_s: 5"),
     "10: deployment_config.upscale_delay_s: belongs in autoscaling_config: Serve refuses it here (serve.deployment() has "
     "no such option)"),
]


def _suggested_target() -> int:
    """What sizing.derive_targets gives for MODEL_OK (Llama-3.1-8B, L4, TP 1, 8k)."""
    from llmctl import sizing
    from llmctl.catalog import resolve_model
    from llmctl.hardware import GPUS

    plan = sizing.plan_for_gpu(resolve_model("llama-3.1-8b-instruct").architecture, GPUS["L4"], tp=1, max_model_len=8192)
    return sizing.derive_targets(plan, max_model_len=8192).target_ongoing_requests


@pytest.mark.parametrize("case_id,text,expected", FILE_CASES, ids=[c[0] for c in FILE_CASES])
def test_bad_model_file(capsys, tmp_path, case_id, text, expected):
    from llmctl.engine_args import engine_args as vllm_engine_args

    f = tmp_path / "model.yaml"
    f.write_text(text)
    r = run_cli(capsys, "validate", "--local", f)  # --local: a model path missing here is an error
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert lines[-1].endswith("found")  # "N problem(s) found"
    want = f"{f}:" + expected.replace("{origin}", vllm_engine_args()[1]).replace("{suggested}", str(_suggested_target()))
    if case_id == "does-not-fit":
        assert any(ln.startswith(want) for ln in lines), lines
    else:
        assert want in lines, lines
    assert "Traceback" not in r.err


BAD_BUT_DEPLOYS = [
    # Serve's AutoscalingConfig ignores keys it does not have (issue 38): the app deploys with the defaults
    ("unknown-autoscaling-key", _patched("    max_replicas: 2", "    max_replicas: 2\n    upscale_delay: 5"),
     "13: deployment_config.autoscaling_config.upscale_delay: unknown autoscaling option (did you mean 'upscale_delay_s'?): "
     "Serve ignores it and deploys with the default"),
    ("max-ongoing-inside-autoscaling", _patched("  max_ongoing_requests: 14\n", "").replace(
        "    target_ongoing_requests: 11", "    target_ongoing_requests: 11\n    max_ongoing_requests: 14"),
     "13: deployment_config.autoscaling_config.max_ongoing_requests: belongs in deployment_config, one level up: "
     "Serve ignores it inside autoscaling_config (ray-project/ray#61439)"),
    ("never-scales", _patched("    target_ongoing_requests: 11\n", ""),
     "10: deployment_config.autoscaling_config: never scales above min_replicas (1): Ray Serve LLM's default "
     "target_ongoing_requests is 1e9; llmctl suggests target_ongoing_requests: {suggested} for llama on L4"),
    ("max-below-target", _patched("max_ongoing_requests: 14", "max_ongoing_requests: 4"),
     "9: deployment_config.max_ongoing_requests: max_ongoing_requests (4) must be >= target_ongoing_requests (11): a replica "
     "never gets more than max_ongoing_requests, so the target could never be reached and Serve would not scale up"),
]


@pytest.mark.parametrize("case_id,text,expected", BAD_BUT_DEPLOYS, ids=[c[0] for c in BAD_BUT_DEPLOYS])
def test_a_model_file_that_deploys_but_misbehaves_warns(capsys, tmp_path, case_id, text, expected):
    """Ray deploys these (issue 20): one warning line naming the fix, exit 0;
    --strict makes the warning fail CI (exit 2)."""
    f = tmp_path / "model.yaml"
    f.write_text(text)
    r = run_cli(capsys, "validate", "--local", f)
    assert r.code == 0, r.err
    want = f"{f}:" + expected.replace("{suggested}", str(_suggested_target()))
    head, _, message = want.partition(": ")
    field, _, message = message.partition(": ")
    assert f"{head}: {field}: warning: {message}" in r.err.splitlines(), r.err
    assert "1 warning (--strict makes them errors)" in r.out
    strict = run_cli(capsys, "validate", "--local", "--strict", f)
    assert strict.code == 2 and strict.err.strip().splitlines()[-1] == "0 errors and 1 warning (--strict) found"


def test_missing_file(capsys, tmp_path):
    r = run_cli(capsys, "validate", tmp_path / "nope.yaml")
    assert r.code == 2 and r.err.splitlines()[0] == f"{tmp_path / 'nope.yaml'}: no such file"


def test_serve_config_problems(capsys, tmp_path):
    good = tmp_path / "model_config" / "a.yaml"
    good.parent.mkdir()
    good.write_text(MODEL_OK)
    serve = tmp_path / "serve.yaml"
    serve.write_text(textwrap.dedent(f"""\
        applications:
        - name: app
          route_prefix: /
          import_path: ray.serve.llm:build_openai_app
          args:
            llm_configs:
            - {good}
            - model_config/missing.yaml
            - {{model_loading_config: {{model_id: llama}}, accelerator_type: L4}}
        - name: app
          route_prefix: /
          import_path: ray.serve.llm:build_openai_app
          args: {{}}
        """))
    r = run_cli(capsys, "validate", "--working-dir", tmp_path, serve)
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert (f"{serve}:8: applications[0].args.llm_configs[1]: model config file 'model_config/missing.yaml' does not exist in "
            f"{tmp_path} (Ray opens relative llm_configs paths from the working directory of the process that builds the app)") in lines
    assert f"{serve}:9: applications[0].args.llm_configs[2]: duplicate model id 'llama' (also in {good}); model ids must be unique within an app" in lines
    assert f"{serve}:1: applications: Found multiple configs for application \"app\". Please remove all duplicates." in lines
    assert f"{serve}:11: applications[1].route_prefix: '/' is already used by application 1" in lines
    assert f"{serve}:13: applications[1].args: ray.serve.llm:build_openai_app needs args.llm_configs: a list of model config files or LLMConfig mappings" in lines


def test_validate_exit_0_on_generated_cpu_config(capsys, tmp_path):
    model = make_model_dir(tmp_path / "m")
    out = tmp_path / "o"
    assert run_cli(capsys, "gen-config", "-m", model, "--gpu", "cpu", "--yes", "-o", out).code == 0
    r = run_cli(capsys, "validate", *out.rglob("*.yaml"))
    assert r.code == 0, r.err


def test_validate_json(capsys, tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text(_patched("accelerator_type: L4", "accelerator_type: FOO"))
    r = run_cli(capsys, "validate", "--json", f)
    assert r.code == 2
    data = r.json()
    assert data["valid"] is False
    assert {"file": str(f), "line": 4, "field": "accelerator_type", "severity": "error"}.items() <= data["diagnostics"][0].items()


def test_missing_model_path_is_a_warning_for_a_remote_cluster(tmp_path):
    """A local model path is looked up on the serving nodes: `up --address
    remote` must not refuse a path that only the cluster has."""
    from llmctl.validate import errors_only, validate_paths

    f = tmp_path / "m.yaml"
    f.write_text(_patched("model_source: meta-llama/Llama-3.1-8B-Instruct", "model_source: /models/llama"))
    (remote,) = validate_paths([f], local_node=False)
    assert remote.severity == "warning" and str(remote) == (
        f"{f}:3: model_loading_config.model_source: warning: local model path '/models/llama' does not exist "
        "here; it must exist on the cluster's nodes (validate --local makes this an error)")
    assert errors_only(validate_paths([f])) and not errors_only([remote])
