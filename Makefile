# Two entry points, both self-installing on a fresh machine:
#   make bench   virtualenv + package, then `offsetlog bench` on ./data/bench (prints the table)
#   make test    virtualenv + package + a Java 17+ runtime if none is found, then every test
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
BENCH_ARGS ?=
# the native core's crate (native/): the package's build compiles it into offsetlog.log._native
NATIVE := native/Cargo.toml native/Cargo.lock $(wildcard native/src/*.rs)
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
	$(BIN)/ruff check --select E9,F,I offsetlog compaction recovery bench

clean:
	rm -rf $(VENV) data .pytest_cache .hypothesis .import_linter_cache native/target offsetlog/log/_native*.so
