# Developer entry points. `make setup` and `make test` are the README's two commands.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

## setup: create .venv, install flagtree-cpu, run its main job with the bundled recipe
setup: $(STAMP)
	$(BIN)/flagtree-cpu setup

## test: the whole test suite (unit + integration), loopback only
test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check flagtree_cpu_build tests bench

## bench: benchmarks (not part of `make test`); results in bench/results/
bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
