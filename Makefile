# eventlake: `make demo` and `make test` install what they need (venv, pip, jars, Debian
# packages) and cache it between runs: the venv in .venv, the jars in the user's jar cache
# (~/.cache/eventlake/jars, or EVENTLAKE_JARS_DIR), Maven's in ~/.m2.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
JARS := .cache/jars
MVN := mvn -q -B -ntp
PYTEST_ARGS ?=
# make test: pytest-xdist workers (2, one per core of CI's machine: a test alone keeps
# most of both busy); TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 2

VENV_STAMP := $(VENV)/.eventlake-installed

.PHONY: all install constraints jars test-jars lock-jars postgres test-tools demo test unit integration lint bench soak iceberg-probe clean distclean

all: test

install: $(VENV_STAMP)

# constraints.txt: the exact versions this repository tests with (the package declares ranges).
$(VENV_STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	touch $@

# After a change of a dependency: the venv's exact versions become the constraints.
constraints: $(VENV_STAMP)
	{ sed -n '1,2p' constraints.txt; $(BIN)/python -m pip freeze --exclude-editable | grep -v '^eventlake=='; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

# The JVM jars: eventlake's lock (eventlake/resources/jars.lock.json) downloaded from Maven
# Central into the user's jar cache and checked, as any installed eventlake does it.
jars: $(VENV_STAMP)
	$(BIN)/eventlake jars fetch --set spark --set kafka-broker

# Test only: Hadoop's MiniDFSCluster (the suite's HDFS), never on Spark's classpath.
test-jars: $(VENV_STAMP)
	$(BIN)/eventlake jars fetch --set hdfs-test

# After a change to jvm/*/pom.xml: Maven resolves the poms, the lock is written anew.
lock-jars: $(VENV_STAMP)
	$(BIN)/python scripts/lock_jars.py

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
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

unit: install jars test-jars test-tools
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

integration: install jars test-jars postgres test-tools
	$(BIN)/pytest tests/integration $(PYTEST_ARGS)

# Bench only: PyFlink and Quix Streams in their own venv, Flink's Kafka SQL connector jar.
BENCH_VENV := .cache/bench-venv
BENCH_STAMP := $(BENCH_VENV)/.installed

$(BENCH_STAMP): bench/requirements.txt
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install -q -r bench/requirements.txt
	touch $@

BENCH_ARGS ?=

bench: install jars $(BENCH_STAMP)
	$(BIN)/eventlake jars fetch --set flink-bench
	$(BIN)/python -m bench.run $(BENCH_ARGS)

# The orders and users pipelines for SOAK_MINUTES with table maintenance on, then off
# (about twice that, plus the state-growth benchmark); figures in bench/results/soak.*.
SOAK_MINUTES ?= 30
SOAK_ARGS ?=

soak: install jars postgres $(BENCH_STAMP)
	$(BIN)/python -m bench.soak --minutes $(SOAK_MINUTES) $(SOAK_ARGS)

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
