"""Ray's token authentication: the local head's token, and the token for a remote cluster.

The local head (``llmctl up`` / ``start_head``)
----------------------------------------------
Ray 2.60 turns token authentication on with ``RAY_AUTH_MODE=token``: the
dashboard's middleware then answers every REST call (Serve, state, logs,
jobs) without ``Authorization: Bearer <token>`` with 401 (403 for a wrong
token), and the GCS/raylet gRPC servers refuse clients without it. Ray's
processes find the token (measured, Ray 2.60 ``AuthenticationTokenLoader``) in
``RAY_AUTH_TOKEN``, else the file named by ``RAY_AUTH_TOKEN_PATH``, else
``~/.ray/auth_token``.

llmctl starts each head with a fresh random token written to a file of its
own, ``$LLMCTL_HOME/ray-token-<8 hex digits>`` (mode 0600, beside
``cluster.json``, which names it), and hands Ray
only its path (``RAY_AUTH_TOKEN_PATH``): the token is never on a command line
(``ps``), never in an environment other processes can read, never in Ray's
logs (Ray logs the path it loaded from), and ``~/.ray/auth_token`` is neither
read nor written. The file is removed when the head stops.

A remote cluster
----------------
The token comes from, in order: the variable named by ``ray_token_env``
(``--ray-token-env NAME``), ``RAY_AUTH_TOKEN``, the file named by
``RAY_AUTH_TOKEN_PATH``, ``~/.ray/auth_token`` — Ray's own conventions, so a
shell set up for ``ray job submit`` works unchanged.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Mapping, Optional

from llmctl.errors import ClusterUnreachable, UsageError, param
from llmctl.paths import llmctl_home, write_atomic

TOKEN_FILE = "ray-token"  # the prefix of each head's token file
AUTH_HEADER = "Authorization"


def token_path() -> Path:
    """A new head's token file: a name of its own, so no head ever replaces
    the file another head's processes read."""
    return llmctl_home() / f"{TOKEN_FILE}-{secrets.token_hex(4)}"


def new_token() -> str:
    """A fresh random token (256 bits, hex: Ray compares tokens as opaque strings)."""
    return secrets.token_hex(32)


def write_token_file(path: Path, token: str) -> Path:
    """Write ``token`` to ``path``, mode 0600 from the moment it exists (never
    readable by others, whatever the umask)."""
    return write_atomic(path, token, mode=0o600)


def read_token_file(path: str | Path | None) -> Optional[str]:
    if not path:
        return None
    try:
        text = Path(os.path.expanduser(str(path))).read_text().strip()
    except (OSError, ValueError):
        return None
    return text or None


def remove_token_file(path: str | Path | None) -> None:
    if path:
        try:
            Path(path).unlink()
        except FileNotFoundError:
            pass


def head_environ(env: dict[str, str], path: Path) -> dict[str, str]:
    """The local head's environment: token auth on, the token by file path only."""
    env = {k: v for k, v in env.items() if k != "RAY_AUTH_TOKEN"}
    env["RAY_AUTH_MODE"] = "token"
    env["RAY_AUTH_TOKEN_PATH"] = str(path)
    return env


def remote_token(ray_token_env: Optional[str] = None, environ: Mapping[str, str] | None = None) -> tuple[Optional[str], str]:
    """``(token or None, where it came from)`` for a remote cluster (see the module doc).

    Raises UsageError when ``ray_token_env`` names an unset variable."""
    env = os.environ if environ is None else environ
    if ray_token_env:
        value = env.get(ray_token_env, "").strip()
        if not value:
            raise UsageError(f"{param('ray_token_env')} {ray_token_env}: the environment variable is not set "
                             "(export it with the cluster's Ray token)", param="ray_token_env")
        return value, f"${ray_token_env}"
    if env.get("RAY_AUTH_TOKEN", "").strip():
        return env["RAY_AUTH_TOKEN"].strip(), "$RAY_AUTH_TOKEN"
    if env.get("RAY_AUTH_TOKEN_PATH"):
        tok = read_token_file(env["RAY_AUTH_TOKEN_PATH"])
        if tok:
            return tok, "$RAY_AUTH_TOKEN_PATH"
    home = env.get("HOME") or os.path.expanduser("~")
    tok = read_token_file(Path(home) / ".ray" / "auth_token")
    if tok:
        return tok, "~/.ray/auth_token"
    return None, ""


def headers(token: Optional[str]) -> dict[str, str]:
    return {AUTH_HEADER: f"Bearer {token}"} if token else {}


def auth_error(url: str, status: int, have_token: bool) -> ClusterUnreachable:
    """The exit-3 error for a dashboard that refused llmctl's token (or its lack of one)."""
    if have_token:
        what = f"{url} refused the Ray token llmctl sent (HTTP {status}): it is not this cluster's token"
    else:
        what = f"{url} asks for a Ray token (token authentication, HTTP {status}) and llmctl has none"
    return ClusterUnreachable(
        f"{what}; pass {param('ray_token_env', 'NAME')} naming an environment variable that holds it, "
        "or set RAY_AUTH_TOKEN / RAY_AUTH_TOKEN_PATH (`ray get-auth-token` on the head prints it)"
    )


def access_hint(dashboard_url: str, token_file: str | None) -> str:
    """How a person reaches a token-auth dashboard: a browser asks for the token, curl sends it."""
    if not token_file:
        return f"dashboard {dashboard_url} (no token authentication)"
    return (f"dashboard {dashboard_url} (Ray token authentication; the token is in {token_file}, mode 0600: paste it in "
            f"the browser's login page, or curl -H \"Authorization: Bearer $(cat {token_file})\" "
            f"{dashboard_url}/api/serve/applications/)")
