"""The model catalog (``model_catalog/*.yaml``) and model architecture facts.

Every catalog entry is checked by :class:`ModelProfile`; a broken entry raises
:class:`~llmctl.errors.CatalogError` naming its file and field. The same
:class:`ModelArch` is built from a ``config.json`` (local directory or the
Hugging Face hub) for models outside the catalog, so sizing and validation see
one shape of data whatever the model's origin.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from llmctl.errors import CatalogError, ModelNotFound
from llmctl.paths import data_dir
from llmctl.sources import CLOUD_SCHEMES, is_cloud_uri, is_hf_repo_id, looks_local_path, path_probe

# libyaml's loader parses the catalog ~10x faster (`llmctl models` start-up, bench/startup.py).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
BUCKET_SCHEMES = CLOUD_SCHEMES  # kept for callers of the old name


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MoE(_Strict):
    """Mixture-of-experts fields, normalised across config.json spellings
    (num_experts / num_local_experts / n_routed_experts)."""

    num_experts: int = Field(gt=0, description="routed experts per MoE layer")
    num_experts_per_tok: int = Field(gt=0)
    moe_intermediate_size: Optional[int] = Field(
        default=None, description="FFN width of one expert; None means intermediate_size (Mixtral, gpt-oss)"
    )
    num_shared_experts: int = Field(default=0, ge=0)
    shared_expert_intermediate_size: Optional[int] = None
    first_k_dense_replace: int = Field(default=0, ge=0, description="leading layers with a dense MLP")
    layer_step: int = Field(default=1, ge=1, description="every layer_step-th layer is MoE (Llama 4 interleave_moe_layer_step)")
    dense_intermediate_size: Optional[int] = Field(default=None, description="FFN width of the dense layers, when it differs")


class MLA(_Strict):
    """Multi-head latent attention (DeepSeek-V2/V3)."""

    kv_lora_rank: int = Field(gt=0)
    q_lora_rank: Optional[int] = None
    qk_rope_head_dim: int = Field(gt=0)
    qk_nope_head_dim: int = Field(gt=0)
    v_head_dim: int = Field(gt=0)


class ModelArch(_Strict):
    """Architecture facts as config.json gives them (None = not known)."""

    architectures: list[str] = Field(min_length=1)
    model_type: str
    num_hidden_layers: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    num_attention_heads: int = Field(gt=0)
    num_key_value_heads: int = Field(gt=0)
    head_dim: Optional[int] = Field(
        default=None, gt=0, description="explicit head_dim; None means hidden_size / num_attention_heads"
    )
    max_position_embeddings: Optional[int] = Field(default=None, gt=0)
    vocab_size: Optional[int] = Field(default=None, gt=0)
    torch_dtype: Optional[str] = None
    tie_word_embeddings: Optional[bool] = None
    attention_bias: bool = False
    rope_scaling: Optional[dict[str, Any]] = None
    sliding_window: Optional[int] = Field(default=None, gt=0)
    sliding_window_layers: int = Field(
        default=0, ge=0, description="layers whose KV cache is bounded by sliding_window"
    )
    moe: Optional[MoE] = None
    mla: Optional[MLA] = None
    quantization: Optional[str] = Field(default=None, description="quant_method of quantization_config")
    num_nextn_predict_layers: int = Field(default=0, ge=0)
    vision: bool = False
    linear_attention_layers: int = Field(
        default=0, ge=0, description="layers with a fixed-size state instead of a growing KV cache (Gated DeltaNet, Mamba)"
    )
    approximate: Optional[str] = Field(default=None, description="why llmctl's sizing of this architecture is approximate")

    @model_validator(mode="after")
    def _consistent(self) -> "ModelArch":
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) is not a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise ValueError("head_dim is not given and hidden_size is not a multiple of num_attention_heads")
        if self.sliding_window_layers > self.num_hidden_layers:
            raise ValueError("sliding_window_layers exceeds num_hidden_layers")
        if self.sliding_window_layers and self.sliding_window is None:
            raise ValueError("sliding_window_layers > 0 needs sliding_window")
        if self.sliding_window_layers + self.linear_attention_layers > self.num_hidden_layers:
            raise ValueError("sliding_window_layers + linear_attention_layers exceed num_hidden_layers")
        return self

    @property
    def head_dim_effective(self) -> int:
        return self.head_dim if self.head_dim is not None else self.hidden_size // self.num_attention_heads

    @property
    def full_attention_layers(self) -> int:
        """Layers whose KV cache grows with the context."""
        return self.num_hidden_layers - self.sliding_window_layers - self.linear_attention_layers

    @property
    def context_limit(self) -> Optional[int]:
        """The longest max_model_len vLLM accepts for the model without
        VLLM_ALLOW_LONG_MAX_MODEL_LEN (vLLM's _get_and_verify_max_len: the rope
        factor extends max_position_embeddings except for llama3/longrope/su/
        mrope scaling, which already bake it into max_position_embeddings; yarn
        scales the original context). None when unknown."""
        if self.max_position_embeddings is None:
            return None
        limit = self.max_position_embeddings
        rs = self.rope_scaling or {}
        kind = rs.get("rope_type") or rs.get("type")
        if rs and kind not in ("llama3", "longrope", "su", "mrope", "default", None):
            factor = self.rope_factor
            if kind == "yarn" and rs.get("original_max_position_embeddings"):
                limit = max(limit, int(rs["original_max_position_embeddings"] * factor))
            elif factor > 1:
                limit = int(limit * factor)
        return limit

    @property
    def rope_factor(self) -> float:
        """Context extension factor from rope_scaling (1.0 when none)."""
        rs = self.rope_scaling or {}
        try:
            return float(rs.get("factor", 1.0) or 1.0)
        except (TypeError, ValueError):
            return 1.0


class Parameters(_Strict):
    total: int = Field(gt=0)
    active: int = Field(gt=0)
    method: str


class Recommendation(_Strict):
    tp: int = Field(gt=0)
    max_model_len: int = Field(gt=0)


class Recipe(_Strict):
    """vLLM engine settings a feature of the model needs, and where they come from."""

    engine_kwargs: dict[str, Any]
    source: str
    note: Optional[str] = None  # what the recipe asks that llmctl cannot write (e.g. a chat template file)


RECIPE_FEATURES = {
    "tool_calling": "tool calling (--tool-calling)",
    "reasoning": "reasoning output (--reasoning)",
    "required": "settings the model needs to load",
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

    @field_validator("id")
    @classmethod
    def _id_ok(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", v):
            raise ValueError("catalog ids use lower-case letters, digits, '.', '_' and '-'")
        return v


# --------------------------------------------------------------------------
# config.json -> ModelArch


def _first(cfg: dict, *keys: str, default: Any = None) -> Any:
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return default


def _sliding_layers(cfg: dict, n_layers: int) -> int:
    """How many layers keep only a sliding window of KV (0 when none)."""
    window = cfg.get("sliding_window")
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        return sum(1 for t in layer_types if t == "sliding_attention")
    if not window:
        return 0
    if cfg.get("use_sliding_window") is False:
        return 0  # Qwen2: the window is configured but switched off
    if cfg.get("use_sliding_window") is True and cfg.get("max_window_layers") is not None:
        # Qwen2 semantics: layers >= max_window_layers use the window
        return max(0, n_layers - int(cfg["max_window_layers"]))
    pattern = cfg.get("sliding_window_pattern")
    if pattern:  # Gemma 3: every pattern-th layer is global
        return n_layers - n_layers // int(pattern)
    if cfg.get("model_type") in ("gemma2",) or cfg.get("cache_implementation") == "hybrid":
        return n_layers - n_layers // 2  # Gemma 2 alternates local / global
    return n_layers  # Mistral v0.1 style: every layer slides


def arch_from_hf_config(cfg: dict) -> ModelArch:
    """Build a ModelArch from a (possibly multimodal) Hugging Face config.json dict."""
    outer = cfg
    text = cfg.get("text_config") or cfg.get("llm_config") or cfg
    vision = any(k in outer for k in ("vision_config", "vision_tower", "image_token_index", "image_token_id"))

    def get(*keys: str, default: Any = None) -> Any:
        v = _first(text, *keys)
        if v is None and text is not outer:
            v = _first(outer, *keys)
        return default if v is None else v

    n_layers = get("num_hidden_layers", "n_layer", "num_layers")
    heads = get("num_attention_heads", "n_head")
    moe = None
    n_exp = get("num_experts", "num_local_experts", "n_routed_experts")
    if n_exp:
        moe = MoE(
            num_experts=int(n_exp),
            num_experts_per_tok=int(get("num_experts_per_tok", "experts_per_token", default=1)),
            moe_intermediate_size=get("moe_intermediate_size"),
            num_shared_experts=int(get("n_shared_experts", default=0) or 0),
            shared_expert_intermediate_size=get("shared_expert_intermediate_size"),
            first_k_dense_replace=int(get("first_k_dense_replace", default=0) or 0),
        )
    mla = None
    if get("kv_lora_rank"):
        mla = MLA(
            kv_lora_rank=get("kv_lora_rank"),
            q_lora_rank=get("q_lora_rank"),
            qk_rope_head_dim=get("qk_rope_head_dim"),
            qk_nope_head_dim=get("qk_nope_head_dim"),
            v_head_dim=get("v_head_dim"),
        )
    qc = outer.get("quantization_config") or text.get("quantization_config") or {}
    merged = dict(outer)
    merged.update(text)
    return ModelArch(
        architectures=outer.get("architectures") or text.get("architectures") or ["unknown"],
        model_type=str(outer.get("model_type") or text.get("model_type") or "unknown"),
        num_hidden_layers=n_layers,
        hidden_size=get("hidden_size", "n_embd", "d_model"),
        intermediate_size=get("intermediate_size", "ffn_dim", default=4 * get("hidden_size", "n_embd", "d_model")),
        num_attention_heads=heads,
        num_key_value_heads=get("num_key_value_heads", "num_kv_heads", default=heads),
        head_dim=get("head_dim"),
        max_position_embeddings=get("max_position_embeddings", "n_positions", "max_seq_len"),
        vocab_size=get("vocab_size"),
        torch_dtype=get("torch_dtype", "dtype"),
        tie_word_embeddings=get("tie_word_embeddings"),
        attention_bias=bool(get("attention_bias", default=False)) or text.get("model_type") == "qwen2",
        rope_scaling=get("rope_scaling"),
        sliding_window=get("sliding_window"),
        sliding_window_layers=_sliding_layers(merged, n_layers),
        moe=moe,
        mla=mla,
        quantization=(qc.get("quant_method") if isinstance(qc, dict) else None),
        num_nextn_predict_layers=int(get("num_nextn_predict_layers", default=0) or 0),
        vision=vision,
    )


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


def _read_config_json(path: Path) -> dict:
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
        return _profile_from_config(_read_config_json(cfg_path), source=str(p.resolve()), origin="local", where=str(cfg_path))
    if is_hf_repo_id(name) and allow_remote:
        cfg = fetch_hf_config(name)
        return _profile_from_config(cfg, source=name, origin="hf", where=f"hf://{name}/config.json")
    close = suggest(name, catalog)
    hint = f" (did you mean {close}?)" if close else ""
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
        return _profile_from_config(_read_config_json(cfg), source=str(p), origin="local", where=str(cfg))
    if is_hf_repo_id(source):
        try:
            from huggingface_hub import try_to_load_from_cache
        except ImportError:  # pragma: no cover - a declared dependency
            return None
        cached = try_to_load_from_cache(source, "config.json")
        if isinstance(cached, str):
            return _profile_from_config(_read_config_json(Path(cached)), source=source, origin="hf", where=cached)
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
    return _read_config_json(Path(path))


def suggest(name: str, catalog: dict[str, ModelProfile]) -> Optional[str]:
    import difflib

    m = difflib.get_close_matches(name.lower(), list(catalog), n=1, cutoff=0.6)
    return m[0] if m else None
