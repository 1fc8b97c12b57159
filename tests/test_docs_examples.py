"""The docs pages' examples are real: their gen-config and plan commands run
as shown, and the tables and sessions they show are what llmctl prints today.

Each test reads its example from the page that shows it (docs/plan.md,
docs/generate.md, docs/validate.md, docs/capacity.md, docs/clusters.md,
docs/python-api.md). When llmctl's output changes on purpose, run the
command the failing test names and paste its output into the page."""

from __future__ import annotations

import re
import shlex

from helpers import REPO, python_api_blocks, run_cli

DOCS = REPO / "docs"


def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def section(text: str, heading: str) -> str:
    """The text under a markdown heading, up to the next heading of the same level or above."""
    level = heading.split(" ", 1)[0]
    body = text.split(heading + "\n", 1)[1]
    stops = [m.start() for m in re.finditer(r"^#{1,%d} " % len(level), body, re.M)]
    return body[: stops[0]] if stops else body


def commands(text: str, prefix: str) -> list[list[str]]:
    """`llmctl <prefix> …` command lines of a text (continuations joined), as argument lists."""
    cmds = []
    for line in text.replace("\\\n", " ").splitlines():
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


def test_generate_page_commands_run(capsys, tmp_path, monkeypatch):
    cmds = [c for c in commands(page("generate.md"), "gen-config") if "--kuberay" not in c]
    assert len(cmds) >= 3
    for i, args in enumerate(cmds):
        work = tmp_path / str(i)
        work.mkdir()
        monkeypatch.chdir(work)
        r = run_cli(capsys, *args)
        assert r.code == 0, (args, r.err)
        assert list(work.rglob("serve_*.yaml"))


def _normalised(text: str, here: str) -> list[str]:
    """Lines with this run's directory shown as /home/me and timestamps as one."""
    text = text.replace(here, "/home/me")
    text = re.sub(r"serve_\d{8}_\d{6}\.yaml", "serve_TIMESTAMP.yaml", text)
    return [ln.rstrip() for ln in text.splitlines() if ln.strip() and not ln.startswith("warning: vLLM ")]


def test_generate_page_example_is_what_gen_config_prints(capsys, tmp_path, monkeypatch):
    """docs/generate.md's scripted example: the console session and the model
    config it shows are what gen-config prints and writes today."""
    text = page("generate.md").split("<!-- gen-config-example:begin -->", 1)[1].split("<!-- gen-config-example:end -->")[0]
    session = text.split("```console\n", 1)[1].split("```", 1)[0]
    cmd, _, shown = session.partition("\n")
    shown_yaml = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    home = tmp_path / "me"
    home.mkdir()
    monkeypatch.chdir(home)
    r = run_cli(capsys, *shlex.split(cmd.removeprefix("$ llmctl ")))
    assert r.code == 0, r.err
    assert sorted(_normalised(r.out + r.err, str(home))) == sorted(_normalised(shown, "/home/me")), r.out + r.err
    (written,) = (home / "configs" / "model_config").glob("*.yaml")
    assert _normalised(written.read_text(), str(home)) == _normalised(shown_yaml, "/home/me")


def test_plan_page_example_is_current(capsys):
    text = page("plan.md")
    (args,) = commands(text, "plan")
    r = run_cli(capsys, *args)
    assert r.code == 0, r.err
    block = text.split("$ llmctl plan", 1)[1].split("```", 1)[0]
    assert _cells(block) and _cells(block) == _cells(r.out), f"rerun: llmctl {shlex.join(args)}"
    advised = [ln for ln in block.splitlines() if ln.startswith("advised:")]
    assert advised and advised[0] in r.out


def test_python_api_example_runs(tmp_path, monkeypatch, capsys):
    """docs/python-api.md: the offline block (plan, generate, validate) runs as
    shown; the launch block (up, status, down) compiles here and runs against
    the suite's cluster in tests/test_launch.py."""
    offline, launch = python_api_blocks()
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(offline, "docs/python-api.md (plan, generate, validate)", "exec"), namespace)
    gen = namespace["gen"]
    assert gen.serve_file.is_file() and gen.serve_file.parent == tmp_path / "configs"
    assert namespace["best"]["tp"] == gen.spec.models[0].tp
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split()[0] == str(namespace["best"]["tp"]) and printed[1].endswith(f"[{gen.spec.models[0].tp}]")
    compile(launch, "docs/python-api.md (launch)", "exec")
    assert "llmctl.up(" in launch and "llmctl.status()" in launch and "llmctl.down(" in launch


def test_python_api_errors_name_parameters():
    """What docs/python-api.md says the Python API's errors look like."""
    import pytest

    import llmctl
    from llmctl.errors import UsageError

    with pytest.raises(UsageError) as e:
        llmctl.plan("llama-3.1-8b-instruct", gpu_memory=-1)
    assert e.value.message == "gpu_memory: must be a positive number of GiB (got -1)" and e.value.param == "gpu_memory"
    assert f"raises `{e.value.message}`" in " ".join(page("python-api.md").split())


def test_kuberay_example_is_what_llmctl_writes(capsys, tmp_path, monkeypatch):
    text = page("clusters.md")
    block = section(text, "## Kubernetes (KubeRay)")
    gen = [c for c in commands(block, "gen-config") if "--kuberay" in c]
    assert len(gen) == 1
    monkeypatch.chdir(tmp_path)
    r = run_cli(capsys, *gen[0])
    assert r.code == 0, r.err
    (manifest,) = tmp_path.glob("rayservice_*.yaml")
    written = manifest.read_text()
    excerpt = block.split("```yaml", 1)[1].split("```", 1)[0]
    lines = [ln for ln in excerpt.splitlines() if ln.strip()]
    assert len(lines) > 8 and all(ln in written.splitlines() for ln in lines), [ln for ln in lines if ln not in written.splitlines()]
    (serve,) = tmp_path.glob("serve_*.yaml")
    (conv,) = commands(block, "kuberay")
    conv = [serve.name if a.startswith("serve_") else a for a in conv]
    r = run_cli(capsys, *conv)
    assert r.code == 0, r.err
    r = run_cli(capsys, "validate", manifest.name, "rayservice.yaml")
    assert r.code == 0 and "OK: 2 files valid" in r.out, r.err


def test_validate_page_examples_are_what_validate_prints(capsys, tmp_path, monkeypatch):
    """docs/validate.md's files and console sessions: every command prints
    what the page shows (the installed-vLLM guard line apart) and exits as shown."""
    text = section(page("validate.md"), "## Examples")
    yamls = re.findall(r"\(`([\w.]+)`\):\n\n```yaml\n(.*?)```", text, re.S)
    assert [n for n, _ in yamls] == ["model.yaml", "scaling.yaml"]
    for name, body in yamls:
        (tmp_path / name).write_text(body)
    monkeypatch.chdir(tmp_path)
    checked = 0
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        code = None
        for cmd in re.split(r"^\$ ", block, flags=re.M)[1:]:
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


def test_capacity_example_is_current(capsys, tmp_path, monkeypatch):
    """docs/capacity.md's `plan --slo` table and its gen-config line are what llmctl prints today."""
    text = section(page("capacity.md"), "## An example")
    (args,) = [c for c in commands(text, "plan") if "--slo" in c]
    r = run_cli(capsys, *args)
    assert r.code == 0, r.err
    block = text.split("$ llmctl plan --model llama-3.1-8b-instruct --slo", 1)[1].split("```", 1)[0]

    def rows(t):
        return [[c for c in re.split(r"[\s│┃]+", ln) if c] for ln in t.splitlines() if re.match(r"^│ (L4|L40S|A100|H100)", ln)]

    assert rows(block) and rows(block) == rows(r.out), f"rerun: llmctl {shlex.join(args)}"
    cheapest = [ln for ln in block.splitlines() if ln.startswith("cheapest:")]
    assert cheapest and cheapest[0] in r.out
    (gen,) = [c for c in commands(text, "gen-config") if "--slo" in c]
    line = text.split("$ llmctl gen-config --model llama-3.1-8b-instruct --slo", 1)[1].split("```", 1)[0].strip().splitlines()[-1]
    assert line.startswith("capacity (estimate):")
    monkeypatch.chdir(tmp_path)
    g = run_cli(capsys, *gen)
    assert g.code == 0 and line in g.err, g.err
