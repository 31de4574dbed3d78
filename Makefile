# Brook: the two set-up commands (see README.md).
#   make run    build and start one broker on localhost:9092, data in ./data
#   make test   install every client and toolchain the tests use, then run every test
SHELL := /bin/bash
CARGO ?= cargo

.PHONY: run build deps toolchain lint unit integration kill-test soak test bench bench-storage clean-data

run:
	$(CARGO) build --release -p brook
	./target/release/brook --override log.dirs=./data $(ARGS)

build:
	$(CARGO) build -p brook

# System packages the Rust build needs (RocksDB's bindings want libclang), then every
# client the integration tests drive.
toolchain:
	@command -v clang >/dev/null && [ -n "$$(ls /usr/lib/llvm-*/lib/libclang.so* 2>/dev/null)" ] || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libclang-dev clang; }

deps: toolchain
	bash integration-tests/install.sh

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

unit:
	$(CARGO) test --workspace

integration: build
	BROOK_BIN=$(CURDIR)/target/debug/brook python3 -m pytest integration-tests

# The long crash-safety run: 60 x kill -9 of a producing broker, then every acknowledged
# record must be read back intact (`make test` runs a short version of it).
KILLS ?= 60
kill-test: build
	BROOK_BIN=$(CURDIR)/target/debug/brook python3 integration-tests/scripts/kill-test.py --kills $(KILLS)

# The long consumer-group soak: 5 groups x 4 members joining, leaving and killed under a steady
# producer for DURATION seconds; prints produced, consumed/duplicates/lost per group, members
# joined/left/killed and rebalances (`make test` runs a 90 s version, integration-tests/test_soak.py).
DURATION ?= 600
soak: build
	BROOK_BIN=$(CURDIR)/target/debug/brook python3 integration-tests/soak/run.py --duration $(DURATION) $(ARGS)

test: deps lint unit integration

# Brook vs Apache Kafka side by side (bench/README.md): release build, then 3 rounds (tens of minutes);
# `make bench ARGS=--quick` runs one short round. A command, never a CI gate.
bench:
	CARGO=$(CARGO) bash bench/bench.sh $(ARGS)

# Storage micro-benchmarks (criterion, a few minutes) and, in the same run, the disk's raw
# sequential write speed with dd as the ratio's denominator (bench/storage_report.py).
bench-storage:
	$(CARGO) bench -p brook-storage --bench log
	python3 bench/storage_report.py --dd-dir $(CURDIR)/target/bench-tmp

clean-data:
	rm -rf ./data
