# Sluicegate developer entry points. `make setup` is idempotent; `make test` is what CI runs.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup system-deps jars tools lint format test test-long chaos quickstart openapi bench clean

setup: system-deps $(STAMP) jars tools

system-deps:
	@bash .ci/system-deps.sh

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

jars: $(STAMP)
	$(BIN)/sluicegate resolve-jars

# the S3-compatible server of `sluicegate s3-local` and the tests (SeaweedFS, built once), and
# the schema registry of `sluicegate registry-local` and the tests (Apicurio, downloaded once)
tools: $(STAMP)
	$(BIN)/python -m supervisor.devstack.s3 install
	$(BIN)/python -m supervisor.devstack.registry install

lint: $(STAMP)
	$(BIN)/ruff check supervisor tasks migrations tests bench
	$(BIN)/ruff format --check supervisor tasks migrations tests bench
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format supervisor tasks migrations tests bench
	$(BIN)/ruff check --fix supervisor tasks migrations tests bench

test: setup lint
	$(BIN)/pytest -n 2 --dist loadgroup

# what `make test` leaves out: the process-per-task runtime end to end, and the whole stack
# on task hosts, a Spark cluster and S3 (~15 min more)
test-long: setup
	$(BIN)/pytest -m long

# exactly-once under faults: fifty seeded runs of the whole stack (bench/chaos.py; hours)
chaos: setup
	$(BIN)/python bench/chaos.py

quickstart: setup
	$(BIN)/sluicegate quickstart

bench: setup
	$(BIN)/python bench/throughput.py
	$(BIN)/python bench/handoff.py
	$(BIN)/python bench/freshness.py
	$(BIN)/python bench/publish.py
	$(BIN)/python bench/control_plane.py
	$(BIN)/python bench/failover.py
	$(BIN)/python bench/combined_jobs.py

openapi: $(STAMP)
	$(BIN)/python -m supervisor.openapi > openapi.yaml

clean:
	rm -rf var .pytest_cache .mypy_cache .ruff_cache
