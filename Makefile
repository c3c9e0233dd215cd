# Quick start: `make demo` (set up, then native + Lightning + compare on this machine)
#              `make test` (set up, then the whole test suite)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Where a site caps or pins torch (CI here: torch==2.14.1 torchvision==0.29.1), say so here.
TORCH_PACKAGES ?= torch torchvision

.PHONY: setup demo test test-fast test-exhaustive lint format schema lesson clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH_PACKAGES)
	$(PY) -m pip install -q -e '.[lightning,test]'
	touch $@

demo: setup
	PY=$(PY) tools/demo.sh

# Two pytest workers (pytest-xdist), one a core: the suite is mostly CPU-bound (each run imports
# torch and often Lightning); three gained at most 5% (docs/tests.md). tests/conftest.py keeps the
# tests that share a run or the Slurm cluster on one worker. `make test PARALLEL=` runs one process.
PARALLEL ?= -n 2 --dist loadgroup

# Everything: unit, CPU end-to-end (2 gloo ranks), failure injection, real local Slurm (as root).
test: setup
	OMP_NUM_THREADS=1 $(PY) -m pytest -q $(PARALLEL)

# Without the multi-process, Slurm and multi-node tests.
test-fast: setup
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -m "not slow and not slurm and not multinode"

# The tests `make test` cuts, in full: Monte Carlo at full repetitions, the architecture table
# derived anew. Run it when stats/, compare/decomposition.py or torchvision change.
test-exhaustive: setup
	OMP_NUM_THREADS=1 $(PY) -m pytest -q --exhaustive -m exhaustive

# Lint and format checks, as tests/test_style.py runs them (pyproject.toml: [tool.ruff]).
lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# Rewrite every file in the project's format (then `make lint` passes the format check).
format: setup
	$(PY) -m ruff format .

schema: setup
	$(PY) -m common schema > schema/result.schema.json
	$(PY) -m common manifest-schema > schema/manifest.schema.json

lesson: setup
	$(PY) -m lesson

clean:
	rm -rf $(VENV) out .pytest_cache
