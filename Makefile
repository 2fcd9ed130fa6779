# Two set-up commands: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q
# The exact tested set (pyproject.toml states only lower bounds).
PINNED := $(PIP) install -c constraints.txt

.PHONY: demo test bench info lint clean gpu-test gpu-wheels gpu-validate package-check package-matrix

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip setuptools wheel

# torch stays pinned to 2.13.0 in constraints.txt (the local CPU build); an unpinned torch
# pulls a multi-GB CUDA build.
$(VENV)/.all: pyproject.toml constraints.txt | $(BIN)/python
	$(PINNED) -e ".[all]"
	touch $@

$(VENV)/.test: pyproject.toml constraints.txt | $(BIN)/python
	$(PINNED) -e ".[test]"
	touch $@ $(VENV)/.all

$(VENV)/.bench: pyproject.toml constraints.txt | $(BIN)/python
	$(PINNED) -e ".[bench]"
	touch $@ $(VENV)/.all

$(VENV)/.lint: pyproject.toml constraints.txt | $(BIN)/python
	$(PINNED) -e ".[test,lint]"
	touch $@ $(VENV)/.test $(VENV)/.all

demo: $(VENV)/.all
	$(BIN)/memtype demo

# Every extra is installed here, so a skip that names no absent GPU or module fails the run
# (tests/conftest.py). Its own temp root, emptied first (rm -rf copes with the 3,000-level
# trees a failed storage test may leave; pytest's cleanup recurses and dies on them).
PYTEST_TMP := .pytest-tmp
test: $(VENV)/.test
	rm -rf $(PYTEST_TMP)
	MEMTYPE_TEST_ALL_EXTRAS=1 $(BIN)/python -m pytest --basetemp=$(PYTEST_TMP)

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

lint: $(VENV)/.lint
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy src

# The built wheel in fresh virtual environments, alone and with one extra each
# (scripts/extras_matrix.py). CI runs the reduced form: no extra, and [torch].
package-check: $(VENV)/.test
	$(BIN)/python scripts/extras_matrix.py --extras none,torch

package-matrix: $(VENV)/.test
	$(BIN)/python scripts/extras_matrix.py --extras none,torch,jax,tensorflow,cle,mlx,zarr,dask

clean:
	rm -rf $(VENV) build dist *.egg-info src/*.egg-info .pytest_cache $(PYTEST_TMP)
