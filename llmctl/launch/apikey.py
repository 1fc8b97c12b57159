"""API keys on the OpenAI endpoint: llmctl's ingress, its delivery, the key's whereabouts.

The ingress (``llmctl/cluster_modules/llmctl_apikey``, class path
:data:`INGRESS_CLS`) is named in an app's ``args.ingress_cls_config`` with
``ingress_extra_kwargs`` that say where the key is — ``api_key_env`` (a
variable of the node's environment) and/or ``api_key_file`` (a file on the
node, e.g. a mounted Kubernetes Secret) — never the key.

``llmctl up`` delivers the module: it zips it (deterministically), uploads it
to the cluster's GCS through the dashboard's package API (``PUT
/api/packages/gcs/<name>.zip``, what Ray's job SDK does for ``py_modules``)
and adds the ``gcs://`` URI to the app's ``runtime_env.py_modules``.

On the local head the ingress replica inherits the head's environment, so the
variable must be in the environment of the shell that starts the head (``up``
checks it, and the value it sends with its own requests, before deploying).
"""

from __future__ import annotations

import ast
import hashlib
import io
import os
import zipfile
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

from llmctl.errors import UsageError

from llmctl.builders import (APIKEY_MODULE as MODULE, INGRESS_CLS, ingress_cls_config, is_apikey_ingress as is_ours,  # noqa: F401
                             key_settings, keyed_apps)

SOURCE_DIR = Path(__file__).resolve().parents[1] / "cluster_modules" / MODULE


@lru_cache(maxsize=1)
def min_key_chars() -> int:
    """The shortest key the ingress accepts: ``MIN_KEY_CHARS`` of the module the
    nodes run (one rule), read from its source (importing it imports Ray's
    ingress, and vLLM)."""
    for node in ast.parse((SOURCE_DIR / "__init__.py").read_text(encoding="utf-8")).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "MIN_KEY_CHARS" for t in targets) and node.value is not None:
            return int(ast.literal_eval(node.value))
    raise RuntimeError(f"{SOURCE_DIR / '__init__.py'} defines no MIN_KEY_CHARS")  # an llmctl bug (tests read it)


def short_key(var: str, value: Optional[str]) -> Optional[str]:
    """Why the ingress would refuse the key in ``$var`` (shorter than
    :func:`min_key_chars`), or None. Never shows the key."""
    n = len((value or "").strip())
    if not value or n >= min_key_chars():
        return None
    return (f"${var} holds a {n}-character API key, and llmctl's ingress refuses keys shorter than {min_key_chars()} "
            f"characters (it does not start: fail closed); use a long random key: export {var}=$(openssl rand -hex 32)")


def package(module: str = MODULE) -> tuple[str, bytes]:
    """``(gcs:// URI, zip bytes)`` of one of llmctl's cluster modules (the
    ingress by default): the same bytes, hence the same URI, for the same
    source (Ray's naming: ``_ray_pkg_<hash>.zip``)."""
    src = SOURCE_DIR.parent / module
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted(src.rglob("*.py")):
            info = zipfile.ZipInfo(f"{module}/{f.relative_to(src).as_posix()}", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, f.read_bytes())
    data = buf.getvalue()
    return f"gcs://_ray_pkg_{hashlib.sha1(data).hexdigest()[:16]}.zip", data


def is_our_package(uri: Any) -> bool:
    return isinstance(uri, str) and uri.startswith("gcs://_ray_pkg_") and uri.endswith(".zip")


def deliver(config: dict, client, apps: Optional[list] = None, module: str = MODULE) -> Optional[str]:
    """Upload a cluster module (once; the ingress by default) and name it in
    the ``py_modules`` of every app that uses it (``apps``; default: those with
    the API-key ingress); returns the URI (None: no app uses it)."""
    apps = [app for app, _ in keyed_apps(config)] if apps is None else apps
    if not apps:
        return None
    uri, data = package(module)
    client.upload_package(uri, data)
    for app in apps:
        renv = app.setdefault("runtime_env", {})
        mods = [m for m in renv.get("py_modules") or [] if m != uri]
        renv["py_modules"] = [*mods, uri]
    return uri


def check_local_key(config: Mapping, head_env: Optional[Mapping[str, str]], shell: Mapping[str, str],
                    starting: bool) -> list[str]:
    """For the local head: every ``api_key_env`` must be in the environment the
    head has (or, when ``up`` is about to start it, in this shell's). Returns
    warnings; raises UsageError when a replica would find no key."""
    warnings = []
    for app, kw in keyed_apps(config):
        var = kw.get("api_key_env")
        if not var:
            if not kw.get("api_key_file"):
                raise UsageError(f"application {app.get('name')!r}: {INGRESS_CLS} needs ingress_extra_kwargs.api_key_env "
                                 "(or api_key_file): the key's variable, never the key")
            continue
        mine = shell.get(var, "").strip()
        if starting:
            if not mine:
                raise UsageError(f"application {app.get('name')!r} takes its API key from ${var}, which is not set in this "
                                 f"shell; export {var}=... (a long random key) and run `llmctl up` again (the local head "
                                 "started now inherits it)")
            if problem := short_key(var, mine):
                raise UsageError(f"application {app.get('name')!r}: {problem}, and run `llmctl up` again")
            continue
        if head_env is None:
            warnings.append(f"cannot read the local head's environment to check ${var} (the API key)")
            continue
        held = head_env.get(var, "").strip()
        if not held:
            raise UsageError(f"application {app.get('name')!r} takes its API key from ${var}, and the local Ray head was "
                             f"started without it: stop it (`llmctl down --cluster`), export {var}=... and run "
                             "`llmctl up` again")
        if problem := short_key(var, held):
            raise UsageError(f"application {app.get('name')!r}: the local Ray head was started with it: {problem}, stop the "
                             "head (`llmctl down --cluster`) and run `llmctl up` again")
        if mine and mine != held:
            warnings.append(f"${var} in this shell differs from the local head's; the replicas use the head's")
    return warnings


def api_key(app_config: Mapping, local_env: Optional[Mapping[str, str]] = None,
            environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The key a client of this app sends: ``$api_key_env`` from this shell,
    else from the local head's environment; None when the app has no key or
    it cannot be found here."""
    kw = key_settings(app_config)
    if not kw or not kw.get("api_key_env"):
        return None
    var = kw["api_key_env"]
    env = os.environ if environ is None else environ
    for source in (env, local_env or {}):
        if source.get(var, "").strip():
            return source[var].strip()
    return None


def headers(key: Optional[str]) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def key_for(app_config: Mapping, target) -> Optional[str]:
    """:func:`api_key` for an app on ``target`` (the local head's environment counts)."""
    if key_settings(app_config) is None:
        return None
    local_env = None
    if target is not None and getattr(target, "local", None) is not None:
        from llmctl.launch.cluster import head_environ

        local_env = head_environ(target.local)
    return api_key(app_config, local_env)


def key_value(var: Optional[str], local=None, environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The value of the key's variable here: this shell's, else the local head's
    (``local``: its ClusterState) environment; None when neither has it."""
    if not var:
        return None
    env = os.environ if environ is None else environ
    if env.get(var, "").strip():
        return env[var].strip()
    if local is not None:
        from llmctl.launch.cluster import head_environ

        held = (head_environ(local) or {}).get(var, "").strip()
        if held:
            return held
    return None


def required_key(app_name: str, var: Optional[str], local=None, flag_var: Optional[str] = None) -> Optional[str]:
    """The key to send to an app: ``flag_var``'s value when given, else the
    app's own variable (:func:`key_value`); raises UsageError when the app
    needs a key and none is found, or ``flag_var`` is unset."""
    from llmctl.errors import param

    if flag_var:
        value = os.environ.get(flag_var, "").strip()
        if not value:
            raise UsageError(f"{param('api_key_env')} {flag_var}: the environment variable is not set", param="api_key_env")
        return value
    if not var:
        return None
    value = key_value(var, local)
    if value is None:
        raise UsageError(f"application {app_name!r} requires an API key from ${var}, which is not set here: export "
                         f"{var}=... (or name another variable with {param('api_key_env')})", param="api_key_env")
    return value


def deliver_steps(config: dict, client, target) -> Iterator:
    """:func:`deliver`, as ``up``'s progress steps; on a cluster llmctl did not
    start, a reminder that its nodes must hold the key's variable."""
    from llmctl.launch.events import Step

    uri = deliver(config, client)
    if uri is None:
        return
    yield Step(f"API-key ingress ({INGRESS_CLS}) uploaded to the cluster as {uri} (runtime_env py_modules)")
    if target.local is None:
        names = sorted({kw["api_key_env"] for _, kw in keyed_apps(config) if kw.get("api_key_env")})
        if names:
            yield Step(f"note: the ingress reads {', '.join('$' + n for n in names)} from the environment of the node it "
                       "runs on (set it on every node; llmctl cannot check it from here) — without it the ingress "
                       "refuses to start")
        for n in names:  # what this shell holds is what its clients send; the same on the nodes is refused
            if problem := short_key(n, os.environ.get(n)):
                yield Step(f"warning: {problem} (in this shell; if the nodes hold the same, the app will not start)")


def check_headers(config: Mapping, app_name: str, target) -> tuple[dict, Optional[str]]:
    """``(headers, note)`` for ``up``'s check of an app's ``/models``: the key's
    header; or, for a keyed app whose key is not here (a remote cluster's
    nodes hold it), no check and a note saying why."""
    cfg = next((a for a in config.get("applications") or [] if isinstance(a, dict) and a.get("name") == app_name), {})
    kw = key_settings(cfg)
    if kw is None:
        return {}, None
    key = key_for(cfg, target)
    if key is None:
        var = kw.get("api_key_env") or "the key"
        return {}, (f"note: {app_name}'s /models not checked: it needs the API key, and ${var} is not set here "
                    "(export it to check, and for `llmctl bench`)")
    return headers(key), None
