# Two commands for a fresh machine: `make up` and `make test`. Everything lands in .venv and node_modules.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: up test venv lint typecheck bench sim clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

node_modules/.bin/configurable-http-proxy: package.json
	npm install --no-audit --no-fund --silent

## make up: install everything into .venv and start Shoal on its embedded defaults (demo cluster, SQLite).
up: $(STAMP) node_modules/.bin/configurable-http-proxy
	PATH="$(CURDIR)/node_modules/.bin:$$PATH" $(VENV)/bin/shoal up $(UP_ARGS)

## make test: install what the tests need, start the services they use, run the whole suite.
test: $(STAMP) node_modules/.bin/configurable-http-proxy
	bash tests/services/system-deps.sh
	bash tests/services/postgres.sh start
	set -o pipefail; source tests/services/postgres.env; \
	PATH="$(CURDIR)/node_modules/.bin:$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	bash tests/services/postgres.sh stop; exit $$rc

typecheck: $(STAMP)
	$(VENV)/bin/mypy scheduler_core

clean:
	bash tests/services/postgres.sh stop || true
	rm -rf $(VENV) node_modules .pytest_cache .mypy_cache
