"""Files in, diagnostics out: the entry points of validation."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Optional

import yaml

from llmctl.errors import ValidationFailed, ValidationIncomplete
from llmctl.sources import looks_local_path, path_probe
from llmctl.validate.documents import Diagnostic, Verdict, _Doc, _read_doc, _Sink, crash_of
from llmctl import builders
from llmctl.validate.llm_config import check_llm_config
from llmctl.validate.pins import check_vllm_pins
from llmctl.validate.secrets import check_secrets
from llmctl.validate.serve_config import check_serve_config, config_file_path, ray_serve_schema
from llmctl.vllm_version import VllmVersion, reference_vllm


def _check_doc(doc: _Doc, results: list[Diagnostic], base_dir: Path, *, kind: Optional[str], local_node: bool,
               check_model_file, model_file_exists, working_dir: Optional[Path] = None,
               vllm: Optional[VllmVersion] = None, debug: bool = False, load_model_file=None) -> Optional[str]:
    """Every check of one parsed document (serve or model config). No check
    raises unless ``debug``: a failure inside one is a ``check-failed`` error
    that makes the result incomplete (``_Sink.guard``)."""
    sink = _Sink(doc, debug=debug)
    is_serve = "applications" in doc.data
    model_id = None
    if kind == "model" and is_serve:
        sink.add((), "expected a model config (LLMConfig) but this is a serve config", code="not-a-config")
    elif is_serve:
        with sink.guard("serve config"):
            check_serve_config(doc, sink, base_dir, check_model_file, model_file_exists, local_node=local_node,
                               working_dir=working_dir, vllm=vllm, load_model_file=load_model_file)
    elif "model_loading_config" in doc.data or kind == "model":
        with sink.guard("model config"):
            model_id = check_llm_config(doc.data, sink, base_dir=base_dir, local_node=local_node, vllm=vllm)
    else:
        sink.add((), "neither a serve config (no 'applications') nor a model config (no 'model_loading_config')", code="not-a-config")
    with sink.guard("secrets"):
        check_secrets(doc.data, sink)
    with sink.guard("vLLM pins"):
        check_vllm_pins(doc.data, sink)
    results.extend(sink.items)
    return model_id


def check_embedded(doc: _Doc, results: list[Diagnostic], vllm: Optional[VllmVersion] = None, debug: bool = False) -> None:
    """Every serve-config check on a serve config embedded in another file (a
    RayService's serveConfigV2): it runs on the cluster, and its llm_configs
    must be inline (a file path is reported by the caller)."""
    _check_doc(doc, results, Path.cwd(), kind=None, local_node=False, debug=debug,
               check_model_file=lambda target: None, model_file_exists=lambda target: False, vllm=vllm)


def check_embedded_model(doc: _Doc, results: list[Diagnostic], vllm: Optional[VllmVersion] = None,
                         debug: bool = False) -> None:
    """Every model-config check on a model file embedded in another file (a
    ConfigMap of a RayService manifest); it runs on the cluster."""
    _check_doc(doc, results, Path.cwd(), kind="model", local_node=False, debug=debug,
               check_model_file=lambda target: None, model_file_exists=lambda target: False, vllm=vllm)


def _as_manifest(path: Path, vllm: Optional[VllmVersion] = None, debug: bool = False) -> Optional[list[Diagnostic]]:
    """Diagnostics of a Kubernetes manifest file (RayService), or None when the
    file is not one (then the serve/model config checks read it)."""
    from llmctl.validate.rayservice import manifest_nodes, validate_manifest

    try:
        nodes = manifest_nodes(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None  # _read_doc reports it
    if nodes is None:
        return None
    return validate_manifest(str(path), nodes, debug=debug,
                             check_doc=lambda doc, results: check_embedded(doc, results, vllm, debug),
                             check_model=lambda doc, results: check_embedded_model(doc, results, vllm, debug))


def validate_text(path: str | Path, text: str, *, debug: bool = False) -> Verdict:
    """Diagnostics of RayService manifest text (gen-config checks a manifest
    this way before writing it)."""
    from llmctl.validate.rayservice import manifest_nodes, validate_manifest

    nodes = manifest_nodes(text) or []
    return Verdict(validate_manifest(str(path), nodes, debug=debug,
                                     check_doc=lambda doc, results: check_embedded(doc, results, debug=debug),
                                     check_model=lambda doc, results: check_embedded_model(doc, results, debug=debug)))


def _validate_file(path: Path, results: list[Diagnostic], kind: Optional[str] = None, local_node: bool = True,
                   working_dir: Optional[Path] = None, vllm: Optional[VllmVersion] = None,
                   debug: bool = False) -> Optional[str]:
    if kind is None and path_probe(path, "is_file") and (manifest := _as_manifest(path, vllm, debug)) is not None:
        results.extend(manifest)
        return None
    doc = _read_doc(path, results)
    if doc is None:
        return None
    return _check_doc(
        doc, results, path.resolve().parent, kind=kind, local_node=local_node, working_dir=working_dir, vllm=vllm,
        debug=debug, model_file_exists=lambda target: path_probe(target, "is_file"),
        check_model_file=lambda target: _validate_file(target, results, kind="model", local_node=local_node, vllm=vllm,
                                                       debug=debug),
    )


def _ordered(results: list[Diagnostic], first_file: str) -> list[Diagnostic]:
    """Line order within a file; the named file first, then files it references."""
    return sorted(results, key=lambda d: (d.file != first_file, d.file, d.line or 0))


def _unique(results: Iterable[Diagnostic]) -> list[Diagnostic]:
    """A model file reached twice (directly and from a serve config) reports once."""
    seen: set[str] = set()
    out = []
    for d in results:
        key = str(d)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def validate_paths(paths: Iterable[Path | str], *, local_node: bool = True,
                   working_dir: Path | str | None = None,
                   vllm_version: VllmVersion | str | None = None,
                   strict: bool = False, debug: bool = False) -> Verdict:
    """Diagnostics for every file (errors, warnings, notes), in file order, as
    a :class:`Verdict` (a list of them that also says ``valid``, ``incomplete``).

    ``local_node=False``: the apps run on another machine (a cluster), so what
    may exist only there — a local model directory, a ``server_cls`` or other
    class — is a warning when it is missing here. ``working_dir``: where
    relative ``llm_configs`` paths are opened, as Ray opens them (default: the
    current directory). ``vllm_version``: the vLLM the replicas run, whose
    engine arguments ``engine_kwargs`` is checked against (default: the one Ray
    pins; :func:`llmctl.vllm_version.reference_vllm`). ``strict``: warnings
    make it fail too (``Verdict.valid``). A check that crashes on the input is
    a ``check-failed`` error (the result is incomplete, never valid);
    ``debug`` raises it instead, with its traceback."""
    wd = Path(working_dir).resolve() if working_dir is not None else Path.cwd()
    vllm = reference_vllm(vllm_version)
    results: list[Diagnostic] = []
    for p in paths:
        one: list[Diagnostic] = []
        _validate_file(Path(p), one, local_node=local_node, working_dir=wd, vllm=vllm, debug=debug)
        results += _ordered(one, str(p))
    return Verdict(_unique(results), strict=strict)


def validate_rendered(docs: Iterable[tuple[str, str, str]], vllm_version: VllmVersion | str | None = None,
                      *, debug: bool = False) -> Verdict:
    """Check documents before they are written: (path, text, kind) with kind
    "model" or "serve". Every document goes through every check a file on
    disk would; a serve config's llm_configs paths resolve to the rendered
    model documents. ``vllm_version`` as for :func:`validate_paths`."""
    docs = list(docs)
    vllm = reference_vllm(vllm_version)
    rendered = {str(Path(path)): text for path, text, kind in docs if kind == "model"}
    results: list[Diagnostic] = []
    ids: dict[str, Optional[str]] = {}
    for path, text, kind in docs:
        if kind == "model":
            ids[str(Path(path))] = _check_doc(_Doc(path, text), results, Path(path).parent, kind="model", local_node=True,
                                              check_model_file=None, model_file_exists=None, vllm=vllm, debug=debug)
    for path, text, kind in docs:
        if kind == "serve":
            _check_doc(_Doc(path, text), results, Path(path).parent, kind=None, local_node=True,
                       check_model_file=lambda target: ids.get(str(target)),
                       model_file_exists=lambda target: str(target) in rendered, vllm=vllm, debug=debug,
                       load_model_file=lambda target: yaml.safe_load(rendered[str(target)]) if str(target) in rendered else None)
    return Verdict(_unique(results))


def load_deployable(serve_path: Path | str, *, local_node: bool = True, working_dir: Path | str | None = None,
                    vllm_version: VllmVersion | str | None = None, strict: bool = False, debug: bool = False) -> dict:
    """The serve config as data with each model config file inlined (so it
    works on any cluster). Relative paths are opened from ``working_dir``
    (default: the current directory), as Ray opens them. Raises
    ValidationFailed if invalid (``strict``: warnings too), and
    ValidationIncomplete when a check crashed on it (``debug``: raises that
    exception instead), so nothing acts on a config validate did not check."""
    serve_path = Path(serve_path)
    wd = Path(working_dir).resolve() if working_dir is not None else Path.cwd()
    verdict = validate_paths([serve_path], local_node=local_node, working_dir=wd, vllm_version=vllm_version,
                             strict=strict, debug=debug)
    if verdict.incomplete:
        raise ValidationIncomplete(verdict.failing, incomplete_message(serve_path, verdict))
    if verdict.failing:
        raise ValidationFailed(verdict.failing)
    data = yaml.safe_load(serve_path.read_text(encoding="utf-8"))
    if "applications" not in data:
        raise ValidationFailed([Diagnostic(str(serve_path), 1, "", "expected a serve config (applications: …); `llmctl up` deploys serve configs",
                                           code="not-a-config")])
    base_dir = serve_path.resolve().parent
    for app in data["applications"]:
        for slot, entry in list(builders.app_llm_configs(app)):
            if isinstance(entry, str):
                target = config_file_path(entry, wd)
                cfg = yaml.safe_load(target.read_text(encoding="utf-8"))
                _absolutize_source(cfg, target.parent)
                builders.set_in(app, slot, cfg)
            elif isinstance(entry, dict):
                _absolutize_source(entry, base_dir)
    return data


def incomplete_message(path: Path | str, verdict: Verdict) -> str:
    """Why an incomplete result is refused: one line naming the crashed check,
    then the other failing diagnostics, one a line."""
    first = verdict.failed_checks[0]
    more = len(verdict.failed_checks) - 1
    head = (f"{path}: validation is incomplete, so it is not used: {crash_of(first)}"
            + (f" and {more} more check{'s' if more != 1 else ''}" if more else "")
            + f" (an llmctl bug: please report it; `llmctl validate --debug {path}` shows the traceback)")
    rest = [str(d) for d in verdict.failing if d.code != "check-failed"]
    return "\n".join([head, *rest])


def _absolutize_source(cfg: dict, base_dir: Path) -> None:
    mlc = cfg.get("model_loading_config") or {}
    src = mlc.get("model_source")
    if isinstance(src, str) and looks_local_path(src) and not os.path.isabs(os.path.expanduser(src)):
        mlc["model_source"] = str((base_dir / src).resolve())


__all__ = ["validate_paths", "validate_rendered", "validate_text", "load_deployable", "ray_serve_schema"]


def inline_llm_configs(data: dict, working_dir: Optional[Path] = None) -> dict:
    """The serve config with its model config files read in (already validated: no checks here;
    a file that cannot be read stays a path)."""
    wd = (working_dir or Path.cwd()).resolve()
    for one in data.get("applications") or []:
        for slot, entry in list(builders.app_llm_configs(one)) if isinstance(one, dict) else []:
            if isinstance(entry, str):
                try:
                    builders.set_in(one, slot, yaml.safe_load(config_file_path(entry, wd).read_text(encoding="utf-8")))
                except (OSError, ValueError, yaml.YAMLError):
                    pass
    return data
