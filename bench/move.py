"""`make bench-move`: issue #27's measure — an unthrottled move of SIZE of replicas onto a new
broker, Brook beside Apache Kafka 4.4, and what it does to an unrelated topic's produce p99.

    python3 bench/move.py [--size-gb 10] [--partitions 8] [--clusters kafka,brook]
                          [--brook-bin PATH] [--probe-rate 200] [--baseline-s 30]
                          [--max-disk-gb G] [--data-dir DIR] [--report JSON]

One cluster at a time (the integration tests' harness/cluster.py, as `make bench-cluster`
uses it, with Kafka's shipped broker session timers): three combined broker+controller nodes,
then a fourth, broker-only node added to the running cluster (`Cluster.add_broker`). Each run:
1. a topic `moved` of --partitions partitions, replication factor 1, its partitions placed
   round the three first brokers, filled with SIZE of 1,000-byte records
   (kafka-producer-perf-test, acks=1); a topic `probe` of one partition on broker 2, which
   does not move;
2. a producer (confluent-kafka, acks=all, 1 KB) writes `probe` at --probe-rate records/s from
   here on; its latencies (librdkafka's produce-to-acknowledgement time per record) over
   --baseline-s at rest are the "before" figures;
3. broker 4 is added; `kafka-reassign-partitions --execute` (no --throttle) moves every
   partition of `moved` onto it; the move ends when every node's Metadata shows every partition
   on broker 4 alone (polled in-process; a single `--verify` then confirms). The move's bytes
   are the partitions' sizes (DescribeLogDirs through kafka-log-dirs) before the move; its rate
   is those bytes over that time. The probe's latencies over it are the "during" figures, and
   the records slower than twice the baseline p99 are listed by when they were sent.
Then the cluster is stopped and its data directory removed before the next one starts.

Disk: a move holds the topic twice at its peak (source and new replica), so a run needs about
2 x SIZE free. When --max-disk-gb (or the free space less a 2 GB reserve) is smaller, SIZE is
reduced to what fits, at least 2 GB, and the output says so. The machine may be shared: the
load average before and after each run is in the output, and figures are indicative then.

Prints a table (Brook, Kafka, Brook/Kafka against the goals: move rate >= 2x Kafka's, the probe's
p99 during the move < 2x its p99 before) and writes bench/results/<UTC>-move.json. Never a CI
gate. Invariants: every wait polls with a deadline; a cluster is always stopped and its data
removed, even on error or Ctrl-C.
"""

import argparse
import json
import os
import shutil
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, List, Optional

from cluster_nodes import OVERRIDES
from procs import ROOT

sys.path.insert(0, str(ROOT / "integration-tests"))
from harness import kafka_cli  # noqa: E402
from harness.cluster import Cluster  # noqa: E402
from harness.replication import create_topic_assigned, producer_perf_test, wait_views  # noqa: E402

REASSIGN_TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
LOG_DIRS_TOOL = "org.apache.kafka.tools.LogDirsCommand"
RESULTS = Path(__file__).resolve().parent / "results"
GB = 10**9
RECORD_SIZE = 1000
DISK_RESERVE_GB = 2.0  # left free for the nodes' own logs and the other users of the disk
MIN_SIZE_GB = 2.0
MOVE_TIMEOUT_S = 3600
NEW_BROKER = 4


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def load_average() -> List[float]:
    return [round(x, 2) for x in os.getloadavg()]


def fitting_size_gb(wanted: float, data_dir: Path, max_disk_gb: Optional[float]) -> float:
    """The SIZE a run can hold twice on `data_dir`'s disk (see the module comment)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    room = shutil.disk_usage(data_dir).free / GB - DISK_RESERVE_GB
    if max_disk_gb is not None:
        room = min(room, max_disk_gb)
    size = min(wanted, room / 2)
    if size < MIN_SIZE_GB:
        raise SystemExit(f"not enough disk: {room:.1f} GB usable holds a {room / 2:.1f} GB move, "
                         f"less than the {MIN_SIZE_GB} GB minimum")
    return round(size, 1)


def percentile(values: List[float], q: float) -> Optional[float]:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Probe:
    """A fixed-rate acks=all producer on its own thread; each delivery's latency (ms) goes to the
    phase current when the record was produced ("before", "during" or None: not counted)."""

    def __init__(self, bootstrap: str, topic: str, rate: float):
        from confluent_kafka import Producer  # the integration tests' client, installed by `make deps`

        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        self.topic, self.interval = topic, 1.0 / rate
        self.phase: Optional[str] = None
        self.latencies: Dict[str, List[float]] = {"before": [], "during": []}
        self.sent: Dict[str, List[float]] = {"before": [], "during": []}  # time.monotonic() of each send
        self.errors: List[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _report(self, phase, sent: float):
        def report(err, msg):
            if err is not None:
                self.errors.append(str(err))
            elif phase is not None:
                self.latencies[phase].append(msg.latency() * 1000)
                self.sent[phase].append(sent)
        return report

    def _run(self) -> None:
        value = b"p" * 1024
        due = time.monotonic()
        while not self._stop.is_set():
            self.producer.produce(self.topic, value=value, on_delivery=self._report(self.phase, time.monotonic()))
            self.producer.poll(0)
            due += self.interval
            # Paced by the clock, not by the previous send: a slow broker does not lower the rate.
            self._stop.wait(max(0.0, due - time.monotonic()))
        self.producer.flush(60)
        self.producer = None  # destroyed here, so it does not reconnect to the stopped cluster

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)

    def figures(self, phase: str) -> Dict:
        values = self.latencies[phase]
        return {"records": len(values), "p50_ms": percentile(values, 0.50), "p99_ms": percentile(values, 0.99),
                "max_ms": max(values) if values else None}

    def slow(self, phase: str, above_ms: float, since: float) -> List[List[float]]:
        """[seconds after `since` it was sent, latency ms] of each record slower than `above_ms`."""
        return [[round(t - since, 2), round(ms, 1)] for t, ms in zip(self.sent[phase], self.latencies[phase])
                if ms > above_ms]


def partition_sizes(cluster: Cluster, topic: str) -> int:
    out = kafka_cli.run(LOG_DIRS_TOOL, "--bootstrap-server", cluster.bootstrap, "--describe",
                        "--topic-list", topic, timeout=120).stdout
    doc = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    return sum(p["size"] for b in doc["brokers"] for d in b["logDirs"] for p in d["partitions"])


def move_all(cluster: Cluster, plan: Path, partitions: int) -> float:
    """--execute unthrottled, then the seconds until every node's Metadata shows every partition
    on the new broker alone: KIP-455 keeps the adding and the removing replicas in the replica set
    until the reassignment completes, so that is its end. Polled with in-process Metadata
    requests every 0.2 s, not with `--verify`: each `--verify` is a JVM start, about a CPU-second
    on these 2 cores, which the probe would measure as the move's cost. One `--verify` afterwards
    must report every partition completed."""
    start = time.monotonic()
    kafka_cli.run(REASSIGN_TOOL, "--bootstrap-server", cluster.bootstrap, "--execute",
                  "--reassignment-json-file", plan, timeout=120)
    wait_views(cluster, "moved", lambda v: all(x["replicas"] == [NEW_BROKER] for x in v.values()),
               MOVE_TIMEOUT_S, "every partition of moved on the new broker")
    seconds = time.monotonic() - start
    out = kafka_cli.run(REASSIGN_TOOL, "--bootstrap-server", cluster.bootstrap, "--verify",
                        "--reassignment-json-file", plan, timeout=120).stdout
    if out.count(" is completed.") != partitions:
        raise RuntimeError(f"--verify does not report every partition completed: {out[-1000:]}")
    return seconds


def run(kind: str, args: argparse.Namespace, size_gb: float) -> Dict:
    base = args.data_dir / f"{kind}-move"
    shutil.rmtree(base, ignore_errors=True)
    result: Dict = {"cluster": kind, "size_gb": size_gb, "load_before": load_average()}
    cluster = Cluster(kind, base, 3, overrides=OVERRIDES)
    probe = None
    try:
        cluster.start()
        parts = args.partitions
        create_topic_assigned(cluster, 1, "moved", [[1 + p % 3] for p in range(parts)])
        create_topic_assigned(cluster, 1, "probe", [[2]])
        records = int(size_gb * GB / RECORD_SIZE)
        t0 = time.monotonic()
        producer_perf_test(cluster.bootstrap, "moved", records, record_size=RECORD_SIZE, acks="1",
                           timeout=60 + records / 2000)
        result["fill_s"] = round(time.monotonic() - t0, 1)
        moved_bytes = partition_sizes(cluster, "moved")
        log(f"{kind}: {moved_bytes / GB:.2f} GB in {parts} partitions in {result['fill_s']} s")

        probe = Probe(cluster.bootstrap, "probe", args.probe_rate)
        probe.phase = "before"
        time.sleep(args.baseline_s)  # the baseline's measurement window, not a wait for a condition
        probe.phase = None
        cluster.add_broker()
        plan = base / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "moved", "partition": p, "replicas": [NEW_BROKER]} for p in range(parts)]}))
        probe.phase = "during"
        move_start = time.monotonic()
        seconds = move_all(cluster, plan, parts)
        probe.phase = None
        probe.stop()
        if probe.errors:
            raise RuntimeError(f"probe produce failed: {probe.errors[:3]}")
        result.update(moved_bytes=moved_bytes, move_s=round(seconds, 1),
                      move_mb_per_s=round(moved_bytes / seconds / 1e6, 1),
                      probe_before=probe.figures("before"), probe_during=probe.figures("during"))
        before, during = result["probe_before"]["p99_ms"], result["probe_during"]["p99_ms"]
        result["probe_p99_rise"] = round(during / before, 2) if before and during else None
        result["probe_slow_during"] = probe.slow("during", 2 * before, move_start) if before else []
        log(f"{kind}: {len(result['probe_slow_during'])} probe records over 2x the baseline p99: "
            f"{result['probe_slow_during'][:40]}")
    except Exception as e:  # noqa: BLE001 — the other cluster still runs; the error is reported
        result["error"] = f"{type(e).__name__}: {str(e)[:1500]}"
        log(f"{kind}: {result['error']}")
    finally:
        if probe is not None:
            probe.stop()
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)  # GBs of replicas
        result["load_after"] = load_average()
    return result


def ratio(a, b) -> Optional[float]:
    return round(a / b, 2) if a and b else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-gb", type=float, default=float(os.environ.get("SIZE", 10)))
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--clusters", default="kafka,brook")
    ap.add_argument("--brook-bin", type=Path, default=ROOT / "target" / "release" / "brook")
    ap.add_argument("--probe-rate", type=float, default=200.0)
    ap.add_argument("--baseline-s", type=float, default=30.0)
    ap.add_argument("--max-disk-gb", type=float, default=None)
    ap.add_argument("--data-dir", type=Path, default=ROOT / "bench" / ".move-data")
    ap.add_argument("--report", type=Path, default=None)
    args = ap.parse_args()
    os.environ["BROOK_BIN"] = str(args.brook_bin)  # the harness's Brook nodes run this binary
    size_gb = fitting_size_gb(args.size_gb, args.data_dir, args.max_disk_gb)
    if size_gb < args.size_gb:
        log(f"{args.size_gb} GB does not fit on this disk twice over (--max-disk-gb / free space): "
            f"measuring {size_gb} GB")
    results = {kind: run(kind, args, size_gb) for kind in args.clusters.split(",")}
    brook, kafka = results.get("brook", {}), results.get("kafka", {})
    summary = {
        "move_rate_brook_over_kafka": ratio(brook.get("move_mb_per_s"), kafka.get("move_mb_per_s")),
        "goal_move_rate_ratio": 2.0,
        "probe_p99_rise_brook": brook.get("probe_p99_rise"), "probe_p99_rise_kafka": kafka.get("probe_p99_rise"),
        "goal_probe_p99_rise_below": 2.0,
    }
    print(f"\nMove of {size_gb} GB ({args.partitions} partitions, RF 1) onto a new broker, unthrottled; "
          f"probe {args.probe_rate:.0f} x 1 KB/s acks=all. Machine shared: load average "
          f"{[r.get('load_before') for r in results.values()]} -> {[r.get('load_after') for r in results.values()]}, "
          f"{os.cpu_count()} cores; figures are indicative.")
    print(f"{'':28}{'Brook':>12}{'Kafka':>12}{'Brook/Kafka':>14}")
    for label, key in (("move time (s)", "move_s"), ("move rate (MB/s)", "move_mb_per_s")):
        print(f"{label:28}{brook.get(key, '-')!s:>12}{kafka.get(key, '-')!s:>12}"
              f"{ratio(brook.get(key), kafka.get(key))!s:>14}")
    for label, phase in (("probe p99 before (ms)", "probe_before"), ("probe p99 during (ms)", "probe_during")):
        b, k = (brook.get(phase) or {}).get("p99_ms"), (kafka.get(phase) or {}).get("p99_ms")
        print(f"{label:28}{b if b is None else round(b, 1)!s:>12}{k if k is None else round(k, 1)!s:>12}"
              f"{ratio(b, k)!s:>14}")
    print(f"{'probe p99 during/before':28}{brook.get('probe_p99_rise')!s:>12}{kafka.get('probe_p99_rise')!s:>12}")
    print(f"goals: move rate >= 2x Kafka's (got {summary['move_rate_brook_over_kafka']}); "
          f"probe p99 rise < 2x (Brook {summary['probe_p99_rise_brook']})")
    for r in results.values():
        if "error" in r:
            print(f"{r['cluster']}: {r['error']}")
    RESULTS.mkdir(exist_ok=True)
    out = args.report or RESULTS / f"{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}-move.json"
    out.write_text(json.dumps({"config": {k: str(v) for k, v in vars(args).items()}, "size_gb": size_gb,
                               "cpus": os.cpu_count(), "results": results, "summary": summary}, indent=2))
    print(f"results: {out}")
    return 1 if any("error" in r for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
