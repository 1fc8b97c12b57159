"""Which cluster a command talks to: ``--address`` / ``RAY_ADDRESS``, or the
local head llmctl started."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from llmctl.errors import ClusterUnreachable, UsageError
from llmctl.launch.cluster import ClusterState, running_state


@dataclass
class Target:
    """The cluster a command talks to."""

    dashboard_url: str
    local: ClusterState | None = None  # set when it is the cluster llmctl started

    @property
    def is_local(self) -> bool:
        return self.local is not None


def _normalize_http(url: str) -> str:
    p = urllib.parse.urlsplit(url)
    if not p.hostname:
        raise UsageError(f"--address {url!r}: not a URL")
    return f"{p.scheme}://{p.netloc}".rstrip("/")


def resolve_target(address: str | None) -> Target:
    """Turn ``--address`` / ``RAY_ADDRESS`` (or nothing) into a dashboard URL.

    - ``http(s)://host:port`` — a Ray dashboard; used as is.
    - nothing, ``local`` or ``auto`` — the local head llmctl started (state file).
    - ``host:port`` or ``ray://host:port`` — a Ray (GCS / client) address; if it
      is the local head's, its dashboard; otherwise the dashboard URL the cluster
      published in its GCS (this path imports ray, so it is slower).

    Raises ClusterUnreachable when there is nothing to talk to.
    """
    local = running_state()
    addr = (address or "").strip()
    if addr in ("", "local", "auto"):
        if local is None:
            raise ClusterUnreachable(no_cluster_message())
        return Target(local.dashboard_url, local)
    if addr.startswith(("http://", "https://")):
        url = _normalize_http(addr)
        if local is not None and _normalize_http(local.dashboard_url) == url:
            return Target(url, local)
        return Target(url, None)
    hostport = addr[len("ray://") :] if addr.startswith("ray://") else addr
    if local is not None and hostport in (local.gcs_address, f"localhost:{local.ports['gcs']}"):
        return Target(local.dashboard_url, local)
    if addr.startswith("ray://"):
        raise UsageError(
            f"--address {addr!r}: a Ray Client address does not name the dashboard; "
            "pass the dashboard URL instead (http://HOST:8265)"
        )
    return Target(_dashboard_from_gcs(hostport), None)


def _dashboard_from_gcs(gcs_address: str) -> str:
    try:
        from ray.dashboard.utils import get_address_for_submission_client  # heavy: only here
    except ImportError as e:  # pragma: no cover
        raise UsageError(f"--address {gcs_address!r}: pass the dashboard URL (http://HOST:PORT) ({e})")
    try:
        url = get_address_for_submission_client(gcs_address)
    except Exception as e:  # noqa: BLE001 - ray raises many kinds here
        raise ClusterUnreachable(f"no Ray cluster answers at {gcs_address} ({str(e).splitlines()[0] if str(e) else type(e).__name__})")
    return _normalize_http(url if "://" in url else "http://" + url)


def no_cluster_message(url: str | None = None) -> str:
    where = f"at {url}" if url else "(llmctl has not started a local one, and no --address / RAY_ADDRESS was given)"
    return (
        f"no Ray cluster reachable {where}; "
        "`llmctl up FILE` starts a local one, or pass --address http://HOST:PORT (the Ray dashboard)"
    )
