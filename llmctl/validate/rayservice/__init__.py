"""Validate Kubernetes manifest files holding RayServices.

A file is a manifest when one of its YAML documents has ``apiVersion`` and
``kind``. Each RayService goes through: the CRD schema as the API server
applies it (:mod:`.schema`), the operator's rules and the GPU arithmetic
(:mod:`.checks`), and its ``serveConfigV2`` through every check a serve file
gets (:mod:`llmctl.validate`), with line numbers pointing into the manifest.
Other kinds are skipped with a note. One :class:`Diagnostic` per problem.
"""

from __future__ import annotations

import copy
from typing import Any, Optional

import yaml

from llmctl.validate.rayservice import checks, schema
from llmctl.validate.documents import Diagnostic, _Doc, _Sink

API_VERSION = "ray.io/v1"


def manifest_nodes(text: str) -> Optional[list[Any]]:
    """The YAML documents' nodes when ``text`` is a Kubernetes manifest, else
    None (raises yaml.YAMLError on malformed YAML)."""
    nodes = [n for n in yaml.compose_all(text, Loader=yaml.SafeLoader) if n is not None]
    for n in nodes:
        keys = {k.value for k, _ in n.value if isinstance(k, yaml.ScalarNode)} if isinstance(n, yaml.MappingNode) else set()
        if keys >= {"apiVersion", "kind"}:
            return nodes
    return None


def validate_manifest(path: str, nodes: list[Any], *, check_doc) -> list[Diagnostic]:
    """Diagnostics for every document of a manifest file. ``check_doc(doc,
    results)`` runs the serve-config checks on the embedded serveConfigV2."""
    out: list[Diagnostic] = []
    for node in nodes:
        try:
            doc = _Doc(path, node=node)
        except yaml.YAMLError as e:
            out.append(Diagnostic(path, node.start_mark.line + 1, "", f"malformed YAML: {getattr(e, 'problem', None) or e}",
                                  code="yaml"))
            continue
        sink = _Sink(doc)
        if not isinstance(doc.data, dict):
            sink.add((), "expected a mapping (a Kubernetes object)", code="not-a-config")
        elif doc.data.get("kind") != "RayService":
            meta = doc.data.get("metadata") if isinstance(doc.data.get("metadata"), dict) else {}
            sink.add((), f"kind {doc.data.get('kind')!r} ({meta.get('name', '?')}): not checked; "
                         "llmctl validates RayService objects", "note", code="k8s-skipped")
        else:
            with sink.guard("RayService"):
                _rayservice(doc, sink, out, check_doc)
        out.extend(sink.items)
    return out


def _rayservice(doc: _Doc, sink: _Sink, out: list[Diagnostic], check_doc) -> None:
    from llmctl.validate.secrets import check_secrets

    obj = doc.data
    if obj.get("apiVersion") != API_VERSION:
        sink.add(("apiVersion",), f"{obj.get('apiVersion')!r}: RayService is {API_VERSION} (v1alpha1 is gone from KubeRay 1.x)",
                 code="k8s-api-version")
    problems = schema.check(obj)
    for loc, msg in problems:
        sink.add(loc, msg, code="k8s-schema")
    api_view = schema.prepare(obj)
    checks.operator_rules(api_view, sink.add)
    bare = copy.deepcopy(obj)
    if isinstance(bare.get("spec"), dict):
        bare["spec"].pop("serveConfigV2", None)
    check_secrets(bare, sink)
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    text = spec.get("serveConfigV2")
    if not isinstance(text, str):
        return
    node = _value_node(doc.node, ("spec", "serveConfigV2"))
    offset = (node.start_mark.line + 1) if node is not None and node.style in ("|", ">") else \
        (node.start_mark.line if node is not None else 0)
    try:
        inner = _Doc(doc.path, text, line_offset=offset)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        sink.add(("spec", "serveConfigV2"), "malformed YAML inside serveConfigV2"
                 + (f" at its line {mark.line + 1}" if mark else "") + f": {getattr(e, 'problem', None) or e}", code="yaml")
        return
    if not isinstance(inner.data, dict) or "applications" not in inner.data:
        sink.add(("spec", "serveConfigV2"), "must be a Ray Serve config (applications: …)", code="not-a-config")
        return
    isink = _Sink(inner)
    _serve_rules(inner.data, isink.add)
    results: list[Diagnostic] = []
    check_doc(inner, results)
    results = [d for d in results if d.code != "no-such-file"]  # file paths: _serve_rules says why
    if not problems and not any(d.is_error for d in results + isink.items):
        checks.gpu_arithmetic(api_view, inner.data, sink.add, isink.add)
    out.extend(results)
    out.extend(isink.items)


def _serve_rules(serve: dict, add) -> None:
    """What a serve config may do on a laptop but not inside a RayService."""
    from llmctl.builders import app_llm_configs

    http = serve.get("http_options") if isinstance(serve.get("http_options"), dict) else {}
    host = http.get("host")
    if isinstance(host, str) and host in ("127.0.0.1", "localhost", "::1"):
        add(("http_options", "host"), f"{host}: the proxy must listen on 0.0.0.0 in a pod (KubeRay's serve Service and "
                                      "the workers' readiness probe reach it from outside); delete http_options.host",
            code="k8s-http-host")
    port = http.get("port")
    if isinstance(port, int) and port != 8000:
        add(("http_options", "port"), f"{port}: KubeRay's serve Service and readiness probe use the container port named "
                                      "serve (8000 in llmctl's manifests); make them equal", "warning", code="k8s-http-port")
    apps = serve.get("applications")
    for i, app in enumerate(apps if isinstance(apps, list) else []):
        for slot, entry in app_llm_configs(app):
            if isinstance(entry, str):
                add(("applications", i) + slot, f"'{entry}' is a file path: the operator sends serveConfigV2 to the cluster as "
                                                "text and the pods do not have this file; inline the LLMConfig "
                                                "(llmctl kuberay does)", code="k8s-file-path")


def _value_node(node: Any, path: tuple) -> Any:
    for part in path:
        if not isinstance(node, yaml.MappingNode):
            return None
        node = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
    return node
