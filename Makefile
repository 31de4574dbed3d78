# Brook: the two set-up commands (see README.md).
#   make run    build and start one broker on localhost:9092, data in ./data
#   make test   install every client and toolchain the tests use, then run every test
SHELL := /bin/bash
CARGO ?= cargo

.PHONY: run build deps toolchain lint unit integration test bench-storage clean-data

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

test: deps lint unit integration

clean-data:
	rm -rf ./data
