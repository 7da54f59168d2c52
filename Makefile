# The two commands of the README: `make demo` runs the main job, `make test`
# installs everything and runs the tests (CI runs exactly `make test`).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install demo test lint bench bench-quick clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml deploy/local/pom.xml
	bash deploy/local/prerequisites.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[test,charts]"
	$(BIN)/python -m framework.cluster.artifacts
	touch $@

demo: install
	$(BIN)/sessionizer demo

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint
	$(BIN)/pytest

# The whole benchmark suite (hours); bench-quick: every scenario at small sizes (<= 15 min).
# BENCH_ARGS passes more flags, e.g. BENCH_ARGS="--output /tmp/RESULTS.md --out-dir /tmp/out".
# The JVM peers (Kafka Streams, Flink) are built from benchmarks/jvm/ with Maven when stale.
bench: install
	$(BIN)/pip install --quiet -e ".[bench]"
	$(BIN)/python -m benchmarks.peer_jvm
	$(BIN)/python -m benchmarks.run_all $(BENCH_ARGS)

bench-quick: install
	$(BIN)/pip install --quiet -e ".[bench]"
	$(BIN)/python -m benchmarks.run_all --quick $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .local-cluster .pytest_cache .ruff_cache
