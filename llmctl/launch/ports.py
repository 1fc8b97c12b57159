"""Free, non-default ports for the local Ray head: one block of named ports
followed by the worker-port range (``LLMCTL_PORT_RANGE`` overrides where)."""

from __future__ import annotations

import os
import random
import socket

from llmctl.errors import LlmctlError, UsageError
from llmctl.serve_facts import LOOPBACK_HOST

RAY_DEFAULT_PORTS = frozenset({6379, 8265, 10001, 8000, 9000, 52365})
# Port names in the block, in order; the worker range follows them.
_SINGLE_PORTS = (
    "gcs",
    "dashboard",
    "client_server",
    "node_manager",
    "object_manager",
    "metrics_export",
    "dashboard_agent_listen",
    "dashboard_agent_grpc",
    "runtime_env_agent",
    "serve_http",
    "serve_grpc",
)
WORKER_PORTS = 200
DEFAULT_PORT_RANGE = (20000, 32000)  # below Linux's ephemeral range (32768+)


def _port_free(port: int) -> bool:
    for host in (LOOPBACK_HOST, ""):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((host, port))
        except OSError:
            return False
        finally:
            s.close()
    return True


def _port_range() -> tuple[int, int]:
    raw = os.environ.get("LLMCTL_PORT_RANGE")
    if not raw:
        return DEFAULT_PORT_RANGE
    try:
        lo, hi = (int(x) for x in raw.split("-", 1))
    except ValueError:
        raise UsageError(f"LLMCTL_PORT_RANGE={raw!r}: expected LOW-HIGH, e.g. 26000-26999")
    if hi - lo + 1 < len(_SINGLE_PORTS) + WORKER_PORTS:
        raise UsageError(f"LLMCTL_PORT_RANGE={raw!r}: needs at least {len(_SINGLE_PORTS) + WORKER_PORTS} ports")
    return lo, hi


def pick_ports(rng: random.Random | None = None, attempts: int = 50) -> dict[str, int]:
    """A block of free ports: the named single ports then ``WORKER_PORTS`` worker ports.

    The range comes from ``LLMCTL_PORT_RANGE`` (``LOW-HIGH``) or defaults to
    20000–32000, below the kernel's ephemeral range so outgoing connections do
    not collide with it. No port in the block is one of Ray's defaults.
    """
    rng = rng or random.Random()
    lo, hi = _port_range()
    size = len(_SINGLE_PORTS) + WORKER_PORTS
    for _ in range(attempts):
        base = rng.randrange(lo, hi - size + 2)
        block = range(base, base + size)
        if any(p in RAY_DEFAULT_PORTS for p in block):
            continue
        singles = list(block[: len(_SINGLE_PORTS)])
        if not all(_port_free(p) for p in singles):
            continue
        workers = block[len(_SINGLE_PORTS) :]
        # Worker ports are bound lazily by Ray; a few taken ones are tolerable,
        # but skip blocks that are visibly in use.
        if sum(1 for p in workers[:: max(1, WORKER_PORTS // 20)] if not _port_free(p)) > 1:
            continue
        ports = dict(zip(_SINGLE_PORTS, singles))
        ports["min_worker"] = workers[0]
        ports["max_worker"] = workers[-1]
        return ports
    raise LlmctlError(f"no free block of {size} ports found in {lo}-{hi}; set LLMCTL_PORT_RANGE")
