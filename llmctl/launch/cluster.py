"""The local Ray head that llmctl starts and owns, and finding a cluster.

Where the state file lives
--------------------------
``$LLMCTL_HOME/cluster.json``, with ``LLMCTL_HOME`` defaulting to
``~/.llmctl``. It is per user, not per project directory, on purpose: the
cluster is a machine-wide thing (ports, RAM, processes), and ``llmctl status``
or ``llmctl down --cluster`` typed in any directory must find the cluster a
previous ``llmctl up`` started, instead of reporting "no cluster" while one
keeps holding 3–6 GB of RAM. ``LLMCTL_HOME`` gives isolated clusters when
wanted (the tests set it to a temporary directory). The file holds PIDs, ports,
the dashboard URL, the temp dir and the path of the Ray token file (0600) —
never a secret itself.

How the head is started
-----------------------
``ray start --head --block`` runs as our child in a new session
(``start_new_session``), so its PID is also the session id of every process
Ray starts below it (GCS, raylet, dashboard, workers — workers change their
process group but not their session). Processes are read through psutil
(and ``os.getsid``); the leader's creation time, kept with its PID, guards
against a reused PID. Stopping = SIGTERM to that PID, a short
wait, then SIGKILL to whatever is left in the session, then a check that
nothing is left. Ray's own ``stop`` command is never used: it kills every Ray cluster on
the machine, including other people's.

Everything listens on 127.0.0.1 and on ports picked from one free block (never
Ray's defaults 6379/8265/10001/8000/9000). Ray rewrites ``--node-ip-address
127.0.0.1`` to the machine's outward IP unless
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (measured on Ray 2.60: with it, GCS,
raylet, dashboard, agents and workers all bind 127.0.0.1); that setting only
forbids other nodes from joining, which a private single-node head never wants.
``RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S=0`` makes SIGTERM tear down at once
instead of draining the node for 30 s.

Token authentication is on (``RAY_AUTH_MODE=token``): each head gets a fresh
random token in ``$LLMCTL_HOME/ray-token`` (0600, beside ``cluster.json``,
removed when the head stops), handed to Ray by path only
(``RAY_AUTH_TOKEN_PATH``) — see :mod:`llmctl.launch.raytoken`. Without it any
local user could ``POST /api/jobs/`` to the dashboard and run code as the
user who ran ``llmctl up``. A stray ``~/.ray/auth_token`` is never read.

The temp dir is short (``/tmp/llmctl-XXXXXXXX``) because Ray puts Unix socket
paths under it and those are limited to ~107 bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

import psutil

from llmctl.errors import LlmctlError
from llmctl.launch import raytoken, tokens
from llmctl.launch.ports import RAY_DEFAULT_PORTS, WORKER_PORTS, pick_ports  # noqa: F401 (re-exported)
from llmctl.paths import llmctl_home, write_atomic
from llmctl.poll import poll_until
from llmctl.serve_facts import LOOPBACK_HOST

STATE_VERSION = 2  # 2: the leader's psutil creation time instead of /proc start ticks
START_TIMEOUT_S = 90.0
SAME_PROCESS_S = 0.05  # creation times this close are the same process (psutil's are exact to a clock tick)


def state_path() -> Path:
    return llmctl_home() / "cluster.json"


@dataclass
class ClusterState:
    """What ``cluster.json`` holds about the head llmctl started."""

    pid: int  # `ray start --head --block`: the session leader
    pid_create_time: float  # psutil's creation time of the leader (seconds since the epoch), guards against PID reuse
    ports: dict[str, int]
    dashboard_url: str
    gcs_address: str
    temp_dir: str
    serve_http_port: int
    num_cpus: int
    num_gpus: int | None  # None: not passed, Ray detected them (it honours CUDA_VISIBLE_DEVICES)
    log_file: str
    started_at: float
    pids: dict[str, str] = field(default_factory=dict)  # pid -> process name, seen once up
    token_fd: int | None = None  # the head's in-memory HF token file (launch/tokens.py), not the token
    ray_token_file: str | None = None  # the head's Ray auth token (0600, launch/raytoken.py); None: auth off (older llmctl)
    version: int = STATE_VERSION

    @property
    def session_dir(self) -> Path:
        return Path(self.temp_dir) / "session_latest"

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK_HOST}:{self.serve_http_port}"

    @property
    def ray_token(self) -> str | None:
        """The head's Ray auth token, read from its 0600 file (never kept in cluster.json)."""
        return raytoken.read_token_file(self.ray_token_file)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "ClusterState":
        data = dict(data)
        if "pid_create_time" not in data and "pid_start_ticks" in data:  # a state file of llmctl < state version 2
            data["pid_create_time"] = psutil.boot_time() + int(data["pid_start_ticks"]) / os.sysconf("SC_CLK_TCK")
            data["version"] = STATE_VERSION
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


# --------------------------------------------------------------------------
# state file


def load_state() -> ClusterState | None:
    p = state_path()
    try:
        return ClusterState.from_json(json.loads(p.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as e:
        raise LlmctlError(f"{p}: unreadable cluster state ({e}); delete it if no llmctl cluster is running")


def save_state(state: ClusterState) -> Path:
    return write_atomic(state_path(), json.dumps(state.to_json(), indent=2) + "\n", mode=0o600)


@contextmanager
def start_lock(timeout: float = START_TIMEOUT_S * 4) -> Iterator[None]:
    """Held while a head is looked for and started, so that two llmctl
    processes sharing an LLMCTL_HOME (two terminals, a CI job beside a user)
    start one head between them: the second waits, then finds the first's."""
    from filelock import FileLock, Timeout

    path = llmctl_home() / "cluster.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(str(path), timeout=timeout):
            yield
    except Timeout:
        raise LlmctlError(f"{path}: another llmctl has been starting the local cluster for {timeout:.0f} s; "
                          "check it with `llmctl status`") from None


def clear_state() -> None:
    try:
        state_path().unlink()
    except FileNotFoundError:
        pass


def running_state() -> ClusterState | None:
    """The state of the local cluster if its head process is still alive."""
    st = load_state()
    if st is not None and is_alive(st):
        return st
    return None


# --------------------------------------------------------------------------
# processes


def _create_time(pid: int) -> float | None:
    """When process ``pid`` was created (psutil), None if there is none."""
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return None


def _same_process(pid: int, create_time: float) -> bool | None:
    """Whether ``pid`` is still the process created at ``create_time``; None if no process has that PID."""
    now = _create_time(pid)
    return None if now is None else abs(now - create_time) < SAME_PROCESS_S


def _session_id(pid: int) -> int | None:
    """The session of a live process; None for no process or a zombie (dead, waiting to be reaped)."""
    try:
        if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return None
        return os.getsid(pid)
    except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError, PermissionError, ValueError):
        return None


def _comm(pid: int) -> str:
    try:
        return psutil.Process(pid).name()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "?"


def session_pids(sid: int) -> list[int]:
    """Live (non-zombie) processes whose session id is ``sid``."""
    return sorted(p for p in psutil.pids() if _session_id(p) == sid)


def is_alive(state: ClusterState) -> bool:
    return bool(_same_process(state.pid, state.pid_create_time)) and _session_id(state.pid) is not None


def cluster_pids(state: ClusterState) -> list[int]:
    """Processes that belong to the cluster: its session, if the leader is ours."""
    if _same_process(state.pid, state.pid_create_time) is False:
        return []  # the PID was reused by an unrelated process: leave it alone
    return session_pids(state.pid)


def head_environ(state: ClusterState) -> dict[str, str] | None:
    """The environment the local head was started with (its raylet and
    workers inherit it); None when it cannot be read."""
    if not _same_process(state.pid, state.pid_create_time):
        return None
    try:
        return psutil.Process(state.pid).environ()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


# --------------------------------------------------------------------------
# start / stop


def ray_executable() -> str:
    cand = Path(sys.executable).parent / "ray"
    if cand.exists():
        return str(cand)
    found = shutil.which("ray")
    if not found:
        raise LlmctlError("the `ray` command was not found; install llmctl's dependencies (make setup)")
    return found


def default_num_cpus() -> int:
    """Logical CPUs to advertise. A tiny CPU app takes 3 (ingress 1, LLMServer
    replica 1 + its placement-group bundle 1, measured on Ray 2.60), so a
    2-core box advertises 8 to hold two apps at once; vLLM's CPU engine uses
    the real cores whatever this says."""
    return max(8, os.cpu_count() or 1)


# How often the head's processes export their metrics (vLLM's among them) to the
# Prometheus endpoint `status --metrics` and `top` read. Ray's default, 10 s, is
# longer than `top`'s 2 s refresh: measured on the tiny CPU engine at about
# 615 generated tokens/s (bench), `top` showed 0, 0, 0, 2436, 0, 0, 2150, 0
# tokens/s and 0 running requests; with 1 s it showed 518-771 and 0-2 running.
METRICS_REPORT_INTERVAL_MS = 1000


def _ray_env(temp_dir: str | None = None) -> dict[str, str]:
    """The head's environment. With ``temp_dir``: vLLM's ZeroMQ IPC sockets
    (``VLLM_RPC_BASE_PATH``, default /tmp, one per engine, left behind when a
    replica is killed) go in the head's own temp dir, removed with it."""
    env = dict(os.environ)
    if temp_dir and not env.get("VLLM_RPC_BASE_PATH"):
        env["VLLM_RPC_BASE_PATH"] = temp_dir
    env.update(
        {
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
            "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
            "RAY_USAGE_STATS_ENABLED": "0",
        }
    )
    if not env.get("RAY_metrics_report_interval_ms", "").strip():  # the user's own setting wins
        env["RAY_metrics_report_interval_ms"] = str(METRICS_REPORT_INTERVAL_MS)
    env.pop("RAY_ADDRESS", None)
    # Ray jobs on this head run ``python`` from PATH: make it this Python (the
    # one with Ray and vLLM), also when llmctl runs from an unactivated venv.
    bindir = os.path.dirname(sys.executable)
    if bindir and bindir not in env.get("PATH", "").split(os.pathsep):
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    return env


def _head_command(ports: dict[str, int], temp_dir: str, num_cpus: int, num_gpus: int | None,
                  resources: dict[str, float] | None = None) -> list[str]:
    """``ray start --head`` on the ports given. GPUs are Ray's to detect (it
    honours CUDA_VISIBLE_DEVICES, counts MIG devices and sets the node's
    accelerator_type); ``--num-gpus`` only when the user gave a number."""
    extra = ["--resources", json.dumps(resources)] if resources else []  # e.g. fake accelerator_type:L4 for tests
    if num_gpus is not None:
        extra += ["--num-gpus", str(num_gpus)]
    return [
        ray_executable(), "start", "--head", "--block",
        "--node-ip-address", LOOPBACK_HOST,
        "--port", str(ports["gcs"]),
        "--dashboard-host", LOOPBACK_HOST,
        "--dashboard-port", str(ports["dashboard"]),
        "--ray-client-server-port", str(ports["client_server"]),
        "--node-manager-port", str(ports["node_manager"]),
        "--object-manager-port", str(ports["object_manager"]),
        "--min-worker-port", str(ports["min_worker"]),
        "--max-worker-port", str(ports["max_worker"]),
        "--metrics-export-port", str(ports["metrics_export"]),
        "--dashboard-agent-listen-port", str(ports["dashboard_agent_listen"]),
        "--dashboard-agent-grpc-port", str(ports["dashboard_agent_grpc"]),
        "--runtime-env-agent-port", str(ports["runtime_env_agent"]),
        "--temp-dir", temp_dir,
        "--num-cpus", str(num_cpus),
        "--disable-usage-stats",
        "--log-style", "record",
        *extra,
    ]  # fmt: skip


def _dashboard_ready(url: str, token: str | None = None) -> bool:
    import httpx

    try:
        return httpx.get(url + "/api/serve/applications/", timeout=2, trust_env=False,
                         headers=raytoken.headers(token)).status_code == 200
    except httpx.TransportError:
        return False


def start_head(
    *,
    num_cpus: int | None = None,
    num_gpus: int | None = None,
    resources: dict[str, float] | None = None,
    timeout: float = START_TIMEOUT_S,
    temp_root: str | None = None,
) -> ClusterState:
    """Start a private Ray head and record it in the state file.

    Raises LlmctlError if one is already running (use :func:`running_state`)
    or if Ray does not come up. Retries with another port block when Ray
    reports a port clash, and once more with twice the wait when the head
    failed otherwise: on a busy machine Ray's raylet can miss Ray's own fixed
    30 s registration window ("The current node timed out during startup",
    ``ray/_private/node.py``), and the next start usually makes it.
    """
    with start_lock():
        if running_state() is not None:
            raise LlmctlError(f"a local cluster is already running (state: {state_path()}); stop it with `llmctl down --cluster`")
        return _start(num_cpus=num_cpus, num_gpus=num_gpus, resources=resources, timeout=timeout, temp_root=temp_root)


def ensure_head(*, num_cpus: int | None = None, num_gpus: int | None = None) -> tuple[ClusterState, bool]:
    """The local head: the running one, else one started now; (state, started).
    Under :func:`start_lock`: of two llmctl processes at once, one starts it
    and the other uses it."""
    with start_lock():
        state = running_state()
        if state is not None:
            return state, False
        return _start(num_cpus=num_cpus, num_gpus=num_gpus), True


def _start(*, num_cpus: int | None = None, num_gpus: int | None = None, resources: dict[str, float] | None = None,
           timeout: float = START_TIMEOUT_S, temp_root: str | None = None) -> ClusterState:
    """:func:`start_head` without the lock and the check (the caller holds both)."""
    clear_state()
    num_cpus = default_num_cpus() if num_cpus is None else num_cpus
    errors: list[str] = []
    slow_retry = False
    for _attempt in range(4):
        ports = pick_ports()
        temp_dir = tempfile.mkdtemp(prefix="llmctl-", dir=temp_root or _short_tmp())
        log_file = os.path.join(temp_dir, "ray-start.log")
        cmd = _head_command(ports, temp_dir, num_cpus, num_gpus, resources)
        ray_token = raytoken.new_token()
        ray_token_file = raytoken.write_token_file(raytoken.token_path(), ray_token)
        env = raytoken.head_environ(tokens.head_environ(_ray_env(temp_dir), temp_dir), ray_token_file)
        token_fd = tokens.new_token_fd()  # empty: up hands the token over when an app needs it (tokens.hand_over)
        try:
            with open(log_file, "ab") as log:
                proc = subprocess.Popen(
                    cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    env=env, start_new_session=True, close_fds=True,
                    pass_fds=(token_fd,),
                )  # fmt: skip
            tokens.link(temp_dir, proc.pid, token_fd)
        finally:
            os.close(token_fd)
        created = _create_time(proc.pid)  # our child: it exists until we reap it
        state = ClusterState(
            pid=proc.pid,
            pid_create_time=created or 0.0,
            ports=ports,
            dashboard_url=f"http://{LOOPBACK_HOST}:{ports['dashboard']}",
            gcs_address=f"{LOOPBACK_HOST}:{ports['gcs']}",
            temp_dir=temp_dir,
            serve_http_port=ports["serve_http"],
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            log_file=log_file,
            started_at=time.time(),
            token_fd=token_fd,
            ray_token_file=str(ray_token_file),
        )
        save_state(state)  # before waiting: an interrupted start can still be stopped
        up = poll_until(lambda: "exited" if proc.poll() is not None else _dashboard_ready(state.dashboard_url, ray_token),
                        timeout=timeout, interval=0.25)
        if up is True:
            state.pids = {str(p): _comm(p) for p in session_pids(proc.pid)}
            save_state(state)
            return state
        # Failed: collect the reason, clean up, retry on a port clash or once when slow.
        tail = _tail(log_file, 15)
        if proc.poll() is None:
            tail += f"\n(not answering after {timeout:.0f} s)"
        stop_head(state, timeout=5)
        errors.append(tail)
        if "port" in tail.lower() and ("in use" in tail.lower() or "used by" in tail.lower()):
            continue
        if slow_retry:
            break
        slow_retry, timeout = True, timeout * 2
    raise LlmctlError(f"the local Ray head did not start ({len(errors)} attempts); the last said:\n" + errors[-1])


def _short_tmp() -> str:
    t = tempfile.gettempdir()
    return t if len(t) <= 20 else "/tmp"


def _tail(path: str, n: int) -> str:
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def _gone(state: ClusterState) -> bool:
    """Whether every process of the head has exited (the leader reaped if it is our child)."""
    _reap(state.pid)
    return not cluster_pids(state)


@dataclass
class StopResult:
    pids: list[int]
    killed: list[int]
    remaining: list[int]
    seconds: float


def stop_head(state: ClusterState | None = None, *, timeout: float = 10.0, remove_temp: bool = True) -> StopResult:
    """Stop the head llmctl started: SIGTERM its leader, SIGKILL stragglers.

    Only processes in the leader's session are touched (never Ray's ``stop`` command).
    Removes the state file and, by default, the private temp dir.
    """
    t0 = time.monotonic()
    state = state or load_state()
    if state is None:
        return StopResult([], [], [], 0.0)
    pids = cluster_pids(state)
    if pids:
        if _same_process(state.pid, state.pid_create_time):
            _signal(state.pid, signal.SIGTERM)
        poll_until(lambda: _gone(state), timeout=timeout, interval=0.1)
    killed = []
    for _round in range(3):
        left = cluster_pids(state)
        if not left:
            break
        for p in left:
            if _signal(p, signal.SIGKILL):
                killed.append(p)
        poll_until(lambda: _gone(state), timeout=5, interval=0.1)
    _reap(state.pid)
    remaining = cluster_pids(state)
    if not remaining:
        cur = load_state()
        if cur is not None and cur.pid == state.pid:
            clear_state()
        if state.ray_token_file and (cur is None or cur.pid == state.pid):
            raytoken.remove_token_file(state.ray_token_file)
        if remove_temp and state.temp_dir and Path(state.temp_dir).name.startswith("llmctl-"):
            shutil.rmtree(state.temp_dir, ignore_errors=True)
    return StopResult(pids, sorted(set(killed)), remaining, time.monotonic() - t0)


def _signal(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _reap(pid: int) -> None:
    """Collect our own child's exit status if it is our child (no zombie left)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


