# Everything runs from the project's own virtualenv; `make install` builds it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: install run demo test lint format pipeline bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# compat mode puts the project directory on sys.path, where Spark's worker looks
	# for top-level pyspark_* data source modules.
	$(PY) -m pip install --quiet -e ".[test]" --config-settings editable_mode=compat
	touch $(STAMP)

## Serve the demo share on 127.0.0.1:8080 (SQLite store, files under ./.sharing/).
run: install
	$(PY) -m sharing_server serve --demo

## Seed the demo share and profile without serving.
demo: install
	$(PY) -m sharing_server demo

lint: install
	$(PY) -m ruff check sharing_server share_store pyspark_delta_sharing examples bench tests

format: install
	$(PY) -m ruff format sharing_server share_store pyspark_delta_sharing examples bench tests

## Lint, then the whole suite (starts its own SeaweedFS S3 server on loopback).
test: install lint
	$(PY) -m pytest $(PYTEST_ARGS)

## The seeds' PySpark pipeline: TPC-H-like data -> Delta + Iceberg -> share -> Spark and pandas.
SCALE ?= 0.01
pipeline: install
	$(PY) examples/tpch_pipeline.py --scale $(SCALE) --workdir .pipeline

## Benchmarks: prints a table and writes bench/RESULTS.md (a few minutes).
bench: install
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .pipeline
