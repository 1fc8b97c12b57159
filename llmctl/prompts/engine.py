"""The "engine settings" questions: vLLM engine arguments beyond TP and
context length, typed by llmctl.engine_args.

Sources, in order (a later one wins for the same key): the named flags
(``--dtype``, ``--quantization``, ``--kv-cache-dtype``, ``--max-num-seqs``,
``--enable-prefix-caching/--no-enable-prefix-caching``,
``--trust-remote-code``), then ``--engine-arg KEY=VALUE`` (every model) or
``--engine-arg MODEL:KEY=VALUE`` (one model: its position 1, 2, …, its
``--model`` value or its catalog id), then a terminal's answers. Keys llmctl or
Ray own (``tensor_parallel_size``, ``max_model_len``, …) are refused, naming
the flag to use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from llmctl import engine_args as EA
from llmctl import spec as S
from llmctl.catalog import ModelProfile, Recipe, load_catalog
from llmctl.errors import UsageError
from llmctl.prompts.session import Flags, Session, ask_confirm, ask_select, ask_text
from llmctl.recipes import family_recipes, read_chat_template, template_recipes

NAMED = (
    ("--dtype", "dtypes", "dtype"),
    ("--quantization", "quantizations", "quantization"),
    ("--kv-cache-dtype", "kv_cache_dtypes", "kv_cache_dtype"),
    ("--max-num-seqs", "max_num_seqs", "max_num_seqs"),
)


def split_selector(item: str) -> tuple[Optional[str], str]:
    """``"2:max_num_seqs=8"`` -> ``("2", "max_num_seqs=8")``; no selector -> ``(None, item)``."""
    left, eq, _ = str(item).partition("=")
    if eq and ":" in left:
        sel, _, rest = str(item).partition(":")
        return sel.strip(), rest
    return None, str(item)


def selects(sel: str, i: int, flags: Flags, profile: Optional[ModelProfile]) -> bool:
    if sel == str(i + 1):
        return True
    if i < len(flags.models) and sel == str(flags.models[i]):
        return True
    return profile is not None and sel == profile.id


def check_selectors(flags: Flags, profiles: list[ModelProfile]) -> None:
    """Every ``MODEL:`` prefix of --engine-arg names a model of this run."""
    for item in flags.engine_args:
        sel, _ = split_selector(item)
        if sel is not None and not any(selects(sel, i, flags, p) for i, p in enumerate(profiles)):
            raise UsageError(f"--engine-arg: '{item}' names no model of this run (use its position 1, 2, …, "
                             "its --model value or its catalog id)")


def _parse_answer(text: str) -> Optional[tuple[str, Any]]:
    if not str(text).strip():
        return None
    return EA.parse_engine_arg(str(text).strip())


def profile_with_recipes(profile: ModelProfile) -> ModelProfile:
    """A model outside the catalog with the recipes llmctl can know for it:
    its documented family's, from its Hugging Face repo id, or, for a local
    directory, the tool-call format its chat template teaches
    (:mod:`llmctl.recipes`). Catalog models keep their own."""
    if profile.origin == "catalog" or profile.recipes:
        return profile
    if profile.origin == "hf":
        found = family_recipes(profile.hf_repo)
    elif profile.origin == "local":
        found = template_recipes(read_chat_template(Path(profile.hf_repo)))
    else:
        found = {}
    if not found:
        return profile
    return profile.model_copy(update={"recipes": {k: Recipe.model_validate(v) for k, v in found.items()}})


def recipe_default(profile: ModelProfile, feature: str) -> tuple[bool, str]:
    """(default answer, why) of the terminal's question about a recipe.

    Reasoning: on for a model that thinks before it answers (catalog task
    "reasoning": vLLM's reasoning-outputs page, e.g. "the reasoning feature for
    the Qwen3 series is enabled by default"), so the thinking lands in
    ``reasoning`` and not in ``content``. Tool calling: on when the model's own
    chat template is enough (vLLM's tool-calling page: "Hermes, Mistral and
    Llama models have tool-compatible chat templates"), off when the
    documented recipe needs a template file of vLLM's repository that llmctl
    cannot put on the cluster."""
    recipe = profile.recipes.get(feature)
    if feature == "reasoning":
        if profile.task == "reasoning":
            return True, "recommended: it thinks before answering"
        return False, "it answers without thinking unless asked"
    if recipe is not None and recipe.chat_template:
        return False, f"needs vLLM's {recipe.chat_template.rsplit('/', 1)[-1]} on the cluster"
    return True, "recommended: works with the model's own chat template"


def models_with(feature: str) -> list[str]:
    """Catalog ids that have a recipe for ``feature``."""
    return [p.id for p in load_catalog().values() if p.recipes.get(feature)]


def recipe_args(session: Session, flags: Flags, profile: ModelProfile) -> dict[str, Any]:
    """The catalog recipe's settings: what the model needs to load (always),
    and tool calling / reasoning when asked for (flags, or a terminal's answer,
    whose default is :func:`recipe_default`; without a terminal they are
    opt-in: --tool-calling / --reasoning)."""
    out: dict[str, Any] = {}
    out.update(profile.recipe_for("required"))
    out.update(profile.recipe_for("serving"))
    out.update(profile.recipe_for("pooling"))
    for feature, flag, value in (("tool_calling", "--tool-calling", flags.tool_calling), ("reasoning", "--reasoning", flags.reasoning)):
        recipe = profile.recipe_for(feature)
        what = feature.replace("_", " ")
        if value and not recipe:
            raise UsageError(f"{flag}: {profile.id} has no {what} recipe (vLLM's documentation names no {what} parser "
                             f"for it); catalog models with one: {', '.join(models_with(feature))}; or give the settings "
                             "with --engine-arg (e.g. tool_call_parser=…, reasoning_parser=…)")
        if value is None and recipe and session.interactive and not session.assume_yes:
            shown = ", ".join(f"{k}={v}" for k, v in recipe.items())
            default, why = recipe_default(profile, feature)
            value = ask_confirm(f"Turn on {what} for {profile.id} ({shown}; {why})?", default)
        if value:
            out.update(recipe)
    out.update(_inputs_recipe(session, flags, profile))
    return out


INPUTS = {"all": None, "image": "image_only", "text": "text_only"}


def _inputs_recipe(session: Session, flags: Flags, profile: ModelProfile) -> dict[str, Any]:
    """The multimodal limits of the catalog recipe for ``--inputs text|image``."""
    inputs = flags.inputs
    if inputs is not None and str(inputs).strip().lower() not in INPUTS:
        raise UsageError(f"--inputs {inputs!r}: expected all, image or text")
    offered = [(k, f) for k, f in INPUTS.items() if f and profile.recipes.get(f)]
    if inputs is None and offered and session.interactive and not session.assume_yes:
        choices = [("text, images and video (vLLM's default)", "all")] + [
            (f"{'text and images, no video' if k == 'image' else 'text only'} ({', '.join(f'{a}={b}' for a, b in profile.recipe_for(f).items())})", k)
            for k, f in offered]
        inputs = ask_select(f"What will {profile.id} take as input?", choices, default="all")
    feature = INPUTS.get(str(inputs or "all").strip().lower())
    if feature is None:
        return {}
    recipe = profile.recipe_for(feature)
    if not recipe:
        raise UsageError(f"--inputs {inputs}: {profile.id} has no {'text-only' if feature == 'text_only' else 'image-only'} "
                         "recipe in llmctl's catalog (multimodal models with a vLLM recipe for it have one); give the "
                         "limits with --engine-arg (e.g. limit_mm_per_prompt={\"video\": 0})")
    return recipe


def ask_engine_args(session: Session, flags: Flags, pm, i: int, profile: ModelProfile) -> dict[str, Any]:
    """The engine arguments llmctl writes for model ``i`` besides its own keys."""
    out: dict[str, Any] = recipe_args(session, flags, profile)
    for flag, attr, key in NAMED:
        value = pm(getattr(flags, attr), flag)
        if value is not None:
            out[key] = S.parse_flag(value, flag=flag, parse=lambda t, k=key: EA.parse_value(k, str(t)))
    if flags.enable_prefix_caching is not None:
        out["enable_prefix_caching"] = bool(flags.enable_prefix_caching)
    if flags.trust_remote_code:
        out["trust_remote_code"] = True
    for item in flags.engine_args:
        sel, text = split_selector(item)
        if sel is not None and not selects(sel, i, flags, profile):
            continue
        key, value = S.parse_flag(text, flag="--engine-arg", parse=EA.parse_engine_arg)
        out[key] = value
    given = any(pm(getattr(flags, attr), flag) is not None for flag, attr, _ in NAMED) or flags.engine_args \
        or flags.enable_prefix_caching is not None or flags.trust_remote_code
    if session.interactive and not session.assume_yes and not given:
        shown = ", ".join(f"{k}={v}" for k, v in out.items()) or "vLLM's defaults"
        if ask_confirm(f"Engine settings (vLLM engine arguments): {shown}. Add some?", False):
            while True:
                answer = ask_text("Engine argument KEY=VALUE (e.g. max_num_seqs=64; empty when done):", _parse_answer)
                if answer is None:
                    break
                out[answer[0]] = answer[1]
    return out
