"""Validate serve configs and model configs: Ray's own schemas plus the checks
Ray skips or words badly. Each problem is a :class:`Diagnostic` printed as
``file:line: field.path: message`` and carrying a stable ``code``.

Ray's classes used (both import without vllm):
``ray.llm._internal.serve.core.configs.llm_config.LLMConfig`` for each model
config and ``ray.serve.schema.ServeDeploySchema`` for serve configs.

Modules: :mod:`.documents` (YAML with line numbers, Diagnostic),
:mod:`.reference` (Ray's accelerator types and Serve options; vLLM's engine
arguments and their types are :mod:`llmctl.engine_args`), :mod:`.deployment` (deployment and autoscaling options),
:mod:`.llm_config` (one LLMConfig), :mod:`.serve_config` (a serve config),
:mod:`.files` (files in, diagnostics out).
"""

from llmctl.validate.documents import Diagnostic, errors_only  # noqa: F401
from llmctl.validate.files import load_deployable, validate_paths, validate_rendered  # noqa: F401

__all__ = ["Diagnostic", "errors_only", "load_deployable", "validate_paths", "validate_rendered"]
