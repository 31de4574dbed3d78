#!/usr/bin/env bash
# What `make fuzz` needs beyond the stable toolchain: Rust nightly (libFuzzer's
# instrumentation flags are nightly-only) and cargo-fuzz, pinned. Idempotent: each step
# checks first. Run by integration-tests/install.sh (so `make test` has it) and `make fuzz-build`.
set -euo pipefail

CARGO_FUZZ_VERSION=0.13.2

log() { echo "fuzz/install.sh: $*" >&2; }

if ! cargo +nightly --version >/dev/null 2>&1; then
  log "rustup toolchain install nightly"
  rustup toolchain install nightly --profile minimal
fi
if [ "$(cargo fuzz --version 2>/dev/null)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]; then
  log "cargo install cargo-fuzz $CARGO_FUZZ_VERSION"
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi
log "ok: $(cargo +nightly --version), $(cargo fuzz --version)"
