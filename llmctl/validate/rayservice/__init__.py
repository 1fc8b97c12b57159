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

from llmctl.serve_facts import is_loopback
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


def validate_manifest(path: str, nodes: list[Any], *, check_doc, check_model=None, debug: bool = False) -> list[Diagnostic]:
    """Diagnostics for every document of a manifest file. ``check_doc(doc,
    results)`` runs the serve-config checks on the embedded serveConfigV2,
    ``check_model(doc, results)`` the model-config checks on a model file a
    ConfigMap of the manifest holds. ``debug``: a check that crashes is raised
    (else a ``check-failed`` error)."""
    from llmctl.validate.rayservice import files

    out: list[Diagnostic] = []
    cms = files.config_maps(nodes)
    for node in nodes:
        try:
            doc = _Doc(path, node=node)
        except yaml.YAMLError as e:
            out.append(Diagnostic(path, node.start_mark.line + 1, "", f"malformed YAML: {getattr(e, 'problem', None) or e}",
                                  code="yaml"))
            continue
        sink = _Sink(doc, debug=debug)
        if not isinstance(doc.data, dict):
            sink.add((), "expected a mapping (a Kubernetes object)", code="not-a-config")
        elif doc.data.get("kind") == "Secret":
            from llmctl.validate.secrets import check_secret_object

            check_secret_object(doc.data, sink)
        elif doc.data.get("kind") != "RayService":
            meta = doc.data.get("metadata") if isinstance(doc.data.get("metadata"), dict) else {}
            sink.add((), f"kind {doc.data.get('kind')!r} ({meta.get('name', '?')}): not checked; "
                         "llmctl validates RayService objects", "note", code="k8s-skipped")
        else:
            with sink.guard("RayService"):
                _rayservice(doc, sink, out, check_doc, check_model, cms)
        out.extend(sink.items)
    return out


def _rayservice(doc: _Doc, sink: _Sink, out: list[Diagnostic], check_doc, check_model, cms: dict) -> None:
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
    check_secrets(bare, sink, manifest=True)
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
    isink = sink.child(inner)
    results: list[Diagnostic] = []
    _serve_rules(inner.data, isink.add)
    _model_files(inner.data, obj, cms, doc.path, isink.add, results, check_model)
    check_doc(inner, results)
    results = [d for d in results if d.code != "no-such-file"]  # file paths: _serve_rules says why
    if not problems and not any(d.is_error for d in results + isink.items):
        checks.gpu_arithmetic(api_view, inner.data, sink.add, isink.add)
    out.extend(results)
    out.extend(isink.items)


def _serve_rules(serve: dict, add) -> None:
    """What a serve config may do on a laptop but not inside a RayService."""
    http = serve.get("http_options") if isinstance(serve.get("http_options"), dict) else {}
    host = http.get("host")
    if is_loopback(host):
        add(("http_options", "host"), f"{host}: the proxy must listen on 0.0.0.0 in a pod (KubeRay's serve Service and "
                                      "the workers' readiness probe reach it from outside); delete http_options.host",
            code="k8s-http-host")
    port = http.get("port")
    if isinstance(port, int) and port != 8000:
        add(("http_options", "port"), f"{port}: KubeRay's serve Service and readiness probe use the container port named "
                                      "serve (8000 in llmctl's manifests); make them equal", "warning", code="k8s-http-port")


def _model_files(serve: dict, obj: dict, cms: dict, path: str, add, results: list[Diagnostic], check_model) -> None:
    """Model config files serveConfigV2 names, resolved as Ray resolves them on
    the pod (:mod:`.files`): from a ConfigMap of this manifest they are
    validated; from a volume llmctl cannot read, a note; not there, an error."""
    from llmctl.builders import app_llm_configs
    from llmctl.validate.rayservice import files

    apps = serve.get("applications")
    for i, app in enumerate(apps if isinstance(apps, list) else []):
        for slot, entry in app_llm_configs(app):
            if not isinstance(entry, str):
                continue
            loc = ("applications", i) + slot
            r = files.resolve(entry, obj)
            if r is None:
                add(loc, f"'{entry}': the Ray container's working directory is not known (no workingDir, not a rayproject "
                         "image), so llmctl cannot tell where Ray opens it; not checked", "note", code="k8s-file-path")
                continue
            if r.mount is None:
                add(loc, f"'{entry}' is a file path: Ray opens {r.path} on the pod, and no volume is mounted there (the "
                         "operator sends serveConfigV2 as text; the image does not have the file); inline the LLMConfig "
                         "(llmctl kuberay does) or mount a ConfigMap with it", "error", code="k8s-file-path")
                continue
            vol = r.volume or {}
            cm = vol.get("configMap") if isinstance(vol.get("configMap"), dict) else None
            if cm is None:
                kind = next((k for k in ("persistentVolumeClaim", "hostPath", "nfs", "csi", "emptyDir") if k in vol), "volume")
                add(loc, f"'{entry}' is {r.path} on a {kind} volume ({r.mount.get('name')}): it cannot be read here; not "
                         "checked", "note", code="k8s-file-path")
                continue
            name = cm.get("name")
            if name not in cms:
                add(loc, f"'{entry}' comes from ConfigMap {name!r}, which is not in this file: it cannot be read here; "
                         "not checked", "note", code="k8s-file-path")
                continue
            node = files.data_node(cms[name], r.key or "")
            if node is None or not isinstance(getattr(node, "value", None), str):
                add(loc, f"'{entry}' is {r.path}, from ConfigMap {name!r}, which has no key {r.key!r}: Ray will not find "
                         "the file", "error", code="k8s-file-path")
                continue
            if check_model is None:
                continue
            offset = node.start_mark.line + 1 if node.style in ("|", ">") else node.start_mark.line
            try:
                mdoc = _Doc(f"{path} (ConfigMap {name}: {r.key})", node.value, line_offset=offset)
            except yaml.YAMLError as e:
                add(loc, f"ConfigMap {name!r} key {r.key!r}: malformed YAML: {getattr(e, 'problem', None) or e}", code="yaml")
                continue
            check_model(mdoc, results)


def _value_node(node: Any, path: tuple) -> Any:
    for part in path:
        if not isinstance(node, yaml.MappingNode):
            return None
        node = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
    return node
