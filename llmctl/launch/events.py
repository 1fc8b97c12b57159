"""What the launch generators yield: one-off steps, progress snapshots, results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from llmctl.launch.serve_api import AppSummary

@dataclass
class Step:
    message: str


@dataclass
class Progress:
    elapsed: float
    apps: list[AppSummary]
    note: str = ""


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
        }


UpEvent = Union[Step, Progress, UpResult]

