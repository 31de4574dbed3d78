#!/usr/bin/env bash
# Start Apache Kafka (jars from Maven Central, see ../kafka-dist/pom.xml) as a single
# KRaft node (combined broker+controller) on loopback, in the foreground.
#   kafka-ref.sh PORT DATA_DIR [extra server.properties lines...]
# The controller listens on PORT+1. Used to check that the compatibility tests are
# right (BROOK_TEST_TARGET=kafka) and as the side-by-side reference for benchmarks.
set -euo pipefail
port=${1:?port}; dir=${2:?data dir}; shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
libs=${KAFKA_LIBS:-$root/.cache/kafka/libs}
[ -d "$libs" ] || { echo "kafka jars missing in $libs: run 'make deps'" >&2; exit 1; }
mkdir -p "$dir"
props=$dir/server.properties
cat > "$props" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$((port + 1))
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$((port + 1))
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/logs
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
PROPS
for line in "$@"; do echo "$line" >> "$props"; done
cp=$libs/'*'
export KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G}
# KAFKA_FORMAT_ARGS: more format arguments, one a line (harness/broker.py `format_args`), e.g.
# `--release-version` and `3.9-IV0` for a cluster born at an older metadata.version.
format_args=()
while IFS= read -r argument; do
  [ -n "$argument" ] && format_args+=("$argument")
done <<< "${KAFKA_FORMAT_ARGS:-}"
if [ ! -f "$dir/logs/meta.properties" ]; then
  java -cp "$cp" kafka.tools.StorageTool format -t "$(java -cp "$cp" kafka.tools.StorageTool random-uuid)" \
    -c "$props" --standalone "${format_args[@]}" >"$dir/format.log" 2>&1
fi
exec java $KAFKA_HEAP_OPTS -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
  -Djava.awt.headless=true -Dlog4j2.configurationFile="$root/integration-tests/kafka-dist/log4j2-server.properties" \
  -cp "$cp" kafka.Kafka "$props"
