"""What the launch generators yield: one-off steps, progress snapshots, results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Union

from llmctl.errors import render

if TYPE_CHECKING:  # pragma: no cover - no httpx import for the CLI's views
    from llmctl.launch.serve_api import AppSummary


@dataclass
class Step:
    """A one-off fact (validated, cluster started, deployed, a warning).
    ``text`` may name parameters (``llmctl.errors.param``); ``message`` and
    ``str()`` spell them as the Python API does."""

    text: str

    @property
    def message(self) -> str:
        return render(self.text)

    def __str__(self) -> str:
        return self.message


def replicas_text(counts: dict[str, int], target: int | None = None) -> str:
    """``1 RUNNING, 1 STARTING (target 2)``: replicas by state, and Serve's target."""
    text = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no replicas yet"
    return text if target is None else f"{text} (target {target})"


@dataclass
class Progress:
    """A snapshot of the apps being deployed; ``str()`` is one line of it."""

    elapsed: float
    apps: list[AppSummary]
    note: str = ""

    def __str__(self) -> str:
        parts = []
        for a in self.apps:
            deps = "; ".join(f"{d.name} {d.status} [{replicas_text(d.replicas)}]" for d in a.deployments)
            parts.append(f"{a.name} {a.status}" + (f" — {deps}" if deps else ""))
        text = " | ".join(parts) or "waiting for the controller to list the app"
        if self.note:
            text += f" ({self.note})"
        return f"[{self.elapsed:5.1f}s] {text}"


@dataclass
class PlanReady:
    """What the update will do (llmctl/rollout.py ``Plan``), before anything is sent."""

    plan: "object"

    def __str__(self) -> str:
        return "\n".join(self.plan.lines())  # type: ignore[attr-defined]


@dataclass
class UpResult:
    apps: list[AppSummary]
    dashboard_url: str
    endpoint: str | None
    model_ids: list[str]
    elapsed: float
    running: bool
    local: bool
    cluster_started: bool = False
    pooling: dict = field(default_factory=dict)  # model id -> pooling task (embedding / scoring models)
    api_key_env: str | None = None  # the variable holding the endpoint's API key (never the key)

    def to_json(self) -> dict:
        return {
            "apps": [a.to_json() for a in self.apps],
            "dashboard_url": self.dashboard_url,
            "endpoint": self.endpoint,
            "model_ids": self.model_ids,
            "elapsed_s": round(self.elapsed, 2),
            "running": self.running,
            "local_cluster": self.local,
            "cluster_started": self.cluster_started,
            "pooling_models": self.pooling,
            "api_key_env": self.api_key_env,
        }


UpEvent = Union[Step, Progress, PlanReady, UpResult]


def run_to_result(events: Iterable[Any], result_type: type, on_event: Optional[Callable[[Any], None]] = None) -> Any:
    """Run an ``iter_*`` generator of llmctl's API to its end: every progress
    event goes to ``on_event``, the one ``result_type`` event is returned."""
    result = None
    for ev in events:
        if isinstance(ev, result_type):
            result = ev
        elif on_event is not None:
            on_event(ev)
    assert result is not None
    return result

