# Developer entry points. `make setup` and `make test` are the README's two commands.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# flagtree-cpu and its run-time dependencies only
TOOL   := $(VENV)/.installed-tool
# plus the test and lint extras (pytest, ruff, torch, PyPI triton)
DEV    := $(VENV)/.installed-dev
# passed to `flagtree-cpu setup`, e.g. make setup ARGS="--skip-build"
ARGS   ?=

.PHONY: setup test test-arm64 lint bench clean

$(TOOL): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(TOOL)

$(DEV): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(DEV) $(TOOL)

## setup: create .venv, install flagtree-cpu (lean: no test extras), run `flagtree-cpu setup $(ARGS)`
setup: $(TOOL)
	$(BIN)/flagtree-cpu setup $(ARGS)

## test: the whole test suite (unit + integration), loopback only
test: $(DEV)
	$(BIN)/python -m pytest -q

## test-arm64: the emulated Armv9 tier: the tool run for real on aarch64 CPU models under QEMU user mode.
## Needs root and binfmt_misc; builds (once, ~7 min) and caches an arm64 Debian rootfs in
## $(FLAGTREE_CPU_EMU) (default /var/cache/flagtree-cpu/arm64-emu). See tests/arm64/emu.sh.
test-arm64: $(DEV)
	PYTHON=$(abspath $(BIN))/python tests/arm64/emu.sh tier

lint: $(DEV)
	$(BIN)/ruff check flagtree_cpu_build tests bench

## bench: benchmarks (not part of `make test`); results in bench/results/
bench: $(DEV)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
