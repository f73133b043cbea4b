# The two set-up commands of README.md: `make serve` and `make test`.
# Both install into a virtual environment, .venv/ (Debian's own Python refuses `pip install` outside one).
BASE_PYTHON ?= python3
VENV ?= .venv
PYTHON = $(VENV)/bin/python
PIP = $(PYTHON) -m pip
APT_PACKAGES = zookeeper kcat maven iproute2 nftables chromium strace krb5-kdc krb5-admin-server
JAVA_PACKAGE = openjdk-17-jdk-headless
JVM_SETS = kafka kafka44 kafka44-log4j2 spark-kafka
JVM_CACHE = .cache/jvm

.PHONY: serve test lint install install-test system-deps jvm-deps apt build-deps

serve: install
	$(VENV)/bin/odradek serve

# The venv module, a C compiler and Python's headers (odradek builds two small C extensions, protocol/_records.c
# and protocol/_codec.c).
build-deps:
	@missing=""; \
	$(BASE_PYTHON) -c 'import ensurepip' 2>/dev/null || missing="$$missing python3-venv"; \
	command -v gcc >/dev/null 2>&1 || missing="$$missing gcc"; \
	$(BASE_PYTHON) -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' || missing="$$missing python3-dev"; \
	if [ -n "$$missing" ]; then $(MAKE) --no-print-directory apt APT_MISSING="$$missing"; fi

$(PYTHON): | build-deps
	$(BASE_PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

install: build-deps $(PYTHON)
	$(PIP) install -q -e .

# Installs everything the suite needs (Debian packages, Java and Maven, Kafka's and Spark's jars, Python
# packages, kafkajs), runs `make lint` (a lint or type error fails the run before any test starts), then runs
# the suite in three parts: four workers (most tests wait on JVMs, brokers and clients, not on the CPU), a
# test file each at a time (every Spark file together: one SparkSession), the longest first (tests/conftest.py
# LONGEST and work_unit); the cluster fault tests, three clusters at a time beside each other only; then the
# timing-sensitive tests (marked serial) alone. Each part must collect tests: pytest's exit 5
# (none collected) fails too. Short tracebacks: a CI that keeps only part of the output still shows each
# failing line and its message, not the failing test's whole source.
PYTEST = $(PYTHON) -m pytest -q -p no:cacheprovider --durations=15 --tb=short
test: system-deps install-test jvm-deps lint
	$(PYTEST) -n 4 --dist loadfile --no-loadscope-reorder -m "not serial and not cluster_faults" $(PYTEST_ARGS); parallel=$$?; \
	$(PYTEST) -n 3 --dist loadfile --no-loadscope-reorder -m cluster_faults $(PYTEST_ARGS); cluster=$$?; \
	$(PYTEST) -m serial $(PYTEST_ARGS); serial=$$?; \
	for status in $$parallel $$cluster $$serial; do \
		if [ $$status -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; \
		if [ $$status -ne 0 ]; then exit $$status; fi; \
	done

# ruff, then mypy (configured in pyproject.toml: strict for protocol/ and storage/, mypy's defaults for
# controller/ and tools/). mypy finds odradek.* through .mypy-path/odradek, a link to this folder, because
# the editable install's import hook is invisible to it; its cache is .mypy_cache/.
lint: install-test
	$(VENV)/bin/ruff check --quiet .
	@mkdir -p .mypy-path && ln -sfn .. .mypy-path/odradek
	$(VENV)/bin/mypy

install-test: build-deps $(PYTHON)
	$(PIP) install -q -e '.[test]'
	@if command -v npm >/dev/null 2>&1; then npm ci --prefix tests/e2e/js --no-audit --no-fund --loglevel=error >/dev/null; fi

# Apache Kafka 3.9.1 (broker, tools, ZooKeeper, Java client), Kafka 4.4.0 (KRaft broker, tools, client)
# and Spark's Kafka connector, copied by Maven as configured on the machine into .cache/jvm/<set>/ once;
# a set is fetched again only when its pom changes.
jvm-deps: $(foreach set,$(JVM_SETS),$(JVM_CACHE)/$(set)/.resolved)

$(JVM_CACHE)/%/.resolved: tests/jvm/%/pom.xml
	rm -rf $(JVM_CACHE)/$*
	mvn -q -B -f $< dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(JVM_CACHE)/$*
	touch $@

system-deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	command -v javac >/dev/null 2>&1 || missing="$$missing $(JAVA_PACKAGE)"; \
	if [ -n "$$missing" ]; then $(MAKE) --no-print-directory apt APT_MISSING="$$missing"; fi

apt:
	@if command -v apt-get >/dev/null 2>&1; then \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(APT_MISSING) >/dev/null; \
	else echo "install these packages by hand: $(APT_MISSING)"; exit 1; fi
