# Two entry points that work on a fresh machine with only python3 and make:
#   make examples   install gradops in .venv and run the SPEC worked examples
#   make test       install gradops with test and peer extras in .venv and run the whole test suite
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
PIP     = $(PY) -m pip

.PHONY: examples test bench install install-dev clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	$(PIP) install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(VENV)/bin/python
	$(PIP) install --quiet -e ".[test,peers,bench,torch,jax,dask,onnx]"
	touch $(VENV)/.installed $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

examples: install
	$(VENV)/bin/gradops examples

test: install-dev
	$(PY) -m pytest -n 2 --dist loadgroup -q

bench: install-dev
	$(VENV)/bin/gradops bench

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .hypothesis
