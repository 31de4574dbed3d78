#!/usr/bin/env bash
# Installs the kafkajs driver's pinned dependencies (package-lock.json) from
# the npm registry. The lz4 codec is a native module built by node-gyp
# against the system Node headers; the last line checks that every codec
# loads. Idempotent.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
node -e "require('./lib/codecs').register().then(() => console.error('kafkajs driver: codecs ok'))"
