"""One way to reach a secured cluster (issue 38): every command that takes
``--address`` takes ``--ray-token-env``, every core function that takes
``address`` takes ``ray_token_env``, and no llmctl code writes the process
environment (a token or a credential put there is inherited by every thread
and subprocess started meanwhile)."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import llmctl

PKG = Path(llmctl.__file__).resolve().parent


def _commands(cmd, path: str = "llmctl"):
    """Every command of the CLI, groups walked (``lora ls`` included)."""
    if hasattr(cmd, "commands"):  # a group (typer's own, not always a click.Group)
        for name, sub in cmd.commands.items():
            yield from _commands(sub, f"{path} {name}")
    else:
        yield path, cmd


def test_every_command_with_address_takes_ray_token_env():
    import typer.main

    from llmctl.cli import app

    with_address = []
    for path, cmd in _commands(typer.main.get_command(app)):
        opts = {o for p in cmd.params for o in p.opts}
        if "--address" in opts:
            with_address.append(path)
            assert "--ray-token-env" in opts, f"{path} takes --address but not --ray-token-env"
    assert {"llmctl up", "llmctl status", "llmctl history", "llmctl rollback", "llmctl bench", "llmctl down",
            "llmctl logs", "llmctl lora ls"} <= set(with_address), with_address


def _core_functions():
    for info in pkgutil.walk_packages([str(PKG)], "llmctl."):
        if info.name.startswith(("llmctl.cli", "llmctl.cluster_modules")) or info.name == "llmctl.__main__":
            continue
        mod = importlib.import_module(info.name)
        for name, fn in vars(mod).items():
            if inspect.isfunction(fn) and fn.__module__ == mod.__name__ and not name.startswith("_"):
                yield f"{mod.__name__}.{name}", fn


def test_every_core_function_with_address_takes_ray_token_env():
    """The token's variable travels with the address as a parameter; a public
    function that took an address but no ``ray_token_env`` would reach a
    token-auth cluster only through the process environment."""
    with_address = []
    for name, fn in _core_functions():
        params = inspect.signature(fn).parameters
        if "address" in params:
            with_address.append(name)
            assert "ray_token_env" in params, f"{name} takes address but not ray_token_env"
    for api in ("up", "iter_up", "status", "down", "iter_down", "bench", "sweep", "history", "rollback", "check",
                "check_security"):
        fn = getattr(llmctl, api)
        assert f"{fn.__module__}.{fn.__name__}" in with_address, api


def _environ_writes(tree: ast.AST):
    """``os.environ[...] = ``, ``del os.environ[...]``, ``os.environ.update/pop/...``, ``os.putenv``."""
    def is_environ(node) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "environ" and getattr(node.value, "id", "") == "os"

    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and is_environ(t.value):
                    yield node.lineno
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            if is_environ(f.value) and f.attr in ("update", "pop", "popitem", "setdefault", "clear", "__setitem__", "__delitem__"):
                yield node.lineno
            if getattr(f.value, "id", "") == "os" and f.attr in ("putenv", "unsetenv"):
                yield node.lineno


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: str(p.relative_to(PKG)))
def test_no_llmctl_code_writes_the_process_environment(path):
    lines = list(_environ_writes(ast.parse(path.read_text(encoding="utf-8"))))
    assert not lines, f"{path.relative_to(PKG.parent)} writes os.environ at line(s) {lines}"


def test_the_environ_scan_finds_writes():
    """The scan itself: each form of write is found, reads are not."""
    src = ("import os\nos.environ['A'] = '1'\nos.environ.update(B='2')\nos.environ.pop('C', None)\n"
           "del os.environ['D']\nos.putenv('E', '5')\nx = os.environ.get('F')\ny = dict(os.environ)\n")
    assert sorted(_environ_writes(ast.parse(src))) == [2, 3, 4, 5, 6]


def test_ray_client_lookup_keeps_the_token_out_of_this_process_environment():
    """The dashboard lookup of a ``ray://`` / GCS address gives Ray the token
    in a child's environment: while it runs, this process's environment (which
    threads and subprocesses started meanwhile would inherit) never holds it.
    Something listens but is no Ray, and the child is given 5 s."""
    import os
    import socket
    import threading

    from llmctl.errors import ClusterUnreachable
    from llmctl.launch import address

    token = "t" * 64
    seen, done = [], threading.Event()

    def watch() -> None:
        while not done.is_set():
            if token in os.environ.values():
                seen.append(True)
            done.wait(0.01)

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    before = dict(os.environ)
    t = threading.Thread(target=watch)
    t.start()
    try:
        with pytest.raises(ClusterUnreachable, match="within 5 s"):
            address._lookup_in_child(f"127.0.0.1:{srv.getsockname()[1]}", token, timeout=5)
    finally:
        done.set()
        t.join()
        srv.close()
    assert not seen and dict(os.environ) == before
