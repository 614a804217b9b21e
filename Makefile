# eventlake: `make demo` and `make test` install what they need (venv, pip, mvn jars) and
# cache it between runs: the venv in .venv, the jars in .cache/jars, Maven's in ~/.m2.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
JARS := .cache/jars
MVN := mvn -q -B -ntp
PYTEST_ARGS ?=

VENV_STAMP := $(VENV)/.eventlake-installed
SPARK_JARS_STAMP := $(JARS)/spark/.resolved
BROKER_JARS_STAMP := $(JARS)/kafka-broker/.resolved
HDFS_JARS_STAMP := $(JARS)/hdfs-test/.resolved

.PHONY: all install jars test-jars postgres test-tools demo test unit integration lint bench iceberg-probe clean distclean

all: test

install: $(VENV_STAMP)

$(VENV_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

jars: $(SPARK_JARS_STAMP) $(BROKER_JARS_STAMP)

# Each set is copied afresh so a jar dropped from a pom never lingers on a classpath.
$(SPARK_JARS_STAMP): jvm/spark/pom.xml
	rm -rf $(JARS)/spark
	$(MVN) -f jvm/spark/pom.xml dependency:copy-dependencies -Djars.dir=$(abspath $(JARS)/spark)
	touch $@

$(BROKER_JARS_STAMP): jvm/kafka-broker/pom.xml
	rm -rf $(JARS)/kafka-broker
	$(MVN) -f jvm/kafka-broker/pom.xml dependency:copy-dependencies -Djars.dir=$(abspath $(JARS)/kafka-broker)
	touch $@

# Test only: Hadoop's MiniDFSCluster (the suite's HDFS), never on Spark's classpath.
test-jars: $(HDFS_JARS_STAMP)

$(HDFS_JARS_STAMP): jvm/hdfs-test/pom.xml
	rm -rf $(JARS)/hdfs-test
	$(MVN) -f jvm/hdfs-test/pom.xml dependency:copy-dependencies -Djars.dir=$(abspath $(JARS)/hdfs-test)
	touch $@

# Debian's PostgreSQL server binaries (apt-get, only when none is installed).
postgres:
	bash scripts/ensure-postgres.sh

# Debian's promtool (alert rules) and chromium (dashboard test), only when missing.
test-tools:
	bash scripts/ensure-test-tools.sh

demo: install jars postgres
	$(BIN)/eventlake demo

lint: install
	$(BIN)/ruff check eventlake tests bench scripts
	$(BIN)/ruff format --check eventlake tests bench scripts
	$(BIN)/mypy

test: install jars test-jars postgres test-tools lint
	$(BIN)/pytest $(PYTEST_ARGS)

unit: install jars test-jars test-tools
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

integration: install jars test-jars postgres test-tools
	$(BIN)/pytest tests/integration $(PYTEST_ARGS)

# Bench only: PyFlink and Quix Streams in their own venv, Flink's Kafka SQL connector jar.
BENCH_VENV := .cache/bench-venv
BENCH_STAMP := $(BENCH_VENV)/.installed
FLINK_JARS_STAMP := $(JARS)/flink-bench/.resolved

$(BENCH_STAMP): bench/requirements.txt
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install -q -r bench/requirements.txt
	touch $@

$(FLINK_JARS_STAMP): jvm/flink-bench/pom.xml
	rm -rf $(JARS)/flink-bench
	$(MVN) -f jvm/flink-bench/pom.xml dependency:copy-dependencies -Djars.dir=$(abspath $(JARS)/flink-bench)
	touch $@

BENCH_ARGS ?=

bench: install jars $(BENCH_STAMP) $(FLINK_JARS_STAMP)
	$(BIN)/python -m bench.run $(BENCH_ARGS)

# Tries Maven Central's Iceberg Spark runtime on eventlake's Spark (docs/iceberg.md).
ICEBERG_VERSION ?= 1.12.0
ICEBERG_SPARK ?= 4.1

iceberg-probe: install jars
	rm -rf $(JARS)/iceberg-probe
	$(MVN) -f jvm/iceberg-probe/pom.xml dependency:copy-dependencies -Diceberg.version=$(ICEBERG_VERSION) -Diceberg.spark=$(ICEBERG_SPARK) -Djars.dir=$(abspath $(JARS)/iceberg-probe)
	$(BIN)/python scripts/iceberg-probe.py $(JARS)/iceberg-probe

clean:
	rm -rf .eventlake .pytest_cache .mypy_cache .ruff_cache

distclean: clean
	rm -rf $(VENV) .cache
