# The two commands of the README: `make demo` runs the main job, `make test`
# installs everything and runs the tests (CI runs exactly `make test`).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install demo test lint bench bench-quick clean

install: $(VENV)/.installed build/compiled.stamp

$(VENV)/.installed: pyproject.toml deploy/local/pom.xml
	bash deploy/local/prerequisites.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[test,charts]"
	$(BIN)/python -m framework.cluster.artifacts
	touch $@

# The compiled hot path (SESSIONIZER_HOT_PATH=compiled, docs/nodes.md): mypyc builds the
# engine's modules into build/compiled/ (15-25 s). It never fails the install:
# without a C compiler it writes why to build/compiled.failed and the node runs Python.
# build/compiled.deps (written by the build) lists the sources it was compiled from.
-include build/compiled.deps
build/compiled.stamp: $(VENV)/.installed deploy/build_compiled.py
	$(BIN)/python deploy/build_compiled.py

demo: install
	$(BIN)/sessionizer demo

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# Two pytest processes, each mostly waiting on its servers: the in-process tests and
# then the integration files in BESIDE_UNIT run beside the other integration files; the
# first's report is printed after, and the run fails if either does (docs/testing.md).
BESIDE_UNIT := $(addprefix tests/integration/,test_secure_cluster.py test_aggregate.py \
	test_cluster_faults.py test_plain_install.py test_spark_standalone.py \
	test_sink_and_shutdown_faults.py test_sink_stall.py)
test: lint
	@mkdir -p build
	$(BIN)/pytest tests/unit $(BESIDE_UNIT) > build/unit-tests.log 2>&1 & unit=$$!; \
	$(BIN)/pytest tests/integration $(addprefix --ignore=,$(BESIDE_UNIT)); integration=$$?; \
	wait $$unit; unit_status=$$?; \
	echo "== tests/unit and $(BESIDE_UNIT) (run beside; build/unit-tests.log) =="; \
	cat build/unit-tests.log; \
	echo "== exit: tests/integration $$integration, tests/unit and the rest $$unit_status =="; \
	[ $$integration -eq 0 ] && [ $$unit_status -eq 0 ]

# The whole benchmark suite (hours); bench-quick: every scenario at small sizes (<= 15 min).
# BENCH_ARGS passes more flags, e.g. BENCH_ARGS="--output /tmp/RESULTS.md --out-dir /tmp/out".
# The JVM peers (Kafka Streams, Flink) are built from benchmarks/jvm/ with Maven when stale.
# Quix Streams pins confluent-kafka below 2.13, which a node must not run on: its peer
# runs from a venv of its own, .venv-quix (benchmarks/quix_venv.py).
bench: install
	$(BIN)/pip install --quiet -e ".[bench]"
	$(BIN)/python -m benchmarks.quix_venv
	$(BIN)/python -m benchmarks.peer_jvm
	$(BIN)/python -m benchmarks.run_all $(BENCH_ARGS)

bench-quick: install
	$(BIN)/pip install --quiet -e ".[bench]"
	$(BIN)/python -m benchmarks.quix_venv
	$(BIN)/python -m benchmarks.run_all --quick $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .venv-quix .local-cluster .pytest_cache .ruff_cache
