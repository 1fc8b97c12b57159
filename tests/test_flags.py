"""Flags live in the CLI layer (issue 19): the core names a parameter in a
message with ``llmctl.errors.param``; the Python API shows the parameter, the
CLI the flag, with the same words around it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import llmctl
from helpers import run_cli
from llmctl.cli.flags import cli_text, flag
from llmctl.errors import UsageError, param, render

PKG = Path(llmctl.__file__).resolve().parent
# the core modules whose messages must not spell a flag (commands in backticks, `llmctl down --cluster`, are fine)
CORE = sorted([*PKG.glob("launch/*.py"), PKG / "genconfig.py", PKG / "planner.py", PKG / "spec.py", PKG / "loadgen.py", PKG / "loadsweep.py",
               PKG / "render.py"])
FLAG = re.compile(r"(?<![\w`-])--[a-z][a-z-]+")


def _text(node: ast.AST) -> str:
    """A string literal (f-strings with {} for their values)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return ""


def _messages(tree: ast.AST):
    """The literals of every raise and of every Step(...) (what users read)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) or (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Step"):
            parts = {id(v) for sub in ast.walk(node) if isinstance(sub, ast.JoinedStr) for v in sub.values}
            for sub in ast.walk(node):
                text = "" if id(sub) in parts else _text(sub)
                if text:
                    yield sub.lineno, text


@pytest.mark.parametrize("path", CORE, ids=lambda p: str(p.relative_to(PKG)))
def test_core_messages_name_parameters_not_flags(path):
    found = [f"{path.name}:{line}: {text}" for line, text in _messages(ast.parse(path.read_text()))
             if FLAG.search(re.sub(r"`[^`]*`", "", text))]
    assert not found, "\n".join(found)


def _cli_options() -> set[str]:
    import typer.main

    from llmctl.cli import app

    group = typer.main.get_command(app)
    return {o for cmd in group.commands.values() for p in cmd.params for o in [*p.opts, *p.secondary_opts]}


def test_every_parameter_named_in_the_core_is_a_cli_flag():
    """Each ``param("name", ...)`` of the core spells as an option some command has."""
    used = set()
    for path in CORE:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("param", "parse_flag") and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    value = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else None
                    used.add((first.value, value))
    names = {n for n, _ in used}
    assert {"tp", "max_model_len", "force", "address", "http_host", "send_token", "preflight", "stop_cluster", "url"} <= names
    options = _cli_options()
    for name, value in sorted(used, key=str):
        spelled = flag(name, True if value is None else value).split()[0]
        assert spelled in options, f"param({name!r}) spells as {spelled}, which no command has"


def test_spellings():
    text = f"{param('http_host')}: pass {param('http_host', '0.0.0.0')}, {param('force', True)}, {param('preflight', False)}, " \
           f"{param('stop_cluster', True)}, {param('max_model_len')}"
    assert render(text) == "http_host: pass http_host='0.0.0.0', force=True, preflight=False, stop_cluster=True, max_model_len"
    assert cli_text(text) == "--http-host: pass --http-host 0.0.0.0, --force, --no-preflight, --cluster, --max-model-len"
    e = UsageError(text, param="http_host")
    assert str(e) == e.message == render(text) and e.template == text and cli_text(e) == cli_text(text)


def test_plan_error_in_python_and_on_the_command_line(capsys):
    with pytest.raises(UsageError) as e:
        llmctl.plan("qwen2.5-7b-instruct", gpu="H100", gpu_memory=80)
    assert e.value.message == "gpu_memory: pass either gpu or gpu_memory, not both" and e.value.param == "gpu_memory"
    r = run_cli(capsys, "plan", "--model", "qwen2.5-7b-instruct", "--gpu", "H100", "--gpu-memory", "80")
    assert r.code == 2 and r.err.strip() == "error: --gpu-memory: pass either --gpu or --gpu-memory, not both"
    with pytest.raises(UsageError) as e:
        llmctl.plan("qwen2.5-7b-instruct", gpu="H100", tp=3)
    assert e.value.message.startswith("tp: ") and e.value.param == "tp"


def test_existing_file_error_in_python(tmp_path):
    llmctl.generate("qwen3-0.6b", gpu="L4", max_model_len=4096, output_dir=tmp_path)
    with pytest.raises(UsageError, match=r"already exists; pass force=True to overwrite it$") as e:
        llmctl.generate("qwen3-0.6b", gpu="L4", max_model_len=4096, output_dir=tmp_path)
    assert e.value.param == "force"


def test_up_refuses_http_host_on_the_local_head(config_model, tmp_path, capsys):
    gen = llmctl.generate(str(config_model), gpu="cpu", output_dir=tmp_path)
    with pytest.raises(UsageError) as e:
        llmctl.up(gen.serve_file, http_host="0.0.0.0")
    assert e.value.message == ("http_host: the local head llmctl starts serves on 127.0.0.1 only; http_host is for a "
                               "cluster given with address") and e.value.param == "http_host"
    r = run_cli(capsys, "up", gen.serve_file, "--http-host", "0.0.0.0")
    assert r.code == 2 and "error: --http-host: the local head llmctl starts serves on 127.0.0.1 only; --http-host is " \
                           "for a cluster given with --address" in r.err
