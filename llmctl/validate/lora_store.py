"""LoRA adapters in the store, checked against the model they will be served
on, before deploying (issue 25): ``llmctl check`` and ``validate --remote``.

With access to the store (the replica's own settings, :mod:`llmctl.lorastore`)
every adapter under ``lora_config.dynamic_lora_loading_path`` is listed and its
``adapter_config.json`` read; each of these is an error naming the adapter,
because vLLM refuses such an adapter when it is first requested (HTTP 500)
while the deployment itself looks healthy:

- ``lora-rank``: its rank (``r``, or the largest of ``rank_pattern``) is above
  ``engine_kwargs.max_lora_rank`` (vLLM's default 16);
- ``lora-base-model``: its tensors do not fit the served model's weights
  (trained for another base model) — an error; only its recorded
  ``base_model_name_or_path`` names another model — a warning;
- ``lora-target-modules``: it targets modules the served model does not have.

When the store cannot be read with the replica's settings, ``lora-store``
says why (endpoint, region, credentials): Ray's loader fails the same way and
answers every adapter request with 404 (ray-project/ray#55502). What could
not be checked (no access to a gs:// or azure:// store, a base model whose
weights are not on this machine) is a ``lora-not-checked`` note.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from llmctl import lorastore
from llmctl.builders import app_llm_configs
from llmctl.validate.documents import Diagnostic
from llmctl.serve_facts import model_id_of

VLLM_DEFAULT_MAX_LORA_RANK = 16  # vllm/config/lora.py (0.29–0.32)
_LORA_TENSOR = re.compile(r"^(?:base_model\.model\.)?(?P<module>.+)\.lora_(?P<ab>[AB])(?:\.[\w-]+)?\.weight$")


@dataclass
class ModelFacts:
    model_id: str
    source: str
    max_lora_rank: int
    rank_given: bool
    weights: dict[str, list[int]] = field(default_factory=dict)  # param name -> shape, when the weights are local
    architecture: str = ""


def _local_weights(source: str) -> tuple[dict[str, list[int]], str]:
    """Param name -> shape from a local checkpoint's safetensors headers, and its architecture."""
    d = Path(source)
    if not (d.is_dir() and (d / "config.json").is_file()):
        return {}, ""
    from llmctl.catalog import read_config_json
    from llmctl.errors import ModelNotFound

    try:
        arch = (read_config_json(d / "config.json").get("architectures") or [""])[0]
    except (ModelNotFound, AttributeError):
        arch = ""
    shapes: dict[str, list[int]] = {}
    for f in sorted(d.glob("*.safetensors")):
        try:
            with f.open("rb") as fh:
                n = int.from_bytes(fh.read(8), "little")
                header = json.loads(fh.read(n))
        except (OSError, ValueError):
            continue
        shapes.update({k: list(v.get("shape", [])) for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)})
    return shapes, arch


def model_facts(llm: dict) -> ModelFacts:
    mlc = llm.get("model_loading_config") or {}
    ek = llm.get("engine_kwargs") if isinstance(llm.get("engine_kwargs"), dict) else {}
    src = mlc.get("model_source") or mlc.get("model_id") or ""
    src = src.get("bucket_uri", "") if isinstance(src, dict) else str(src)
    rank = ek.get("max_lora_rank")
    weights, arch = _local_weights(src)
    return ModelFacts(str(mlc.get("model_id") or ""), src, rank if isinstance(rank, int) else VLLM_DEFAULT_MAX_LORA_RANK,
                      isinstance(rank, int), weights, arch)


def _leaf(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _modules(weights: dict[str, list[int]]) -> dict[str, list[int]]:
    """Module path -> weight shape of every 2-D ``*.weight`` (the layers a LoRA can target)."""
    return {k[: -len(".weight")]: v for k, v in weights.items() if k.endswith(".weight") and len(v) == 2}


def _same_name(base: str, facts: ModelFacts) -> bool:
    norm = lambda s: str(s).rstrip("/").rsplit("/", 1)[-1].lower()  # noqa: E731
    return base in (facts.source, facts.model_id) or norm(base) in (norm(facts.source), norm(facts.model_id))


def check_adapter(name: str, cfg: dict, shapes: Optional[dict[str, list[int]]], facts: ModelFacts) -> list[tuple[str, str, str]]:
    """(severity, code, message) for one adapter of ``facts``' model."""
    found: list[tuple[str, str, str]] = []
    ranks = [cfg.get("r")] + list((cfg.get("rank_pattern") or {}).values())
    ranks = [r for r in ranks if isinstance(r, int)]
    if not ranks:
        found.append(("error", "lora-rank", "adapter_config.json has no rank r; vLLM refuses it"))
    elif max(ranks) > facts.max_lora_rank:
        where = "engine_kwargs.max_lora_rank" if facts.rank_given else "vLLM's default max_lora_rank"
        found.append(("error", "lora-rank", f"rank {max(ranks)} is above {where} ({facts.max_lora_rank}); vLLM refuses "
                      f"it when it is first requested (HTTP 500); set engine_kwargs.max_lora_rank: {_allowed_rank(max(ranks))}"))
    modules = _modules(facts.weights)
    base = cfg.get("base_model_name_or_path")
    misfit = []
    if modules and shapes:
        for tname, shape in shapes.items():
            m = _LORA_TENSOR.match(tname)
            if not m or len(shape) != 2 or m.group("module") not in modules:
                continue
            out_f, in_f = modules[m.group("module")]
            if (m.group("ab") == "A" and shape[1] != in_f) or (m.group("ab") == "B" and shape[0] != out_f):
                misfit.append((m.group("module"), m.group("ab"), shape, (out_f, in_f)))
    if misfit:
        mod, ab, shape, want = misfit[0]
        found.append(("error", "lora-base-model", f"its tensors do not fit {facts.model_id} ({mod}.lora_{ab} is "
                      f"{shape[0]}x{shape[1]}, the layer is {want[0]}x{want[1]}): trained for another base model "
                      f"({base or 'base_model_name_or_path unset'}); vLLM refuses it when it is first requested"))
    elif isinstance(base, str) and base and not _same_name(base, facts):
        found.append(("warning", "lora-base-model", f"trained for {base!r}, served on {facts.source!r}; if that is "
                      "another model, its answers are garbage (its shapes were " + ("checked and fit)" if modules and shapes
                                                                                   else "not checked)")))
    targets = cfg.get("target_modules")
    if modules:
        names = set(modules)
        leaves = {_leaf(n) for n in names}
        if isinstance(targets, list):
            missing = sorted({_leaf(str(t)) for t in targets} - leaves - {"all-linear"})
            if missing:
                found.append(("error", "lora-target-modules", f"targets {', '.join(missing)}, which "
                              f"{facts.architecture or facts.model_id} does not have (its layers: {', '.join(sorted(leaves - {'lm_head', 'embed_tokens'}))}); "
                              "vLLM refuses it when it is first requested"))
        elif isinstance(targets, str) and targets != "all-linear":
            try:
                hit = any(re.fullmatch(targets, n) for n in names)
            except re.error:
                hit = True  # peft would refuse it first; not ours to judge
            if not hit:
                found.append(("error", "lora-target-modules", f"target_modules {targets!r} matches no layer of "
                              f"{facts.architecture or facts.model_id}"))
    return found


def adapter_field(model_id: str, name: str) -> str:
    """The field a diagnostic about one adapter names: ``adapter base:name``."""
    return f"adapter {model_id}:{name}"


def _allowed_rank(r: int) -> int:
    """The smallest max_lora_rank vLLM accepts that holds rank r (vllm/config/lora.py MaxLoRARanks)."""
    return next((a for a in (1, 8, 16, 32, 64, 128, 256, 320, 512) if a >= r), r)


def _adapter_shapes(c, uri: str, name: str, se) -> Optional[dict[str, list[int]]]:
    try:
        return lorastore.safetensors_shapes(c, uri, f"{name}/adapter_model.safetensors", se)
    except (lorastore.StoreError, ValueError):
        return None


@dataclass
class AdapterReport:
    model_id: str
    uri: str
    adapters: list[str] = field(default_factory=list)
    bad: dict[str, list[str]] = field(default_factory=dict)  # adapter -> codes of its errors
    store: Optional[str] = None  # what is wrong with the store, if anything
    settings: str = ""


def check_config(config: dict, file: str, *, node_env: Optional[dict[str, str]], shell_env: dict[str, str],
                 reports: Optional[list[AdapterReport]] = None) -> list[Diagnostic]:
    """Diagnostics for every LoRA store of a (deployable, inlined) serve config."""
    out: list[Diagnostic] = []
    for app in (config.get("applications") or []) if isinstance(config, dict) else []:
        if not isinstance(app, dict):
            continue
        for _, llm in app_llm_configs(app):
            lc = llm.get("lora_config") if isinstance(llm, dict) else None
            uri = lc.get("dynamic_lora_loading_path") if isinstance(lc, dict) else None
            if not isinstance(uri, str) or not uri:
                continue
            rep = AdapterReport(str(model_id_of(llm)), uri.rstrip("/"))
            out += _check_store(app, llm, rep, file, node_env, shell_env)
            if reports is not None:
                reports.append(rep)
    return out


def _check_store(app: dict, llm: dict, rep: AdapterReport, file: str, node_env, shell_env) -> list[Diagnostic]:
    field_ = "lora_config.dynamic_lora_loading_path"
    d = lambda sev, code, msg, f=field_: Diagnostic(file, None, f, msg, sev, code)  # noqa: E731
    if not rep.uri.startswith("s3://"):
        rep.store = "not checked"
        return [d("note", "lora-not-checked", f"{rep.uri}: adapters not checked (llmctl reads s3:// stores; "
                  "rank, base model and target modules are checked when each is first requested)")]
    se = lorastore.effective_env(lorastore.merged_env_vars(app.get("runtime_env"), llm.get("runtime_env")), node_env, shell_env)
    rep.settings = se.describe()
    out: list[Diagnostic] = []
    trap = se.region_trap()
    if se.unresolved:
        out.append(d("error", "lora-store", f"runtime_env takes {', '.join(sorted(set(se.unresolved)))} from the environment, "
                     "where it is unset: Ray fills an unset ${VAR} with an empty string"))
    try:
        c = lorastore.client(se)
        names = lorastore.list_adapters(c, rep.uri, se)
    except lorastore.StoreError as e:
        rep.store = e.message
        why = e.message + (f"; {trap}" if trap and e.kind == "region" else "")
        fix = {"endpoint": "set AWS_ENDPOINT_URL (an S3-compatible store) in the app's runtime_env to the store's URL",
               "region": "set AWS_DEFAULT_REGION to the bucket's region in the app's runtime_env",
               "credentials": "give the replicas credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY by ${VAR}, or a role)",
               "access": "give the credentials read access to the bucket", "bucket": "fix the bucket name"}.get(e.kind, "")
        out.append(d("error", "lora-store", f"{rep.uri}: {why} ({se.describe()}). Ray's LoRA loader reads the store with the "
                     f"same settings: the app deploys, then every adapter request answers 404 (ray-project/ray#55502)"
                     + (f"; {fix}" if fix else "")))
        return out
    if trap:
        out.append(d("warning", "lora-store", f"{trap}; it works only because the store accepts that region"))
    rep.adapters = names
    if not names:
        out.append(d("warning", "lora-store", f"{rep.uri}: no adapters in the store yet (each is a folder with "
                     "adapter_config.json); requests for one answer 404 until it is uploaded (`llmctl lora push`)"))
        return out
    facts = model_facts(llm)
    if not facts.weights:
        out.append(d("note", "lora-not-checked", f"the weights of {facts.model_id} are not on this machine: adapters' "
                     "base model and target modules not checked (rank was)"))
    for name in names:
        ref = adapter_field(facts.model_id, name)
        try:
            cfg = lorastore.adapter_config(c, rep.uri, name, se)
        except lorastore.StoreError as e:
            out.append(d("error", "lora-store", e.message, ref))
            rep.bad.setdefault(name, []).append("lora-store")
            continue
        except (ValueError, UnicodeDecodeError) as e:
            out.append(d("error", "lora-adapter", f"adapter_config.json is not valid JSON ({e}); Ray answers its requests "
                         "with 500", ref))
            rep.bad.setdefault(name, []).append("lora-adapter")
            continue
        if cfg is None:
            out.append(d("error", "lora-adapter", f"no adapter_config.json in {rep.uri}/{name}/; Ray answers its requests "
                         "with 404", ref))
            rep.bad.setdefault(name, []).append("lora-adapter")
            continue
        shapes = _adapter_shapes(c, rep.uri, name, se) if facts.weights else None
        for sev, code, msg in check_adapter(name, cfg, shapes, facts):
            out.append(d(sev, code, msg, ref))
            if sev == "error":
                rep.bad.setdefault(name, []).append(code)
    return out


def not_checked_note(config: dict, file: str) -> list[Diagnostic]:
    """What plain validate (no store access) leaves unchecked."""
    out = []
    for app in (config.get("applications") or []) if isinstance(config, dict) else []:
        for _, llm in app_llm_configs(app) if isinstance(app, dict) else []:
            lc = llm.get("lora_config") if isinstance(llm, dict) else None
            uri = lc.get("dynamic_lora_loading_path") if isinstance(lc, dict) else None
            if isinstance(uri, str) and uri:
                out.append(Diagnostic(file, None, "lora_config.dynamic_lora_loading_path", f"{uri}: the store and its adapters "
                                      "(reachable with the app's endpoint/region/credentials; each adapter's rank, base model "
                                      "and target modules) not checked; `llmctl check` or validate --remote reads them",
                                      "note", "lora-not-checked"))
    return out
