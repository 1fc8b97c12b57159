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
- In a Kubernetes manifest, a container's ``command`` / ``args`` are passed
  as written: Kubernetes expands only ``$(NAME)`` there. A shell run with
  ``-c`` (``sh -c "… ${VAR} …"``, an initContainer's usual script) expands
  ``${VAR}`` and ``$VAR`` in its script, and only there.
- Template placeholders (``<YOUR-HF-TOKEN>``, ``<MODEL_ID>``) left unfilled.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterator, Optional

from llmctl.secrets import literal_secret
from llmctl.validate.documents import _Sink

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_PLACEHOLDER = re.compile(r"<\s*(?:YOUR|Your|your)[\w .-]*>|<[A-Z][A-Z0-9]*(?:[_-][A-Z0-9]+)+>|<(?:MODEL|TOKEN|BUCKET|PATH|NAME)>")
# Helm / Go templates ({{ .Values.x }}) and envsubst's $VAR: neither Ray nor kubectl expands them.
_HELM = re.compile(r"\{\{-?\s*[.$A-Za-z(][^{}]*\}\}")
_BARE_VAR = re.compile(r"(?<![\w$\\])\$([A-Z_][A-Z0-9_]*)\b(?!\()")
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


_CONTAINERS = ("containers", "initContainers", "ephemeralContainers")
_SHELLS = ("sh", "bash", "ash", "dash", "zsh", "ksh", "mksh")


def _argv_item(data: Any, loc: tuple) -> Optional[tuple[list, int]]:
    """``(argv, index)`` when ``loc`` is an item of a Kubernetes container's
    ``command`` / ``args`` (argv is command + args; without a command, the
    args, as for an image with no entrypoint) or of an ``exec.command``
    (probes, lifecycle hooks); None elsewhere."""
    if len(loc) < 2 or not isinstance(loc[-1], int) or loc[-2] not in ("command", "args"):
        return None
    owner = data
    for part in loc[:-2]:
        try:
            owner = owner[part]
        except (KeyError, IndexError, TypeError):
            return None
    if not isinstance(owner, dict):
        return None
    command = owner.get("command") if isinstance(owner.get("command"), list) else []
    if len(loc) >= 4 and loc[-4] in _CONTAINERS and isinstance(loc[-3], int):
        args = owner.get("args") if isinstance(owner.get("args"), list) else []
        return command + args, loc[-1] + (len(command) if loc[-2] == "args" else 0)
    if len(loc) >= 3 and loc[-3] == "exec" and loc[-2] == "command":
        return command, loc[-1]
    return None


def _shell_script_at(argv: list, index: int) -> bool:
    """Whether ``argv[index]`` is the script of a shell run with ``-c`` (which
    expands ``${VAR}`` / ``$VAR`` in it); the arguments after the script are
    its positional parameters, passed as written."""
    words = [str(w) for w in argv]
    start = 0
    while start < len(words) and os.path.basename(words[start]) in ("env", "busybox"):
        start += 1
    if start >= len(words) or os.path.basename(words[start]) not in _SHELLS:
        return False
    seen_c = False
    for i in range(start + 1, len(words)):
        w = words[i]
        if w.startswith("-") and not seen_c:
            seen_c = "c" in w.lstrip("-") and not w.startswith("--")
            continue
        return seen_c and i == index
    return False


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
        bare = None if (free or _in_runtime_env(loc)) else _BARE_VAR.search(value)
        argv = _argv_item(data, loc) if manifest else None
        if argv is not None and (ref or bare) and not free:
            if _shell_script_at(*argv):
                continue  # the shell expands it
            v = ref or bare
            sink.add(loc, f"'{v.group(0)}' is not expanded here: Kubernetes passes a container's command and args as "
                          f"written, expanding only $({v.group(1)}); write $({v.group(1)}), or run the command through "
                          "sh -c, whose script expands it", code="unexpanded-variable")
            continue
        if manifest and ref and not _in_runtime_env(loc) and not free:
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


# Model ids and sources a template leaves to the reader (org/model-name,
# unique-model-id, <hf-model-id>): a value in angle brackets, or one made only
# of the words templates use for "the model goes here" (two or more of them,
# so a real one-word id such as "model" or "gpt2" is not one).
_TEMPLATE_WORDS = frozenset("your unique huggingface hf org organization user username owner namespace model name id "
                            "repo repository placeholder example".split())
_ANGLE = re.compile(r"<[^<>\s|/][^<>|]*>")


def model_placeholder(value: Any, *, words: bool = True) -> Optional[str]:
    """The placeholder a model id or source is (or holds), or None: an
    angle-bracket one anywhere in it (``<hf-model-id>``, ``s3://<bucket>/m``),
    or (``words``: a Hugging Face repo id, not a path or URI) one made only of
    template words (``org/model-name``, ``huggingface-org/model-name``,
    ``unique-model-id``)."""
    if not isinstance(value, str):
        return None
    m = _PLACEHOLDER.search(value) or _ANGLE.search(value)
    if m:
        return m.group(0)
    parts = value.strip().split("/")
    found = [w for part in parts for w in re.split(r"[-_.\s]+", part.lower()) if w]
    if words and len(parts) <= 2 and len(found) >= 2 and all(w in _TEMPLATE_WORDS for w in found):
        return value.strip()
    return None


def check_model_placeholders(mlc: dict, sink: _Sink, *, source_is_path: bool) -> bool:
    """Placeholders in ``model_loading_config``: a model_source (or the model_id
    standing in for one) vLLM cannot load is an error; a model_id that is a
    placeholder while the source is real deploys, but clients must send it
    (a warning). Returns whether the source is a placeholder."""
    model_id, source = mlc.get("model_id"), mlc.get("model_source")
    src_loc = ("model_loading_config", "model_source" if "model_source" in mlc else "model_id")
    src = source.get("bucket_uri") if isinstance(source, dict) else (source if "model_source" in mlc else model_id)
    ph = model_placeholder(src, words=not source_is_path and not isinstance(source, dict))
    if ph and not _PLACEHOLDER.search(ph):  # an all-caps one (<MODEL_ID>): check_secrets reports it, for every field
        via = "" if "model_source" in mlc else " (model_source defaults to model_id)"
        sink.add(src_loc + (("bucket_uri",) if isinstance(source, dict) else ()),
                 f"'{ph}' is a template's placeholder, not a model{via}: vLLM cannot load it; write the Hugging Face "
                 "repo id (e.g. Qwen/Qwen2.5-7B-Instruct), a local path or a bucket URI", code="placeholder")
    if "model_source" in mlc and (ph_id := model_placeholder(model_id)) and not _PLACEHOLDER.search(ph_id):
        code = "placeholder" if ph_id.startswith("<") else "placeholder-model-id"
        sink.add(("model_loading_config", "model_id"), f"'{ph_id}' is a template's placeholder: clients must send it as "
                 "\"model\"; name the model (e.g. qwen2.5-7b-instruct)", code=code)
    return bool(ph)
