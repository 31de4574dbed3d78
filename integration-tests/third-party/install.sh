#!/usr/bin/env bash
# Fetches and builds the third-party clients' own test suites the system tests run against the
# broker, once, under .cache (idempotent: a finished step leaves a marker and is skipped):
#   - franz-go v1.22.3's pkg/kgo tests (test_franz_kgo.py): the module from the Go module proxy,
#     copied writable to .cache/franz-go/v1.22.3, its tests compiled (harness/franz_kgo.py);
#   - librdkafka 2.12.1's test runner (test_librdkafka_0081.py): librdkafka's source with its
#     tests/ directory as bundled in the crate rdkafka-sys 4.10.0+2.12.1 (crates.io, fetched by
#     cargo), copied to .cache/librdkafka/2.12.1, configured without optional dependencies and
#     built (src/, src-cpp/, tests/test-runner).
#   integration-tests/third-party/install.sh
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
tests=$(cd "$here/.." && pwd)
repo=$(cd "$tests/.." && pwd)
python=${PYTHON:-python3}
log() { echo "third-party/install.sh: $*" >&2; }

# 1. franz-go's kgo tests.
"$python" "$tests/scripts/franz-kgo-tests.py" --fetch-only >&2

# 2. librdkafka's test runner.
rdk_crate_version=4.10.0+2.12.1
rdk_version=${rdk_crate_version#*+}
rdk_dir=$repo/.cache/librdkafka/$rdk_version
if [ -f "$rdk_dir/.built" ] && [ -x "$rdk_dir/tests/test-runner" ]; then
  log "librdkafka $rdk_version test-runner already built in $rdk_dir"
  exit 0
fi
fetch=$repo/.cache/librdkafka/fetch
mkdir -p "$fetch/src"
cat > "$fetch/Cargo.toml" <<TOML
[package]
name = "brook-fetch-librdkafka"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
rdkafka-sys = { version = "=$rdk_crate_version", default-features = false }

[workspace]
TOML
: > "$fetch/src/lib.rs"
log "cargo fetch rdkafka-sys $rdk_crate_version"
cargo fetch --manifest-path "$fetch/Cargo.toml" >&2
crate_dir=$(cargo metadata --manifest-path "$fetch/Cargo.toml" --format-version 1 \
  | "$python" -c 'import json, sys, os; m = json.load(sys.stdin); print(next(os.path.dirname(p["manifest_path"]) for p in m["packages"] if p["name"] == "rdkafka-sys"))')
[ -f "$crate_dir/librdkafka/tests/0081-admin.c" ] || { log "ERROR: no librdkafka tests in $crate_dir"; exit 1; }
rm -rf "$rdk_dir"
mkdir -p "$(dirname "$rdk_dir")"
cp -r "$crate_dir/librdkafka" "$rdk_dir"
chmod -R u+w "$rdk_dir"
cd "$rdk_dir"
log "building librdkafka $rdk_version and its test-runner in $rdk_dir"
# (Our logs are not named configure.*: mklove loads every configure.<x> file here as a module.)
./configure --disable-ssl --disable-gssapi --disable-curl --disable-zstd --disable-lz4-ext >"$rdk_dir/brook-configure.log" 2>&1 \
  || { tail -30 "$rdk_dir/brook-configure.log" >&2; exit 1; }
make -j"$(nproc)" libs >"$rdk_dir/brook-build.log" 2>&1 || { tail -30 "$rdk_dir/brook-build.log" >&2; exit 1; }
make -C tests -j"$(nproc)" test-runner >>"$rdk_dir/brook-build.log" 2>&1 || { tail -30 "$rdk_dir/brook-build.log" >&2; exit 1; }
[ -x tests/test-runner ] || { log "ERROR: tests/test-runner not built"; exit 1; }
touch "$rdk_dir/.built"
log "ok: librdkafka $rdk_version test-runner in $rdk_dir/tests"
