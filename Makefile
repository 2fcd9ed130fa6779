# Two set-up commands: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: demo test bench info lint typecheck clean gpu-test gpu-wheels gpu-validate

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip setuptools wheel

# torch stays pinned to 2.13.0 in pyproject (the local CPU build); an unpinned torch pulls CUDA.
$(VENV)/.all: pyproject.toml | $(BIN)/python
	$(PIP) install -e ".[all]"
	touch $@

$(VENV)/.test: pyproject.toml | $(BIN)/python
	$(PIP) install -e ".[test]"
	touch $@ $(VENV)/.all

$(VENV)/.bench: pyproject.toml | $(BIN)/python
	$(PIP) install -e ".[bench]"
	touch $@ $(VENV)/.all

demo: $(VENV)/.all
	$(BIN)/memtype demo

test: $(VENV)/.test
	$(BIN)/python -m pytest

info: $(VENV)/.all
	$(BIN)/memtype info

bench: $(VENV)/.bench
	$(BIN)/python benchmarks/convert.py
	$(BIN)/python benchmarks/decorators.py
	$(BIN)/python benchmarks/gpu_cache.py
	$(BIN)/python benchmarks/storage.py
	$(BIN)/python benchmarks/pipeline.py

# On a machine with a CUDA GPU (docs/gpu-validation.md): the GPU-marked tests alone, or the
# whole validation (tests + benchmarks/gpu.py) from a checkout without installing memtype.
gpu-test: $(VENV)/.test
	$(BIN)/python -m pytest -m gpu -ra

gpu-wheels:
	scripts/gpu-wheels.sh

gpu-validate:
	scripts/gpu-validate.sh

lint: $(VENV)/.test
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy src

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache
