#!/usr/bin/env bash
# `make bench [ARGS=--quick]`: build Brook in release, make sure matplotlib is importable
# (a venv in bench/.venv, from PyPI), then run bench.py with the arguments given.
# `make bench-cluster` runs the same with BENCH_MAIN=cluster.py (3 nodes against 3 nodes).
# Needs what `make deps` installs: Kafka 4.4 jars in .cache/kafka/libs and a JDK.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"
[ -d .cache/kafka/libs ] || { echo "Kafka jars missing in .cache/kafka/libs: run 'make deps'" >&2; exit 1; }
command -v java >/dev/null || { echo "java not found: run 'make deps'" >&2; exit 1; }
if [ -z "${BENCH_SKIP_BUILD:-}" ]; then
  ${CARGO:-cargo} build --release -p brook
fi
venv=$here/.venv
if ! "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check matplotlib
fi
exec "$venv/bin/python" "$here/${BENCH_MAIN:-bench.py}" "$@"
