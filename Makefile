# Two entry points that work on a fresh machine with only python3 and make:
#   make examples   install gradops in .venv and run the SPEC worked examples
#   make test       install gradops with test and peer extras in .venv and run the whole test suite
#   make test-avx2  on an AVX-512 host, the fast backend's tests again with the code numba generates
#                   for an AVX2 CPU
#   make fuzz       a long fuzz campaign (tests/fuzz, GRADOPS_FUZZ=long) and its counts per target
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
PIP     = $(PY) -m pip

.PHONY: examples test test-avx2 fuzz bench install install-dev clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	$(PIP) install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(VENV)/bin/python
	$(PIP) install --quiet -e ".[test,peers,bench,jax,dask,onnx]"  # peers holds torch==2.13.0
	touch $(VENV)/.installed $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

examples: install
	$(VENV)/bin/gradops examples

test: install-dev
	$(PY) -m pytest -n 2 --dist loadgroup -q

# On an AVX-512 host, the fast backend's checks again with the code numba generates for an AVX2
# CPU (a Zen 3 on an AMD host, x86-64-v3 elsewhere: gradops.bench.isa.avx2_codegen_cpu; with that
# CPU's own features, no AVX-512), the other tier users run.
AVX2_CPU = $(shell $(PY) -c "from gradops.bench.isa import avx2_codegen_cpu; print(avx2_codegen_cpu())")
FAST_TESTS = tests/test_fast_resample.py tests/test_fast_resample_order.py tests/test_fast_resample_microkernels.py \
             tests/test_half.py tests/test_fast_depthwise*.py tests/test_relu.py tests/test_simd.py tests/test_target.py \
             tests/test_examples.py
test-avx2: install-dev
	NUMBA_CPU_NAME=$(AVX2_CPU) NUMBA_CPU_FEATURES= $(PY) -m pytest -n 2 -q $(FAST_TESTS)

# FUZZ_EXAMPLES generated cases per fuzz test (each makes 1-4 calls); the report lists the calls,
# outcomes and slowest call per target, and fails on any exception other than GradopsError.
FUZZ_EXAMPLES ?= 2000
fuzz: install-dev
	rm -f .fuzz-counts.jsonl
	status=0; GRADOPS_FUZZ=long GRADOPS_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) GRADOPS_FUZZ_COUNTS=.fuzz-counts.jsonl \
		$(PY) -m pytest -n 2 --dist load -q tests/fuzz || status=$$?; \
	$(PY) tests/fuzz/report.py .fuzz-counts.jsonl || status=1; exit $$status

bench: install-dev
	$(VENV)/bin/gradops bench

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .hypothesis .fuzz-counts.jsonl
