# lodex: `make run` sets up .venv and serves samples/ (watch + API + search page); `make test` runs the tests;
# `make docs` builds the docs site.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
# Python may cache the modules it compiles (in __pycache__, ignored by git): where the environment says not to
# (PYTHONDONTWRITEBYTECODE, as CI containers do), every process of a run compiled torch, transformers and ray from
# source again (each lodex CLI a test starts, each Ray worker): the Ray tests took 96 s in a fresh venv, 54 s with this
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run demo test install install-test docs bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The installer is uv (from PyPI, into the venv): it installs what pip would, in parallel (the test extra in a fresh
# clone: 12 s against pip's 63 s); pip where uv cannot be had or fails. Neither byte-compiles: Python compiles the
# modules it imports on first use, and keeps them (see above), where compiling every file of torch, transformers and ray
# up front doubled the install's time. uv reads no pip configuration: it is given pip's find-links (on these machines
# /opt/wheels, which holds the CPU build of torch; without it uv would take the CUDA build from PyPI).
# (Expanded only where an install runs: asking pip costs ~0.3 s, which every other make call skips.)
FIND_LINKS = $(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null)
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check
define install
	{ [ -x $(BIN)/uv ] && $(BIN)/uv pip install --quiet --python $(BIN)/python $(addprefix --find-links ,$(FIND_LINKS)) -e "$(1)"; } || \
	  $(PIP) --no-compile -e "$(1)"
endef

$(BIN)/uv: | $(BIN)/python
	-$(PIP) uv

$(VENV)/.installed: pyproject.toml | $(BIN)/python $(BIN)/uv
	$(call install,.)
	touch $@

# the package, the tests' tools and the docs' in one resolve (the test extra holds the docs extra)
$(VENV)/.installed-test: pyproject.toml | $(BIN)/python $(BIN)/uv
	$(call install,.[test])
	@# the search-page test drives Debian's Chromium (no browser download: these machines are offline)
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "install Chromium for the browser test: sudo apt-get install chromium"; exit 1; fi; }
	touch $@ $(VENV)/.installed $(VENV)/.installed-docs

$(VENV)/.installed-docs: pyproject.toml $(VENV)/.installed | $(BIN)/uv
	$(call install,.[docs])
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

run: install
	$(BIN)/lodex serve

# The layers first (a second); then the tests under pytest-xdist (one worker per core; a test file stays on one worker,
# its module fixtures load once) with the type check (mypy over lodex.* as it installs, [tool.mypy] in pyproject.toml)
# and the docs build beside them, on the CPU time the tests leave idle while they wait on the processes and servers
# they start. The two print their output after the tests'; any of the three failing fails `make test`.
test: install-test
	$(BIN)/ruff format --check --quiet . || { echo 'the format differs: run $(BIN)/ruff format .'; exit 1; }
	$(BIN)/ruff check --quiet .  # the lint rules in pyproject.toml [tool.ruff.lint]
	$(BIN)/python scripts/lint_imports.py  # the layers: api > search | indexer > encoders > store > text (import-linter; see the script)
	@mkdir -p build
	@$(BIN)/python scripts/typecheck.py > build/typecheck.log 2>&1 & typecheck=$$!; \
	$(MAKE) --no-print-directory docs > build/docs.log 2>&1 & docs=$$!; \
	$(BIN)/python -m pytest -n auto --dist loadfile; tests=$$?; \
	wait $$typecheck; typed=$$?; echo "== the type check (scripts/typecheck.py): exit $$typed"; cat build/typecheck.log; \
	wait $$docs; built=$$?; echo "== the docs (make docs): exit $$built"; cat build/docs.log; \
	[ $$tests -eq 0 ] && [ $$typed -eq 0 ] && [ $$built -eq 0 ]

# the docs site (mkdocs.yml, docs/): the configuration page must match the code, and any warning fails the build
docs: $(VENV)/.installed-docs
	$(BIN)/python scripts/config_reference.py --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

demo: install
	$(BIN)/lodex index
	$(BIN)/lodex search "heat transfer in hypersonic boundary layers" -k 3

bench: install-test
	$(BIN)/python bench/indexing/encode.py
	$(BIN)/python bench/quality/quality.py ../shared/evaldata/cranfield

clean:
	rm -rf $(VENV) .lodex .pytest_cache site
