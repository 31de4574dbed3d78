#!/usr/bin/env python3
"""Controller failover: kill -9 the metadata quorum's leader while an AdminClient creates topics.

    python3 integration-tests/scripts/controller-failover.py --kills 20 [--target brook|kafka]
                                                            [--deadline-s 60] [--interval-ms 100]

A 3-node cluster (harness/cluster.py: brook, or Apache Kafka with --target kafka to check the
test itself) and the Java driver's `create-topics-loop` (one Kafka AdminClient creating
1-partition topics one after another, bootstrapped from all three nodes, a JSON line per
attempt). Each round: wait until creations succeed, SIGKILL the node that leads the quorum,
measure the time from the kill until the survivors report the new quorum leader (polled every
20 ms, Cluster.wait_new_quorum_leader: both name it in Metadata on brook; on Kafka it answers
DescribeQuorum on its controller listener, as only the leader does) and the time to the end
of the first successful creation whose attempt STARTED after the kill (one already in flight at
the kill may have been committed before it; this one adds the AdminClient's own metadata refresh
and retry backoff); then restart the killed node with its data, and wait until every node lists
all three again. At the end every topic the loop reported created
must be in every node's metadata (a committed creation is never lost by a leader change).

Prints a line per kill and a summary (median, max of both times); exits 1 if a creation never succeeded
within --deadline-s of a kill, or a reported topic is missing. The pytest test in
../test_cluster_failover.py runs the short version (3 kills) through `run_failover`.
"""

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # integration-tests/, for harness

from harness import paths  # noqa: E402
from harness.cluster import Cluster, wait_for  # noqa: E402
from harness.drivers import DRIVER_ARGV  # noqa: E402
from harness.members import MemberProcess  # noqa: E402
from harness.paths import TESTS_DIR  # noqa: E402

RESTART_TIMEOUT_S = {"brook": 60.0, "kafka": 120.0}


class CreateLoop(MemberProcess):
    """The Java driver's `create-topics-loop`, its attempt lines collected as they arrive."""

    def __init__(self, bootstrap: str, prefix: str, interval_ms: int, timeout_ms: int = 15000):
        self.name = "create-topics-loop"
        self.records: List[dict] = []
        argv = [*DRIVER_ARGV["java"], "create-topics-loop", "--bootstrap", bootstrap, "--prefix", prefix,
                "--interval-ms", str(interval_ms), "--timeout-ms", str(timeout_ms)]
        self._start(argv, cwd=TESTS_DIR)

    def _on_stdout(self, doc: dict, line: str) -> None:
        self.records.append(doc)

    def stop(self) -> None:
        self._terminate(30)


def _first_success_after(loop: CreateLoop, t_ms: float) -> Optional[dict]:
    return next((r for r in loop.snapshot() if r["ok"] and r["start_ms"] >= t_ms), None)


def run_failover(cluster: Cluster, kills: int, deadline_s: float = 60.0, interval_ms: int = 100,
                 log: Callable[[str], None] = print) -> dict:
    """`kills` rounds of kill-the-quorum-leader on a running `cluster` (left with every node
    running). Returns {"kills": [{"round", "killed", "new_leader", "recovery_ms", "failed_attempts"}],
    "created": [topics], "missing": {node: [topics]}, "never_recovered": [rounds], "attempts": n}; leader_ms:
    from the kill until every survivor reports the new quorum leader."""
    prefix = f"fo-{uuid.uuid4().hex[:8]}"
    loop = CreateLoop(cluster.bootstrap, prefix, interval_ms)
    rounds, never = [], []
    try:
        for k in range(1, kills + 1):
            now_ms = time.time() * 1000
            wait_for(lambda: _first_success_after(loop, now_ms), deadline_s,
                     lambda: f"a creation succeeding before kill {k}: {loop.snapshot()[-3:]} {loop.stderr_tail(10)}")
            leader = cluster.wait_quorum_leader(deadline_s)
            victim = cluster.node(leader)
            kill_ms = time.time() * 1000
            victim.kill()
            # The survivors' own reports, polled fast: the election alone, without the client's
            # metadata refresh and backoff that the first creation below also waits for.
            new_leader = cluster.wait_new_quorum_leader(leader, deadline_s)
            leader_ms = round(time.time() * 1000 - kill_ms)
            try:
                first = wait_for(lambda: _first_success_after(loop, kill_ms), deadline_s,
                                 lambda: f"a creation succeeding after killing node {leader}")
            except AssertionError:
                first = None
                never.append(k)
            recovery_ms = None if first is None else round(first["end_ms"] - kill_ms)
            failed = [r for r in loop.snapshot() if not r["ok"] and r["end_ms"] >= kill_ms
                      and (first is None or r["start_ms"] < first["start_ms"])]
            rounds.append({"round": k, "killed": leader, "new_leader": new_leader, "leader_ms": leader_ms,
                           "recovery_ms": recovery_ms, "failed_attempts": len(failed),
                           "errors": sorted({r.get("error", "") for r in failed})})
            log(f"kill {k}: node {leader} (quorum leader) killed, new leader {new_leader} after {leader_ms} ms, "
                f"first creation after the kill {'NEVER' if recovery_ms is None else f'{recovery_ms} ms'}"
                f" ({len(failed)} attempts failed meanwhile{': ' + ', '.join(rounds[-1]['errors']) if failed else ''})")
            victim.start_timeout_s = RESTART_TIMEOUT_S[cluster.kind]
            victim.start()
            cluster.wait_registered(deadline_s)
        now_ms = time.time() * 1000
        wait_for(lambda: _first_success_after(loop, now_ms), deadline_s, "a creation succeeding after the last restart")
    finally:
        loop.stop()
    attempts = loop.snapshot()
    created = [r["topic"] for r in attempts if r["ok"]]

    def missing_on(node_id):
        names = set(cluster.metadata(node_id)["topics"])
        return [t for t in created if t not in names]

    # Metadata propagates within moments; allow a few seconds before calling a topic missing.
    missing = {}
    for node_id in cluster.node_ids:
        try:
            wait_for(lambda: not missing_on(node_id), 10, f"every created topic on node {node_id}")
        except AssertionError:
            missing[node_id] = missing_on(node_id)
    return {"kills": rounds, "created": created, "missing": missing, "never_recovered": never,
            "attempts": len(attempts)}


def summary(result: dict) -> str:
    times = [r["recovery_ms"] for r in result["kills"] if r["recovery_ms"] is not None]
    elections = [r["leader_ms"] for r in result["kills"]]
    lines = [f"{len(result['kills'])} kills, {result['attempts']} creation attempts, {len(result['created'])} topics created"]
    if elections:
        lines.append(f"kill -> new quorum leader reported: median {statistics.median(elections):.0f} ms, "
                     f"max {max(elections)} ms, min {min(elections)} ms")
    if times:
        lines.append(f"kill -> first successful creation: median {statistics.median(times):.0f} ms, "
                     f"max {max(times)} ms, min {min(times)} ms")
    if result["never_recovered"]:
        lines.append(f"NO creation succeeded after kills {result['never_recovered']}")
    for node_id, topics in result["missing"].items():
        lines.append(f"node {node_id} lacks {len(topics)} created topics, e.g. {topics[:5]}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--target", choices=["brook", "kafka"], default=paths.target())
    parser.add_argument("--deadline-s", type=float, default=60.0,
                        help="a creation must succeed within this long after each kill")
    parser.add_argument("--interval-ms", type=int, default=100, help="pause between creation attempts")
    parser.add_argument("--keep", action="store_true", help="keep the cluster's data directory")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="brook-failover-"))
    cluster = Cluster(args.target, base)
    print(f"starting a 3-node {args.target} cluster in {base}", flush=True)
    cluster.start()
    try:
        result = run_failover(cluster, args.kills, args.deadline_s, args.interval_ms,
                              log=lambda line: print(line, flush=True))
    finally:
        cluster.stop()
    print(summary(result))
    if not args.keep:
        import shutil
        shutil.rmtree(base, ignore_errors=True)
    ok = not result["never_recovered"] and not result["missing"]
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
