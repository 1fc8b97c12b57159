"""``llmctl up --fix``: turn a diagnosed start-up failure into a change of the
config file, shown as a diff, applied only after confirmation, old file kept
as ``.bak`` (issue 11).

The diagnosis (``llmctl.launch.failures``) says which LLMConfig values to change, as
dotted paths (``engine_kwargs.max_model_len``). This module finds where that
LLMConfig lives — a model config file the serve file names, or an inline
mapping in the serve file — and edits that file's text in place
(:mod:`llmctl.yaml_edit`: comments and layout kept).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import yaml

from llmctl import yaml_edit
from llmctl.errors import LlmctlError
from llmctl.paths import file_mode, write_atomic
from llmctl.builders import app_llm_configs
from llmctl.validate.serve_config import config_file_path
from llmctl.serve_facts import model_id_of


@dataclass
class FixPlan:
    app: str
    model_id: str
    file: Path
    prefix: list  # path of the LLMConfig inside the file ([] for a model config file)
    changes: dict[str, Any]
    cause: str
    fix: str
    old_text: str
    new_text: str

    def diff(self) -> str:
        return "".join(difflib.unified_diff(self.old_text.splitlines(True), self.new_text.splitlines(True),
                                            fromfile=f"{self.file} (now)", tofile=f"{self.file} (fixed)"))


def locate(serve_path: Path, app: str, model_id: str) -> Optional[tuple[Path, list]]:
    """(file, path inside it) of the LLMConfig of ``model_id`` in ``app``."""
    serve_path = Path(serve_path)
    data = yaml.safe_load(serve_path.read_text(encoding="utf-8")) or {}
    for i, a in enumerate(data.get("applications") or []):
        if a.get("name", "default") != app:
            continue
        for slot, entry in app_llm_configs(a):
            if isinstance(entry, str):
                p = config_file_path(entry, Path.cwd())
                try:
                    cfg = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
                except OSError:
                    continue
                if model_id_of(cfg) == model_id:
                    return p, []
            elif isinstance(entry, dict) and model_id_of(entry) == model_id:
                return serve_path, ["applications", i, *slot]
    return None


def plan(serve_path: Path, app: str, model_id: str, changes: dict[str, Any], *, cause: str = "", fix: str = "") -> FixPlan:
    where = locate(serve_path, app, model_id)
    if where is None:
        raise LlmctlError(f"{serve_path}: no LLMConfig with model_id {model_id!r} in application {app!r} to fix")
    file, prefix = where
    old = file.read_text(encoding="utf-8")
    new = old
    for dotted, value in changes.items():
        try:
            new = yaml_edit.set_value(new, prefix + dotted.split("."), value)
        except yaml_edit.EditError as e:
            raise LlmctlError(f"{file}: cannot change {dotted} automatically ({e}); change it by hand: {fix}") from None
    return FixPlan(app, model_id, file, prefix, dict(changes), cause, fix, old, new)


def backup_path(file: Path) -> Path:
    """``file.bak``, or ``file.bak.1``, … when earlier backups exist (never overwritten)."""
    bak = file.with_name(file.name + ".bak")
    n = 1
    while bak.exists():
        bak = file.with_name(f"{file.name}.bak.{n}")
        n += 1
    return bak


def apply(p: FixPlan) -> Path:
    """Write the fixed file atomically, the old one kept as a backup; returns the backup's path."""
    if p.file.read_text(encoding="utf-8") != p.old_text:
        raise LlmctlError(f"{p.file} changed since the fix was planned; nothing written")
    mode = file_mode(p.file)  # the fixed file and its backup keep the user's mode (mkstemp would make 0600)
    bak = backup_path(p.file)
    write_atomic(bak, p.old_text, mode=mode)
    write_atomic(p.file, p.new_text, mode=mode)
    return bak


# --------------------------------------------------------------------------
# the fix loop of `up --fix`: deploy, and on a start-up failure llmctl knows a
# mechanical fix for, change the file (after ``approve``) and deploy again


MAX_FIX_ROUNDS = 3


@dataclass
class FixNeeded:
    """A deploy failed with a failure that has a mechanical fix; fixes follow."""

    error: Exception


@dataclass
class FixProposed:
    """A change to a file, before ``approve`` is asked."""

    plan: FixPlan


@dataclass
class FixApplied:
    """The file changed (the old one kept as ``backup``); the deploy runs again."""

    plan: FixPlan
    backup: Path


def iter_up_fixing(serve_path: Path | str, options=None, *, approve: Callable[[FixPlan], bool],
                   rounds: int = MAX_FIX_ROUNDS, **settings) -> Iterator:
    """:func:`llmctl.launch.deploy.iter_up` (its events and its UpResult), and when the deploy fails with
    diagnoses that carry changes: :class:`FixNeeded`, then per model a :class:`FixProposed`, ``approve(plan)``
    (False stops with a UsageError: nothing redeployed), :func:`apply` and :class:`FixApplied`; then the deploy
    again, at most ``rounds`` times. A failure without a fix, or after the last round, is raised as it came.
    ``options`` / ``settings``: the deploy's :class:`llmctl.launch.deploy.UpOptions`, as ``iter_up`` takes them."""
    from llmctl.errors import DeployFailed, UsageError, param
    from llmctl.launch.deploy import UpOptions, iter_up

    options = UpOptions.of(options, **settings)

    for attempt in range(rounds + 1):
        try:
            yield from iter_up(serve_path, options)
            return
        except DeployFailed as e:
            fixable = [(a, m, d) for a, m, d in e.diagnoses if d.changes and m]
            if not fixable or attempt == rounds:
                raise
            yield FixNeeded(e)
            done: set[str] = set()
            for app_name, model_id, d in fixable:
                if model_id in done:
                    continue
                p = plan(Path(serve_path), app_name, model_id, d.changes, cause=d.cause, fix=d.fix)
                yield FixProposed(p)
                if not approve(p):
                    raise UsageError(f"{param('fix')}: change not applied; nothing was redeployed", param="fix") from None
                yield FixApplied(p, apply(p))
                done.add(model_id)
