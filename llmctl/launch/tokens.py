"""Hugging Face tokens on the local head, kept out of Ray's API and logs.

Why not an environment variable
-------------------------------
Ray Serve LLM copies ``HF_TOKEN`` and ``HUGGING_FACE_HUB_TOKEN`` from a
replica's environment into the ``runtime_env`` of the model-download tasks it
starts on each node (Ray 2.60:
``ray/llm/_internal/serve/engines/vllm/vllm_models.py``
``get_runtime_env_with_local_env_vars``, the names in
``ray/llm/_internal/serve/constants.py`` ``ENV_VARS_TO_PROPAGATE``). Ray's
runtime_env agent logs that runtime_env at INFO (``runtime_env_agent.log``)
and the state API returns it with the task. So a token in either variable —
from the deployed config or inherited from the shell that started the head —
ends up in the cluster's logs and in what every dashboard client can read.

What llmctl does instead, on the head it starts
-----------------------------------------------
- Neither variable is in the head's environment (nor, so, in any Ray
  process's).
- ``start_head`` creates an anonymous in-memory file (``memfd_create``) and
  hands it to the ``ray start --block`` process (``pass_fds``), which keeps it
  open for the cluster's lifetime. Nothing is written to disk; when the head
  stops, the file is gone.
- ``HF_TOKEN_PATH`` — huggingface_hub's token-file location
  (``huggingface_hub/constants.py``), read by every Hub call vLLM and Ray make
  — points at ``<temp_dir>/hf-token``, a symlink to ``/proc/<pid>/fd/<n>``.
  Only processes allowed to inspect the head process (its user, root) can
  open it.
- ``llmctl up`` writes the token a deployment names
  (``HF_TOKEN: "${VAR}"`` in ``runtime_env.env_vars``) into that file and
  drops the entry from what it deploys, so the replica's environment does not
  hold it either.

The token goes to a head only when an app needs it (:func:`needs_hf_token`:
a runtime_env names it, or a model or tokenizer comes from the Hub): then
``up`` writes the token the user's shell would give the Hub (``HF_TOKEN`` /
``HUGGING_FACE_HUB_TOKEN``, else the token file ``huggingface-cli login``
wrote) into the file, unless the deployment names one. Every write is read
back; a file that cannot be read or written is named with the reason, never
taken for a head without a token.

All this needs Linux (``memfd_create``, ``/proc``): elsewhere
:func:`require_memfd` refuses to start the local head, and a cluster started
with ``ray start`` is reached with ``--address``.
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

from llmctl.errors import UsageError, param
from llmctl.serve_facts import LOOPBACK_HOST

# The variables Ray Serve LLM propagates (ENV_VARS_TO_PROPAGATE in Ray 2.60).
TOKEN_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
LINK_NAME = "hf-token"


def user_token(environ: Mapping[str, str] | None = None) -> str:
    """The token huggingface_hub would use in this shell ("" when none), read
    as huggingface_hub reads it (``_get_token_from_environment``, then the
    token file), without importing it."""
    env = os.environ if environ is None else environ
    for var in TOKEN_VARS:
        if env.get(var, "").strip():
            return env[var].strip()
    if env.get("HF_TOKEN_PATH"):
        path = Path(os.path.expanduser(env["HF_TOKEN_PATH"]))
    else:
        home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface")
        path = Path(os.path.expanduser(home)) / "token"
    try:
        return path.read_text().strip()
    except (OSError, ValueError):
        return ""


def require_memfd() -> None:
    """Raise UsageError (one line, exit 2) where the local head cannot hold the
    token in memory: no ``memfd_create`` or no ``/proc`` (macOS, Windows)."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        return
    system = {"darwin": "macOS", "win32": "Windows", "cygwin": "Windows"}.get(sys.platform, sys.platform)
    raise UsageError(f"llmctl cannot start a local Ray head on {system}: it hands the head the Hugging Face token in memory "
                     f"(memfd_create and /proc, which only Linux has); start Ray yourself (`ray start --head`) and pass "
                     f"{param('address')} with its dashboard URL (e.g. http://{LOOPBACK_HOST}:8265)", param="address")


def new_token_fd(initial: str = "") -> int:
    """An anonymous in-memory file holding ``initial`` (default: none; ``up``
    writes a token when an app needs one, :func:`hand_over`); the caller
    passes the descriptor to the head process and closes its own copy."""
    require_memfd()
    fd = os.memfd_create("llmctl-hf-token", 0)
    os.write(fd, initial.encode())
    return fd


def link_path(temp_dir: str) -> Path:
    return Path(temp_dir) / LINK_NAME


def head_environ(env: dict[str, str], temp_dir: str) -> dict[str, str]:
    """The head's environment: no token variable, ``HF_TOKEN_PATH`` set."""
    env = {k: v for k, v in env.items() if k not in TOKEN_VARS}
    env["HF_TOKEN_PATH"] = str(link_path(temp_dir))
    return env


def link(temp_dir: str, pid: int, fd: int) -> Path:
    """Point ``<temp_dir>/hf-token`` at the head process's descriptor."""
    p = link_path(temp_dir)
    p.symlink_to(f"/proc/{pid}/fd/{fd}")
    return p


def _proc_path(pid: int, fd: Optional[int]) -> Optional[Path]:
    return None if fd is None else Path(f"/proc/{pid}/fd/{fd}")


def read(pid: int, fd: Optional[int]) -> Optional[str]:
    """The token the head holds ("" for none), None if it has no token file."""
    p = _proc_path(pid, fd)
    try:
        return p.read_text().strip() if p else None
    except OSError:
        return None


def write(pid: int, fd: Optional[int], value: str) -> bool:
    """Replace the token the head holds; False if it has no token file."""
    p = _proc_path(pid, fd)
    if p is None:
        return False
    try:
        w = os.open(p, os.O_WRONLY | os.O_TRUNC)
    except OSError:
        return False
    try:
        os.write(w, value.encode())
    finally:
        os.close(w)
    return True


def token_entries(config: dict) -> Iterator[tuple[str, dict, str, Optional[str]]]:
    """``(where, env_vars, key, value)`` for every HF token entry of every
    runtime_env in a prepared serve config (the apps' and their LLMConfigs')."""
    from llmctl.builders import runtime_envs

    for where, renv in runtime_envs(config):
        env_vars = renv.get("env_vars") if isinstance(renv, dict) else None
        if isinstance(env_vars, dict):
            for key in [k for k in env_vars if k in TOKEN_VARS]:
                yield where, env_vars, key, env_vars[key]


def needs_hf_token(config: Any) -> bool:
    """Whether any app of a serve config (its model configs inlined, as
    ``prepare`` gives it) needs the Hugging Face token on the head: a
    runtime_env names HF_TOKEN / HUGGING_FACE_HUB_TOKEN, or a model, its
    tokenizer or ``engine_kwargs.tokenizer`` is a Hub repo (not a local path, a
    bucket URI or a bucket mapping), which vLLM downloads with the token
    (gated repos need it). A head whose apps need none is given none."""
    from llmctl.builders import app_llm_configs
    from llmctl.sources import is_cloud_uri, looks_local_path

    if not isinstance(config, dict):
        return False
    if any(True for _ in token_entries(config)):
        return True
    for app in config.get("applications") or []:
        for _, llm in app_llm_configs(app):
            if not isinstance(llm, dict):
                continue
            mlc = llm.get("model_loading_config") if isinstance(llm.get("model_loading_config"), dict) else {}
            ek = llm.get("engine_kwargs") if isinstance(llm.get("engine_kwargs"), dict) else {}
            for src in (mlc.get("model_source", mlc.get("model_id")), mlc.get("tokenizer_source"), ek.get("tokenizer")):
                if isinstance(src, str) and src.strip() and not looks_local_path(src) and not is_cloud_uri(src):
                    return True
    return False


_HINTS = {errno.ENOENT: "the head process, or its descriptor, is gone: `llmctl down --cluster` and `llmctl up` again",
          errno.EACCES: "this user may not open another process's descriptors (/proc mounted with hidepid, or a head "
                        "started by another user)",
          errno.EPERM: "this user may not open another process's descriptors (/proc mounted with hidepid, or a head "
                       "started by another user)"}


def _failure(what: str, path: Path, e: OSError) -> UsageError:
    hint = _HINTS.get(e.errno or 0, "")
    return UsageError(f"cannot {what} the local Ray head's in-memory Hugging Face token file {path}: "
                      f"{e.strerror or type(e).__name__}" + (f" ({hint})" if hint else "")
                      + f"; {param('send_token', True)} sends the token in the config instead (readable by every "
                      "dashboard client)", param="send_token")


def read_checked(pid: int, fd: int) -> str:
    """The token the head holds ("" for none); UsageError naming the file and the reason when it cannot be read."""
    p = _proc_path(pid, fd)
    try:
        return p.read_text().strip()
    except OSError as e:
        raise _failure("read", p, e) from None


def write_checked(pid: int, fd: int, value: str) -> None:
    """Replace the token the head holds, and read it back; UsageError naming
    the file and the reason when either fails."""
    p = _proc_path(pid, fd)
    try:
        w = os.open(p, os.O_WRONLY | os.O_TRUNC)
        try:
            data = value.encode()
            while data:
                data = data[os.write(w, data):]
        finally:
            os.close(w)
    except OSError as e:
        raise _failure("write", p, e) from None
    if read_checked(pid, fd) != value.strip():
        raise UsageError(f"the local Ray head's in-memory Hugging Face token file {p} does not hold what was written to it "
                         "(another process writing it?): run `llmctl up` again")


def hand_over(config: dict, pid: int, fd: Optional[int], environ: Mapping[str, str]) -> tuple[list[str], list[str], str]:
    """Give the local head the token a prepared serve config names, and drop
    those entries from it (see the module's docstring); for an app that needs
    the Hub without naming a token (:func:`needs_hf_token`), the token of this
    shell (:func:`user_token`), so a gated model downloads as it would here.

    Returns ``(messages, variables handled, token)``; ``([], [], "")`` when no
    app needs a token, or the head has no token file (a head started by an
    older llmctl: the references then go to Ray as before). Raises UsageError
    when no value can be had, or the head's token file cannot be read or
    written (naming the file and why)."""
    from llmctl.sources import env_ref

    refs = [(where, env_vars, key, env_ref(value)) for where, env_vars, key, value in token_entries(config)]
    refs = [r for r in refs if r[3]]
    if fd is None or not (refs or needs_hf_token(config)):
        return [], [], ""
    if not refs:
        return _hand_over_user_token(pid, fd, environ)
    held = read_checked(pid, fd)
    names = sorted({var for *_, var in refs})
    given = {var: environ[var].strip() for var in names if environ.get(var, "").strip()}
    messages = []
    if len(set(given.values())) > 1:
        raise UsageError(f"{' and '.join(names)} hold different tokens, and the local head holds one Hugging Face token "
                         "for all its replicas: name one variable in every model config")
    if given:
        value = next(iter(given.values()))
        if held and held != value:
            messages.append("warning: the local head held another Hugging Face token; replaced (running apps use the new one "
                            "for later downloads)")
    elif held:
        value = held
        messages.append(f"{', '.join(names)} not set in this shell: the token the local head already holds is used")
    else:
        where, _, key, var = refs[0]
        raise UsageError(f"{where} takes {key} from the environment variable {var}, which is not set; export {var}=... "
                         "(a Hugging Face token with access to the model) and run `llmctl up` again")
    if value != held:
        write_checked(pid, fd, value)
    for _, env_vars, key, _ in refs:
        env_vars.pop(key, None)
    keys = sorted({key for _, _, key, _ in refs})
    messages.insert(0, f"{', '.join(keys)} (from {', '.join('$' + n for n in names)}): handed to the local head in memory "
                       "(HF_TOKEN_PATH) and left out of the deployed config, so Ray's API and logs never hold it")
    return messages, names, value


def _hand_over_user_token(pid: int, fd: int, environ: Mapping[str, str]) -> tuple[list[str], list[str], str]:
    """An app downloads from the Hub without naming a token: this shell's
    token (when it has one) goes to the head, so a gated model downloads as it
    would here. A token file that fails is a warning here (an ungated model
    needs no token); when a deployment names the token it is an error."""
    mine = user_token(environ)
    try:
        held = read_checked(pid, fd)
        if not mine or mine == held:
            return [], [], mine or held
        write_checked(pid, fd, mine)
    except UsageError as e:
        return [f"warning: {e.message}; the models download from the Hub without a token (a gated one fails)"], [], mine
    return ["the Hugging Face token of this shell: handed to the local head in memory (HF_TOKEN_PATH) for the models it "
            "downloads from the Hub"], [], mine
