"""``llmctl check FILE`` as a core with no UI: can the cluster start a serve
config, before anything is deployed?

:func:`check` runs the three checks ``llmctl check`` reports on — preflight
(:mod:`llmctl.launch.preflight`: the replicas placed on the cluster's nodes),
the Ray and vLLM the cluster's head runs (:mod:`llmctl.launch.versions`) and
every LoRA store of the config read with the settings its replicas would get
(:func:`llmctl.launch.lora.store_check`) — and returns one
:class:`CheckReport`; the CLI only renders it. Nothing is deployed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from llmctl.launch.preflight import Preflight
from llmctl.launch.versions import Report as VersionsReport


@dataclass
class CheckReport:
    """What ``llmctl check FILE`` reports. ``ok``: the cluster can start it
    and no LoRA store check found an error (``llmctl check`` exits 0)."""

    file: str
    preflight: Preflight
    versions: Optional[VersionsReport] = None  # None: not asked (``versions=False``)
    lora_diagnostics: list = field(default_factory=list)  # llmctl.validate Diagnostic
    lora_stores: list = field(default_factory=list)  # llmctl.validate.lora_store.AdapterReport

    @property
    def lora_errors(self) -> list:
        return [d for d in self.lora_diagnostics if d.is_error]

    @property
    def ok(self) -> bool:
        return self.preflight.ok and not self.lora_errors

    @property
    def warnings(self) -> list[str]:
        """Preflight's warnings, then the version guard's."""
        return self.preflight.warnings + (self.versions.warnings if self.versions is not None else [])

    def to_json(self) -> dict[str, Any]:
        """``llmctl check --json``: preflight's keys at the top, ``ok`` the
        verdict the exit code gives (preflight's alone is ``preflight_ok``),
        ``versions`` when asked, ``lora``."""
        pf = self.preflight.to_json()
        return {
            **pf,
            "ok": self.ok,
            "preflight_ok": pf["ok"],
            **({"versions": self.versions.data} if self.versions is not None else {}),
            "lora": {"ok": not self.lora_errors, "diagnostics": [d.to_json() for d in self.lora_diagnostics],
                     "stores": [{"model_id": r.model_id, "path": r.uri, "settings": r.settings, "adapters": r.adapters,
                                 "refused": r.bad, "store_error": r.store} for r in self.lora_stores]},
        }


def check(serve_path: Path | str, *, address: Optional[str] = None, ray_token_env: Optional[str] = None,
          versions: bool = True) -> CheckReport:
    """Check the serve config ``serve_path`` against the cluster at ``address``
    (default: the local head llmctl started; never started here) and
    ``ray_token_env`` (the variable holding a token-auth cluster's Ray token).
    ``versions=False`` skips asking the head which Ray and vLLM it runs (a Ray
    job of a few seconds). Raises ValidationFailed for a file that does not
    validate, ClusterUnreachable (exit 3) when no cluster answers."""
    from llmctl.launch import preflight
    from llmctl.launch.address import resolve_target
    from llmctl.launch.lora import store_check
    from llmctl.launch.serve_api import ServeClient
    from llmctl.launch.versions import report
    from llmctl.validate import load_deployable

    path = Path(serve_path)
    target = resolve_target(address, ray_token_env)
    config = load_deployable(path, local_node=target.is_local)
    with ServeClient(target.dashboard_url, token=target.ray_token) as client:
        pf = preflight.check(config, client)
        ver = report(client, config) if versions else None
    diags, stores = store_check(config, str(path), target)
    return CheckReport(str(path), pf, ver, diags, stores)
