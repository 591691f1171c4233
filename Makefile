# Two entry points, both self-installing on a fresh machine:
#   make bench   virtualenv + package, then `offsetlog bench` on ./data/bench (prints the table)
#   make test    virtualenv + package (its Rust core built) + a Java 17+ JDK, Maven and strace
#                where missing, then the Rust crate's checks and every test
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
BENCH_ARGS ?=
# the native core's crate (native/): the package's build compiles it into offsetlog.log._native
NATIVE := native/Cargo.toml native/Cargo.lock $(wildcard native/src/*.rs native/src/*/*.rs)
# rustup's default place, for shells whose PATH lacks it
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: bench test lint java install native-check clean

install: $(STAMP)

$(STAMP): pyproject.toml $(NATIVE)
	@command -v cargo >/dev/null 2>&1 || { echo "make: cargo (Rust) is needed to build \
	offsetlog's native core (native/); install Rust with rustup, then run make again" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,spark]'
	touch $(STAMP)

# Spark, the JVM cross-check of the partitioner, Apache Kafka (the broker that judges the wire
# server) and the Java client's test programs need a Java 17+ JDK (javac) and Maven (the
# broker's and the client's jars come from Maven Central); the DSYNC test needs strace.
# Install Debian's packages where any is missing; without root, say so (the tests that need
# them then fail under CI=true and skip elsewhere).
java:
	@missing=""; \
	if ! command -v java >/dev/null 2>&1 || \
	    [ "$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)" -lt 17 ] || \
	    ! command -v javac >/dev/null 2>&1; then missing="$$missing openjdk-17-jdk-headless"; fi; \
	command -v mvn >/dev/null 2>&1 || missing="$$missing maven"; \
	command -v strace >/dev/null 2>&1 || missing="$$missing strace"; \
	if [ -z "$$missing" ]; then \
	    echo "java: $$(java -version 2>&1 | head -1), $$(mvn -v 2>/dev/null | head -1)"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "java: installing$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	else \
	    echo "java: missing$$missing and cannot install here; the tests that need them will not run"; \
	fi

bench: $(STAMP)
	$(BIN)/offsetlog bench $(BENCH_ARGS)

test: $(STAMP) java native-check
	$(BIN)/pytest -q

# the native core's own checks: clippy with warnings as errors, and its unit tests (linked
# against the virtualenv's Python); cargo-fuzz for the suite's short fuzz run
# (tests/log/test_native_fuzz.py)
native-check: $(STAMP)
	@command -v cargo-fuzz >/dev/null 2>&1 || { echo "native-check: installing cargo-fuzz"; \
	    cargo install --quiet --locked cargo-fuzz; }
	cd native && PYO3_PYTHON=$(abspath $(BIN)/python) cargo clippy --quiet --all-targets -- -D warnings
	cd native && PYO3_PYTHON=$(abspath $(BIN)/python) cargo test --quiet

# the import contracts of pyproject.toml (also a test) and the linter
lint: $(STAMP)
	$(BIN)/lint-imports --no-cache
	$(BIN)/ruff check --select E9,F,I offsetlog compaction recovery bench tests

clean:
	rm -rf $(VENV) data .pytest_cache .hypothesis .import_linter_cache native/target offsetlog/log/_native*.so
