"""Two Ray hosts on one machine: a head and a worker node, each in its own
network namespace with its own IP on a private bridge; the test process (and
llmctl) stays outside both and reaches them only over that link.

Everything is torn down by PID: every process left in a namespace is killed
(``ip netns pids``), then the namespaces, the bridge and the temp dirs go —
also when the test fails. Where namespaces cannot be created the caller skips
with the reason (:class:`NoNamespaces`).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx


class NoNamespaces(Exception):
    pass


def _ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + ["ip", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=30)


def _used_subnets() -> set[int]:
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    return {int(p.split(".")[2]) for p in out.split() if p.startswith("10.77.") and p.count(".") == 3}


class TwoHosts:
    GCS_PORT, DASHBOARD_PORT = 6379, 8265  # free inside fresh namespaces

    def __init__(self, ray_token: str | None = None) -> None:
        """``ray_token``: start both nodes with Ray's token authentication, the token
        in a 0600 file named by RAY_AUTH_TOKEN_PATH (issue 22)."""
        self.ray_token = ray_token
        self.tag = f"{os.getpid() % 10000:04d}{random.randint(0, 99):02d}"
        free = sorted(set(range(1, 255)) - _used_subnets())
        self.net = f"10.77.{random.choice(free)}"
        self.head_ip, self.worker_ip = f"{self.net}.1", f"{self.net}.2"
        self.ns = {"head": f"lmh{self.tag}", "worker": f"lmw{self.tag}"}
        self.bridge = f"lmb{self.tag}"
        self.tmp = Path(tempfile.mkdtemp(prefix="lmh-", dir="/tmp"))
        self.procs: dict[str, subprocess.Popen] = {}
        self.made: list[tuple[str, str]] = []  # ("netns"|"link", name) to delete
        self.token_file = self.tmp / "ray-token"
        if ray_token:
            fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, ray_token.encode())
            os.close(fd)

    @property
    def headers(self) -> dict:
        return {"Authorization": f"Bearer {self.ray_token}"} if self.ray_token else {}

    @property
    def dashboard_url(self) -> str:
        return f"http://{self.head_ip}:{self.DASHBOARD_PORT}"

    # -- network
    def create(self) -> "TwoHosts":
        if shutil.which("ip") is None:
            raise NoNamespaces("the `ip` command (iproute2) is not installed")
        r = subprocess.run(["ip", "netns", "add", self.ns["head"]], capture_output=True, text=True)
        if r.returncode != 0:
            raise NoNamespaces(f"cannot create a network namespace: {r.stderr.strip()}")
        self.made.append(("netns", self.ns["head"]))
        _ip("netns", "add", self.ns["worker"])
        self.made.append(("netns", self.ns["worker"]))
        _ip("link", "add", self.bridge, "type", "bridge")
        self.made.append(("link", self.bridge))
        _ip("addr", "add", f"{self.net}.254/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for role, addr in (("head", self.head_ip), ("worker", self.worker_ip)):
            ns, outer, inner = self.ns[role], f"lv{role[0]}{self.tag}", f"lp{role[0]}{self.tag}"
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            self.made.append(("link", outer))
            _ip("link", "set", inner, "netns", ns)
            _ip("link", "set", outer, "master", self.bridge)
            _ip("link", "set", outer, "up")
            _ip("link", "set", "lo", "up", ns=ns)
            _ip("addr", "add", f"{addr}/24", "dev", inner, ns=ns)
            _ip("link", "set", inner, "up", ns=ns)
        return self

    # -- Ray
    def _env(self, extra: dict | None = None) -> dict:
        env = dict(os.environ)
        env.update({"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0",
                    "PATH": os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")})
        env.pop("RAY_ADDRESS", None)
        env.pop("RAY_AUTH_TOKEN", None)
        if self.ray_token:
            env.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(self.token_file)})
        env.update(extra or {})
        return env

    def _start(self, role: str, args: list[str], env: dict | None, ok, what: str, timeout: float = 120) -> None:
        """``ray start`` in the role's namespace, until ``ok()``. Tried up to three
        times, each waiting longer, when it exits or is not ready in time: on a busy
        machine the raylet can miss Ray's fixed 30 s registration window ("The
        current node timed out during startup", ray/_private/node.py), as llmctl's
        own head start can; a fresh-clone CI run missed it twice in a row beside the
        head lane's loads."""
        ray = str(Path(sys.executable).parent / "ray")
        for attempt in (1, 2, 3):
            log = open(self.tmp / f"{role}.log", "w")
            temp = self.tmp / f"{role[0]}{attempt}"
            temp.mkdir()
            self.procs[role] = subprocess.Popen(
                ["ip", "netns", "exec", self.ns[role], ray, "start", "--block", "--temp-dir", str(temp),
                 "--disable-usage-stats", "--log-style", "record", *args],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self._env(env), start_new_session=True)
            try:
                return self._wait(ok, what, timeout * attempt)
            except (RuntimeError, TimeoutError):
                if attempt == 3:
                    raise
                self._kill_session(self.procs.pop(role))

    @staticmethod
    def _kill_session(p: subprocess.Popen) -> None:
        """Every process of a failed ``ray start`` (its session: start_new_session)."""
        import psutil

        for q in psutil.process_iter():
            try:
                if os.getsid(q.pid) == p.pid:
                    q.kill()
            except (ProcessLookupError, psutil.Error, OSError):
                pass
        p.wait(timeout=30)

    def start_head(self, num_cpus: int = 2, env: dict | None = None, num_gpus: int = 0,
                   resources: dict[str, float] | None = None) -> None:
        """``num_gpus``: logical GPUs (Ray schedules on the count; there are none here)."""
        extra = ["--resources", json.dumps(resources)] if resources else []
        self._start("head", ["--head", "--node-ip-address", self.head_ip, "--port", str(self.GCS_PORT),
                             "--dashboard-host", self.head_ip, "--dashboard-port", str(self.DASHBOARD_PORT),
                             "--num-cpus", str(num_cpus), "--num-gpus", str(num_gpus), *extra], env,
                    lambda: httpx.get(f"{self.dashboard_url}/api/serve/applications/", timeout=5,
                                      headers=self.headers).status_code == 200,
                    "head dashboard's Serve API")  # ready as llmctl's own head counts it (cluster._dashboard_ready)

    def start_worker(self, resources: dict[str, float], num_cpus: int = 3, env: dict | None = None, num_gpus: int = 0) -> None:
        self._start("worker", ["--address", f"{self.head_ip}:{self.GCS_PORT}", "--node-ip-address", self.worker_ip,
                               "--num-cpus", str(num_cpus), "--num-gpus", str(num_gpus), "--resources", json.dumps(resources)], env,
                    lambda: len(self.alive_nodes()) == 2, "worker node ALIVE")

    def alive_nodes(self) -> list[str]:
        data = httpx.get(f"{self.dashboard_url}/api/v0/nodes?detail=1", timeout=5, headers=self.headers).json()
        return [n["node_ip"] for n in data["data"]["result"]["result"] if n.get("state") == "ALIVE"]

    def _wait(self, ok, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for role, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"ray start ({role}) exited {p.returncode}: {(self.tmp / f'{role}.log').read_text()[-2000:]}")
            try:
                if ok():
                    return
            except (httpx.HTTPError, KeyError, ValueError):
                pass
            time.sleep(1)
        raise TimeoutError(f"{what}: not within {timeout:.0f}s")

    # -- teardown
    def destroy(self) -> None:
        for ns in self.ns.values():
            for _ in range(3):
                pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
                if not pids:
                    break
                for pid in pids:
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (ProcessLookupError, ValueError):
                        pass
                time.sleep(0.5)
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for kind, name in reversed(self.made):
            if kind == "netns":
                subprocess.run(["ip", "netns", "del", name], capture_output=True)
            else:
                subprocess.run(["ip", "link", "del", name], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)


@contextlib.contextmanager
def two_hosts(head: dict, worker: dict, ray_token: str | None = None):
    """A :class:`TwoHosts` started with ``head`` (``start_head``'s keywords) and
    ``worker`` (``start_worker``'s), torn down on exit; the test skips, saying
    why, where network namespaces cannot be made."""
    import pytest

    h = TwoHosts(ray_token=ray_token)
    try:
        try:
            h.create()
        except NoNamespaces as e:
            pytest.skip(f"no network namespaces here: {e}")
        h.start_head(**head)
        h.start_worker(**worker)
        yield h
    finally:
        h.destroy()
