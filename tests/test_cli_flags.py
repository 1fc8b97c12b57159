"""One meaning per flag across the CLI (issue 39): every command and group is
walked; a long flag has one type, one metavar and one flag-ness wherever it
appears, and a short flag always stands for the same long flag. Every command
that reads or writes takes --json, and its output parses. The root --help
lists the exit codes from llmctl.errors.EXIT_CODES."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
import typer.main
from typer.testing import CliRunner

from llmctl.cli import app
from llmctl.errors import EXIT_CODES

from helpers import run_cli

# Long flags whose value may be shaped differently, and why (same meaning).
SHAPE_DIFFERS = {"--concurrency": "plan predicts for a list of concurrencies (N[,M...]); bench runs one (N)"}
# Commands without --json, and why.
NO_JSON = {
    "tiny-model": "a test fixture builder: writes a model directory and prints its path",
    "tiny-lora": "a test fixture builder: writes an adapter directory and prints its path",
}


def commands() -> dict[str, object]:
    out = {}

    def walk(cmd, path):
        subs = getattr(cmd, "commands", {})
        for name, sub in subs.items():
            walk(sub, [*path, name])
        if not subs:
            out[" ".join(path)] = cmd

    walk(typer.main.get_command(app), [])
    return out


def options():
    for name, cmd in commands().items():
        for p in cmd.params:
            if p.param_type_name == "option":
                yield name, p


def _scalar(annotation) -> str:
    """The value type of an option's annotation, without Optional and the list of a repeatable option
    (gen-config takes most per-model options once per --model; plan takes one)."""
    import typing

    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is typing.Annotated:
        return _scalar(args[0])
    if args:
        return _scalar(args[0])
    return getattr(annotation, "__name__", str(annotation))


def test_every_long_flag_has_one_type_and_metavar():
    seen = defaultdict(set)
    for cmd, p in options():
        for o in (*p.opts, *p.secondary_opts):
            if o.startswith("--"):
                key = (p.is_flag,) if o in SHAPE_DIFFERS else (_scalar(p.type_descriptor.annotation), p.is_flag, p.metavar)
                seen[o].add((key, cmd))
    differ = {o: sorted(v) for o, v in seen.items() if len({k for k, _ in v}) > 1}
    assert differ == {}, differ


def test_every_short_flag_means_one_long_flag():
    longs = defaultdict(set)
    for cmd, p in options():
        shorts = [o for o in p.opts if not o.startswith("--")]
        for s in shorts:
            longs[s].add(tuple(sorted(o for o in p.opts if o.startswith("--"))))
    assert {s: v for s, v in longs.items() if len(v) > 1} == {}


def test_every_command_that_reads_or_writes_takes_json():
    lacking = sorted(n for n, c in commands().items()
                     if not any("--json" in p.opts for p in c.params if p.param_type_name == "option"))
    assert lacking == sorted(NO_JSON), lacking


def test_json_output_parses(tmp_path, capsys):
    """The commands that need no cluster: their --json is one JSON document on stdout."""
    r = run_cli(capsys, "gen-config", "-m", "qwen3-0.6b", "--gpu", "L4", "--yes", "--output-dir", str(tmp_path), "--json")
    assert r.code == 0, r.err
    gen = json.loads(r.out)
    assert gen["serve_file"] in gen["written"] and all(p.startswith(str(tmp_path)) for p in gen["written"])
    for args in (["models"], ["plan", "-m", "qwen3-0.6b", "--gpu", "L4"], ["validate", gen["serve_file"]],
                 ["kuberay", gen["serve_file"], "--output", "-"],
                 ["kuberay", gen["serve_file"], "--output", str(tmp_path / "rs.yaml")]):
        r = run_cli(capsys, *args, "--json")
        assert r.code == 0, (args, r.err)
        json.loads(r.out)


def test_root_help_lists_the_exit_codes():
    r = CliRunner().invoke(app, ["--help"], prog_name="llmctl", env={"COLUMNS": "120", "NO_COLOR": "1"})
    assert r.exit_code == 0
    text = r.output[r.output.index("Exit codes:"):]
    rows = [ln.split(None, 1) for ln in text.splitlines()[1:] if ln.strip()]
    assert {int(c): t for c, t in rows} == EXIT_CODES


@pytest.mark.parametrize("cmd", ["status", "gen-config"])
def test_exit_codes_are_only_on_the_root_help(cmd):
    r = CliRunner().invoke(app, [cmd, "--help"], prog_name="llmctl", env={"COLUMNS": "120", "NO_COLOR": "1"})
    assert "Exit codes:" not in r.output
