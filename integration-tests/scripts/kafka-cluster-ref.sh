#!/usr/bin/env bash
# Start one node of an Apache Kafka KRaft cluster (static voters) on loopback, in the foreground.
#   kafka-cluster-ref.sh CLUSTER_ID DATA_DIR key=value...
# The key=value lines are the node's whole server.properties (process.roles, node.id,
# controller.quorum.voters, listeners, log.dirs, ...; harness/cluster.py writes them). Before
# the node's first start its storage is formatted with the cluster's shared id (`kafka-storage
# format -t CLUSTER_ID -c server.properties`: static voters, so no --standalone, and a
# broker-only node, process.roles=broker, needs no --no-initial-controllers either). Every node of
# one cluster must get the same CLUSTER_ID (`java -cp 'libs/*' kafka.tools.StorageTool random-uuid`).
# Example, node 1 of 3:
#   kafka-cluster-ref.sh "$id" /tmp/k1 process.roles=broker,controller node.id=1 \
#     controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097 \
#     listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093 ... log.dirs=/tmp/k1/logs
set -euo pipefail
cluster_id=${1:?cluster id}; dir=${2:?data dir}; shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
libs=${KAFKA_LIBS:-$root/.cache/kafka/libs}
[ -d "$libs" ] || { echo "kafka jars missing in $libs: run integration-tests/install.sh" >&2; exit 1; }
mkdir -p "$dir"
props=$dir/server.properties
: > "$props"
for line in "$@"; do echo "$line" >> "$props"; done
log_dirs=$(sed -n 's/^log\.dirs=//p' "$props" | tail -1)
[ -n "$log_dirs" ] || { echo "log.dirs missing from the properties" >&2; exit 1; }
cp=$libs/'*'
# Three JVMs share a small machine: half the single-node reference's heap each.
export KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xmx512m -Xms512m}
# KAFKA_ADD_SCRAM: --add-scram values, one a line (harness/broker.py `add_scram`), for a
# cluster whose brokers log in to each other with SCRAM from the first start.
add_scram=()
while IFS= read -r credential; do
  [ -n "$credential" ] && add_scram+=(--add-scram "$credential")
done <<< "${KAFKA_ADD_SCRAM:-}"
# KAFKA_FORMAT_ARGS: more format arguments, one a line (harness/broker.py `format_args`), e.g.
# KIP-853's --initial-controllers / --no-initial-controllers for a dynamic quorum.
format_args=()
while IFS= read -r argument; do
  [ -n "$argument" ] && format_args+=("$argument")
done <<< "${KAFKA_FORMAT_ARGS:-}"
# The first log dir decides: `format` writes meta.properties into every one of log.dirs.
if [ ! -f "${log_dirs%%,*}/meta.properties" ]; then
  java -cp "$cp" kafka.tools.StorageTool format --cluster-id="$cluster_id" -c "$props" "${add_scram[@]}" "${format_args[@]}" \
    >"$dir/format.log" 2>&1 || { cat "$dir/format.log" >&2; exit 1; }
fi
exec java $KAFKA_HEAP_OPTS -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
  -Djava.awt.headless=true -Dlog4j2.configurationFile="$root/integration-tests/kafka-dist/log4j2-server.properties" \
  -cp "$cp" kafka.Kafka "$props"
