"""The README's examples are real: its gen-config and plan commands run as
shown, and the plan table it shows is what llmctl prints today."""

from __future__ import annotations

import re
import shlex

from helpers import REPO, readme_python_blocks, run_cli

README = (REPO / "README.md").read_text(encoding="utf-8")


def _commands(prefix: str) -> list[list[str]]:
    """`llmctl <prefix> …` command lines of the README (joined continuations)."""
    # the LoRA section is a recorded session (its flow runs in tests/test_lora_e2e.py)
    head, sep, tail = README.partition("## LoRA adapters\n")
    text = (head + (tail.split("\n## ", 1)[-1] if sep else "")).replace("\\\n", " ")
    cmds = []
    for line in text.splitlines():
        line = line.strip().removeprefix("$ ")
        if line.startswith(f"llmctl {prefix} "):
            cmds.append(shlex.split(line.split("#")[0])[1:])
    return cmds


def _cells(text: str) -> list[list[str]]:
    rows = []
    for line in text.splitlines():
        if re.match(r"^\W*L4\b", line):
            rows.append([c for c in re.split(r"[\s│┃]+", line.replace("← advised", "advised")) if c])
    return rows


def test_readme_gen_config_commands_run(capsys, tmp_path, monkeypatch):
    cmds = _commands("gen-config")
    assert len(cmds) >= 2
    for i, args in enumerate(cmds):
        work = tmp_path / str(i)
        work.mkdir()
        monkeypatch.chdir(work)
        r = run_cli(capsys, *args)
        assert r.code == 0, (args, r.err)
        assert list(work.rglob("serve_*.yaml"))


def test_readme_plan_example_is_current(capsys):
    (args,) = [c for c in _commands("plan") if "--slo" not in c]
    r = run_cli(capsys, *args)
    assert r.code == 0, r.err
    block = README.split("$ llmctl plan", 1)[1].split("```", 1)[0]
    assert _cells(block) and _cells(block) == _cells(r.out)
    advised = [ln for ln in block.splitlines() if ln.startswith("advised:")]
    assert advised and advised[0] in r.out


def test_readme_python_api_example_runs(tmp_path, monkeypatch, capsys):
    """The offline block (plan, generate, validate) runs as shown; the
    launch block (up, status, down) compiles here and runs against the
    suite's cluster in tests/test_launch.py."""
    offline, launch = readme_python_blocks()
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(offline, "README.md (Python API)", "exec"), namespace)
    gen = namespace["gen"]
    assert gen.serve_file.is_file() and gen.serve_file.parent == tmp_path / "configs"
    assert namespace["best"]["tp"] == gen.spec.models[0].tp
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split()[0] == str(namespace["best"]["tp"]) and printed[1].endswith(f"[{gen.spec.models[0].tp}]")
    compile(launch, "README.md (Python API, launch)", "exec")
    assert "llmctl.up(" in launch and "llmctl.status()" in launch and "llmctl.down(" in launch


def test_readme_python_api_errors_name_parameters():
    """What the README says the Python API's errors look like."""
    import pytest

    import llmctl
    from llmctl.errors import UsageError

    with pytest.raises(UsageError) as e:
        llmctl.plan("llama-3.1-8b-instruct", gpu_memory=-1)
    assert e.value.message == "gpu_memory: must be a positive number of GiB (got -1)" and e.value.param == "gpu_memory"
    assert f"raises `{e.value.message}`" in " ".join(README.split())


def test_readme_kuberay_example_is_what_llmctl_writes(capsys, tmp_path, monkeypatch):
    block = README.split("## Kubernetes (KubeRay)", 1)[1]
    gen = [c for c in _commands("gen-config") if "--kuberay" in c]
    assert len(gen) == 1
    monkeypatch.chdir(tmp_path)
    r = run_cli(capsys, *gen[0])
    assert r.code == 0, r.err
    (manifest,) = tmp_path.glob("rayservice_*.yaml")
    text = manifest.read_text()
    excerpt = block.split("```yaml", 1)[1].split("```", 1)[0]
    lines = [ln for ln in excerpt.splitlines() if ln.strip()]
    assert len(lines) > 8 and all(ln in text.splitlines() for ln in lines), [ln for ln in lines if ln not in text.splitlines()]
    (serve,) = tmp_path.glob("serve_*.yaml")
    (conv,) = _commands("kuberay")
    conv = [serve.name if a.startswith("serve_") else a for a in conv]
    r = run_cli(capsys, *conv)
    assert r.code == 0, r.err
    r = run_cli(capsys, "validate", manifest.name, "rayservice.yaml")
    assert r.code == 0 and "OK: 2 files valid" in r.out, r.err


def test_readme_validate_examples_are_what_validate_prints(capsys, tmp_path, monkeypatch):
    """The Validate section's files and console sessions: every command prints
    what the README shows (the installed-vLLM guard line apart) and exits as shown."""
    import re

    section = README.split("## Validate\n", 1)[1].split("\n## ", 1)[0]
    yamls = re.findall(r"\(`([\w.]+)`\):\n\n```yaml\n(.*?)```", section, re.S)
    assert [n for n, _ in yamls] == ["model.yaml", "scaling.yaml"]
    for name, text in yamls:
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    sessions = re.findall(r"```console\n(.*?)```", section, re.S)
    checked = 0
    for block in sessions:
        cmds = re.split(r"^\$ ", block, flags=re.M)[1:]
        code = None
        for cmd in cmds:
            line, _, shown = cmd.partition("\n")
            if line == "echo $?":
                assert int(shown.strip()) == code
                continue
            r = run_cli(capsys, *line.split()[1:])
            code = r.code
            printed = [ln for ln in (r.err + r.out).splitlines() if not ln.startswith("warning: vLLM")]
            assert printed == shown.strip().splitlines(), "\n".join(printed)
            checked += 1
    assert checked == 3


def test_readme_capacity_example_is_current(capsys, tmp_path, monkeypatch):
    """The Capacity section's `plan --slo` table and its gen-config line are what llmctl prints today."""
    (args,) = [c for c in _commands("plan") if "--slo" in c]
    r = run_cli(capsys, *args)
    assert r.code == 0, r.err
    block = README.split("$ llmctl plan --model llama-3.1-8b-instruct --slo", 1)[1].split("```", 1)[0]

    def rows(text):
        return [[c for c in re.split(r"[\s│┃]+", ln) if c] for ln in text.splitlines() if re.match(r"^│ (L4|L40S|A100|H100)", ln)]

    assert rows(block) and rows(block) == rows(r.out)
    cheapest = [ln for ln in block.splitlines() if ln.startswith("cheapest:")]
    assert cheapest and cheapest[0] in r.out
    (gen,) = [c for c in _commands("gen-config") if "--slo" in c]
    line = README.split("$ llmctl gen-config --model llama-3.1-8b-instruct --slo", 1)[1].split("```", 1)[0].strip().splitlines()[-1]
    assert line.startswith("capacity (estimate):")
    monkeypatch.chdir(tmp_path)
    g = run_cli(capsys, *gen)
    assert g.code == 0 and line in g.err, g.err
