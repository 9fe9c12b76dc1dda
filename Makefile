# One virtual environment, installed from the lock file; every target uses it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH ?= all

.PHONY: install test test-engine test-store test-behaviour test-service test-e2e lint format bench demo up lock clean

install: $(STAMP)

$(STAMP): requirements.lock pyproject.toml services/sdk/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e ./services/sdk
	touch $(STAMP)

## Tests, all layers; `make test-engine` etc. run one layer.
test: $(STAMP)
	$(BIN)/pytest -q

test-engine: $(STAMP)
	$(BIN)/pytest -q -m engine

test-store: $(STAMP)
	$(BIN)/pytest -q -m store

test-behaviour: $(STAMP)
	$(BIN)/pytest -q -m behaviour

test-service: $(STAMP)
	$(BIN)/pytest -q -m "service or e2e"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

## Benchmarks: one JSON object per line; `make bench BENCH=engine` runs one group.
bench: $(STAMP)
	$(BIN)/python -m tests.bench $(BENCH)

demo: $(STAMP)
	$(BIN)/domino demo

up: $(STAMP)
	$(BIN)/domino up

## Regenerate the lock file after changing dependencies in pyproject.toml.
lock:
	$(PYTHON) -m pip install --quiet uv
	$(PYTHON) -m uv pip compile pyproject.toml --extra dev -o requirements.lock --python-version 3.11

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
