"""Shared helpers for tests that drive the CLI (no fixtures here: see conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
LLMCTL = str(Path(sys.executable).parent / "llmctl")


@dataclass
class Result:
    code: int
    out: str
    err: str
    seconds: float = 0.0

    def json(self):
        return json.loads(self.out)


# What a command that waits (`up`, `rollback`, `bench`) needs beyond its own
# `--timeout`: start-up, the cluster calls before and after the wait.
WAIT_MARGIN_S = 300.0
DEFAULT_TIMEOUT_S = 600.0


def subprocess_timeout(args) -> float:
    """How long a test lets an llmctl subprocess run: its own ``--timeout``
    (or ``--duration``) plus a margin, so the test never kills a command
    earlier than the command itself would give up; else 600 s."""
    args = [str(a) for a in args]
    own = [float(args[i + 1]) for i, a in enumerate(args[:-1]) if a in ("--timeout", "--duration")]
    return max(own) + WAIT_MARGIN_S if own else DEFAULT_TIMEOUT_S


def llmctl(*args, timeout: float | None = None, env: dict | None = None, unset: tuple[str, ...] = ()) -> Result:
    """The real entry point in a subprocess, stdin not a terminal. ``env``
    adds to this process's environment, ``unset`` removes from it; the
    deadline is :func:`subprocess_timeout` unless given."""
    full = {k: v for k, v in os.environ.items() if k not in unset}
    full.update(env or {})
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "llmctl", *map(str, args)], env=full, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=timeout or subprocess_timeout(args))
    return Result(p.returncode, p.stdout, p.stderr, time.monotonic() - t0)


def wait_for(cond, what: str, timeout: float, interval: float = 2.0) -> float:
    """Seconds until ``cond()`` holds, polled every ``interval`` s (llmctl.poll);
    an AssertionError naming ``what`` after ``timeout`` s."""
    from llmctl.poll import poll_iter

    for elapsed in poll_iter(timeout, interval):
        if cond():
            return elapsed
    raise AssertionError(f"{what}: not within {timeout:.0f}s")


def run_cli(capsys, *args: str) -> Result:
    """Run llmctl in-process through its real entry point (main), stdin not a TTY."""
    from llmctl.cli import main

    capsys.readouterr()
    code = main([str(a) for a in args])
    cap = capsys.readouterr()
    return Result(code, cap.out, cap.err)


def run_subprocess(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 120) -> Result:
    """Run the installed console script, stdin from /dev/null (no terminal)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    p = subprocess.run([LLMCTL, *map(str, args)], cwd=cwd, env=full_env, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=timeout)
    return Result(p.returncode, p.stdout, p.stderr)


def python_api_blocks() -> list[str]:
    """The ```python blocks of docs/python-api.md, in order."""
    text = (REPO / "docs" / "python-api.md").read_text(encoding="utf-8")
    return [part.split("```", 1)[0] for part in text.split("```python\n")[1:]]


def files_under(d: Path) -> list[Path]:
    return sorted(p for p in d.rglob("*") if p.is_file()) if d.exists() else []


def serve_file(d: Path) -> Path:
    found = sorted(d.glob("serve_*.yaml"))
    assert len(found) == 1, found
    return found[0]


def load_yaml(p: Path):
    return yaml.safe_load(p.read_text(encoding="utf-8"))


def tiny_config() -> dict:
    """A small Llama config.json (no weights): enough for gen-config/validate."""
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 32, "max_position_embeddings": 2048,
        "vocab_size": 1000, "torch_dtype": "float32", "tie_word_embeddings": False,
    }


def make_model_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(tiny_config()), encoding="utf-8")
    return path


class Proc:
    """A child process whose stdout / stderr are collected by reader threads,
    so a test can wait for a line with a deadline instead of sleeping."""

    def __init__(self, args: list[str], env: dict | None = None):
        import threading

        full_env = dict(os.environ)
        full_env.update(env or {})
        self.p = subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL, text=True, env=full_env)
        self.out: list[str] = []
        self.err: list[str] = []
        self._threads = [threading.Thread(target=self._pump, args=(s, buf), daemon=True)
                         for s, buf in ((self.p.stdout, self.out), (self.p.stderr, self.err))]
        for t in self._threads:
            t.start()

    @staticmethod
    def _pump(stream, buf: list[str]) -> None:
        for line in stream:
            buf.append(line)

    def text(self, stream: str = "out") -> str:
        return "".join(self.out if stream == "out" else self.err)

    def wait_for(self, needle: str, *, stream: str = "out", timeout: float = 120) -> str:
        """Poll until ``needle`` appears in the stream (AssertionError at the deadline)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.text(stream)
            if needle in text:
                return text
            if self.p.poll() is not None and needle not in self.text(stream):
                for t in self._threads:
                    t.join(timeout=5)
                if needle in self.text(stream):
                    return self.text(stream)
                raise AssertionError(f"exited {self.p.returncode} before printing {needle!r}:\n{self.text('out')}\n{self.text('err')}")
            time.sleep(0.1)
        raise AssertionError(f"no {needle!r} after {timeout:.0f}s:\n{self.text('out')}\n{self.text('err')}")

    def interrupt(self, timeout: float = 15) -> Result:
        """Ctrl-C, pressed once, as a user would: the process must exit
        within ``timeout`` seconds (AssertionError otherwise, with its
        output; it is then killed). Pressing again would hide a lost Ctrl-C:
        `up --follow` once kept following after one, because a Ctrl-C that
        arrived during a garbage collection was handled inside the
        finalizer of a socket llmctl had left open, and that finalizer drops
        the exception (llmctl.launch.serve_api.ServeClient)."""
        import signal

        self.p.send_signal(signal.SIGINT)
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(timeout=30)
            for t in self._threads:
                t.join(timeout=5)
            raise AssertionError(f"still running {timeout:g}s after one Ctrl-C (killed):\n{self.text('out')[-3000:]}\n"
                                 f"{self.text('err')[-3000:]}") from None
        for t in self._threads:
            t.join(timeout=5)
        return Result(self.p.returncode, self.text("out"), self.text("err"))


# A model config llmctl sizes (Qwen2.5-7B on an L4) whose engine_kwargs tests vary.
MODEL_CONFIG = {"model_loading_config": {"model_id": "qwen", "model_source": "Qwen/Qwen2.5-7B-Instruct"},
                "accelerator_type": "L4", "engine_kwargs": {"max_model_len": 8192}}


def model_file(tmp_path, **engine_kwargs):
    """MODEL_CONFIG with ``engine_kwargs`` added, written to tmp_path/m.yaml."""
    import copy

    import yaml

    data = copy.deepcopy(MODEL_CONFIG)
    data["engine_kwargs"].update(engine_kwargs)
    f = tmp_path / "m.yaml"
    f.write_text(yaml.safe_dump(data, sort_keys=False))
    return f


def write_app(root: Path, app: str, route: str, llm: dict) -> Path:
    """A serve file of gen-config's shape: absolute path to model_config/<id>.yaml."""
    mid = llm["model_loading_config"]["model_id"]
    (root / "model_config").mkdir(parents=True, exist_ok=True)
    mc = root / "model_config" / f"{mid}.yaml"
    mc.write_text(yaml.safe_dump(llm, sort_keys=False))
    serve = root / f"serve_{app}.yaml"
    serve.write_text(
        yaml.safe_dump(
            {"applications": [{"name": app, "route_prefix": route, "import_path": "ray.serve.llm:build_openai_app",
                               "args": {"llm_configs": [str(mc)]}}]},
            sort_keys=False,
        )
    )  # fmt: skip
    return serve


def cpu_llm(model_id: str, source: str, **extra) -> dict:
    cfg = {
        "model_loading_config": {"model_id": model_id, "model_source": source},
        "engine_kwargs": {"tensor_parallel_size": 1, "dtype": "float32", "enforce_eager": True,
                          "max_model_len": 512, "kv_cache_memory_bytes": 67108864},
        "placement_group_config": {"bundles": [{"CPU": 1}]},
        "deployment_config": {"autoscaling_config": {"min_replicas": 1, "max_replicas": 1}},
    }  # fmt: skip
    cfg.update(extra)
    return cfg
