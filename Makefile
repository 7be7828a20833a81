# kafkad: the two commands a fresh machine needs are `make serve` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# pyproject.toml, setup.py and the C record scanner: a change to any of them reinstalls (rebuilds)
HASH := $(shell cat pyproject.toml setup.py wire/_record_kernel.c | sha1sum | cut -c1-12)
# Two stamps: `make serve` needs the broker's runtime dependencies only; every other target
# also needs the test extras (pytest, the stock clients, pyspark, ...).
RUNTIME_STAMP := $(VENV)/.installed-runtime-$(HASH)
TEST_STAMP := $(VENV)/.installed-test-$(HASH)

.PHONY: serve test lint type unit compat fmt bench fuzz clean

$(RUNTIME_STAMP): pyproject.toml setup.py wire/_record_kernel.c
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(RUNTIME_STAMP)

$(TEST_STAMP): $(RUNTIME_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(TEST_STAMP)

## Run the broker: data under ./data, listening on 127.0.0.1:9092. New consumer groups start at
## once (group.initial.rebalance.delay.ms=0, as Kafka's shipped server.properties has it).
serve: $(RUNTIME_STAMP)
	$(BIN)/kafkad serve --listen 127.0.0.1:9092 --data-dir ./data --set group.initial.rebalance.delay.ms=0

## The whole test suite: lint, types, unit tests, stock-client compat tests; then the stock
## clients' transaction tests again on a broker formatted with transaction.version 0.
TXN_COMPAT := $(addprefix compat_tests/test_transactions_,aiokafka.py confluent.py kafka_python.py kafkajs.py version.py)
test: $(TEST_STAMP)
	scripts/install-client-tools
	$(MAKE) lint type
	$(BIN)/python -m pytest -q -p no:cacheprovider
	KAFKAD_FEATURE=transaction.version=0 $(BIN)/python -m pytest -q -p no:cacheprovider -m compat $(TXN_COMPAT)

lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

type: $(TEST_STAMP)
	$(BIN)/mypy

unit: $(TEST_STAMP)
	$(BIN)/python -m pytest -q tests

compat: $(TEST_STAMP)
	scripts/install-client-tools
	$(BIN)/python -m pytest -q -m compat compat_tests

fmt: $(TEST_STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(TEST_STAMP)
	$(BIN)/python bench/throughput.py --start-kafkad

## Coverage-guided fuzzing of the request decoder and batch validator, 10 minutes (corpus kept in
## .fuzz-corpus/; FUZZ_FLAGS adds libFuzzer flags, e.g. FUZZ_FLAGS=-max_total_time=3600).
fuzz: $(TEST_STAMP)
	$(BIN)/python -m tests.wire.fuzz_atheris .fuzz-corpus -max_total_time=600 -max_len=4096 $(FUZZ_FLAGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
