"""`llmctl up / status / logs / down / tiny-model`: thin commands over
:mod:`llmctl.launch`, :mod:`llmctl.logs` and :mod:`llmctl.tinymodel`.

Top-level imports stay light (no ray, vllm, torch): `llmctl --help` and
`llmctl status` never load them. Progress goes to stderr — a live table when
stderr is a terminal, plain lines otherwise; results go to stdout.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer
from typing_extensions import Annotated

from llmctl.cli import app
from llmctl.cli.console import err, out, print_json
from llmctl.cli.options import AddressOpt, JsonOpt
from llmctl.errors import EXIT_FAILED, EXIT_OK, OutputExists, UsageError

TimeoutOpt = Annotated[float, typer.Option("--timeout", help="Seconds to wait for RUNNING before giving up (the app keeps deploying).")]


# --------------------------------------------------------------------------
# rendering helpers


def _replicas(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no replicas yet"


def _progress_line(p) -> str:
    parts = []
    for a in p.apps:
        deps = "; ".join(f"{d.name} {d.status} [{_replicas(d.replicas)}]" for d in a.deployments)
        parts.append(f"{a.name} {a.status}" + (f" — {deps}" if deps else ""))
    text = " | ".join(parts) or "waiting for the controller to list the app"
    if p.note:
        text += f" ({p.note})"
    return f"[{p.elapsed:5.1f}s] {text}"


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
            t.add_row(a.name if i == 0 else "", a.status if i == 0 else "", d.name, d.status, _replicas(d.replicas))
    if p.note:
        from rich.console import Group
        from rich.text import Text

        return Group(t, Text(p.note, style="yellow"))
    return t


class _ProgressView:
    """Live table on a terminal; a plain line per change otherwise."""

    def __init__(self) -> None:
        self.tty = err.is_terminal
        self.live = None
        self._last = None
        self._last_print = 0.0

    def step(self, message: str) -> None:
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
        line = _progress_line(p)
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


def _next_steps(app_name: str, local: bool) -> str:
    stop = f"llmctl down {app_name}" + (" (add --cluster to also stop the local Ray head)" if local else "")
    return f"next: llmctl status · llmctl logs {app_name} --follow · {stop}"


def _print_ready(result) -> None:
    names = ", ".join(a.name for a in result.apps)
    out.print(f"{names} is RUNNING ({', '.join(result.model_ids) or 'no LLM models'}) after {result.elapsed:.1f}s", markup=False)
    if result.endpoint:
        model = result.model_ids[0] if result.model_ids else "MODEL"
        out.print(f"endpoint: {result.endpoint}", markup=False)
        out.print("", markup=False)
        out.print("curl:", markup=False)
        out.print(
            f"  curl {result.endpoint}/chat/completions -H 'Content-Type: application/json' \\\n"
            f"    -d '{{\"model\": \"{model}\", \"messages\": [{{\"role\": \"user\", \"content\": \"Hello!\"}}]}}'",
            markup=False,
            highlight=False,
        )
        out.print("", markup=False)
        out.print("python (pip install openai):", markup=False)
        out.print(
            "  from openai import OpenAI\n"
            f"  client = OpenAI(base_url=\"{result.endpoint}\", api_key=\"not-needed\")\n"
            f"  reply = client.chat.completions.create(model=\"{model}\", messages=[{{\"role\": \"user\", \"content\": \"Hello!\"}}])\n"
            "  print(reply.choices[0].message.content)",
            markup=False,
            highlight=False,
        )
        out.print("", markup=False)
    out.print(_next_steps(result.apps[0].name if result.apps else "APP", result.local), markup=False)


def _print_logs(lines) -> None:
    for ln in lines:
        out.print(f"[{ln.source}] {ln.text}", markup=False, highlight=False)


def _follow(target, app_name: Optional[str], lines: int) -> None:
    from llmctl import logs

    err.print("following logs; Ctrl-C stops following (the app keeps running)", markup=False)
    gen = logs.follow(target, app_name, lines)
    try:
        for ln in gen:
            out.print(f"[{ln.source}] {ln.text}", markup=False, highlight=False)
    except KeyboardInterrupt:
        err.print("stopped following; the app is still running", markup=False)
    finally:
        gen.close()


# --------------------------------------------------------------------------
# up


@app.command("up")
def up_cmd(
    file: Annotated[Path, typer.Argument(help="A serve config (serve_*.yaml from `llmctl gen-config`).", show_default=False)],
    address: AddressOpt = None,
    timeout: TimeoutOpt = 900.0,
    no_wait: Annotated[bool, typer.Option("--no-wait", help="Return right after the config is accepted.")] = False,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="After RUNNING, tail the app's logs until Ctrl-C (the app keeps running).")] = False,
    num_cpus: Annotated[Optional[int], typer.Option("--num-cpus", help="Logical CPUs of a local head llmctl starts (default: max(8, cores)).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Validate FILE, deploy it (starting a local Ray head if no cluster is given), wait until RUNNING."""
    from llmctl import launch

    if timeout <= 0:
        raise UsageError(f"--timeout must be positive (got {timeout:g})")
    view = _ProgressView()
    result = None
    try:
        for ev in launch.up(file, address=address, timeout=timeout, wait=not no_wait, num_cpus=num_cpus):
            if isinstance(ev, launch.Step):
                view.step(ev.message)
            elif isinstance(ev, launch.Progress):
                view.update(ev)
            else:
                result = ev
    finally:
        view.close()
    assert result is not None
    if json_out:
        print_json(result.to_json())
    elif not result.running:
        names = ", ".join(f"{a.name} ({a.status})" for a in result.apps) or str(file)
        out.print(f"deployed {names}; not waiting for RUNNING", markup=False)
        out.print(_next_steps(result.apps[0].name if result.apps else "APP", result.local), markup=False)
    else:
        _print_ready(result)
    if follow and result.running:
        from llmctl.cluster import resolve_target

        _follow(resolve_target(address), result.apps[0].name if len(result.apps) == 1 else None, 20)


# --------------------------------------------------------------------------
# status


def _status_table(rep):
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    head = Text(f"cluster: {rep.dashboard_url}" + (" (local, started by llmctl)" if rep.local else ""))
    if not rep.apps:
        return Group(head, Text("no applications; deploy one with `llmctl up serve_*.yaml`"))
    t = Table(expand=False)
    for col in ("app", "status", "route", "models", "deployment", "replicas", "endpoint"):
        t.add_column(col, overflow="fold")
    for a in rep.apps:
        deps = a.deployments or []
        first = True
        for d in deps or [None]:
            t.add_row(
                a.name if first else "",
                a.status if first else "",
                (a.route_prefix or "") if first else "",
                ", ".join(a.model_ids) if first else "",
                f"{d.name} ({d.status})" if d else "",
                _replicas(d.replicas) if d else "",
                (a.endpoint or "") if first else "",
            )
            first = False
    msgs = []
    for a in rep.apps:
        if a.status != "RUNNING":
            if a.message:
                msgs.append(Text(f"{a.name}: {a.message.splitlines()[0]}", style="yellow"))
            for d in a.deployments:
                if d.message:
                    from llmctl.launch import reason_from_message

                    first = d.message.splitlines()[0]
                    reason = reason_from_message(d.message, max_lines=2)
                    text = first if reason == first else f"{first} {reason}"
                    msgs.append(Text(f"{a.name}/{d.name}: {text}", style="yellow"))
    return Group(head, t, *msgs)


@app.command("status")
def status_cmd(
    address: AddressOpt = None,
    json_out: JsonOpt = False,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Refresh every 2 s until Ctrl-C.")] = False,
) -> None:
    """Applications on the cluster: status, route, models, replicas, endpoint. Exit 0 if all RUNNING, 1 if not, 3 if no cluster."""
    from llmctl import launch

    rep = launch.status(address)
    if watch:
        rep = _watch(address, rep, json_out)
    elif json_out:
        print_json(rep.to_json())
    else:
        out.print(_status_table(rep))
    raise typer.Exit(EXIT_OK if rep.all_running else EXIT_FAILED)


def _watch(address, rep, json_out: bool):
    from llmctl import launch

    try:
        if out.is_terminal and not json_out:
            from rich.live import Live

            with Live(_status_table(rep), console=out, refresh_per_second=2) as live:
                while True:
                    time.sleep(2)
                    rep = launch.status(address)
                    live.update(_status_table(rep))
        else:
            last = None
            while True:
                text = rep.to_json()
                if text != last:
                    if json_out:
                        print_json(text)
                    else:
                        out.print(_status_table(rep))
                    last = text
                time.sleep(2)
                rep = launch.status(address)
    except KeyboardInterrupt:
        pass
    return rep


# --------------------------------------------------------------------------
# logs


@app.command("logs")
def logs_cmd(
    app_name: Annotated[Optional[str], typer.Argument(metavar="[APP]", help="Application name (default: all).")] = None,
    address: AddressOpt = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new lines until Ctrl-C.")] = False,
    lines: Annotated[int, typer.Option("--lines", "-n", help="Lines per log file to show first.")] = 50,
) -> None:
    """Replica and controller logs of an app (local cluster: its session dir; remote: Ray's log API)."""
    from llmctl import logs
    from llmctl.cluster import resolve_target

    if lines < 0:
        raise UsageError(f"--lines must be >= 0 (got {lines})")
    target = resolve_target(address)
    if follow:
        _follow(target, app_name, lines)
        return
    got = logs.tail(target, app_name, lines)
    if not got:
        err.print("no log lines yet", markup=False)
    _print_logs(got)


# --------------------------------------------------------------------------
# down


@app.command("down")
def down_cmd(
    app_name: Annotated[Optional[str], typer.Argument(metavar="[APP]", help="Application to delete (default: all).")] = None,
    address: AddressOpt = None,
    cluster: Annotated[bool, typer.Option("--cluster", help="Also stop the local Ray head llmctl started (by its PIDs).")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for the apps to be gone.")] = 120.0,
    json_out: JsonOpt = False,
) -> None:
    """Delete one app or all apps and wait until they are gone; --cluster also stops the local head."""
    from llmctl import launch

    res = None
    for ev in launch.down(app_name, address=address, stop_cluster=cluster, timeout=timeout):
        if isinstance(ev, launch.Step):
            err.print(ev.message, markup=False)
        else:
            res = ev
    assert res is not None
    if json_out:
        print_json(
            {
                "removed": res.removed,
                "remaining": res.remaining,
                "cluster_stopped": res.cluster_stopped,
                "stopped_pids": res.stop.pids if res.stop else [],
            }
        )
        return
    if res.cluster_stopped:
        n = len(res.stop.pids) if res.stop else 0
        apps = f" and its apps ({', '.join(res.removed)})" if res.removed else ""
        out.print(f"stopped the local Ray head{apps}: {n} processes, none left" if n else "no local Ray head was running", markup=False)
        out.print("next: llmctl up serve_*.yaml starts a new one", markup=False)
        return
    if res.removed:
        out.print(f"deleted {', '.join(res.removed)}", markup=False)
    else:
        out.print("no applications to delete", markup=False)
    if res.remaining:
        out.print(f"still running: {', '.join(res.remaining)}; next: llmctl status", markup=False)
    else:
        out.print("next: llmctl up serve_*.yaml · llmctl down --cluster stops the local Ray head", markup=False)


# --------------------------------------------------------------------------
# tiny-model


@app.command("tiny-model")
def tiny_model_cmd(
    directory: Annotated[Path, typer.Argument(metavar="DIR", help="Directory to write the model into (e.g. ./demo/tiny-llama).")],
    force: Annotated[bool, typer.Option("--force", help="Write into a non-empty directory.")] = False,
) -> None:
    """Build the tiny random-weight Llama used by tests and the demo (offline, deterministic, ~0.7 MB)."""
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{directory} exists and is not a directory")
    if directory.is_dir() and any(directory.iterdir()) and not force:
        raise OutputExists(f"{directory} is not empty; pass --force to write into it")
    from llmctl import tinymodel

    try:
        path = tinymodel.build_tiny_model(directory)
    except ImportError as e:
        raise UsageError(f"building the tiny model needs torch, transformers and tokenizers ({e}); run `make setup`")
    size = sum(p.stat().st_size for p in path.iterdir() if p.is_file())
    out.print(f"wrote a tiny Llama to {path} ({size / 1e6:.2f} MB, sha256 {tinymodel.digest(path)[:12]})", markup=False)
    out.print(f"next: llmctl gen-config --model {path} --gpu cpu --yes --output-dir DIR", markup=False)
