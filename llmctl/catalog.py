"""The model catalog (``model_catalog/*.yaml``) and model architecture facts.

Every catalog entry is checked by :class:`ModelProfile`; a broken entry raises
:class:`~llmctl.errors.CatalogError` naming its file and field. A model
outside the catalog (a local directory, an HF repo) is described by its
``config.json`` through the same converter that built the catalog
(:func:`llmctl.arch.arch_from_hf_config`), so sizing and validation see one
shape of data whatever the model's origin.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from llmctl.arch import MLA, ModelArch, MoE, arch_from_hf_config  # noqa: F401  (re-exported)

from llmctl.errors import CatalogError, ModelNotFound
from llmctl.suggest import closest, did_you_mean
from llmctl.paths import data_dir
from llmctl.sources import CLOUD_SCHEMES, is_cloud_uri, is_hf_repo_id, looks_local_path, path_probe

# libyaml's loader parses the catalog ~10x faster (`llmctl models` start-up, bench/startup.py).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
BUCKET_SCHEMES = CLOUD_SCHEMES  # kept for callers of the old name


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Parameters(_Strict):
    total: int = Field(gt=0)
    active: int = Field(gt=0)
    method: str


class Recommendation(_Strict):
    tp: int = Field(gt=0)
    max_model_len: int = Field(gt=0)


class LayoutEntry(_Strict):
    """The default layout on one GPU type (llmctl.sizing.layouts.default_layout)."""

    kind: Literal["single node", "DP+EP", "multi-node"]
    tp: int = Field(gt=0)
    pp: int = Field(default=1, gt=0)
    dp: int = Field(default=1, gt=0)
    max_model_len: int = Field(gt=0)
    nodes: int = Field(default=1, gt=0)
    engine_kwargs: dict[str, Any] = Field(default_factory=dict)

    def describe(self) -> str:
        if self.kind == "DP+EP":
            return f"DP {self.dp} x TP {self.tp} + EP ({self.nodes} node{'s' if self.nodes > 1 else ''})"
        if self.kind == "multi-node":
            return f"TP {self.tp} x PP {self.pp} ({self.nodes} nodes)"
        return f"TP {self.tp}"


class Recipe(_Strict):
    """vLLM engine settings a feature of the model needs, and where they come from."""

    engine_kwargs: dict[str, Any]
    source: str
    note: Optional[str] = None  # what the recipe asks that llmctl cannot write (e.g. a chat template file)
    chat_template: Optional[str] = None  # the examples/*.jinja of vLLM's repository the source passes with --chat-template

    def settings(self) -> str:
        """``k=v, …`` of its engine settings ("vLLM's defaults" for none)."""
        return ", ".join(f"{k}={v}" for k, v in self.engine_kwargs.items()) or "vLLM's defaults"


RECIPE_FEATURES = {
    "tool_calling": "tool calling (--tool-calling)",
    "reasoning": "reasoning output (--reasoning)",
    "required": "settings the model needs to load",
    "serving": "vLLM's documented serving settings",
    "pooling": "embedding / scoring (vLLM's pooling runner)",
    "text_only": "text-only serving of a multimodal model (--inputs text)",
    "image_only": "text and images, no video (--inputs image)",
}


class ModelProfile(_Strict):
    """One catalog entry, or a model described by a config.json."""

    id: str = Field(min_length=1)
    hf_repo: str
    family: str
    task: Literal["chat", "reasoning", "vision", "code", "embed", "rerank"]
    tasks: list[str] = Field(default_factory=list, description="every task the model card names")
    gated: bool
    license: Optional[str] = None
    architecture: Optional[ModelArch] = None
    parameters: Optional[Parameters] = None
    recommended: dict[str, Recommendation] = Field(default_factory=dict)
    layouts: dict[str, LayoutEntry] = Field(default_factory=dict, description="default layout per GPU type it fits on")
    sources: list[str] = Field(default_factory=list)
    reliability: Optional[Literal["high", "medium", "low"]] = None
    unknown: list[str] = Field(default_factory=list, description="fields left unknown rather than guessed")
    notes: Optional[str] = None
    recipes: dict[str, Recipe] = Field(default_factory=dict, description="engine settings per feature, with sources")
    embedding: Optional[dict[str, Any]] = None
    # Where the profile came from: "catalog", "hf", "local", "bucket".
    origin: Literal["catalog", "hf", "local", "bucket"] = "catalog"

    def recipe_for(self, feature: str) -> dict[str, Any]:
        """Engine settings of a recipe feature ({} when the model has none)."""
        r = self.recipes.get(feature)
        return dict(r.engine_kwargs) if r is not None else {}

    def applied_recipes(self, engine_kwargs: dict[str, Any]) -> list[tuple[str, Recipe]]:
        """``[(feature, recipe)]`` that a model's engine settings apply: every
        setting of the recipe is there, or, for the ``serving`` recipe of a
        model served with vLLM's defaults (no settings), always."""
        return [(f, r) for f, r in self.recipes.items()
                if (r.engine_kwargs and all(engine_kwargs.get(k) == v for k, v in r.engine_kwargs.items()))
                or (f == "serving" and not r.engine_kwargs)]

    @field_validator("id")
    @classmethod
    def _id_ok(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", v):
            raise ValueError("catalog ids use lower-case letters, digits, '.', '_' and '-'")
        return v


# --------------------------------------------------------------------------
# Loading the catalog


def catalog_dir() -> Path:
    return data_dir("model_catalog")


def _format_loc(loc: tuple) -> str:
    return ".".join(str(p) for p in loc)


def load_entry(path: Path) -> ModelProfile:
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)
    except yaml.YAMLError as e:
        line = getattr(getattr(e, "problem_mark", None), "line", None)
        where = f"{path}:{line + 1}" if line is not None else str(path)
        raise CatalogError(f"{where}: malformed YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(raw, dict):
        raise CatalogError(f"{path}: a catalog entry must be a mapping")
    try:
        prof = ModelProfile.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        raise CatalogError(f"{path}: {_format_loc(err['loc'])}: {err['msg']}") from None
    if prof.id != path.stem:
        raise CatalogError(f"{path}: id: '{prof.id}' must match the file name '{path.stem}'")
    return prof


@lru_cache(maxsize=4)
def _load_catalog(directory: str) -> dict[str, ModelProfile]:
    entries: dict[str, ModelProfile] = {}
    for path in sorted(Path(directory).glob("*.yaml")):
        prof = load_entry(path)
        entries[prof.id] = prof
    if not entries:
        raise CatalogError(f"{directory}: no catalog entries found")
    return entries


def load_catalog(directory: Path | None = None) -> dict[str, ModelProfile]:
    """All catalog entries by id (cached)."""
    return _load_catalog(str(directory or catalog_dir()))


# --------------------------------------------------------------------------
# Resolving what a user typed: catalog id, HF repo, local dir, bucket URI

def default_model_id(source: str) -> str:
    """A short served-model id from a repo id, path or bucket URI."""
    base = source.rstrip("/").split("/")[-1] or source
    return base.lower()


def _profile_from_config(cfg: dict, *, source: str, origin: str, where: str) -> ModelProfile:
    try:
        arch = arch_from_hf_config(cfg)
    except (ValidationError, TypeError, KeyError, ValueError) as e:
        raise ModelNotFound(f"{where}: config.json does not describe a supported transformer: {_short(e)}") from None
    task = "vision" if arch.vision else "chat"
    return ModelProfile.model_construct(
        id=default_model_id(source),
        hf_repo=source,
        family=arch.model_type,
        task=task,
        gated=False,
        license=None,
        architecture=arch,
        parameters=None,
        recommended={},
        sources=[where],
        reliability=None,
        unknown=[],
        notes=None,
        origin=origin,
    )


def _short(e: Exception) -> str:
    if isinstance(e, ValidationError):
        err = e.errors()[0]
        return f"{_format_loc(err['loc'])}: {err['msg']}"
    return str(e).splitlines()[0]


def read_config_json(path: Path) -> dict:
    """A checkpoint's config.json as a mapping (the one reader; ModelNotFound when it cannot be read)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ModelNotFound(f"{path}: cannot read config.json: {e}") from None


def resolve_model(name: str, *, catalog: dict[str, ModelProfile] | None = None, allow_remote: bool = True) -> ModelProfile:
    """Turn what a user typed into a ModelProfile.

    Order: catalog id; a local directory holding config.json; a bucket URI
    (s3://, gs://: no architecture can be read); a Hugging Face repo id
    (config.json through huggingface_hub, which honours HF_HUB_OFFLINE and the
    local cache).
    """
    catalog = load_catalog() if catalog is None else catalog
    name = name.strip()
    if not name:
        raise ModelNotFound("empty model name; pass a catalog id (see `llmctl models`), an HF repo id or a directory")
    if name in catalog:
        return catalog[name]
    by_repo = {p.hf_repo.lower(): p for p in catalog.values()}
    if name.lower() in by_repo:
        return by_repo[name.lower()]
    if is_cloud_uri(name):
        return ModelProfile.model_construct(
            id=default_model_id(name), hf_repo=name, family="unknown", task="chat", gated=False,
            license=None, architecture=None, parameters=None, recommended={}, sources=[], reliability=None,
            unknown=["architecture"], notes="weights in a cloud bucket: architecture not read", origin="bucket",
        )
    p = Path(os.path.expanduser(name))
    if p.is_dir() or looks_local_path(name):
        cfg_path = p / "config.json"
        if not p.is_dir():
            raise ModelNotFound(f"{name}: no such directory")
        if not cfg_path.is_file():
            raise ModelNotFound(f"{name}: directory has no config.json")
        return _profile_from_config(read_config_json(cfg_path), source=str(p.resolve()), origin="local", where=str(cfg_path))
    if is_hf_repo_id(name) and allow_remote:
        cfg = fetch_hf_config(name)
        return _profile_from_config(cfg, source=name, origin="hf", where=f"hf://{name}/config.json")
    hint = did_you_mean(name.lower(), catalog)
    raise ModelNotFound(
        f"unknown model '{name}'{hint}: use a catalog id (`llmctl models`), an HF repo id (org/name), "
        "a local directory with config.json, or s3://… / gs://…"
    )


def known_profile(source: str, base_dir: Path) -> Optional[ModelProfile]:
    """The profile of a ``model_source`` that llmctl can know offline: a
    catalog repo, a local directory with config.json (relative paths against
    ``base_dir``), or an HF repo whose config.json is in the local cache.

    None when it cannot be known here (a bucket, an uncached repo, a missing
    directory: other checks report those); raises ModelNotFound when a
    config.json exists but cannot be read or does not describe a model."""
    if not isinstance(source, str):
        return None
    for prof in load_catalog().values():
        if prof.hf_repo.lower() == source.lower():
            return prof
    p = Path(os.path.expanduser(source))
    if not p.is_absolute() and (looks_local_path(source) or path_probe(base_dir / source, "is_dir")):
        p = base_dir / p
    if path_probe(p, "is_dir") and path_probe(p / "config.json", "is_file"):
        cfg = p / "config.json"
        return _profile_from_config(read_config_json(cfg), source=str(p), origin="local", where=str(cfg))
    if is_hf_repo_id(source):
        try:
            from huggingface_hub import try_to_load_from_cache
        except ImportError:  # pragma: no cover - a declared dependency
            return None
        cached = try_to_load_from_cache(source, "config.json")
        if isinstance(cached, str):
            return _profile_from_config(read_config_json(Path(cached)), source=source, origin="hf", where=cached)
    return None


def fetch_hf_config(repo: str) -> dict:
    """config.json of an HF repo via huggingface_hub (cache + HF_HUB_OFFLINE aware)."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:  # pragma: no cover - dependency
        raise ModelNotFound("huggingface_hub is not installed") from None
    try:
        path = hf_hub_download(repo, "config.json")
    except Exception as e:  # the hub raises many types; all mean "cannot read"
        kind = type(e).__name__
        offline = os.environ.get("HF_HUB_OFFLINE") in ("1", "true", "True")
        why = "HF_HUB_OFFLINE is set and it is not in the local cache" if offline else kind
        raise ModelNotFound(f"{repo}: cannot read config.json from the Hugging Face hub ({why})") from None
    return read_config_json(Path(path))


def suggest(name: str, catalog: dict[str, ModelProfile]) -> Optional[str]:
    return closest(name.lower(), catalog)
