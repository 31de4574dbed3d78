#!/usr/bin/env python3
"""Fault-injection run (issue #11): a 3-node cluster under an idempotent acks=all workload while a
seeded nemesis injects faults, then a checker of the whole history.

    python3 integration-tests/scripts/chaos.py --target brook|kafka (--faults N | --duration S)
                                              [--seed K] [--out DIR] [--interval S] [--rate R] [--nodes N]

Cluster (harness/cluster.py: brook from $BROOK_BIN, or Apache Kafka 4.x from .cache/kafka/libs):
3 (--nodes) combined broker+controller nodes on 127.0.0.1, broker.session.timeout.ms 6000 (heartbeat
1000), replica.lag.time.max.ms 10000, default.replication.factor 3, min.insync.replicas 2,
unclean.leader.election.enable false, offsets.topic.replication.factor 3. Topic: 6 partitions
(--partitions), RF 3, min.insync.replicas 2.

Workload: `produce-stream` of the Java and the franz-go drivers (idempotent, acks=all, --rate
records/s each, values <producer>-<seq>, record i to partition i % partitions, one outcome line
per record: partition, offset, ok/error, t_send, t_ack); a franz-go assign-mode consumer tailing
every partition from the start; a Java group consumer (subscribe, commits); heavy-restart faults
add bursts of 1 KB records from franz-go's `produce`.

Faults, one at a time (chaos/nemesis.py; every one logged with kind, node, start, heal, end):
kill -9 of a random partition's leader / of a follower / of the quorum leader (each restarted
after 0.5-2.5 s); SIGSTOP of a leader for session timeout + 1-2.5 s; SIGTERM (controlled
shutdown) and restart; kill -9 during a burst of heavy writes; isolation of a leader from the
other brokers (clients still reach it) for session timeout + 1-2.5 s, with cgroup-tagged
nftables rules on loopback (chaos/netfault.py; needs root, nft, a cgroup2 mount; --network off
or unavailable: no isolate faults); a reassignment of 1-2 partitions with kafka-reassign-partitions
(chaos/reassign.py: with 3 nodes the replica list rotates and a PREFERRED election moves the
leader; with --nodes 4+ one replica moves to a broker outside the set, copying the data), maybe
with a kill -9 of a broker of the move while it runs, cancelled if not complete by
--recovery-timeout; a voter change (chaos/voters.py: a controller, sometimes the quorum leader,
removed with kafka-metadata-quorum remove-controller, a topic created while it is out, added back
with add-controller, maybe a kill -9 of it while a change runs; the quorum is formatted dynamic,
KIP-853's --initial-controllers, unless --quorum static). After each fault: every node running and every partition
led (deadline --recovery-timeout, a slow recovery is counted and the run goes on), then
--interval seconds of quiet; with --settled, also full ISRs before the next fault.

End: heal everything, stop the producers (they flush), wait for full ISRs, let the tailing
consumer reach the high watermarks, read every partition from the beginning, compare the
replicas' batch headers on disk below the high watermark. Checks (chaos/checker.py): lost
(acked record not at its offset), duplicated, inconsistent offsets, reordered (per producer and
partition), stale offsets (a send begun after an ack got a lower offset), read-then-vanished,
tailing session going backwards / skipping, unknown values, acked but never read by the tailing
consumer, replica mismatches (the partitions' current replicas only), moved partitions not on
a replica set their moves' outcomes allow, reassignments still listed at the end, the voter set
not every node at the end, topics created while a voter was out missing. Unavailability per fault: fault start -> every partition has
acknowledged a record sent after it (median/max per kind).

Prints a summary, writes OUT/report.json with the histories (sends.jsonl, reads.jsonl,
faults.jsonl, final.jsonl); exits 1 on any violation or if the ISRs never refilled, 2 if the run
itself failed.
"""

import argparse
import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # integration-tests/, for harness and chaos

from chaos.nemesis import KINDS  # noqa: E402
from chaos.run import Options, run_chaos, summary  # noqa: E402
from harness import paths  # noqa: E402


def parse_kinds(text: str) -> dict:
    """'kill-leader,pause' or 'kill-leader=3,pause=1' -> weights."""
    out = {}
    for part in text.split(","):
        name, _, weight = part.strip().partition("=")
        if name not in KINDS:
            raise argparse.ArgumentTypeError(f"unknown fault kind {name!r}; known: {', '.join(KINDS)}")
        out[name] = int(weight) if weight else KINDS[name]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 2)[2],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", choices=["brook", "kafka"], default=paths.target())
    parser.add_argument("--faults", type=int, help="stop after N faults (default 30 when --duration is absent)")
    parser.add_argument("--duration", type=float, help="stop injecting after S seconds (from the cluster's start)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, help="history and report.json (default: a new temp dir)")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--nodes", type=int, default=3,
                        help="cluster size (4+: reassign faults move data to a broker outside the replica set)")
    parser.add_argument("--rate", type=float, default=200.0, help="records/s per producer (2 producers)")
    parser.add_argument("--interval", type=float, default=0.0, help="quiet seconds after each fault's recovery")
    parser.add_argument("--kinds", type=parse_kinds, default=dict(KINDS),
                        help="fault kinds and weights, e.g. kill-leader=3,pause=1 (default: "
                             + ",".join(f"{k}={w}" for k, w in KINDS.items()) + ")")
    parser.add_argument("--network", choices=["auto", "on", "off"], default="auto",
                        help="isolate faults via nftables (auto: when root, nft and cgroup2 are there)")
    parser.add_argument("--settled", action="store_true",
                        help="before each fault, wait until every ISR is full (failover times of a healthy "
                             "cluster; without it faults follow each other's recovery at once)")
    parser.add_argument("--recovery-timeout", type=float, default=60.0)
    parser.add_argument("--quorum", choices=["dynamic", "static"], default="dynamic",
                        help="dynamic: the controllers formatted with --initial-controllers (KIP-853), so voters "
                             "faults change them; static: controller.quorum.voters, no voters faults")
    parser.add_argument("--voters-keep-leader", action="store_true",
                        help="voters faults never remove the quorum leader itself (default: a third of them do)")
    parser.add_argument("--keep", action="store_true", help="keep the cluster's data directory even when OK")
    parser.add_argument("--secured", action="store_true",
                        help="SASL_SSL (SCRAM-SHA-512) clients, SASL_SSL inter-broker, mutual TLS quorum "
                             "(harness.security.secure_cluster: no PLAINTEXT listener; the harness logs in through harness/door.py)")
    args = parser.parse_args()
    opts = Options(target=args.target, faults=args.faults, duration_s=args.duration, seed=args.seed, out=args.out,
                   partitions=args.partitions, nodes=args.nodes, rate=args.rate, interval_s=args.interval, kinds=args.kinds,
                   network=args.network, recovery_timeout_s=args.recovery_timeout, keep=args.keep,
                   settled=args.settled, secured=args.secured, quorum=args.quorum,
                   voters_remove_leader=not args.voters_keep_leader)
    try:
        report = run_chaos(opts, log=lambda line: print(line, flush=True))
    except Exception:
        traceback.print_exc()
        print("FAILED: the run itself failed")
        return 2
    print(summary(report))
    print(json.dumps({k: report[k] for k in ("faults_total", "acked", "lost", "duplicated", "reordered",
                                              "read_then_vanished", "ok")}))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
