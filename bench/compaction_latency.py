#!/usr/bin/env python3
"""`make bench-compaction`: produce latency while a compacted partition is cleaned, Brook vs Kafka.

    python3 bench/compaction_latency.py [--rounds N] [--records N] [--keys N] [--rate R]
                                        [--duration S] [--servers brook,kafka] [--brook-bin PATH]

Each round starts one server fresh (procs.Server; log.cleaner.backoff.ms=500 on both), creates a
one-partition topic with cleanup.policy=compact, segment.bytes=16 MiB and min.compaction.lag.ms
of an hour (nothing is cleanable yet), and fills it with --records records of 1,000-byte values
over --keys keys (librdkafka, as fast as it goes: 1.1 GB by default). Then a second producer
sends 1 KB records at --rate msg/s (acks=1, linger.ms=0) for --duration s; 3 s in, an
IncrementalAlterConfigs sets min.compaction.lag.ms=0, so the cleaner starts on the whole log
while the paced producer runs. Each record's latency runs from its *scheduled* send time to
its delivery report (a producer that falls behind is charged for it). Reported per run: p99
and max before the alter, and p50 / p99 / p99.9 / max from it to the end (the clean passes);
the partition's segment count before and after (a run whose count did not fall did not clean,
and is marked). Medians over rounds, and the ratio Brook / Kafka, go to stdout.

A command, never a CI gate. Needs what `make deps` installs (the Kafka jars, confluent-kafka).
Invariants: every wait has a deadline; each server is stopped and its data removed after its run.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procs import ROOT, Server  # noqa: E402

TOPIC = "compaction-latency"
BACKOFF = "log.cleaner.backoff.ms=500"
ALTER_AT_S = 3.0
VALUE_BYTES = 1000
DELIVERY_WAIT_S = 60.0


class TunedServer(Server):
    """A bench server with the cleaner's back-off shortened, so a clean starts soon after the alter."""

    def argv(self) -> List[str]:
        base = super().argv()
        return base + (["--override", BACKOFF] if self.kind == "brook" else [BACKOFF])


def partition_dir(server: Server) -> Path:
    logs = server.data_dir / "logs" if server.kind == "kafka" else server.data_dir
    return logs / f"{TOPIC}-0"


def segment_count(server: Server) -> int:
    return sum(1 for f in partition_dir(server).glob("*.log"))


def percentile(values: List[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def fill(bootstrap: str, records: int, keys: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "acks": 1, "queue.buffering.max.kbytes": 1 << 20})  # fmt: skip
    value = os.urandom(VALUE_BYTES)
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, value, key=b"k%07d" % (i % keys))
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(DELIVERY_WAIT_S * 2) != 0:
        raise RuntimeError("the fill was not acknowledged in time")


def paced_run(bootstrap: str, admin: AdminClient, keys: int, rate: float, duration_s: float) -> Dict:
    """The paced producer; the alter that makes the log cleanable happens ALTER_AT_S in."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
    latencies: List[tuple] = []  # (scheduled, ms)
    failures = [0]

    def report(scheduled: float):
        def on_delivery(err, _msg):
            if err is None:
                latencies.append((scheduled, (time.monotonic() - scheduled) * 1000))
            else:
                failures[0] += 1

        return on_delivery

    value = b"v" * 1024
    start = time.monotonic()
    alter_at: Optional[float] = None
    sent = 0
    while True:
        scheduled = start + sent / rate
        if scheduled > start + duration_s:
            break
        now = time.monotonic()
        if now < scheduled:
            time.sleep(min(scheduled - now, 0.001))
            producer.poll(0)
            continue
        producer.produce(TOPIC, value, key=b"k%07d" % (sent % keys), on_delivery=report(scheduled))
        producer.poll(0)
        sent += 1
        if alter_at is None and now - start >= ALTER_AT_S:
            entry = ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)
            resource = ConfigResource("TOPIC", TOPIC, incremental_configs=[entry])
            admin.incremental_alter_configs([resource])[resource].result(30)
            alter_at = time.monotonic()
    if producer.flush(DELIVERY_WAIT_S) != 0 or failures[0] or alter_at is None:
        raise RuntimeError(f"paced producer: {failures[0]} failed deliveries, altered: {alter_at is not None}")
    before = [ms for s, ms in latencies if s < alter_at]
    during = [ms for s, ms in latencies if s >= alter_at]
    return {
        "sent": sent,
        "before_p99_ms": percentile(before, 0.99),
        "before_max_ms": max(before, default=float("nan")),
        "p50_ms": percentile(during, 0.50),
        "p99_ms": percentile(during, 0.99),
        "p999_ms": percentile(during, 0.999),
        "max_ms": max(during, default=float("nan")),
    }


def one_run(kind: str, round_no: int, args: argparse.Namespace, work: Path) -> Dict:
    server = TunedServer(kind, work / f"{kind}-r{round_no}", brook_bin=args.brook_bin, partitions=1)
    try:
        server.start()  # returns once ApiVersions is answered
        # The clients are gone (closed) when this returns, before the server stops.
        return exercise(server, args)
    finally:
        server.stop()
        shutil.rmtree(server.data_dir, ignore_errors=True)


def exercise(server: Server, args: argparse.Namespace) -> Dict:
    """Create, fill, then the paced run with the alter; the figures of one run."""
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    topic = NewTopic(TOPIC, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": str(16 << 20), "min.compaction.lag.ms": "3600000",
    })  # fmt: skip
    admin.create_topics([topic])[TOPIC].result(60)
    t0 = time.monotonic()
    fill(server.bootstrap, args.records, args.keys)
    fill_s = time.monotonic() - t0
    segments_before = segment_count(server)
    figures = paced_run(server.bootstrap, admin, args.keys, args.rate, args.duration)
    figures.update(fill_s=fill_s, segments_before=segments_before, segments_after=segment_count(server))
    figures["cleaned"] = figures["segments_after"] < figures["segments_before"]
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=1_100_000)
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=2000.0)
    parser.add_argument("--duration", type=float, default=40.0)
    parser.add_argument("--servers", default="brook,kafka")
    parser.add_argument("--brook-bin", type=Path, default=ROOT / "target" / "release" / "brook")
    args = parser.parse_args()
    kinds = [k for k in args.servers.split(",") if k]
    runs: Dict[str, List[Dict]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory(prefix="brook-compaction-bench-", dir=ROOT / "target") as work:
        for round_no in range(1, args.rounds + 1):
            for kind in kinds:
                try:
                    figures = one_run(kind, round_no, args, Path(work))
                except (RuntimeError, KafkaException) as e:
                    print(f"{kind} round {round_no}: failed: {e}", file=sys.stderr, flush=True)
                    continue
                runs[kind].append(figures)
                mark = "" if figures["cleaned"] else "  (NOT CLEANED)"
                print(f"{kind} round {round_no}: fill {figures['fill_s']:.1f} s; before the clean p99 "
                      f"{figures['before_p99_ms']:.1f} max {figures['before_max_ms']:.1f} ms; from the alter "
                      f"p50 {figures['p50_ms']:.1f} p99 {figures['p99_ms']:.1f} p99.9 {figures['p999_ms']:.1f} "
                      f"max {figures['max_ms']:.1f} ms; segments {figures['segments_before']} -> "
                      f"{figures['segments_after']}{mark}", flush=True)  # fmt: skip
    print(f"\nproduce latency (ms, {args.rate:.0f} msg/s of 1 KB, acks=1) while a "
          f"{args.records * VALUE_BYTES / 1e9:.2f} GB compacted partition is cleaned; medians of cleaned runs")  # fmt: skip
    fields = ("before_p99_ms", "p50_ms", "p99_ms", "p999_ms", "max_ms")
    medians = {k: {f: statistics.median(r[f] for r in v if r["cleaned"]) for f in fields}
               for k, v in runs.items() if any(r["cleaned"] for r in v)}  # fmt: skip
    print(f"{'':8}" + "".join(f"{f.replace('_ms', ''):>14}" for f in fields))
    for kind, row in medians.items():
        print(f"{kind:8}" + "".join(f"{row[f]:14.1f}" for f in fields))
    if "brook" in medians and "kafka" in medians:
        print(f"{'ratio':8}" + "".join(f"{medians['brook'][f] / medians['kafka'][f]:13.2f}x" for f in fields))
    return 0 if all(len(v) == args.rounds for v in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
