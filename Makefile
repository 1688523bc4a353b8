# Developer entry points. `make setup` and `make test` are the README's two commands.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# the versions the suite last passed with: every install here is made under them (see .ci/pins.py)
CONSTRAINTS := constraints.txt
# the newest versions pyproject.toml allows (make test-latest), made afresh each time
LATEST := .venv-latest
# flagtree-cpu and its run-time dependencies only
TOOL   := $(VENV)/.installed-tool
# plus the test and lint extras (pytest, ruff, torch, PyPI triton)
DEV    := $(VENV)/.installed-dev
# passed to `flagtree-cpu setup`, e.g. make setup ARGS="--skip-build"
ARGS   ?=
# how `make test` and `make test-latest` run the suite: on 4 pytest-xdist workers, each test handed to the next
# free worker, except that the tests sharing a module's costly world stay on one worker, which builds it once
# (loadgroup; tests/support/xdistgroups.py). The suite often waits (servers, real processes, signals), so 4
# workers pay even on 2 cores. PYTEST_ARGS="-n 0" (or `make test-serial`) runs it in one process; add e.g. "-k fetch" to pick tests.
PYTEST_ARGS ?= -n 4 --dist loadgroup

.PHONY: setup test test-env test-serial print-pytest-args test-latest test-installed test-arm64 constraints lint docs bench clean

$(TOOL): pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c $(CONSTRAINTS) --upgrade pip
	$(BIN)/python -m pip install --quiet -c $(CONSTRAINTS) -e .
	touch $(TOOL)

# the test suite's own wheel folder: the build tools its fixture builds install (tests/support/venvs.py), so
# they never depend on the test venv's own pip and setuptools, nor on this machine's pip configuration
BUILD_TOOLS := pip setuptools wheel pybind11 ninja

$(DEV): pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c $(CONSTRAINTS) --upgrade pip
	$(BIN)/python -m pip install --quiet -c $(CONSTRAINTS) -e '.[dev]'
	rm -rf $(VENV)/test-wheels
	$(BIN)/python -m pip download --quiet -c $(CONSTRAINTS) --only-binary :all: -d $(VENV)/test-wheels $(BUILD_TOOLS)
	touch $(DEV) $(TOOL)

## setup: create .venv, install flagtree-cpu (lean: no test extras), run `flagtree-cpu setup $(ARGS)`
setup: $(TOOL)
	$(BIN)/flagtree-cpu setup $(ARGS)

## test: the whole test suite (unit + integration), loopback only, on parallel workers (PYTEST_ARGS)
test: $(DEV)
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

## test-env: the dev venv with the test extras and the suite's wheel folder (what `make test` needs), nothing run
test-env: $(DEV)

# what .ci/run prints beside the suite's wall time
print-pytest-args:
	@echo "pytest $(PYTEST_ARGS)"

## test-serial: the same suite in one process, in file order (to tell a parallel-only failure from a real one)
test-serial: $(DEV)
	$(BIN)/python -m pytest -q -n 0

## test-latest: the whole suite on the newest versions pyproject.toml allows, in a fresh $(LATEST); first names
## every package whose newest version differs from $(CONSTRAINTS). With SKIP_IF_SAME=1 (what .ci/run passes) the
## suite is not run a second time when none differs: the constrained run covered exactly those versions.
test-latest:
	rm -rf $(LATEST)
	$(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install --quiet --upgrade pip
	$(LATEST)/bin/python -m pip install --quiet --upgrade --upgrade-strategy eager -e '.[dev]'
	$(LATEST)/bin/python -m pip download --quiet --only-binary :all: -d $(LATEST)/test-wheels $(BUILD_TOOLS)
	@status=0; $(PYTHON) .ci/pins.py compare $(LATEST)/bin/python $(CONSTRAINTS) || status=$$?; \
	if [ $$status -eq 0 ] && [ -n "$(SKIP_IF_SAME)" ]; then \
	    echo "test-latest: not run again (the constrained run tested these very versions)"; \
	elif [ $$status -eq 0 ] || [ $$status -eq 10 ]; then \
	    $(LATEST)/bin/python -m pytest -q $(PYTEST_ARGS); \
	else exit $$status; fi

## constraints: write the versions in $(LATEST) (after a passing `make test-latest`) to $(CONSTRAINTS)
constraints:
	$(PYTHON) .ci/pins.py freeze $(LATEST)/bin/python > $(CONSTRAINTS).new
	mv $(CONSTRAINTS).new $(CONSTRAINTS)

## test-installed: the installed-wheel tier: build the wheel and the sdist, install each into a fresh venv outside
## the checkout (dependencies from the index under $(CONSTRAINTS)), drive real commands through its console script
test-installed: $(DEV)
	PYTHON=$(abspath $(BIN))/python tests/installed/tier.sh

## test-arm64: the emulated Armv9 tier: the tool run for real on aarch64 CPU models under QEMU user mode.
## Needs root and binfmt_misc; builds (once, ~7 min) and caches an arm64 Debian rootfs in
## $(FLAGTREE_CPU_EMU) (default /var/cache/flagtree-cpu/arm64-emu). See tests/arm64/emu.sh.
test-arm64: $(DEV)
	PYTHON=$(abspath $(BIN))/python tests/arm64/emu.sh tier

lint: $(DEV)
	$(BIN)/ruff check flagtree_cpu_build tests bench

## docs: the documentation site (mkdocs.yml, docs/), built strictly (a broken link or anchor fails) into $(SITE)
SITE ?= site
docs: $(DEV)
	$(BIN)/mkdocs build --strict --site-dir $(SITE)

## bench: benchmarks (not part of `make test`); results in bench/results/
bench: $(DEV)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) $(LATEST) build dist site *.egg-info .pytest_cache
