# kafkad: the two commands a fresh machine needs are `make serve` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# pyproject.toml, setup.py and the C record scanner: a change to any of them reinstalls (rebuilds)
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml setup.py wire/_record_kernel.c | sha1sum | cut -c1-12)

.PHONY: serve test lint type unit compat fmt bench fuzz clean

$(STAMP): pyproject.toml setup.py wire/_record_kernel.c
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

## Run the broker: data under ./data, listening on 127.0.0.1:9092.
serve: $(STAMP)
	$(BIN)/kafkad serve --listen 127.0.0.1:9092 --data-dir ./data

## The whole test suite: lint, types, unit tests, stock-client compat tests.
test: $(STAMP)
	scripts/install-client-tools
	$(MAKE) lint type
	$(BIN)/python -m pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

type: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest -q tests

compat: $(STAMP)
	scripts/install-client-tools
	$(BIN)/python -m pytest -q -m compat compat_tests

fmt: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/python bench/throughput.py --start-kafkad

## Coverage-guided fuzzing of the request decoder and batch validator, 10 minutes (corpus kept in
## .fuzz-corpus/; FUZZ_FLAGS adds libFuzzer flags, e.g. FUZZ_FLAGS=-max_total_time=3600).
fuzz: $(STAMP)
	$(BIN)/python -m tests.wire.fuzz_atheris .fuzz-corpus -max_total_time=600 -max_len=4096 $(FUZZ_FLAGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
