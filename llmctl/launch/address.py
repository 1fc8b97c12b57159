"""Which cluster a command talks to: ``--address`` / ``RAY_ADDRESS``, or the
local head llmctl started; and the Ray token it takes (:mod:`llmctl.launch.raytoken`).

The token's variable is a parameter (``ray_token_env``: the CLI's
``--ray-token-env``, the Python API's keyword of the same name) of every
entry point that takes an address, passed down to :func:`resolve_target`:
no module state, and nothing written to ``os.environ``."""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass

from llmctl.errors import ClusterUnreachable, UsageError, param
from llmctl.serve_facts import LOCALHOST, LOOPBACK_HOST
from llmctl.launch import raytoken
from llmctl.launch.cluster import ClusterState, running_state

@dataclass
class Target:
    """The cluster a command talks to."""

    dashboard_url: str
    local: ClusterState | None = None  # set when it is the cluster llmctl started
    ray_token: str | None = None  # sent as Authorization: Bearer on every dashboard call

    @property
    def is_local(self) -> bool:
        return self.local is not None


def ray_token_for(dashboard_url: str, ray_token_env: str | None = None) -> str | None:
    """The Ray token to send to ``dashboard_url``: the local head's (from its
    0600 file) when it is the head llmctl started, else a remote cluster's
    (``ray_token_env`` / ``RAY_AUTH_TOKEN`` / ``RAY_AUTH_TOKEN_PATH`` / ``~/.ray/auth_token``)."""
    local = running_state()
    if local is not None and _normalize_http(local.dashboard_url) == _normalize_http(dashboard_url):
        return local.ray_token
    return raytoken.remote_token(ray_token_env)[0]


def _normalize_http(url: str) -> str:
    p = urllib.parse.urlsplit(url)
    if not p.hostname:
        raise UsageError(f"{param('address')} {url!r}: not a URL", param="address")
    return f"{p.scheme}://{p.netloc}".rstrip("/")


def resolve_target(address: str | None, ray_token_env: str | None = None) -> Target:
    """Turn ``--address`` / ``RAY_ADDRESS`` (or nothing) into a dashboard URL.

    - ``http(s)://host:port`` — a Ray dashboard; used as is.
    - nothing, ``local`` or ``auto`` — the local head llmctl started (state file).
    - ``host:port`` (the GCS) or ``ray://host:port`` (Ray Client) — if it is
      the local head's, its dashboard; otherwise the dashboard URL the cluster
      published (read from its GCS, or asked through a Ray Client session);
      this path imports ray, so it takes seconds.

    The Ray token: the local head's own; for any other cluster see
    :func:`ray_token_for`. Raises ClusterUnreachable when there is nothing to
    talk to, UsageError when ``ray_token_env`` names an unset variable.
    """
    local = running_state()
    addr = (address or "").strip()
    if addr in ("", "local", "auto"):
        if local is None:
            raise ClusterUnreachable(no_cluster_message())
        return Target(local.dashboard_url, local, local.ray_token)
    if addr.startswith(("http://", "https://")):
        url = _normalize_http(addr)
        if local is not None and _normalize_http(local.dashboard_url) == url:
            return Target(url, local, local.ray_token)
        return Target(url, None, raytoken.remote_token(ray_token_env)[0])
    hostport = addr[len("ray://") :] if addr.startswith("ray://") else addr
    if local is not None and hostport in {f"{host}:{local.ports[p]}" for host in (LOOPBACK_HOST, LOCALHOST)
                                          for p in ("gcs", "client_server")}:
        return Target(local.dashboard_url, local, local.ray_token)
    token = raytoken.remote_token(ray_token_env)[0]
    return Target(_dashboard_from_ray(addr, hostport, token=token), None, token)


def _dashboard_from_ray(addr: str, hostport: str, connect_timeout: float = 5.0, token: str | None = None) -> str:
    """The dashboard URL a cluster published: read from its GCS (``host:port``)
    or asked through a Ray Client session (``ray://host:port``), as Ray's job
    CLI does (``ray.dashboard.utils.get_address_for_submission_client``)."""
    import socket

    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"{param('address')} {addr!r}: expected http://HOST:PORT (the dashboard), HOST:PORT (the GCS) "
                         "or ray://HOST:PORT (Ray Client)", param="address")
    try:  # fail fast where nothing listens (Ray's own lookup retries for a long time)
        socket.create_connection((host.strip("[]"), int(port)), timeout=connect_timeout).close()
    except OSError as e:
        raise ClusterUnreachable(f"no Ray cluster answers at {hostport} ({e.strerror or e})")
    url = _lookup_in_child(addr, token)
    return _normalize_http(url if "://" in url else "http://" + url)


# Ray's own lookup (``ray job``'s), run in a child process with an environment of
# its own: the token reaches Ray there, never this process's os.environ (where
# threads and subprocesses started meanwhile would inherit it), and Ray's
# preference for RAY_ADDRESS / RAY_API_SERVER_ADDRESS over its argument is
# taken away so the flag wins. Ray Client's head-side server for a session can
# fail to start in time on a loaded head: a second session usually gets one.
_LOOKUP = """
import sys
from ray.dashboard.utils import get_address_for_submission_client as lookup
try:
    try:
        url = lookup(sys.argv[1])
    except Exception as e:
        if "Initialization failure from server" not in str(e):
            raise
        url = lookup(sys.argv[1])
except Exception as e:
    print((str(e).splitlines() or [type(e).__name__])[0] or type(e).__name__, file=sys.stderr)
    sys.exit(1)
print(url)
"""


def _lookup_in_child(addr: str, token: str | None, timeout: float = 120.0) -> str:
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    if token:  # a token-auth GCS refuses clients without it
        env.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token})
    try:
        p = subprocess.run([sys.executable, "-c", _LOOKUP, addr], env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ClusterUnreachable(f"no Ray cluster answered at {addr} within {timeout:.0f} s")
    if p.returncode == 0 and p.stdout.strip():
        return p.stdout.strip().splitlines()[-1]
    why = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
    if "No module named" in why:
        raise UsageError(f"{param('address')} {addr!r}: pass the dashboard URL (http://HOST:PORT) ({why})", param="address")
    if "InvalidAuthToken" in why or "authentication token" in why.lower():
        raise raytoken.auth_error(addr, 401, bool(token))
    raise ClusterUnreachable(f"no Ray cluster answers at {addr} ({why})")


def no_cluster_message(url: str | None = None) -> str:
    where = f"at {url}" if url else f"(llmctl has not started a local one, and no {param('address')} / RAY_ADDRESS was given)"
    return (
        f"no Ray cluster reachable {where}; "
        f"`llmctl up FILE` starts a local one, or pass {param('address', 'http://HOST:PORT')} (the Ray dashboard)"
    )
