# Two entry points, both self-installing on a fresh machine:
#   make bench   virtualenv + package, then `offsetlog bench` on ./data/bench (prints the table)
#   make test    virtualenv + package + a Java 17+ runtime if none is found, then every test
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
BENCH_ARGS ?=

.PHONY: bench test lint java install clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,spark]'
	touch $(STAMP)

# Spark (and the JVM cross-check of the partitioner) need Java 17+. Install Debian's
# headless runtime where none is found; without root, say so and let those tests skip.
java:
	@if command -v java >/dev/null 2>&1 && \
	    [ "$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)" -ge 17 ]; then \
	    echo "java: $$(java -version 2>&1 | head -1)"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "java: installing openjdk-17-jre-headless"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null; \
	else \
	    echo "java: no Java 17+ found and cannot install it here; JVM tests will be skipped"; \
	fi

bench: $(STAMP)
	$(BIN)/offsetlog bench $(BENCH_ARGS)

test: $(STAMP) java
	$(BIN)/pytest -q

# the import contracts of pyproject.toml (also a test) and the linter
lint: $(STAMP)
	$(BIN)/lint-imports --no-cache
	$(BIN)/ruff check --select E9,F,I offsetlog compaction recovery bench

clean:
	rm -rf $(VENV) data .pytest_cache .hypothesis .import_linter_cache
