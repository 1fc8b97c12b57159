"""Docs that cannot drift: docs/cli.md is the CLI's own --help for every command and group."""

from __future__ import annotations

import subprocess
import sys

from helpers import REPO


def test_cli_reference_is_current():
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_cli_docs.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr + "\n(run: .venv/bin/python scripts/gen_cli_docs.py)"


def _typer_paths(app, prefix=()) -> set[tuple[str, ...]]:
    """Every command and group as Typer registered them (not the generator's walk)."""
    paths = set()
    for c in app.registered_commands:
        if not c.hidden:
            paths.add((*prefix, c.name or c.callback.__name__.replace("_", "-")))
    for g in app.registered_groups:
        name = g.name or g.typer_instance.info.name
        paths.add((*prefix, name))
        paths |= _typer_paths(g.typer_instance, (*prefix, name))
    return paths


def test_cli_reference_covers_every_command_and_group():
    """A section per command and per group (`lora`) and per group command
    (`lora ls`): a command or group the reference lacks fails here even if the
    generator's own walk missed it."""
    import re

    from llmctl.cli import app

    registered = _typer_paths(app)
    assert ("lora",) in registered and ("lora", "push") in registered
    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    documented = {tuple(h.split()) for h in re.findall(r"^## llmctl (.+)$", text, re.M)}
    assert registered - documented == set(), "missing from docs/cli.md (run scripts/gen_cli_docs.py)"
    assert documented - registered == set(), "docs/cli.md documents commands the CLI lacks"
    for path in registered:
        assert f"$ llmctl {' '.join(path)} --help\n" in text, path


def test_no_type_placeholders_as_option_metavars():
    text = (REPO / "docs" / "cli.md").read_text()
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("-"):  # an option row: its metavar is a readable word, never <str> / <list[str]>
            assert "<" not in stripped.split("  ")[0], line


def test_completion_completes_catalog_ids_and_gpu_types():
    from llmctl.cli.options import complete_gpu, complete_model

    assert "llama-3.1-8b-instruct" in complete_model("llama-3.1")
    assert all(m.startswith("qwen3") for m in complete_model("qwen3"))
    assert complete_gpu("a1") == ["A10G", "A100-40G", "A100-80G"]


def test_sizing_tables_are_current():
    """docs/sizing.md's per-category accuracy tables are bench/sizing.py --markdown's output."""
    import subprocess
    import sys

    doc = (REPO / "docs" / "sizing.md").read_text(encoding="utf-8")
    start = doc.index("--markdown`; tests/test_docs.py keeps it current -->\n") + len("--markdown`; tests/test_docs.py keeps it current -->\n")
    end = doc.index("<!-- end of generated tables -->")
    out = subprocess.run([sys.executable, str(REPO / "bench" / "sizing.py"), "--markdown"], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    assert doc[start:end] == out, "regenerate: python bench/sizing.py --markdown"


def test_diagnostics_page_is_current():
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_diagnostics_docs.py"), "--check"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_diagnostic_code_is_documented_and_used():
    """One registry (llmctl/validate/codes.py): every code the source emits is
    in it, every entry is emitted somewhere, and every example triggers its code."""
    import re

    sys.path.insert(0, str(REPO / "scripts"))
    from gen_diagnostics_docs import example_diagnostics

    from llmctl.validate.codes import CODES, SEVERITIES

    emitted, quoted = set(), set()
    for f in (REPO / "llmctl").rglob("*.py"):
        if f.name == "codes.py":
            continue
        text = f.read_text(encoding="utf-8")
        emitted |= set(re.findall(r'code="([a-z0-9-]+)"', text))
        quoted |= set(re.findall(r'"([a-z0-9-]+)"', text))
    assert emitted - set(CODES) == set(), "codes emitted but not in the registry"
    assert set(CODES) - quoted - {"invalid"} == set(), "registry entries nothing emits"  # invalid: the sink's default
    for c in CODES.values():
        assert c.severity in SEVERITIES and c.summary and c.fix
        if c.example:
            assert c.code in {d.code for d in example_diagnostics(c.example)}, c.code


def test_explain_prints_a_code_and_refuses_an_unknown_one(capsys):
    from helpers import run_cli

    r = run_cli(capsys, "validate", "--explain", "never-scales")
    assert r.code == 0 and r.out.startswith("never-scales (warning)\n") and "target_ongoing_requests" in r.out
    r = run_cli(capsys, "validate", "--explain", "never-scale")
    assert r.code == 2 and r.err.startswith("error: --explain: unknown diagnostic code 'never-scale'")


def test_capacity_tables_are_the_runs_on_file():
    """docs/capacity.md's latest-run table and its round-by-round table are
    bench/capacity.py's rendering of the runs kept in bench/results/."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("capacity_bench", REPO / "bench" / "capacity.py")
    capacity = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(capacity)
    runs = [json.loads(p.read_text()) for p in capacity.result_files()]
    assert [r["run"] for r in runs] == sorted({r["run"] for r in runs})  # numbered, oldest first, latest last
    doc = (REPO / "docs" / "capacity.md").read_text(encoding="utf-8")

    def block(name: str) -> str:
        return doc.split(f"<!-- {name}:begin -->\n", 1)[1].split(f"\n<!-- {name}:end -->", 1)[0]

    assert block("capacity-cpu").endswith(capacity.markdown(runs[-1]))
    assert block("capacity-retest") == capacity.retest_markdown(runs)
    kept = [r for run in runs for r in run["rows"] if "measured_per_round" in r]
    assert kept and all(len(r["measured_per_round"]) == len(r["predicted_per_round"]) == 2 for r in kept)
