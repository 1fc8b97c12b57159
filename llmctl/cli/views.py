"""Rendering shared by up / status / logs: progress, replica counts, next steps.

Progress goes to stderr — a live table when stderr is a terminal, plain lines
otherwise; results go to stdout."""

from __future__ import annotations

import json
import sys
import contextlib
import signal
import threading
import time
from typing import Iterator, Optional


from llmctl.cli.console import err, out
from llmctl.cli.flags import cli_text
from llmctl.launch.events import replicas_text  # noqa: F401 (status uses it from here)


def _progress_table(p):
    from rich.table import Table

    t = Table(title=f"deploying … {p.elapsed:.0f}s", title_justify="left", expand=False)
    for col in ("app", "status", "deployment", "deployment status", "replicas"):
        t.add_column(col)
    if not p.apps:
        t.add_row("…", "waiting for the controller", "", "", "")
    for a in p.apps:
        if not a.deployments:
            t.add_row(a.name, a.status, "(building the app)", "", "")
        for i, d in enumerate(a.deployments):
            t.add_row(a.name if i == 0 else "", a.status if i == 0 else "", d.name, d.status, replicas_text(d.replicas))
    if p.note:
        from rich.console import Group
        from rich.text import Text

        return Group(t, Text(p.note, style="yellow"))
    return t


class ProgressView:
    """Live table on a terminal; a plain line per change otherwise."""

    def __init__(self) -> None:
        self.tty = err.is_terminal
        self.live = None
        self._last = None
        self._last_print = 0.0

    def step(self, message: str) -> None:
        message = cli_text(message)
        if self.live is not None:
            self.live.console.print(message)
        else:
            err.print(message, markup=False, highlight=False)

    def update(self, p) -> None:
        if self.tty:
            if self.live is None:
                from rich.live import Live

                self.live = Live(_progress_table(p), console=err, refresh_per_second=4, transient=False)
                self.live.start()
            else:
                self.live.update(_progress_table(p))
            return
        line = str(p)
        sig = line.split("] ", 1)[1]
        now = time.monotonic()
        if sig != self._last or now - self._last_print > 15:
            err.print(line, markup=False, highlight=False)
            self._last = sig
            self._last_print = now

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def next_steps(app_name: str, local: bool) -> str:
    stop = f"llmctl down {app_name}" + (" (add --cluster to also stop the local Ray head)" if local else "")
    return f"next: llmctl status · llmctl logs {app_name} --follow · {stop}"


def print_ready(result, lora: Optional[dict] = None) -> None:
    """The endpoint and ready-to-paste examples: chat for generative models,
    embeddings or scores for models on vLLM's pooling runner; for a model with
    a LoRA path (``lora``: base id -> adapters in its store), a request for
    ``base:adapter``."""
    names = ", ".join(a.name for a in result.apps)
    out.print(f"{names} is RUNNING ({', '.join(result.model_ids) or 'no LLM models'}) after {result.elapsed:.1f}s", markup=False)
    if result.endpoint:
        chat = [m for m in result.model_ids if m not in result.pooling]
        embed = [m for m in result.model_ids if result.pooling.get(m) == "embed"]
        score = [m for m in result.model_ids if result.pooling.get(m) == "classify"]
        key = getattr(result, "api_key_env", None)
        auth = f" -H \"Authorization: Bearer ${key}\"" if key else ""
        out.print(f"endpoint: {result.endpoint}" + (f" (API key: ${key})" if key else ""), markup=False)
        out.print("", markup=False)
        out.print("curl:", markup=False)
        for model in chat[:1]:
            out.print(
                f"  curl {result.endpoint}/chat/completions -H 'Content-Type: application/json'{auth} \\\n"
                f"    -d '{{\"model\": \"{model}\", \"messages\": [{{\"role\": \"user\", \"content\": \"Hello!\"}}]}}'",
                markup=False, highlight=False,
            )
        for model in embed[:1]:
            out.print(
                f"  curl {result.endpoint}/embeddings -H 'Content-Type: application/json'{auth} \\\n"
                f"    -d '{{\"model\": \"{model}\", \"input\": \"Hello!\"}}'",
                markup=False, highlight=False,
            )
        for model in score[:1]:
            out.print(
                f"  curl {result.endpoint}/score -H 'Content-Type: application/json'{auth} \\\n"
                f"    -d '{{\"model\": \"{model}\", \"text_1\": \"What is Ray?\", \"text_2\": \"Ray is a framework for scaling Python.\"}}'",
                markup=False, highlight=False,
            )
        out.print("", markup=False)
        if chat or embed:  # the OpenAI client has no score call
            out.print("python (pip install openai):", markup=False)
            lines = ["  from openai import OpenAI", f"  client = OpenAI(base_url=\"{result.endpoint}\", api_key=\"not-needed\")"]
            if key:
                lines = ["  import os", "  from openai import OpenAI",
                         f"  client = OpenAI(base_url=\"{result.endpoint}\", api_key=os.environ[\"{key}\"])"]
            for model in chat[:1]:
                lines += [f"  reply = client.chat.completions.create(model=\"{model}\", messages=[{{\"role\": \"user\", \"content\": \"Hello!\"}}])",
                          "  print(reply.choices[0].message.content)"]
            for model in embed[:1]:
                lines += [f"  vector = client.embeddings.create(model=\"{model}\", input=\"Hello!\").data[0].embedding"]
            out.print("\n".join(lines), markup=False, highlight=False)
            out.print("", markup=False)
        for base, adapters in (lora or {}).items():
            app = result.apps[0].name if result.apps else "APP"
            if not adapters:
                out.print(f"LoRA: no adapters in {base}'s store yet; add one without a redeploy: "
                          f"llmctl lora push DIR {app}/NAME, then request model \"{base}:NAME\"", markup=False)
                continue
            out.print(f"LoRA adapters of {base} (request one as model \"{base}:ADAPTER\"): {', '.join(adapters)}", markup=False)
            out.print(
                f"  curl {result.endpoint}/chat/completions -H 'Content-Type: application/json'{auth} \\\n"
                f"    -d '{{\"model\": \"{base}:{adapters[0]}\", \"messages\": [{{\"role\": \"user\", \"content\": \"Hello!\"}}]}}'",
                markup=False, highlight=False,
            )
            out.print(f"  (llmctl lora ls {app} shows which replicas loaded which; llmctl lora push DIR {app}/NAME adds one)",
                      markup=False)
            out.print("", markup=False)
    out.print(next_steps(result.apps[0].name if result.apps else "APP", result.local), markup=False)


def print_logs(lines) -> None:
    for ln in lines:
        out.print(f"[{ln.source}] {ln.text}", markup=False, highlight=False)


@contextlib.contextmanager
def ctrl_c() -> Iterator[threading.Event]:
    """Within: Ctrl-C raises KeyboardInterrupt as usual and also sets the
    event yielded, which a loop checks each round. A KeyboardInterrupt can be
    lost — raised while a finalizer runs (a garbage-collected socket's
    ResourceWarning text is made by Python code, and the finalizer restores
    the exception state it saved) — the event cannot."""
    pressed = threading.Event()

    def on_sigint(signum, frame):
        pressed.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield pressed
    finally:
        signal.signal(signal.SIGINT, previous)


def follow_logs(target, app_name: Optional[str], lines: int, *, json_out: bool = False) -> None:
    """Print the app's logs as they are written until Ctrl-C (exit 0; the app keeps running);
    ``json_out``: one JSON object per line (JSON Lines)."""
    from llmctl.launch import logs

    with ctrl_c() as pressed:
        err.print("following logs; Ctrl-C stops following (the app keeps running)", markup=False)
        gen = logs.follow(target, app_name, lines, stop=pressed)
        try:
            for ln in gen:
                if json_out:
                    sys.stdout.write(json.dumps({"source": ln.source, "text": ln.text}) + "\n")
                    sys.stdout.flush()
                else:
                    out.print(f"[{ln.source}] {ln.text}", markup=False, highlight=False)
        except KeyboardInterrupt:
            pass
        finally:
            gen.close()
        err.print("stopped following; the app is still running", markup=False)



def engines_table(engines, url: str):
    """Each replica's vLLM engine (llmctl.perf.metrics.EngineStats)."""
    from rich.table import Table
    from rich.text import Text

    if not engines:
        return Text(f"engines: no vLLM metrics at {url} yet (an engine reports after it starts; "
                    "log_engine_metrics must not be false)")
    t = Table(title=f"engines (vLLM metrics from {url})", title_justify="left")
    for col in ("replica", "model", "running", "waiting", "KV cache", "gen tok/s", "TTFT mean", "ITL mean", "requests"):
        t.add_column(col, justify="left" if col in ("replica", "model") else "right")

    def ms(v):
        return "-" if v is None else f"{v * 1000:.0f} ms" if v >= 0.01 else f"{v * 1000:.1f} ms"

    for e in engines:
        t.add_row(e.replica, e.model, f"{e.running:g}", f"{e.waiting:g}", f"{e.kv_usage * 100:.1f}%",
                  "-" if e.generation_tokens_per_s is None else f"{e.generation_tokens_per_s:.1f}",
                  ms(e.ttft_mean_s), ms(e.itl_mean_s), f"{e.requests_done:g}")
    return t
