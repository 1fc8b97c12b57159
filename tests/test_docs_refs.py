"""Names the docs show resolve, so a rename cannot leave them stale silently.

- every ``llmctl.x.y`` in README.md, docs/*.md and the code's docstrings and
  comments (llmctl/, tests/, scripts/, bench/) imports, or is an attribute of
  what imports;
- every repository path the docs show in a code span (``llmctl/...``,
  ``tests/...``, ``docs/...``, ``bench/...``, ...) exists, and every ``.py``
  path under llmctl/, tests/, scripts/ or bench/ that the code names exists;
- every ``llmctl <command>`` the docs show (a code span or a line of a code
  block) is a command of the CLI, and each ``--flag`` on it is one of that
  command's options;
- nothing in the repository points at files outside it.
"""

from __future__ import annotations

import glob
import importlib
import re
import shlex
from functools import lru_cache
from pathlib import Path

import pytest

from helpers import REPO

DOC_FILES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
CODE_FILES = sorted(p for d in ("llmctl", "tests", "scripts", "tools", "bench") for p in (REPO / d).rglob("*.py"))

NAME = re.compile(r"(?<![\w./-])llmctl(?:\.[A-Za-z_][A-Za-z0-9_]*)+\*?")
SPAN = re.compile(r"(?<!`)`([^`\n]+(?:\n[^`\n]+)?)`(?!`)")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
ROOT_FILES = {"Makefile", "pyproject.toml", "mkdocs.yml", "README.md", "CHANGELOG.md"}


def _tracked_top_dirs() -> list[str]:
    names = {"llmctl", "tests", "scripts", "tools", "bench", "docs", "model_catalog", "templates", ".ci"}
    return sorted(n for n in names if (REPO / n).is_dir())


TOP_DIRS = _tracked_top_dirs()
PATH = re.compile(r"^(?:%s)/[\w.*<>/-]*$" % "|".join(re.escape(t) for t in TOP_DIRS))
CODE_PATH = re.compile(r"(?<![\w./-])(?:llmctl|tests|scripts|tools|bench)/[\w/.-]*\w\.py\b")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO))


# --------------------------------------------------------------------------
# llmctl.x.y names


def resolves(name: str) -> bool:
    """``llmctl.a.b.c``: the longest importable module prefix, then attributes.
    A trailing ``*`` (``llmctl.spec.parse_*``) asks for an attribute with that prefix."""
    star = name.endswith("*")
    parts = name.rstrip("*").rstrip(".").split(".")
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        try:
            obj = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name and (module == e.name or module.startswith(e.name + ".")):
                continue
            raise
        rest = parts[i:]
        for j, attr in enumerate(rest):
            if star and j == len(rest) - 1:
                return any(a.startswith(attr) for a in dir(obj))
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _names(text: str) -> set[str]:
    return {m.group(0) for m in NAME.finditer(text) if "__main__" not in m.group(0)}


@pytest.mark.parametrize("path", DOC_FILES, ids=_rel)
def test_python_names_in_docs_resolve(path):
    bad = sorted(n for n in _names(_text(path)) if not resolves(n))
    assert not bad, f"{_rel(path)} names what does not exist: {bad}"


def test_python_names_in_code_resolve():
    bad = {}
    for path in CODE_FILES:
        if path.name == Path(__file__).name:  # its own examples of stale names
            continue
        for n in _names(_text(path)):
            if not resolves(n):
                bad.setdefault(n, []).append(_rel(path))
    assert not bad, bad


# --------------------------------------------------------------------------
# repository paths


def _exists(path: str) -> bool:
    pattern = re.sub(r"<[^>]*>|X\.Y\.Z", "*", path.split("::")[0]).rstrip("/")
    return bool(glob.glob(str(REPO / pattern)))


def _spans(text: str) -> list[str]:
    """Inline code spans outside fenced blocks, whitespace joined."""
    return [" ".join(s.split()) for s in SPAN.findall(FENCE.sub("", text))]


@pytest.mark.parametrize("path", DOC_FILES, ids=_rel)
def test_repository_paths_in_docs_exist(path):
    shown = [s for s in _spans(_text(path)) if PATH.match(s) or s in ROOT_FILES]
    bad = [s for s in shown if not _exists(s)]
    assert not bad, f"{_rel(path)} shows paths that do not exist: {bad}"


def test_repository_paths_in_code_exist():
    bad = {}
    for path in CODE_FILES:
        if path.name == Path(__file__).name:
            continue
        for p in CODE_PATH.findall(_text(path)):
            if not _exists(p):
                bad.setdefault(p, []).append(_rel(path))
    assert not bad, bad


def test_the_path_checks_see_paths():
    """Not vacuous: the docs show many repository paths, and a missing one is caught."""
    shown = [s for p in DOC_FILES for s in _spans(_text(p)) if PATH.match(s)]
    assert len(shown) > 30
    assert not _exists("tests/test_validate_builders.py") and _exists("tests/test_validate_ray.py")
    assert _exists("llmctl/engine_args/tables/vllm-X.Y.Z.json") and _exists("tests/test_launch.py::test_up")
    assert not resolves("llmctl.failures") and resolves("llmctl.launch.failures.diagnose")


# --------------------------------------------------------------------------
# llmctl commands and their flags


@lru_cache(maxsize=1)
def _cli():
    import typer.main

    from llmctl.cli import app

    return typer.main.get_command(app)


def _options(cmd) -> set[str]:
    return {o for p in cmd.params for o in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))} | {"--help"}


def command_problem(line: str) -> str | None:
    """Why ``llmctl ...`` (one shown command line) is not a command of the CLI
    with those flags, or None. Placeholders (FILE, APP, [--x], …) are fine."""
    line = line.split(" # ", 1)[0].split("  #", 1)[0]
    try:
        words = shlex.split(line)
    except ValueError:
        words = line.split()
    words = [w.strip("[](),;|") for w in words[1:]]
    root = _cli()
    global_opts = _options(root)
    cmd, path = root, []
    if words and words[0].startswith("<"):  # llmctl <command>
        return None
    for w in words:
        if w.startswith("-") or not getattr(cmd, "commands", None):
            break
        if w not in cmd.commands:
            if cmd is root:
                return f"no command {w!r}"
            return f"no command {' '.join([*path, w])!r}" if w.islower() and w.isalpha() else None
        cmd, path = cmd.commands[w], [*path, w]
    if not path:
        return None if not words or words[0] in global_opts else f"no command in {line!r}"
    known = _options(cmd) | global_opts
    for w in words:
        flag = w.split("=", 1)[0]
        if re.fullmatch(r"--[a-z][a-z0-9-]*", flag) and flag not in known:
            return f"llmctl {' '.join(path)} has no option {flag}"
    return None


def shown_commands(text: str) -> list[str]:
    """``llmctl ...`` lines of code blocks and inline code spans."""
    lines = []
    for block in FENCE.findall(text):
        block = block.replace("\\\n", " ")
        prompts = [ln for ln in block.splitlines() if ln.startswith("$ ")]
        for line in prompts or block.splitlines():  # a session: its commands, not its output
            line = line.strip().removeprefix("$ ").removeprefix(".venv/bin/")
            line = re.sub(r"^(?:[A-Z_]+=\S+ )+", "", line)  # VAR=value llmctl ...
            if line.startswith("llmctl ") and not line.startswith("llmctl 0."):
                lines.append(line)
    lines += [s.removeprefix(".venv/bin/") for s in _spans(text) if s.removeprefix(".venv/bin/").startswith("llmctl ")]
    return lines


@pytest.mark.parametrize("path", DOC_FILES, ids=_rel)
def test_commands_in_docs_exist_with_their_flags(path):
    problems = [(line, p) for line in shown_commands(_text(path)) if (p := command_problem(line))]
    assert not problems, f"{_rel(path)}: {problems}"


def test_the_command_check_sees_commands_and_flags():
    assert len([c for p in DOC_FILES for c in shown_commands(_text(p))]) > 100
    assert command_problem("llmctl lora push DIR APP/NAME --force") is None
    assert command_problem("llmctl check FILE [--address] [--json] [--no-versions]") is None
    assert command_problem("llmctl lora pull DIR") == "no command 'lora pull'"
    assert command_problem("llmctl deploy serve.yaml") == "no command 'deploy'"
    assert command_problem("llmctl plan --model x --gpus L4") == "llmctl plan has no option --gpus"


def test_every_command_that_takes_address_takes_ray_token_env():
    """What docs/security.md says of --ray-token-env."""
    def walk(cmd, path):
        for name, sub in getattr(cmd, "commands", {}).items():
            yield [*path, name], sub
            yield from walk(sub, [*path, name])

    with_address = [(p, c) for p, c in walk(_cli(), []) if "--address" in _options(c)]
    assert len(with_address) >= 10
    assert [p for p, c in with_address if "--ray-token-env" not in _options(c)] == []
    assert "every command that takes `--address` takes it" in " ".join(_text(REPO / "docs" / "security.md").split())


# --------------------------------------------------------------------------
# nothing outside the repository

OUTSIDE = re.compile(r"DESIGN\.md|STYLE\.md|\.\./shared\b|shared/reference|shared/data|(?<![\w/])/work/")


def test_nothing_points_outside_the_repository():
    files = [*DOC_FILES, REPO / "CHANGELOG.md", REPO / "Makefile", REPO / ".ci" / "run", REPO / "pyproject.toml",
             REPO / "mkdocs.yml", *CODE_FILES, *(REPO / "model_catalog").glob("*.yaml"), *(REPO / "templates").rglob("*"),
             *(p for p in (REPO / "tests" / "data").rglob("*") if p.suffix in (".yaml", ".md", ".txt"))]
    this = Path(__file__).resolve()
    bad = {_rel(f): sorted(set(OUTSIDE.findall(_text(f)))) for f in files
           if f.is_file() and f.resolve() != this and OUTSIDE.search(_text(f))}
    assert not bad, bad
