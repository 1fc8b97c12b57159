"""Secrets and unfilled placeholders anywhere in a config.

- A literal token is an error wherever it stands (``runtime_env.env_vars``,
  ``engine_kwargs.hf_token`` as one of Ray's tutorials writes it, an
  application's ``args``, …): Ray's dashboard returns serve configs and
  runtime_envs to every client, and Ray logs them. What is a secret (by
  shape, or any literal value under a name that says secret) is
  :mod:`llmctl.secrets`'s one rule.
- ``${VAR}`` is expanded by Ray only inside a ``runtime_env``: its
  ``env_vars`` (``ray/_private/utils.py`` ``update_envs``: os.path.expandvars
  on the node) and the pip/uv options (``_private/runtime_env/pip.py``,
  ``uv.py``). Anywhere else the engine receives the literal text.
- Template placeholders (``<YOUR-HF-TOKEN>``, ``<MODEL_ID>``) left unfilled.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from llmctl.secrets import literal_secret
from llmctl.validate.documents import _Sink

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_PLACEHOLDER = re.compile(r"<\s*(?:YOUR|Your|your)[\w .-]*>|<[A-Z][A-Z0-9]*(?:[_-][A-Z0-9]+)+>|<(?:MODEL|TOKEN|BUCKET|PATH|NAME)>")
# Helm / Go templates ({{ .Values.x }}) and envsubst's $VAR: neither Ray nor kubectl expands them.
_HELM = re.compile(r"\{\{-?\s*[.$A-Za-z(][^{}]*\}\}")
_BARE_VAR = re.compile(r"(?<![\w$\\])\$[A-Z_][A-Z0-9_]*\b(?!\()")
# Fields whose text is a template or free text, where angle brackets are normal.
_FREE_TEXT = re.compile(r"(template|prompt|description|stop|regex|pattern)", re.I)


def _walk(data: Any, loc: tuple = ()) -> Iterator[tuple[tuple, Any, Any]]:
    """(location, key, value) of every scalar leaf."""
    if isinstance(data, dict):
        for k, v in data.items():
            if isinstance(v, (dict, list)):
                yield from _walk(v, loc + (k,))
            else:
                yield loc + (k,), k, v
    elif isinstance(data, list):
        for i, v in enumerate(data):
            if isinstance(v, (dict, list)):
                yield from _walk(v, loc + (i,))
            else:
                yield loc + (i,), None, v


def _in_runtime_env(loc: tuple) -> bool:
    return "runtime_env" in loc


def _literal_secret(key: Any, value: str) -> str | None:
    """A literal secret (llmctl.secrets), unless it is an unfilled placeholder
    (reported as one)."""
    what = literal_secret(key, value)
    if what == "a secret" and _PLACEHOLDER.search(value):
        return None
    return what


def _env_name(loc: tuple, key: Any, what: str) -> str:
    if len(loc) >= 2 and loc[-2] == "env_vars" and isinstance(key, str):
        return key
    if "Hugging Face" in what or (isinstance(key, str) and "hf" in key.lower()):
        return "HF_TOKEN"
    return re.sub(r"[^A-Za-z0-9_]", "_", str(key)).upper() if isinstance(key, str) else "SECRET"


def _shell(loc: tuple) -> bool:
    """A container's command / args / probe exec: a shell may expand $VAR there."""
    return any(p in ("command", "args", "exec", "lifecycle") for p in loc) and \
        any(p in ("containers", "initContainers") for p in loc)


def check_secrets(data: Any, sink: _Sink, *, manifest: bool = False) -> None:
    """Literal tokens, ``${VAR}`` where Ray does not expand it, unfilled
    placeholders, template expressions (Helm, envsubst): each an error at its
    field. ``manifest``: a Kubernetes manifest, where ``${VAR}`` means the
    file was meant for envsubst."""
    for loc, key, value in _walk(data):
        if not isinstance(value, str):
            continue
        what = _literal_secret(key, value)
        if what:
            name = _env_name(loc, key, what)
            sink.add(loc, f"holds {what} in plain text; Ray's dashboard shows configs to every client and logs them: "
                          f"write {name}: \"${{{name}}}\" under runtime_env.env_vars and export {name} where you deploy",
                     code="literal-token")
            continue
        free = bool(_FREE_TEXT.search(str(key or "")))
        ph = None if free else _PLACEHOLDER.search(value)
        if ph:
            sink.add(loc, f"unfilled placeholder '{ph.group(0)}': replace it with the real value", code="placeholder")
            continue
        helm = None if free else _HELM.search(value)
        if helm:
            sink.add(loc, f"'{helm.group(0)}' is a Helm / Go template expression that neither Ray nor kubectl expands: "
                          "render the file first (helm template)", code="template")
            continue
        ref = _ENV_REF.search(value)
        bare = None if (free or _in_runtime_env(loc) or _shell(loc)) else _BARE_VAR.search(value)
        if manifest and ref and not _in_runtime_env(loc) and not free and not _shell(loc):
            sink.add(loc, f"'{ref.group(0)}' is an envsubst-style reference kubectl does not expand: render the file first "
                          "(envsubst < file | kubectl apply -f -)", code="template")
            continue
        if bare:
            sink.add(loc, f"'{bare.group(0)}' is a shell / envsubst variable that neither Ray nor kubectl expands here: render "
                          "the file first (envsubst), or use runtime_env.env_vars with \"${VAR}\"", code="template")
            continue
        if ref and not _in_runtime_env(loc) and not free:
            hint = ("; vLLM reads HF_TOKEN from the environment: delete this field and set runtime_env.env_vars.HF_TOKEN: "
                    "\"${HF_TOKEN}\"" if isinstance(key, str) and "token" in key.lower() else
                    "; only runtime_env (env_vars, pip, uv) expands variables")
            sink.add(loc, f"'{ref.group(0)}' is not expanded here: Ray passes the literal text{hint}", code="unexpanded-variable")


# A secret value someone masked before publishing (hf_whNJmkxxxxxxxxxx, ****).
_MASKED = re.compile(r"x{6,}|X{6,}|\*{4,}|(?i:^your[-_ ]|^changeme$|^replace[-_ ]?me)")


def check_secret_object(data: Any, sink: _Sink) -> None:
    """A Kubernetes Secret in a manifest: its stringData values must be real
    values, not an envsubst / Helm expression or a masked or placeholder
    token (kubectl stores the text as it is and the pods get it)."""
    sd = data.get("stringData") if isinstance(data, dict) else None
    for k, v in (sd.items() if isinstance(sd, dict) else []):
        if not isinstance(v, str):
            continue
        loc = ("stringData", k)
        ref = _ENV_REF.search(v) or _BARE_VAR.search(v)
        helm = _HELM.search(v)
        if ref or helm:
            tool = "helm template" if helm else "envsubst"
            sink.add(loc, f"'{(helm or ref).group(0)}' is not expanded by kubectl: the Secret would hold the literal text; "
                          f"render the file first ({tool}) or create the Secret with kubectl create secret", code="template")
        elif _PLACEHOLDER.search(v) or _MASKED.search(v):
            sink.add(loc, f"'{v[:24]}' looks masked or a placeholder: the Secret would hold it as the token; put the real "
                          "value in (kubectl create secret generic … --from-literal)", code="placeholder")
