"""Which vLLM a check is about: one function decides (:func:`reference_vllm`).

The replicas of a Ray Serve LLM app run the vLLM installed where Ray runs, and
Ray pins the one it was tested with (``ray[llm]==2.60.0`` requires
``vllm[audio]==0.29.0``). So every check that depends on vLLM's version —
which engine arguments exist, what sizing models, which defaults apply — is
about that vLLM unless the user names another (``--vllm-version``, or what a
cluster reports). A vLLM installed next to llmctl (the CPU build the tests
serve with) is not the reference; it matters only when it is the target.

A base module: no llmctl import except :mod:`llmctl.errors`, no ray or vllm
import (both versions come from package metadata).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import metadata
from typing import Optional, Union

from llmctl.errors import SizingError

VersionTuple = tuple[int, int, int]

# Ray 2.60's pin (`ray[llm]==2.60.0` requires `vllm[audio]==0.29.0`), used when
# no Ray is installed to read the pin from.
FALLBACK_VLLM_VERSION = "0.29.0"
FALLBACK_RAY_MINOR = "2.60"

_VERSION = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class VllmVersion:
    """A vLLM version: ``release`` (major, minor, patch) and the text it came
    from. Pre-releases and dev builds of X.Y.Z count as X.Y.Z (e.g.
    0.10.1rc2.dev263 -> 0.10.1). ``source`` says where it came from, for
    messages ("Ray 2.60's pin", "--vllm-version"); it does not take part in
    comparisons."""

    release: VersionTuple
    text: str
    source: str = field(default="", compare=False)

    @property
    def label(self) -> str:
        return "{}.{}.{}".format(*self.release)

    @property
    def minor(self) -> str:
        return "{}.{}".format(*self.release[:2])

    def at_least(self, minor: int, patch: int = 0) -> bool:
        return self.release >= (0, minor, patch)

    def described(self) -> str:
        """``vLLM 0.29.0 (Ray 2.60's pin)``."""
        return f"vLLM {self.label}" + (f" ({self.source})" if self.source else "")


def parse_vllm_version(text: Union[str, VllmVersion, None], source: str = "") -> VllmVersion:
    """``"0.19.0"``, ``"0.10.1.1"``, ``"v0.11.2"``, ``"0.10.1rc2.dev263+g2f13319f4"``.
    ``None`` means :func:`default_vllm_version`. Raises SizingError (a
    UsageError) for text that is not a version (e.g. "not stated")."""
    if isinstance(text, VllmVersion):
        return text
    if text is None:
        return default_vllm_version()
    m = _VERSION.match(str(text))
    if not m:
        raise SizingError("vllm_version", f"not a vLLM version: {text!r} (e.g. 0.29.0)")
    major, minor, patch = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    if major == 0 and minor < 8 and str(text).strip().startswith("0.1.dev"):
        # setuptools-scm's version of an untagged source build: the number says nothing
        raise SizingError("vllm_version", f"{text!r} is an untagged source build; give the release it is closest to")
    return VllmVersion((major, minor, patch), str(text).strip(), source)


def ray_vllm_pin(requires: Optional[list[str]] = None):
    """Ray's own requirement on vllm (its ``llm`` extra), from its metadata
    (``requires``: Ray's requirement lines as read elsewhere, e.g. on a
    cluster); a ``packaging`` Requirement, or None."""
    from packaging.requirements import InvalidRequirement, Requirement

    if requires is None:
        try:
            requires = metadata.requires("ray") or []
        except metadata.PackageNotFoundError:
            return None
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.name == "vllm":
            return req
    return None


def _ray_minor() -> str:
    try:
        return ".".join(metadata.version("ray").split(".")[:2])
    except metadata.PackageNotFoundError:
        return FALLBACK_RAY_MINOR


@lru_cache(maxsize=1)
def default_vllm_version() -> VllmVersion:
    """The vLLM the installed Ray pins (Ray's own ``vllm`` requirement), else
    :data:`FALLBACK_VLLM_VERSION` (Ray 2.60's pin)."""
    try:
        pin = ray_vllm_pin()
    except Exception:  # noqa: BLE001 - odd metadata: fall back  # pragma: no cover
        pin = None
    if pin is not None:
        for spec in pin.specifier:
            if spec.operator in ("==", "==="):
                try:
                    return parse_vllm_version(spec.version, f"Ray {_ray_minor()}'s pin")
                except SizingError:
                    break
    return parse_vllm_version(FALLBACK_VLLM_VERSION, f"Ray {FALLBACK_RAY_MINOR}'s pin")


def reference_vllm(explicit: Union[str, VllmVersion, None] = None, source: str = "") -> VllmVersion:
    """The vLLM a check is about: ``explicit`` when given (``--vllm-version``,
    or what a cluster reports; ``source`` says which, for messages), else the
    one Ray pins (:func:`default_vllm_version`). Raises SizingError (exit 2)
    for text that is not a version."""
    if explicit is None or (isinstance(explicit, str) and not explicit.strip()):
        return default_vllm_version()
    if isinstance(explicit, VllmVersion):
        return explicit
    return parse_vllm_version(explicit, source or "the version given")


__all__ = ["FALLBACK_VLLM_VERSION", "VersionTuple", "VllmVersion", "default_vllm_version", "parse_vllm_version",
           "ray_vllm_pin", "reference_vllm"]
