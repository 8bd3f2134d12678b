# wanreduce: two commands do all the set-up on a fresh machine (Python >= 3.11 and a C++ compiler):
#   make demo   the main job (see README)
#   make test   the test suite
# Both bootstrap .venv from pyproject.toml on first use; afterwards the install is a no-op
# until pyproject.toml changes.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# Parallel pytest workers (2 cores here). Override: make test JOBS=1
JOBS   ?= 2
PYTEST_ARGS ?=

.PHONY: all demo test test-slow test-icarus test-under-load lint bench clean distclean venv

all: test

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,torch]'
	@touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/wanreduce demo

# The suite without the long flows (marked `slow`: full place-and-route, wheel build), which
# `make test-slow` runs; CI (.ci/run) runs both.
test: $(STAMP)
	$(PY) -m pytest -n $(JOBS) -m "not slow" $(PYTEST_ARGS)

test-slow: $(STAMP)
	$(PY) -m pytest -n $(JOBS) -m slow $(PYTEST_ARGS)

# The cocotb benches again on Icarus Verilog (apt-get install iverilog).
test-icarus: $(STAMP)
	SIM=icarus $(PY) -m pytest -n $(JOBS) -m "cocotb and not slow" $(PYTEST_ARGS)

# The whole suite REPEAT times while LOAD busy-loop processes load the cores (bench/load_suite.py).
LOAD   ?= 4
REPEAT ?= 3
test-under-load: $(STAMP)
	$(PY) bench/load_suite.py --load $(LOAD) --repeat $(REPEAT) --jobs $(JOBS) $(if $(PYTEST_ARGS),-- $(PYTEST_ARGS))

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench: $(STAMP)
	$(PY) bench/run_all.py

clean:
	rm -rf build sim_build .pytest_cache .hypothesis

distclean: clean
	rm -rf $(VENV)
