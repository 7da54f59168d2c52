# The two commands of the README: `make demo` runs the main job, `make test`
# installs everything and runs the tests (CI runs exactly `make test`).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install demo test lint bench clean

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

test: lint
	$(BIN)/pytest

bench: install
	$(BIN)/pip install --quiet -e ".[bench]"
	$(BIN)/python -m benchmarks.run_all

clean:
	rm -rf $(VENV) .local-cluster .pytest_cache .ruff_cache
