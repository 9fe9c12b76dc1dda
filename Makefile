# One virtual environment, installed from the lock file; every target uses it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH ?= all
MINUTES ?= 10
# Python keeps what it compiles (__pycache__, which git ignores) even where the environment
# says not to: the tests start hundreds of processes that import the same code, and assert
# rewriting recompiles every test module on each run without it.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install test test-fast system-packages test-engine test-store test-behaviour test-service test-many-partitions test-e2e chaos lint schema format bench soak demo up lock clean

install: $(STAMP)

$(STAMP): requirements.lock pyproject.toml services/sdk/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e ./services/sdk
	touch $(STAMP)

## Tests, all layers, on TEST_WORKERS processes (2; 1 runs them in this one), after
## installing the system packages they use (as root with apt; elsewhere it says what to run);
## `make test-engine` etc. run one layer. It ends with the 20 slowest tests, where the time goes.
TEST_WORKERS ?= 2
WORKERS = $(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist worksteal)
test: $(STAMP) system-packages
	$(BIN)/pytest -q $(WORKERS) --durations=20

system-packages:
	@bash tests/support/system-packages.sh

## The inner loop: the engine, the schema, the store contract and the behaviour suites (on
## memory and on Redis), on TEST_WORKERS processes.
test-fast: $(STAMP)
	$(BIN)/pytest -q $(WORKERS) -m "engine or store or behaviour or golden"

test-engine: $(STAMP)
	$(BIN)/pytest -q -m engine

test-store: $(STAMP)
	$(BIN)/pytest -q -m store

test-behaviour: $(STAMP)
	$(BIN)/pytest -q -m behaviour

test-service: $(STAMP)
	$(BIN)/pytest -q -m "service or e2e"

## The long form of the partition reads: DOMINO_PARTITIONS=512 on a local cluster (minutes).
test-many-partitions: $(STAMP)
	$(BIN)/pytest -q tests/service/many_partitions.py

## The long chaos run, one JSON line per check, then a long fuzzing of the gateway
## (`make chaos CHAOS_S=600 SEED=7`: longer, with faults at other moments; docs/chaos.md).
CHAOS_S ?= 180
SEED ?= 1
FUZZ_EXAMPLES ?= 300
chaos: $(STAMP)
	$(BIN)/python -m tests.chaos --seconds $(CHAOS_S) --seed $(SEED) --house 150 --outside 16 --watched 30 --verify-commands 30
	DOMINO_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) DOMINO_FUZZ_SEED=$(SEED) $(BIN)/pytest -q -m chaos -k "no_request or no_frame" tests/chaos/test_fuzz_gateway.py tests/chaos/test_fuzz_socket.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m services.cli.schemas check

## Record the JSON Schema of the stored and wire shapes at the current SCHEMA and PROTOCOL
## (events/schemas/); it refuses a change that needs a new version first (docs/store.md).
schema: $(STAMP)
	$(BIN)/python -m services.cli.schemas record

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

## Benchmarks: one JSON object per line; `make bench BENCH=engine` runs one group.
bench: $(STAMP)
	$(BIN)/python -m tests.bench $(BENCH)

## The soak: matches at a steady rate for MINUTES (10), retention 60 s; JSON lines, then a
## verdict on Redis's memory, the results it keeps and every process's RSS (exit 1 unless
## all stay flat and the results within their bound).
soak: $(STAMP)
	$(BIN)/python -m tests.soak --minutes $(MINUTES)

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
