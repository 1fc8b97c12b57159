"""The interactive gen-config, driven by key presses in a real pseudo-terminal
(pexpect), produces the same files as the equivalent flags."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect
import pytest

from helpers import LLMCTL, load_yaml, run_cli, serve_file

DOWN = "\x1b[B"
ENTER = "\r"
BACKSPACE = "\x7f"
TIMEOUT = 60
POINTER = r"» (\x1b\[[0-9;]*m)*"  # the highlighted row of a list (questionary's pointer, then styling)


def _spawn(*args: str, cwd: Path) -> pexpect.spawn:
    # PROMPT_TOOLKIT_NO_CPR: prompt_toolkit otherwise asks the terminal for the
    # cursor position and waits ~1 s per prompt for an answer pexpect never sends.
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="200", LINES="50", PYTHONUNBUFFERED="1", PROMPT_TOOLKIT_NO_CPR="1")
    child = pexpect.spawn(LLMCTL, list(args), cwd=str(cwd), env=env, encoding="utf-8",
                          dimensions=(50, 200), timeout=TIMEOUT)
    child.logfile_read = sys.stdout if os.environ.get("LLMCTL_TEST_SHOW_PTY") else None
    return child


def _normalized(out: Path) -> tuple[dict, list[dict]]:
    serve = load_yaml(serve_file(out))
    models = [load_yaml(Path(p)) for p in serve["applications"][0]["args"]["llm_configs"]]
    serve["applications"][0]["args"]["llm_configs"] = [Path(p).relative_to(out).as_posix() for p in serve["applications"][0]["args"]["llm_configs"]]
    return serve, models


def test_interactive_flow_matches_flags(capsys, tmp_path):
    out_i = tmp_path / "interactive"
    c = _spawn("gen-config", "-o", str(out_i), cwd=tmp_path)
    c.expect("Model")
    c.send("qwen3-0.6b")            # the list is searchable: typing filters it
    c.expect("qwen3-0.6b")
    c.send(ENTER)
    c.expect("Model id clients will send")
    c.send(ENTER)                   # default id: qwen3-0.6b
    c.expect("GPU type")
    c.send(DOWN)                    # the recommended L4 is preselected; one down: A10G
    c.send(ENTER)
    c.expect("Turn on tool calling for qwen3-0.6b .enable_auto_tool_choice=True, tool_call_parser=hermes; recommended")
    c.send(ENTER)                   # default: yes (works with the model's own chat template)
    c.expect("Turn on reasoning for qwen3-0.6b .reasoning_parser=qwen3; recommended: it thinks before answering")
    c.send(ENTER)                   # default: yes (Qwen3 thinks by default)
    c.expect("Engine settings .vLLM engine arguments.: enable_auto_tool_choice=True, tool_call_parser=hermes, "
             "reasoning_parser=qwen3")
    c.send(ENTER)                   # default: none added
    c.expect("Tensor-parallel size")
    c.expect("TP 8")                # choices carry the verdict; wait for the full list
    c.send(DOWN)                    # advised TP 1 preselected; one down: TP 2
    c.send(ENTER)
    c.expect("max_model_len .tokens")
    c.expect("max_model_len 32,768: llmctl's default context")  # the default says why it was chosen
    c.send(ENTER)                   # default: 32,768 (qwen3-0.6b's 40,960 capped), which fits at TP 2
    c.expect("Minimum replicas")
    c.send(BACKSPACE + "2" + ENTER)
    c.expect("Maximum replicas")
    c.send(BACKSPACE + "0" + ENTER)  # invalid: the prompt shows the shared validator's message
    c.expect("max replicas must be >= 1, got 0")
    c.send(BACKSPACE + "4" + ENTER)
    c.expect("Scale on")            # replicas can change (2-4): what to scale on
    c.expect(POINTER + r"ongoing requests per replica \(Serve's default\)")
    c.send(ENTER)                   # default: Serve's own policy
    c.expect("Autoscaling details: target")  # derived from the plan; keep them
    c.send(ENTER)
    c.expect("Request routing between replicas")
    c.expect(POINTER + "Serve's default, power of two choices")
    c.send(ENTER)                   # default: no request_router_config written
    c.expect("Serve LoRA adapters")
    c.send("n")
    c.expect("fast downloads")
    c.send(ENTER)                   # default: no
    c.expect("Add another model")
    c.send(ENTER)                   # default: no
    c.expect("Serve application name")
    c.send(ENTER)
    c.expect("Route prefix")
    c.send(ENTER)
    c.expect("Require an API key on the endpoint .* anyone who reaches the endpoint uses the GPUs")
    c.send(ENTER)                   # default for a GPU app: yes (issue 22)
    c.expect("Environment variable holding the key")
    c.send(ENTER)                   # default: LLMCTL_API_KEY
    c.expect("Write 2 files")
    c.send("y")
    c.expect("Wrote:")
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 0

    out_f = tmp_path / "flags"
    r = run_cli(capsys, "gen-config", "-m", "qwen3-0.6b", "--model-id", "qwen3-0.6b", "--gpu", "A10G",
                "--max-model-len", "32768", "--tp", "2", "--min-replicas", "2", "--max-replicas", "4",
                "--no-fast-download", "--tool-calling", "--reasoning", "--app-name", "llm_app", "--route-prefix", "/",
                "--api-key-env", "LLMCTL_API_KEY", "--yes", "-o", out_f)
    assert r.code == 0, r.err
    serve_i, models_i = _normalized(out_i)
    serve_f, models_f = _normalized(out_f)
    assert serve_i == serve_f
    assert models_i == models_f
    assert models_i[0]["engine_kwargs"]["tensor_parallel_size"] == 2
    assert models_i[0]["engine_kwargs"]["reasoning_parser"] == "qwen3"
    assert models_i[0]["accelerator_type"] == "A10G"
    asc = models_i[0]["deployment_config"]["autoscaling_config"]
    assert (asc["min_replicas"], asc["max_replicas"]) == (2, 4) and asc["target_ongoing_requests"] >= 1
    # byte for byte, apart from the output directory named in comments
    text_i = (out_i / "model_config" / "qwen3-0.6b.yaml").read_text().replace(str(out_i), "OUT")
    text_f = (out_f / "model_config" / "qwen3-0.6b.yaml").read_text().replace(str(out_f), "OUT")
    assert text_i == text_f


def test_interactive_custom_model_gated_token_and_second_model(tmp_path):
    """'Other' → a local directory; then a second, gated model asks for the token variable."""
    from helpers import make_model_dir

    model = make_model_dir(tmp_path / "my-model")
    out = tmp_path / "o"
    c = _spawn("gen-config", "-o", str(out), cwd=tmp_path)
    c.expect("Model")
    c.send("Other")
    c.expect("Other: a Hugging Face repo id")
    c.send(ENTER)
    c.expect("Hugging Face repo id, local directory")
    c.send(str(model) + ENTER)
    c.expect("Model id clients will send")
    c.send(ENTER)
    c.expect("GPU type")
    c.send(DOWN * 9 + ENTER)        # last entry: cpu (after B300)
    c.expect("Engine settings")
    c.send("y")                     # add one: typed by vLLM's own argument types
    c.expect("Engine argument KEY=VALUE")
    c.send("max_num_seqs=lots" + ENTER)
    c.expect("max_num_seqs: expected an integer, got 'lots'")
    c.send(BACKSPACE * 4 + "4" + ENTER)
    c.expect("Engine argument KEY=VALUE")
    c.send(ENTER)                   # done
    c.expect("Tensor-parallel size")
    c.send(ENTER)
    c.expect("max_model_len .tokens")
    c.expect("default for vLLM's CPU build")
    c.send(ENTER)                   # CPU default: 512
    c.expect("Minimum replicas")
    c.send(ENTER)
    c.expect("Maximum replicas")
    c.send(ENTER)
    c.expect("Autoscaling details")
    c.send(ENTER)
    c.expect("Serve LoRA adapters")
    c.send("n")
    c.expect("fast downloads")
    c.send(ENTER)
    c.expect("Add another model")
    c.send("y")
    c.expect("Model")
    c.send("llama-3.2-1b")
    c.expect("llama-3.2-1b-instruct")
    c.send(ENTER)
    c.expect("Model id clients will send")
    c.send(ENTER)
    c.expect("GPU type")
    c.send(ENTER)                   # recommended: L4
    c.expect("Turn on tool calling for llama-3.2-1b-instruct .*needs vLLM's tool_chat_template_llama3.2_json.jinja")
    c.send(ENTER)                   # default: no (the documented recipe needs a template file)
    c.expect("Engine settings")
    c.send(ENTER)
    c.expect("Tensor-parallel size")
    c.send(ENTER)
    c.expect("max_model_len .tokens")
    c.send(ENTER)
    c.expect("Minimum replicas")
    c.send(ENTER)
    c.expect("Maximum replicas")
    c.send(ENTER)
    c.expect("Autoscaling details")
    c.send(ENTER)
    c.expect("Serve LoRA adapters")
    c.send("n")
    c.expect("is gated: NAME of the environment variable")
    c.send(BACKSPACE * 8 + "MY_TOKEN" + ENTER)
    c.expect("fast downloads")
    c.send("y")
    c.expect("Add another model")
    c.send("n")
    c.expect("Serve application name")
    c.send(ENTER)
    c.expect("Route prefix")
    c.send(ENTER)
    c.expect("Require an API key on the endpoint")
    c.send("n")
    c.expect("Write 3 files")
    c.send("y")
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 0
    _, models = _normalized(out)
    assert models[0]["model_loading_config"] == {"model_id": "my-model", "model_source": str(model.resolve())}
    assert models[0]["placement_group_config"] == {"bundles": [{"CPU": 1}]}
    assert models[0]["engine_kwargs"]["max_num_seqs"] == 4  # an int, as vLLM types it
    assert models[1]["accelerator_type"] == "L4"
    assert models[1]["runtime_env"]["env_vars"] == {"HF_TOKEN": "${MY_TOKEN}", "HF_HUB_ENABLE_HF_TRANSFER": "1"}


# Every question the default model meets, in order; Enter answers each.
ENTER_ONLY = ["Model .type to search.", "Model id clients will send", "GPU type",
              "Turn on tool calling for qwen2.5-0.5b-instruct", "Engine settings", "Tensor-parallel size",
              "max_model_len .tokens", "Minimum replicas", "Maximum replicas", "Autoscaling details",
              "Serve LoRA adapters", "fast downloads", "Add another model", "Serve application name", "Route prefix",
              "Require an API key on the endpoint", "Environment variable holding the key", "Write 2 files"]


@pytest.mark.parametrize("gpu", [[], ["--gpu", "cpu"]], ids=["no-gpu-flag", "gpu-cpu"])
def test_enter_at_every_prompt_writes_files_that_validate(capsys, tmp_path, gpu):
    """Issue 21: the list opens on the catalog's default model, shown as
    such; Enter at every question (declining "add another model", its
    default) writes files `llmctl validate` accepts."""
    out = tmp_path / "o"
    c = _spawn("gen-config", *gpu, "-o", str(out), cwd=tmp_path)
    c.expect("Model .type to search.")
    c.expect(POINTER + r"qwen2\.5-0\.5b-instruct  \(Qwen/Qwen2\.5-0\.5B-Instruct, 0\.5B, chat\) \(default\)")
    c.send(ENTER)
    for prompt in ENTER_ONLY[1:]:
        if prompt in ("GPU type", "Environment variable holding the key") and gpu:
            continue  # --gpu cpu: no GPU question, and the API key defaults to off (issue 22)
        if prompt.startswith("Write"):  # the summary comes first, saying which recipes were applied
            c.expect("qwen2.5-0.5b-instruct: recipe applied: tool calling .--tool-calling.: enable_auto_tool_choice=True, "
                     "tool_call_parser=hermes")
        c.expect(prompt)
        c.send(ENTER)
    c.expect("Wrote:")
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 0
    serve, models = _normalized(out)
    assert models[0]["model_loading_config"] == {"model_id": "qwen2.5-0.5b-instruct",
                                                 "model_source": "Qwen/Qwen2.5-0.5B-Instruct"}
    assert models[0]["engine_kwargs"]["tool_call_parser"] == "hermes"  # the recommended default: on
    assert models[0].get("accelerator_type") == (None if gpu else "L4")
    r = run_cli(capsys, "validate", serve_file(out))
    assert r.code == 0, (r.out, r.err)


def test_search_picks_the_match_and_empty_other_returns_to_the_list(tmp_path):
    """Typing filters the list and Enter picks the match; "Other" (last) with
    an empty answer goes back to the list instead of failing."""
    out = tmp_path / "o"
    c = _spawn("gen-config", "--api-key-env", "LLMCTL_API_KEY", "--gpu", "L4", "--tp", "1", "--max-model-len", "4096", "--min-replicas", "1",
               "--max-replicas", "1", "--no-fast-download", "--no-tool-calling", "--app-name", "a", "--route-prefix", "/",
               "-o", str(out), cwd=tmp_path)
    c.expect("Model .type to search.")
    c.send("Other")
    c.expect(POINTER + "Other: a Hugging Face repo id")
    c.send(ENTER)
    c.expect("Hugging Face repo id, local directory, or s3:// / gs:// URI:")
    c.expect("empty: back to the list")
    c.send(ENTER)                   # empty: back to the list, not "empty model name"
    c.expect("Model .type to search.")
    c.send("llama-3.2-3b")
    c.expect(POINTER + r"llama-3\.2-3b-instruct")
    c.send(ENTER)
    c.expect("Model id clients will send")
    c.send(ENTER)
    c.expect("Engine settings")
    c.send("n")
    c.expect("Autoscaling details")
    c.send("n")
    c.expect("Serve LoRA adapters")
    c.send("n")
    c.expect("is gated: NAME of the environment variable")
    c.send(ENTER)
    c.expect("Add another model")
    c.send(ENTER)
    c.expect("Write 2 files")
    c.send("y")
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 0
    _, models = _normalized(out)
    assert models[0]["model_loading_config"]["model_source"] == "meta-llama/Llama-3.2-3B-Instruct"
    assert "tool_call_parser" not in models[0]["engine_kwargs"]


def test_ctrl_c_writes_nothing(tmp_path):
    out = tmp_path / "o"
    c = _spawn("gen-config", "-o", str(out), cwd=tmp_path)
    c.expect("Model")
    c.sendintr()
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 130
    assert not out.exists()


@pytest.mark.parametrize("answer,code", [("n", 1), ("y", 0)])
def test_confirmation(tmp_path, answer, code):
    out = tmp_path / "o"
    c = _spawn("gen-config", "--api-key-env", "LLMCTL_API_KEY", "-m", "qwen3-0.6b", "--gpu", "L4", "--tp", "1", "--min-replicas", "1", "--max-replicas", "1",
               "--max-model-len", "4096", "--model-id", "q", "--no-fast-download", "--no-tool-calling", "--no-reasoning",
               "--app-name", "a", "--route-prefix", "/", "-o", str(out), cwd=tmp_path)
    c.expect("Engine settings")  # the only questions no flag answered
    c.send("n")
    c.expect("Autoscaling details")
    c.send("n")
    c.expect("Serve LoRA adapters")
    c.send("n")
    c.expect("Write 2 files")
    c.send(answer)
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == code
    assert out.exists() == (code == 0)


def test_autoscaling_details_step_defaults_to_the_derived_values(tmp_path):
    """Changing the expected tokens re-derives the targets; the answers land
    exactly where the equivalent flags put them."""
    import llmctl

    out = tmp_path / "o"
    c = _spawn("gen-config", "--api-key-env", "LLMCTL_API_KEY", "-m", "qwen3-0.6b", "--gpu", "L4", "--tp", "1", "--min-replicas", "1", "--max-replicas", "3",
               "--max-model-len", "4096", "--model-id", "q", "--no-fast-download", "--no-tool-calling", "--no-reasoning",
               "--app-name", "a", "--route-prefix", "/", "-o", str(out), cwd=tmp_path)
    c.expect("Engine settings")
    c.send("n")
    c.expect("Scale on")
    c.send(ENTER)                   # ongoing requests: the details below are its settings
    c.expect("Autoscaling details: target")
    c.send("y")
    c.expect("Expected tokens per request")
    c.send(BACKSPACE * 8 + "1K" + ENTER)  # vLLM's rule: 1K = 1,024, 1k = 1,000
    c.expect("Target ongoing requests per replica")
    c.send(ENTER)                   # the default: derived for 1,024 tokens per request
    c.expect("Max ongoing requests per replica")
    c.send(ENTER)
    c.expect("Initial replicas")
    c.send(ENTER)                   # empty: min_replicas
    c.expect("Upscale delay")
    c.send(ENTER)                   # empty: Serve's 30 s
    c.expect("Downscale delay")
    c.send("120" + ENTER)
    c.expect("Request routing between replicas")
    c.send(ENTER)
    c.expect("Serve LoRA adapters")
    c.send("n")
    c.expect("Write 2 files")
    c.send("y")
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 0
    (written,) = (out / "model_config").glob("*.yaml")
    flags = llmctl.generate("qwen3-0.6b", gpu="L4", tp=1, min_replicas=1, max_replicas=3, max_model_len=4096, model_id="q",
                            expected_tokens=1024, downscale_delay=120, write_files=False)
    assert load_yaml(written)["deployment_config"] == flags.documents[0].data["deployment_config"]
    assert load_yaml(written)["deployment_config"]["autoscaling_config"]["downscale_delay_s"] == 120


def test_moe_model_is_offered_data_parallel_with_expert_parallelism(tmp_path):
    """At a terminal, a mixture of experts on GPUs is offered the DP+EP layout (issue 40); the
    answer writes Ray's build_dp_openai_app, as --dp 8 --enable-expert-parallel does."""
    out_i = tmp_path / "interactive"
    c = _spawn("gen-config", "-m", "qwen3-30b-a3b", "--gpu", "H100", "--no-tool-calling", "--no-reasoning",
               "--max-num-seqs", "64", "--tp", "1", "--max-model-len", "8192", "--min-replicas", "1", "--max-replicas", "1",
               "--target-ongoing-requests", "8", "--max-ongoing-requests", "16", "--no-fast-download",
               "--api-key-env", "MY_KEY", "--app-name", "moe", "--route-prefix", "/", "-o", str(out_i), cwd=tmp_path)
    c.expect("Model id clients will send")
    c.send(ENTER)
    c.expect("qwen3-30b-a3b is a mixture of experts: layout")
    c.expect("DP 8 ranks per group")
    c.send(DOWN * 3)                # one engine per replica, DP 2, DP 4, DP 8
    c.send(ENTER)
    c.expect("Deal the experts over the ranks")
    c.send(ENTER)                   # default: yes
    c.expect("Serve LoRA adapters")
    c.send("n")
    c.expect("Write 2 files")
    c.send(ENTER)
    c.expect("Wrote:")
    c.expect(pexpect.EOF)
    out_f = tmp_path / "flags"
    r = run_subprocess_gen(out_f, "--dp", "8", "--enable-expert-parallel")
    assert r.returncode == 0, r.stderr
    serve_i, serve_f = load_yaml(serve_file(out_i)), load_yaml(serve_file(out_f))
    assert serve_i["applications"][0]["import_path"] == serve_f["applications"][0]["import_path"] == "ray.serve.llm:build_dp_openai_app"
    model_i = load_yaml(Path(serve_i["applications"][0]["args"]["llm_config"]))
    model_f = load_yaml(Path(serve_f["applications"][0]["args"]["llm_config"]))
    assert model_i == model_f and model_i["engine_kwargs"]["data_parallel_size"] == 8


def run_subprocess_gen(out: Path, *extra: str):
    import subprocess

    return subprocess.run([LLMCTL, "gen-config", "-m", "qwen3-30b-a3b", "--gpu", "H100", "--no-tool-calling", "--no-reasoning",
                           "--max-num-seqs", "64", "--tp", "1", "--max-model-len", "8192", "--min-replicas", "1",
                           "--max-replicas", "1", "--target-ongoing-requests", "8", "--max-ongoing-requests", "16",
                           "--no-fast-download", "--api-key-env", "MY_KEY", "--app-name", "moe", "--route-prefix", "/",
                           "--yes", "-o", str(out), *extra], capture_output=True, text=True, timeout=120)


# Issue 41 at the terminal: what to scale on and how to route, asked when the replicas can change.
SCALED = ["--api-key-env", "LLMCTL_API_KEY", "-m", "qwen3-0.6b", "--gpu", "L4", "--tp", "1", "--min-replicas", "1",
          "--max-replicas", "3", "--max-model-len", "4096", "--model-id", "q", "--no-fast-download", "--no-tool-calling",
          "--no-reasoning", "--app-name", "a", "--route-prefix", "/"]


def _model_text(out: Path) -> str:
    (written,) = (out / "model_config").glob("*.yaml")
    return written.read_text().replace(str(out), "OUT")


def test_latency_target_and_prefix_router_answers_match_the_flags(capsys, tmp_path):
    """TTFT p95 at "Scale on" and prefix-cache routing write what `--autoscale-on ttft_p95=500ms
    --router prefix` writes, byte for byte; a bad target is re-asked with the flag parser's message."""
    from llmctl.cli.flags import cli_text
    from llmctl.errors import UsageError
    from llmctl.latency import parse_autoscale_on

    with pytest.raises(UsageError) as bad:
        parse_autoscale_on("ttft_p95=fast")
    out_i = tmp_path / "interactive"
    c = _spawn("gen-config", *SCALED, "-o", str(out_i), cwd=tmp_path)
    c.expect("Engine settings")
    c.send("n")
    c.expect("Scale on")
    c.expect("both TTFT and ITL")   # the whole list: ongoing requests, TTFT, ITL, both
    c.send(DOWN + ENTER)            # time to first token, p95
    c.expect("Time to first token .TTFT. p95 target, with its unit")
    c.send(BACKSPACE * 5 + "fast" + ENTER)
    c.expect_exact(cli_text(bad.value))  # the parser's one line, under the prompt; the question stays
    c.send(BACKSPACE * 4 + "500ms" + ENTER)
    c.expect("Window the percentiles cover, in seconds")
    c.send(ENTER)                   # default: 30
    c.expect("Autoscaling details")
    c.send("n")
    c.expect("Request routing between replicas")
    c.expect("prefix-cache aware .PrefixCacheAffinityRouter.: helps when many requests share a prompt prefix")
    c.send(DOWN + ENTER)
    c.expect("Serve LoRA adapters")
    c.send("n")
    c.expect("Write 2 files")
    c.send("y")
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 0

    out_f = tmp_path / "flags"
    r = run_cli(capsys, "gen-config", *SCALED, "--autoscale-on", "ttft_p95=500ms", "--router", "prefix", "--yes", "-o", out_f)
    assert r.code == 0, r.err
    assert _model_text(out_i) == _model_text(out_f)
    dc = load_yaml(next((out_i / "model_config").glob("*.yaml")))["deployment_config"]
    assert dc["autoscaling_config"]["policy"]["policy_kwargs"]["targets"] == {"ttft_p95": 0.5}
    assert dc["request_router_config"]["request_router_class"].endswith(":PrefixCacheAffinityRouter")
    r = run_cli(capsys, "validate", serve_file(out_i))
    assert r.code == 0, (r.out, r.err)


@pytest.mark.parametrize("given", [["--autoscale-on", "itl_p95=50ms", "--router", "prefix"],
                                   ["--target-ongoing-requests", "4", "--router", "pow2"],
                                   ["--yes"]], ids=["latency-flags", "ongoing-flags", "yes"])
def test_scale_on_and_router_flags_are_not_asked_again(capsys, tmp_path, given):
    """A flag that chose the signal (--autoscale-on, or --target-ongoing-requests) or the router is
    never asked again; --yes asks nothing and keeps today's defaults (no policy, no router config)."""
    out = tmp_path / "o"
    c = _spawn("gen-config", *SCALED, *given, "-o", str(out), cwd=tmp_path)
    if "--yes" not in given:
        c.expect("Engine settings")
        c.send("n")
        # (y/N): the question itself, not its echo once answered
        while (seen := c.expect(["Scale on", "Request routing", r"Autoscaling details[^\r\n]*\(y/N\)",
                                 "Serve LoRA adapters"])) == 2:
            c.send("n")             # asked unless an ongoing-requests flag is given
        assert seen == 3
        c.send("n")
        c.expect("Write 2 files")
        c.send("y")
    assert c.expect(["Scale on", "Request routing", "Wrote:"]) == 2
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == 0
    out_f = tmp_path / "flags"
    r = run_cli(capsys, "gen-config", *SCALED, *given, "--yes", "-o", out_f)
    assert r.code == 0, r.err
    assert _model_text(out) == _model_text(out_f)
    dc = load_yaml(next((out / "model_config").glob("*.yaml")))["deployment_config"]
    assert ("policy" in dc["autoscaling_config"]) == ("--autoscale-on" in given)
    assert ("request_router_config" in dc) == ("--router" in given)
