"""Reference data the checks compare against: Ray's accelerator types,
Serve's deployment and autoscaling options (vLLM's engine arguments are
:mod:`llmctl.engine_args`)."""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

# vLLM's engine arguments and their types: llmctl.engine_args.

@lru_cache(maxsize=1)
def ray_accelerator_types() -> tuple[str, ...]:
    from ray.llm._internal.serve.core.configs.accelerators import AcceleratorType

    return tuple(t.value for t in AcceleratorType)


@lru_cache(maxsize=1)
def _deployment_option_names() -> frozenset[str]:
    import inspect

    from ray.serve.deployment import Deployment

    return frozenset(p for p in inspect.signature(Deployment.options).parameters if not p.startswith("_") and p not in ("self", "func_or_class"))


@lru_cache(maxsize=1)
def _autoscaling_model():
    from ray.serve.config import AutoscalingConfig

    return AutoscalingConfig


def _suggest(word: str, choices: Iterable[str]) -> str:
    from llmctl.suggest import did_you_mean

    return did_you_mean(word, choices)



