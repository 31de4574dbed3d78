#!/usr/bin/env bash
# Three combined (broker + controller) Brook nodes on loopback forming one metadata quorum;
# what `make cluster` runs after its release build.
#   scripts/cluster.sh [--override key=value ...]     (the arguments go to every node)
#   BROOK_BIN   the binary (default ./target/release/brook)
#   DATA_DIR    where node N keeps its data, DATA_DIR/node-N (default ./data)
#
# Node N (1..3): Kafka clients on 127.0.0.1:909(1+N), controller (raft) on 127.0.0.1:1909(1+N),
# Prometheus metrics on 127.0.0.1:964(3+N)/metrics. Each node's log lines are prefixed with
# [node-N]. Ctrl-C (or SIGTERM to this script) stops all three: SIGTERM to each, then wait for
# each; a second Ctrl-C sends SIGKILL instead. If one node exits on its own (a bad setting,
# say), the other two are stopped the same way and its exit status is this script's.
#
# Every address is 127.0.0.1 (not localhost, which may resolve to ::1 for the raft listener and
# 127.0.0.1 for a peer); clients may still bootstrap from localhost:9092. The nodes run in their
# own sessions, so the terminal's Ctrl-C reaches only this script, which turns it into one
# SIGTERM per node (Brook's controlled shutdown).
set -uo pipefail

bin=${BROOK_BIN:-./target/release/brook}
data=${DATA_DIR:-./data}
voters="1@127.0.0.1:19092,2@127.0.0.1:19093,3@127.0.0.1:19094"

[ -x "$bin" ] || { echo "cluster.sh: no brook binary at $bin (make cluster builds it)" >&2; exit 1; }
# Every other BROOK_<NAME> variable reaches the nodes as a setting (BROOK_NUM_PARTITIONS=6).
unset BROOK_BIN

signals=0
on_signal() { signals=$((signals + 1)); }
trap on_signal INT TERM

declare -A pids=()
for n in 1 2 3; do
  mkdir -p "$data/node-$n"
  # The prefixer ignores SIGINT so that it outlives the node and prints its shutdown lines.
  setsid "$bin" \
    --override process.roles=broker,controller \
    --override node.id=$n \
    --override controller.quorum.voters=$voters \
    --override listeners=PLAINTEXT://127.0.0.1:909$((1 + n)),CONTROLLER://127.0.0.1:1909$((1 + n)) \
    --override advertised.listeners=PLAINTEXT://127.0.0.1:909$((1 + n)) \
    --override controller.listener.names=CONTROLLER \
    --override listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT \
    --override log.dirs="$data/node-$n" \
    --override metrics.listener=127.0.0.1:964$((3 + n)) \
    "$@" \
    </dev/null > >(trap '' INT; exec sed -u "s/^/[node-$n] /") 2>&1 &
  pids[$n]=$!
done
echo "cluster.sh: nodes 1-3 started (pids ${pids[*]}): clients 127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094;" \
  "metrics http://127.0.0.1:9644/metrics .. :9646; Ctrl-C stops all three" >&2

# Until a signal arrives or a node exits on its own.
status=0
first_exit=""
while [ "$signals" = 0 ]; do
  first_exit=""
  wait -n -p first_exit "${pids[@]}"
  status=$?
  first_exit=${first_exit:-}  # unset when a signal interrupted the wait
  [ -n "$first_exit" ] && break
done
if [ -n "$first_exit" ]; then
  for n in "${!pids[@]}"; do [ "${pids[$n]}" = "$first_exit" ] && echo "cluster.sh: node-$n exited with status $status; stopping the others" >&2; done
else
  status=0
  echo "cluster.sh: stopping nodes 1-3 (SIGTERM)" >&2
fi

# SIGTERM each node still running, then wait for each (a second signal escalates to SIGKILL).
for pid in "${pids[@]}"; do [ "$pid" = "$first_exit" ] || kill -TERM "$pid" 2>/dev/null; done
for n in 1 2 3; do
  pid=${pids[$n]}
  [ "$pid" = "$first_exit" ] && continue
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$signals" -ge 2 ]; then kill -KILL "$pid" 2>/dev/null; fi
    wait "$pid" 2>/dev/null  # (no "Killed" job notice after an escalation)
    code=$?
    # A signal interrupts `wait` with a status above 128 while the node still runs: wait again.
    kill -0 "$pid" 2>/dev/null && continue
    [ "$code" = 0 ] || { echo "cluster.sh: node-$n exited with status $code" >&2; [ "$status" != 0 ] || status=$code; }
  done
done
wait  # the log prefixers, which end when their node's output closes
exit "$status"
