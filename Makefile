# The two set-up commands of README.md: `make serve` and `make test`.
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip
APT_PACKAGES = zookeeper kcat
JAVA_PACKAGE = openjdk-17-jre-headless

.PHONY: serve test install install-test system-deps

serve: install
	odradek serve

install:
	$(PIP) install -q -e .

# Installs everything the suite needs (Debian packages, Java for PySpark, Python packages, kafkajs where npm is), then runs it.
test: system-deps install-test
	$(PYTHON) -m pytest -q -p no:cacheprovider $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$status

install-test:
	$(PIP) install -q -e '.[test]'
	@if command -v npm >/dev/null 2>&1; then npm ci --prefix tests/e2e/js --no-audit --no-fund --loglevel=error >/dev/null; fi

system-deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	command -v java >/dev/null 2>&1 || missing="$$missing $(JAVA_PACKAGE)"; \
	if [ -n "$$missing" ]; then \
		if command -v apt-get >/dev/null 2>&1; then \
			SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
			$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
		else echo "install these packages by hand: $$missing"; fi; \
	fi
