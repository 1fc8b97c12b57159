"""The RayService CRD schema, applied offline as the Kubernetes API server applies it.

The API server does, for a structural CRD schema (Kubernetes docs, "Versions
in CustomResourceDefinitions" / "Defaulting and Nullable"): prune ``key: null``
where the field is not ``nullable``, fill each property's ``default`` inside
objects that are present, and — with kubectl's default strict field
validation — reject fields the schema does not name. Only then does it check
the OpenAPI v3 rules. Without the first two steps two of KubeRay's own LLM
samples fail falsely (``template.metadata:`` left empty; worker groups
without ``minReplicas``/``maxReplicas``, which the schema both requires and
defaults); without the third a typo such as ``rayStartParam`` passes.

The schema is package data (``crd/rayservice-v1.7.0.schema.json``, provenance
in ``crd/README.md``); :data:`KUBERAY_VERSION` names it.
"""

from __future__ import annotations

import copy
import json
import re
from functools import lru_cache
from importlib import resources
from typing import Any, Iterator

KUBERAY_VERSION = "1.7.0"
SCHEMA_FILE = f"rayservice-v{KUBERAY_VERSION}.schema.json"

# ObjectMeta: the CRD schema says only ``type: object``; the API server checks these.
OBJECT_META = {
    "name", "generateName", "namespace", "labels", "annotations", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences", "finalizers",
    "managedFields", "selfLink",
}
_QUANTITY = "a Kubernetes quantity such as \"2\", \"500m\" or \"16Gi\""


@lru_cache(maxsize=1)
def crd_schema() -> dict:
    text = resources.files("llmctl.validate.rayservice").joinpath("crd", SCHEMA_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def _props(schema: dict) -> dict:
    return schema.get("properties") or {}


def prepare(obj: Any, schema: dict | None = None) -> Any:
    """A copy of ``obj`` as the API server stores it: non-nullable nulls pruned,
    defaults filled (recursively, inside objects that are present)."""
    schema = crd_schema() if schema is None else schema
    return _prepare(copy.deepcopy(obj), schema)


def _prepare(obj: Any, schema: dict) -> Any:
    if isinstance(obj, dict):
        props = _props(schema)
        extra = schema.get("additionalProperties")
        for k in list(obj):
            sub = props.get(k) if k in props else (extra if isinstance(extra, dict) else None)
            if obj[k] is None and not (sub or {}).get("nullable"):
                del obj[k]
            elif sub is not None:
                obj[k] = _prepare(obj[k], sub)
        for k, sub in props.items():
            if k not in obj and "default" in sub:
                obj[k] = _prepare(copy.deepcopy(sub["default"]), sub)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        return [_prepare(x, schema["items"]) for x in obj]
    return obj


def unknown_fields(obj: Any, schema: dict | None = None, loc: tuple = ()) -> Iterator[tuple[tuple, str]]:
    """(location, field) of every field the schema does not name (strict field validation)."""
    schema = crd_schema() if schema is None else schema
    if isinstance(obj, dict):
        props = _props(schema)
        extra = schema.get("additionalProperties")
        open_ = schema.get("x-kubernetes-preserve-unknown-fields") or extra is True
        if loc == ("metadata",):
            props = {k: {} for k in OBJECT_META}
        for k, v in obj.items():
            if k in props:
                yield from unknown_fields(v, props[k], loc + (k,))
            elif isinstance(extra, dict):
                yield from unknown_fields(v, extra, loc + (k,))
            elif props and not open_:
                yield loc + (k,), str(k)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, x in enumerate(obj):
            yield from unknown_fields(x, schema["items"], loc + (i,))


def _known_here(schema: dict) -> list[str]:
    return sorted(_props(schema))


def _schema_at(loc: tuple) -> dict:
    s = crd_schema()
    for p in loc:
        if isinstance(p, int):
            s = s.get("items") or {}
        elif p in _props(s):
            s = _props(s)[p]
        elif isinstance(s.get("additionalProperties"), dict):
            s = s["additionalProperties"]
        else:
            return {}
    return s


def _suggest(word: str, options: list[str]) -> str:
    from llmctl.suggest import did_you_mean

    return did_you_mean(word, options)


_KINDS = ((bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"), (list, "a list"),
          (dict, "a mapping"))  # bool before int: a bool is an int


def _kind(v: Any) -> str:
    return next((name for t, name in _KINDS if isinstance(v, t)), "null")


def _message(e) -> str:
    v = e.instance
    path = tuple(e.absolute_path)
    if e.validator == "type":
        want = e.validator_value
        want = " or ".join(want) if isinstance(want, list) else want
        hint = ""
        if want == "string" and isinstance(v, (int, float)) and not isinstance(v, bool) and "rayStartParams" in path:
            hint = f"; rayStartParams values are strings: quote it (\"{v}\")"
        elif want == "string" and isinstance(v, (int, float, bool)):
            hint = f"; quote it (\"{v}\")" if not isinstance(v, bool) else "; quote it"
        return f"must be {'an' if want[0] in 'aeiou' else 'a'} {want}, not {_kind(v)}{hint}"
    if e.validator == "required":
        missing = e.message.split("'")[1] if "'" in e.message else e.message
        return f"missing required field '{missing}'"
    if e.validator == "pattern" and e.schema.get("x-kubernetes-int-or-string"):
        return f"{v!r} is not {_QUANTITY}"
    if e.validator == "pattern":
        return f"{v!r} does not match {e.validator_value}"
    if e.validator == "enum":
        return f"{v!r} is not one of: {', '.join(map(str, e.validator_value))}"
    if e.validator == "anyOf" and e.schema.get("x-kubernetes-int-or-string"):
        return f"must be an integer or {_QUANTITY}, not {_kind(v)}"
    if e.validator in ("maxLength", "minLength", "minimum", "maximum", "maxItems", "minItems"):
        return f"{e.validator} is {e.validator_value}: {e.message}"
    return e.message


def check(obj: Any) -> list[tuple[tuple, str]]:
    """(location, message) for every schema problem of one RayService object
    (a parsed YAML mapping), in document order of location."""
    import jsonschema

    out: list[tuple[tuple, str]] = []
    for loc, field in unknown_fields(obj):
        parent = _schema_at(loc[:-1])
        known = sorted(OBJECT_META) if loc[:-1] == ("metadata",) else _known_here(parent)
        out.append((loc, f"unknown field{_suggest(field, known)}; "
                         f"{'.'.join(str(p) for p in loc[:-1] if not isinstance(p, int)) or 'the top level'} takes "
                         f"{', '.join(known[:12])}{', …' if len(known) > 12 else ''}"))
    prepared = prepare(obj)
    validator = jsonschema.Draft7Validator(crd_schema())
    for e in validator.iter_errors(prepared):
        loc = tuple(e.absolute_path)
        if e.validator == "required":
            name = e.message.split("'")[1] if "'" in e.message else ""
            loc = loc + ((name,) if name else ())
        out.append((loc, _message(e)))
    return out


_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def dns1035_problem(name: str, max_len: int) -> str | None:
    if len(name) > max_len:
        return f"{len(name)} characters; at most {max_len}"
    if not _DNS_1035.match(name):
        return "must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter, not ending with '-'"
    return None
