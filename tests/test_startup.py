"""`llmctl --help` and `llmctl models` must not import ray or vllm (bench/startup.py
measures the time; this checks the imports, which is what makes it fast)."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = (
    "import sys; from llmctl.cli import main; rc = main({args!r}); "
    "print('HEAVY=' + ','.join(sorted(m for m in ('ray', 'vllm', 'torch', 'transformers', 'huggingface_hub') if m in sys.modules)))"
)


@pytest.mark.parametrize("args", [["--help"], ["models"], ["models", "--json"], ["gen-config", "--help"], ["plan", "--help"]])
def test_no_heavy_imports(args):
    p = subprocess.run([sys.executable, "-c", PROBE.format(args=args)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-1] == "HEAVY="
