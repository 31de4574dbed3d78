# Brook: the set-up commands (see README.md).
#   make run      install the build toolchain, build and start one broker on localhost:9092, data in ./data
#   make cluster  the same, then three nodes on one quorum: 127.0.0.1:9092/9093/9094, data in ./data/node-N
#   make test     install every client and toolchain the tests use, then run every test
SHELL := /bin/bash
CARGO ?= cargo
# apt-get needs root; a developer who is not root gets sudo.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: fuzz fuzz-build fuzz-run fuzz-tools run cluster build test-bin suite-bin suite-parallel suite-serial test-kafka deps toolchain lint unit integration kill-test log-flood controller-failover chaos throttle-move soak slow-clients test bench bench-tls bench-cluster bench-move bench-storage bench-scale bench-scale-spread bench-scale-restart bench-startup bench-compaction bench-rebalance clean-data

run: toolchain
	$(CARGO) build --release -p brook
	./target/release/brook --override log.dirs=./data $(ARGS)

# Three combined broker+controller nodes on loopback (scripts/cluster.sh): clients on
# 127.0.0.1:9092/9093/9094, controllers on 19092/19093/19094, metrics on 9644/9645/9646,
# data in ./data/node-1..3, log lines prefixed [node-N]. Ctrl-C stops all three (SIGTERM each, wait).
# ARGS (e.g. ARGS='--override num.partitions=6') go to every node.
cluster: toolchain
	$(CARGO) build --release -p brook
	BROOK_BIN=./target/release/brook DATA_DIR=./data bash scripts/cluster.sh $(ARGS)

build:
	$(CARGO) build -p brook

# System packages the Rust build needs: RocksDB's bindings want libclang, its C++ a compiler
# (Debian's clang is also cc/c++). Checked first, so a machine that has them runs no apt-get.
# Rust itself (1.85 or newer) comes from rustup.
toolchain:
	@command -v $(firstword $(CARGO)) >/dev/null || { echo "make: $(firstword $(CARGO)) not found: install Rust 1.85 or newer (rustup)" >&2; exit 1; }
	@command -v clang >/dev/null && command -v c++ >/dev/null && [ -n "$$(ls /usr/lib/llvm-*/lib/libclang.so* 2>/dev/null)" ] || \
	  { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libclang-dev clang; }

deps: toolchain
	bash integration-tests/install.sh

# clippy-driver is rustc with Clippy's lints. As the workspace's compiler wrapper (what `cargo clippy`
# itself sets, with its arguments in CLIPPY_ARGS) it lints every target while it builds the test
# binaries, so the workspace and its dependencies compile once, instead of once in check mode for
# `cargo clippy` and again for the tests. Unit tests and the suite's binary use the same wrapper,
# so they reuse that build. `cargo clippy --workspace --all-targets -- -D warnings` reports the same.
CLIPPY_DRIVER := $(shell rustc --print sysroot 2>/dev/null)/bin/clippy-driver
LINTED_CARGO := RUSTC_WORKSPACE_WRAPPER=$(CLIPPY_DRIVER) CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings $(CARGO)

lint:
	@[ -x "$(CLIPPY_DRIVER)" ] || { echo "make: clippy-driver not found: rustup component add clippy" >&2; exit 1; }
	$(CARGO) fmt --all -- --check
	$(LINTED_CARGO) test --workspace --all-targets --no-run

unit:
	$(LINTED_CARGO) test --workspace

# The suite runs the `brook` binary that `cargo test --workspace` builds (the broker's own
# process tests need it too): the same features as the unit tests' build, so `make test`
# compiles the workspace once instead of again for `cargo build -p brook` (~4 CI minutes).
test-bin:
	$(LINTED_CARGO) test --workspace --no-run

# The suite in two passes, both always run: modules marked `serial` (CPU and timing figures,
# 20,000 partitions, chaos) run alone; the rest run INTEGRATION_WORKERS modules at a time
# (pytest-xdist: most of a module's time is clients and brokers waiting on each other, and each
# worker draws its ports from its own range, harness/broker.py), the longest modules first
# (LONG_MODULES_FIRST in conftest.py; xdist's own reordering by test count is turned off).
INTEGRATION_WORKERS ?= 3
integration: test-bin
	@status=0; $(MAKE) --no-print-directory suite-parallel || status=$$?; \
	$(MAKE) --no-print-directory suite-serial || status=$$?; \
	exit $$status

# The two passes alone, on the binary already built (`make test` runs them around its lint build).
suite-parallel:
	BROOK_BIN=$(CURDIR)/target/debug/brook python3 -m pytest -n $(INTEGRATION_WORKERS) --dist loadfile --no-loadscope-reorder --durations=30 -m "not serial" \
	  --junitxml=$(CURDIR)/target/integration-parallel-junit.xml integration-tests

suite-serial:
	BROOK_BIN=$(CURDIR)/target/debug/brook python3 -m pytest -m serial --durations=10 --junitxml=$(CURDIR)/target/integration-serial-junit.xml integration-tests

# The whole suite against Apache Kafka 4.4 (BROOK_TEST_TARGET=kafka), configured as for Brook,
# security included: single-node modules against one Kafka node, cluster modules against three
# (harness/cluster.py); Brook-only tests skip themselves. "Also passes on Kafka" in one command,
# never part of `make test` (Kafka's JVMs make it over an hour on 2 cores).
test-kafka: deps
	@status=0; \
	BROOK_TEST_TARGET=kafka python3 -m pytest -n $(INTEGRATION_WORKERS) --dist loadfile --no-loadscope-reorder --durations=30 -m "not serial" integration-tests $(ARGS) || status=$$?; \
	BROOK_TEST_TARGET=kafka python3 -m pytest -m serial --durations=10 integration-tests $(ARGS) || status=$$?; \
	exit $$status

# Only what the suite runs: the `brook` binary, built by the same `cargo test` (same features,
# same lint wrapper) as the rest of the test targets, through one small integration test of
# the broker crate, so the later full build reuses it.
suite-bin:
	$(LINTED_CARGO) test --workspace --no-run --test leadership

# The long crash-safety run: 60 x kill -9 of a producing broker, then every acknowledged
# record must be read back intact (`make test` runs a short version of it).
KILLS ?= 60
kill-test: build
	BROOK_BIN=$(CURDIR)/target/debug/brook python3 integration-tests/scripts/kill-test.py --kills $(KILLS)

# Controller failover: KILLS x kill -9 of the metadata quorum's leader in a 3-node cluster while
# a Java AdminClient creates topics; prints kill -> first successful creation per kill, median
# and max, and checks no created topic is lost (`make test` runs 3 kills, test_cluster_failover.py).
controller-failover: build
	BROOK_BIN=$(CURDIR)/target/debug/brook python3 integration-tests/scripts/controller-failover.py --kills $(KILLS)

# The fault-injection run (issue #11, integration-tests/scripts/chaos.py): 3 nodes of TARGET (brook or
# kafka) under idempotent acks=all producers (Java, franz-go) and consumers while a seeded nemesis
# kills (-9, leader/follower/quorum leader), pauses, terminates, restarts after heavy writes and
# isolates nodes (nftables, installed here when missing), moves replicas with kafka-reassign-partitions
# and removes and re-adds controllers with kafka-metadata-quorum (a dynamic quorum); then every
# acknowledged record must be read back at its offset once, the replicas must match and the voter
# set must be whole. FAULTS faults (default 1000), or
# DURATION seconds when given; `make test` runs 30 faults (integration-tests/test_chaos_short.py).
FAULTS ?= 1000
TARGET ?= brook
SEED ?= 1
INTERVAL ?= 1
CHAOS_LIMIT = $(if $(filter command line environment,$(origin DURATION)),--duration $(DURATION) $(if $(filter command line environment,$(origin FAULTS)),--faults $(FAULTS)),--faults $(FAULTS))
chaos:
	@command -v nft >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nftables; } || true
	@if [ "$(TARGET)" = brook ]; then $(CARGO) build -p brook; fi
	BROOK_BIN=$${BROOK_BIN:-$(CURDIR)/target/debug/brook} python3 integration-tests/scripts/chaos.py --target $(TARGET) $(CHAOS_LIMIT) \
	  --seed $(SEED) --interval $(INTERVAL) --out $(CURDIR)/target/chaos-$(TARGET)-$(SEED) $(ARGS)

# A throttled reassignment (issue #27): MB megabytes (default 1024) of one replica moved from
# broker 1 to broker 2 with `kafka-reassign-partitions --throttle` (THROTTLE_MB MB/s, default 10)
# while a producer writes to another broker at full speed; prints the move rate beside the
# throttle and fails outside +-20 %. TARGET=kafka runs the same against Kafka 4.4.
MB ?= 1024
THROTTLE_MB ?= 10
throttle-move: build
	BROOK_BIN=$${BROOK_BIN:-$(CURDIR)/target/debug/brook} python3 integration-tests/scripts/throttle-move.py --target $(TARGET) \
	  --mb $(MB) --throttle-mb $(THROTTLE_MB)

# A flood of FRAMES malformed frames (one per connection, default 1,000,000; `make test` sends
# 20,000): every one counted in brook_connections_closed_total, the log under 100 KB.
FRAMES ?= 1000000
log-flood: build
	BROOK_BIN=$(CURDIR)/target/debug/brook BROOK_LOG_FLOOD_FRAMES=$(FRAMES) python3 -m pytest -o timeout=3600 -q \
	  integration-tests/test_logs.py -k flood

# Slow clients at the issue's count: 1,000 clients trickling a large request at one byte a second
# and 1,000 that never read their responses, beside a fixed-rate kafka-producer-perf-test (`make
# test` runs 200 of each); prints the producer's MB/s and p99 idle and loaded and the broker's RSS.
# TARGET=kafka runs the same against Kafka 4.4.
SLOW_CLIENTS ?= 1000
slow-clients: build
	cd integration-tests && BROOK_BIN=$(CURDIR)/target/debug/brook BROOK_TEST_TARGET=$(TARGET) SLOW_CLIENTS=$(SLOW_CLIENTS) \
	  python3 -m pytest -o timeout=900 -q -s test_slow_clients.py

# The long consumer-group soak: 5 groups x 4 members joining, leaving and killed under a steady
# producer for DURATION seconds; prints produced, consumed/duplicates/lost per group, members
# joined/left/killed and rebalances (`make test` runs a 60 s version with the same 29 membership
# changes, one every 2 s, integration-tests/test_soak.py).
DURATION ?= 600
soak: build
	BROOK_BIN=$(CURDIR)/target/debug/brook python3 integration-tests/soak/run.py --duration $(DURATION) $(ARGS)

# `make test` in CI order, each phase's wall time printed as it ends ("make test: ... after N s"):
# 1. the clients install in the background (most of it is downloads; output in target/deps.log,
#    shown when it ends) while formatting is checked and the `brook` binary is built (linted);
# 2. the parallel pass of the suite runs while the rest of the workspace's targets are built and
#    linted, and the fuzz targets built (`make fuzz-build`, nightly, no RocksDB), at the lowest
#    CPU priority (the suite leaves most of a core idle: its modules mostly wait on clients and
#    brokers);
# 3. once those builds are done, the serial pass (CPU and timing figures) runs alone, then the
#    unit tests, then each fuzz target for 3 s. Every phase runs; any failure fails `make test`.
# The build is not incremental: a from-scratch build gains nothing from incremental caches, which
# cost code-generation time and ~11 GB of disk.
test: export CARGO_INCREMENTAL := 0
test: toolchain
	@mkdir -p target; start=$$(date +%s); \
	phase() { echo "make test: $$1 after $$(( $$(date +%s) - start )) s"; }; \
	echo "make test: installing the test clients in the background (integration-tests/install.sh > target/deps.log)"; \
	{ bash integration-tests/install.sh > target/deps.log 2>&1; s=$$?; echo "make test: install.sh ended after $$(( $$(date +%s) - start )) s" >> target/deps.log; exit $$s; } & deps=$$!; \
	status=0; $(CARGO) fmt --all -- --check || status=$$?; \
	[ $$status = 0 ] && { $(MAKE) --no-print-directory suite-bin || status=$$?; }; \
	phase "format check and the brook binary ended"; \
	wait $$deps; deps_status=$$?; \
	echo "make test: integration-tests/install.sh (exit $$deps_status):"; cat target/deps.log; \
	[ $$status = 0 ] || exit $$status; \
	[ $$deps_status = 0 ] || { echo "make test: installing the test clients failed (above)" >&2; exit $$deps_status; }; \
	{ nice -n 19 $(MAKE) --no-print-directory lint > target/lint.log 2>&1; } & lint=$$!; \
	{ nice -n 19 $(MAKE) --no-print-directory fuzz-build > target/fuzz-build.log 2>&1; } & fuzz_build=$$!; \
	$(MAKE) --no-print-directory suite-parallel || status=$$?; \
	phase "parallel pass ended"; \
	wait $$lint; lint_status=$$?; \
	echo "make test: lint build (exit $$lint_status):"; tail -n 60 target/lint.log; \
	[ $$lint_status = 0 ] || status=$$lint_status; \
	wait $$fuzz_build; fuzz_build_status=$$?; \
	echo "make test: fuzz build (exit $$fuzz_build_status):"; tail -n 20 target/fuzz-build.log; \
	[ $$fuzz_build_status = 0 ] || status=$$fuzz_build_status; \
	phase "lint and fuzz builds ended"; \
	$(MAKE) --no-print-directory suite-serial || status=$$?; \
	phase "serial pass ended"; \
	[ $$lint_status = 0 ] && { $(MAKE) --no-print-directory unit || status=$$?; }; \
	phase "unit tests ended"; \
	[ $$fuzz_build_status = 0 ] && { $(MAKE) --no-print-directory fuzz-run FUZZ_SECONDS=3 || status=$$?; }; \
	phase "fuzz runs ended"; \
	exit $$status

# Coverage-guided fuzzing of the decoders (fuzz/README.md): cargo-fuzz (libFuzzer, nightly Rust)
# builds fuzz/ (its own workspace, storage and raft without RocksDB), then each target runs
# FUZZ_SECONDS (default 60) on its committed seeds; prints executions per target and fails on
# any crash, leaving the input in target/fuzz/artifacts/<target>/. `make test` runs 3 s each.
# No sanitizer: Brook's code denies `unsafe`, and without ASan's allocator a huge but untouched
# allocation behaves as in the broker (kafka-protocol reserves an array's claimed length).
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= frame request batch compressed raft_rpc raft_snapshot checkpoint producer_snapshot log_dir
FUZZ_TARGET_DIR ?= $(CURDIR)/fuzz/target
fuzz-tools:
	bash fuzz/install.sh

fuzz-build: fuzz-tools
	cd fuzz && CARGO_INCREMENTAL=0 cargo +nightly fuzz build --sanitizer none --debug-assertions --target-dir $(FUZZ_TARGET_DIR)

fuzz: fuzz-build
	$(MAKE) --no-print-directory fuzz-run

# The runs alone, on the targets `make fuzz-build` built.
fuzz-run:
	FUZZ_BIN_DIR=$(FUZZ_TARGET_DIR)/x86_64-unknown-linux-gnu/release bash fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# Brook vs Apache Kafka side by side (bench/README.md): release build, then 3 rounds (tens of minutes);
# `make bench ARGS=--quick` runs one short round. A command, never a CI gate.
bench:
	CARGO=$(CARGO) bash bench/bench.sh $(ARGS)

# What TLS + SASL (SCRAM-SHA-512, TLS 1.3, TLS_AES_128_GCM_SHA256) and 10,000 ACLs cost, Brook vs
# Kafka 4.4 (bench/tls.py, bench/README.md "TLS and ACLs"): release build, then 3 rounds of
# 1,000,000 1 KB records, Kafka's perf tools and a franz-go client (about 19 minutes on an idle
# 2-core machine, 27 on a shared one); `make bench-tls ARGS=--quick` runs one round of 100,000
# (4-5 minutes). Prints figures and ratios beside the issue's targets; never a CI gate.
bench-tls:
	$(CARGO) build --release -p brook
	python3 bench/tls.py $(ARGS)

# 3 Brook nodes vs 3 Kafka nodes, RF=3 acks=all: throughput, e2e p99 at a fixed rate, CPU-s per
# GB replicated (bench/README.md, "Cluster mode"); `ARGS=--quick` takes under 10 minutes. Never a CI gate.
bench-cluster:
	CARGO=$(CARGO) BENCH_MAIN=cluster.py bash bench/bench.sh $(ARGS)

# Issue #27's move measure (bench/move.py, bench/README.md "Moving replicas"): SIZE GB (default 10)
# of replicas moved unthrottled onto a new fourth broker, Brook (release build) beside Kafka 4.4,
# with an unrelated topic's produce p99 before and during the move. Needs about 2 x SIZE of free
# disk (less is measured as the largest that fits, at least 2 GB). Never a CI gate.
SIZE ?= 10
bench-move:
	$(CARGO) build --release -p brook
	python3 bench/move.py --size-gb $(SIZE) $(ARGS)

# Storage micro-benchmarks (criterion, a few minutes) and, in the same run, the disk's raw
# sequential write speed with dd as the ratio's denominator (bench/storage_report.py).
bench-storage:
	$(CARGO) bench -p brook-storage --bench log
	python3 bench/storage_report.py --dd-dir $(CURDIR)/target/bench-tmp

# Many partitions on one node (bench/scale_partitions.py): Brook vs Kafka at 1k..100k partitions,
# create time, first record to every partition, spread throughput, RSS/fds per partition, start-up
# after a clean stop and kill -9, Metadata time (ARGS="--sizes 1000,10000"). Never a CI gate. Each run's
# table goes to its own bench/results/<UTC>-scale.md; scale-partitions.md is the curated report.
bench-scale:
	$(CARGO) build --release -p brook
	python3 bench/scale_partitions.py --out bench/results/$$(date -u +%Y%m%dT%H%M%SZ)-scale.md $(ARGS)

# Throughput with 1 KB records spread over every partition, by franz-go (bench/scale_spread.py,
# bench/go/scaleperf): create, first record to every partition, spread produce and fetch MB/s (full
# 15-record batches), RSS/fds per node, Metadata and `kafka-topics --describe` times; LAYOUT=1 one
# node RF 1 at 1k/10k/100k partitions, LAYOUT=3 three nodes RF 3 at 1k/5k, which adds a node's
# restart-to-serving and controller failover (ARGS="--sizes 1000 --servers brook"). Brook beside
# Kafka 4.4; each run writes bench/results/<UTC>-scale-spread-<LAYOUT>n.{json,md}. Never a CI gate.
LAYOUT ?= 1
bench-scale-spread:
	$(CARGO) build --release -p brook
	python3 bench/scale_spread.py --layout $(LAYOUT) $(ARGS)

# Stop and start one node holding many partitions (bench/scale_restart.py, issue 24's "< 2 s start
# at 100,000 partitions"): clean stop and start, idle stop and start, kill -9 start, RSS and open
# files (ARGS="--partitions 20000 --written-topics 20"). Never a CI gate.
bench-scale-restart:
	$(CARGO) build --release -p brook
	python3 bench/scale_restart.py $(ARGS)

# Start-up against data size (bench/startup_scale.py): Brook vs Kafka with 1, 10 and 30 GB written
# by the producer perf tool, restarted after a clean stop and after kill -9 (needs ~35 GB free).
bench-startup:
	$(CARGO) build --release -p brook
	python3 bench/startup_scale.py $(ARGS)

# Produce latency while a 1.1 GB compacted partition is cleaned (bench/compaction_latency.py):
# Brook vs Kafka, 3 rounds each (about 7 minutes). Needs what `make deps` installs. Never a CI gate.
bench-compaction:
	$(CARGO) build --release -p brook
	python3 bench/compaction_latency.py $(ARGS)

# Consumer-group rebalance time, classic (cooperative-sticky) and KIP-848 (uniform) groups, Brook vs
# Kafka 4.4 (bench/rebalance.py, bench/README.md "Rebalance"): a member joining and one leaving 10
# members over 100 partitions (about 4 minutes); ARGS=--large for 100 over 1,000, ARGS="--heartbeat-ms
# 5000,1000" for the 1 s heartbeat too. Needs what `make deps` installs. Never a CI gate.
bench-rebalance:
	$(CARGO) build --release -p brook
	bash integration-tests/drivers/java/install.sh
	python3 bench/rebalance.py $(ARGS)

clean-data:
	rm -rf ./data
