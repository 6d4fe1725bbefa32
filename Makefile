# lodex: `make run` sets up .venv, indexes samples/ and searches it; `make test` runs the test suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: run test install install-test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ".[test]"
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

run: install
	$(BIN)/lodex index
	$(BIN)/lodex search "heat transfer in hypersonic boundary layers" -k 3
	$(BIN)/lodex search "how do libraries classify and retrieve documents" -k 3

test: install-test
	$(BIN)/python -m pytest

bench: install-test
	$(BIN)/python bench/encode.py
	$(BIN)/python bench/quality.py ../shared/evaldata/cranfield

clean:
	rm -rf $(VENV) .lodex .pytest_cache
