#!/usr/bin/env python3
"""Crash-safety kill test: acknowledged records survive `kill -9`, exactly once, uncorrupted.

    python3 integration-tests/scripts/kill-test.py --kills 60 [--partitions 3] [--seed N]
                                                  [--max-seconds 1800] [--target brook|kafka]

One broker (harness.broker.Broker: the real `brook` binary, or Apache Kafka with
--target kafka to check the test itself) and one topic with `flush.messages=1` and 1 MiB
segments (Kafka's minimum), so kills also land around segment rolls. Each round a
fresh confluent-kafka Producer (acks=1, no retries, no idempotence, a random codec and linger)
sends distinct records round-robin over the partitions; 0.2-2 s in, the broker gets SIGKILL,
restarts on the same port and data dir (in some rounds it is first killed again 0-300 ms
into its start-up, before it is ready: brook recovers its logs then), and the producer flushes
what it still had queued to the new process. Every delivery report is kept: acknowledged
(partition, offset) or failed.
After the last round everything is read back with `check.crcs=true` and checked:
  - every acknowledged record is at its acknowledged (partition, offset), key and value intact;
  - no key and no offset appears twice (retries are off, so a second copy is the broker's);
  - each partition's offsets run contiguously from log start 0 to the high watermark;
  - no batch fails its CRC or is otherwise corrupt, and every value matches its key;
  - the broker log shows no panic.
Records whose delivery failed (in flight at the kill) may be present or absent: both counted.

The pytest test in ../test_crash_recovery.py runs the short version through `run_kill_test`.
Loops are bounded in count and time; everything stays on loopback.
"""

import argparse
import hashlib
import logging
import random
import shutil
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Set, Tuple

TESTS_DIR = Path(__file__).resolve().parent.parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from harness import paths  # noqa: E402
from harness.broker import Broker, BrokerStartError  # noqa: E402

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
KILL_AFTER_S = (0.2, 2.0)
RECOVERY_KILL_CHANCE = 0.3
RECOVERY_KILL_AFTER_S = (0.0, 0.3)
MESSAGE_TIMEOUT_MS = 15000  # a record queued at a kill must outlive the restart to be sent
FLUSH_TIMEOUT_S = MESSAGE_TIMEOUT_MS / 1000 + 10
TOPIC_TIMEOUT_S = 30.0
READ_TIMEOUT_S = 600.0  # a deadline against a hang, not a speed target
# librdkafka reports a CRC mismatch (check.crcs) as _BAD_MSG; brokers say CORRUPT_MESSAGE (INVALID_MSG, code 2).
CORRUPTION_CODES = {KafkaError._BAD_MSG, KafkaError.INVALID_MSG, KafkaError._BAD_COMPRESSION}
MAX_DETAILS = 20
# fsync after every record; small segments so rolls (new files, index trims) happen all the time.
TOPIC_CONFIG = {"flush.messages": "1", "segment.bytes": str(1024 * 1024)}

Log = Callable[[str], None]


def record_value(key: str) -> str:
    """The value is a function of the key (16-400 bytes), so any record read back can be checked."""
    digest = hashlib.sha256(key.encode()).hexdigest()
    length = 16 + int(digest[:4], 16) % 385
    return f"{key}|" + (digest * (length // len(digest) + 1))[:length]


@dataclass
class Ledger:
    """What the producers were told. Keys are unique over the whole run."""

    acked: Dict[str, Tuple[int, int]] = field(default_factory=dict)  # key -> (partition, offset)
    failed: Dict[str, str] = field(default_factory=dict)  # key -> delivery error
    unreported: Set[str] = field(default_factory=set)  # no delivery report before the flush deadline

    def sent_unacknowledged(self) -> Set[str]:
        return set(self.failed) | self.unreported


@dataclass
class Report:
    seed: int
    kills: int = 0
    recovery_kills: int = 0  # extra kills during start-up (log recovery), not counted in `kills`
    sent: int = 0
    acknowledged: int = 0
    lost: int = 0  # acknowledged, but not intact at its acknowledged offset
    duplicates: int = 0  # a key or an offset served more than once
    corrupt_batches: int = 0  # CRC/corruption errors from the consumer
    bad_records: int = 0  # a value that does not match its key, or a key never sent
    offset_gaps: int = 0  # offsets missing between log start and high watermark
    unacked_present: int = 0
    unacked_absent: int = 0
    consumer_errors: int = 0  # any other consumer error, or the read-back deadline
    panics: int = 0  # "panicked at" lines in the broker log
    elapsed_s: float = 0.0
    details: List[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        bad = (self.lost, self.duplicates, self.corrupt_batches, self.bad_records, self.offset_gaps)
        return not any(bad) and not self.consumer_errors and not self.panics

    def note(self, line: str) -> None:
        if len(self.details) < MAX_DETAILS:
            self.details.append(line)

    def summary(self) -> str:
        lines = [
            f"seed: {self.seed}",
            f"kills: {self.kills} (+{self.recovery_kills} during recovery)",
            f"records sent: {self.sent}",
            f"records acknowledged: {self.acknowledged}",
            f"records lost: {self.lost}",
            f"duplicates: {self.duplicates}",
            f"corrupt batches: {self.corrupt_batches}",
            f"bad records (value/key mismatch): {self.bad_records}",
            f"offset gaps: {self.offset_gaps}",
            f"unacknowledged-but-present: {self.unacked_present}"
            f" (unacknowledged-and-absent: {self.unacked_absent})",
            f"consumer errors: {self.consumer_errors}",
            f"broker panics: {self.panics}",
            f"elapsed: {self.elapsed_s:.1f} s",
            f"result: {'PASS' if self.ok else 'FAIL'}",
        ]
        return "\n".join(lines + [f"  detail: {d}" for d in self.details])


def _quiet_logger() -> logging.Logger:
    """librdkafka complains loudly about every refused connection while the broker is down;
    those are expected here, so its log goes nowhere unless --verbose raised the level."""
    logger = logging.getLogger("kill-test.librdkafka")
    logger.propagate = False
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    return logger


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create the topic with TOPIC_CONFIG and wait until every partition has a leader."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": _quiet_logger()})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1, config=dict(TOPIC_CONFIG))]
    )
    futures[topic].result(TOPIC_TIMEOUT_S)
    deadline = time.monotonic() + TOPIC_TIMEOUT_S
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=topic, timeout=5).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions:
            if all(p.leader >= 0 for p in md.partitions.values()):
                return
        time.sleep(0.2)
    raise RuntimeError(f"topic {topic} not ready with {partitions} partitions after {TOPIC_TIMEOUT_S} s")


def restart(broker: Broker, rng: random.Random) -> bool:
    """Start the killed broker again. With RECOVERY_KILL_CHANCE, first kill it once more a few
    milliseconds into its start-up, before it serves (it recovers its logs then): recovery must be
    crash-safe (a torn-tail truncation or index rebuild cut short is redone next time).
    Returns whether a kill landed before the broker was ready; it is running and ready afterwards."""
    if rng.random() >= RECOVERY_KILL_CHANCE:
        broker.start()
        return False
    # A timer thread kills while start() waits for readiness; start() then raises because the
    # process died. If start() won the race the broker is simply killed again while idle.
    timer = threading.Timer(rng.uniform(*RECOVERY_KILL_AFTER_S), broker.kill)
    timer.start()
    try:
        broker.start()
        killed_starting = False
    except BrokerStartError:
        killed_starting = True
    timer.join()
    broker.kill()
    broker.start()
    return killed_starting


def produce_round(
    broker: Broker, topic: str, partitions: int, round_no: int, rng: random.Random, ledger: Ledger, log: Log
) -> Tuple[int, bool]:
    """Produce until a random moment, kill -9 the broker, restart it, flush.
    Returns (records sent, whether the restart was also killed once during recovery)."""
    codec = rng.choice(CODECS)
    linger_ms = rng.choice((0, 1, 5, 20))
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "1",
            "enable.idempotence": False,
            # No client retries: a record the broker wrote but never acknowledged must not be
            # sent again, so any second copy read back is the broker's doing.
            "retries": 0,
            "compression.type": codec,
            "linger.ms": linger_ms,
            "queue.buffering.max.messages": 5000,
            "message.timeout.ms": MESSAGE_TIMEOUT_MS,
            "logger": _quiet_logger(),
        }
    )
    pending: Set[str] = set()

    def on_delivery(err, msg) -> None:
        key = msg.key().decode()
        pending.discard(key)
        if err is None:
            ledger.acked[key] = (msg.partition(), msg.offset())
        else:
            ledger.failed[key] = err.str()

    kill_after = rng.uniform(*KILL_AFTER_S)
    started = time.monotonic()
    seq = 0
    while time.monotonic() - started < kill_after:
        key = f"r{round_no}-{seq}"
        try:
            producer.produce(
                topic, key=key, value=record_value(key), partition=seq % partitions, on_delivery=on_delivery
            )
        except BufferError:  # local queue full: serve delivery reports first
            producer.poll(0.01)
            continue
        pending.add(key)
        seq += 1
        producer.poll(0)
    broker.kill()
    recovery_killed = restart(broker, rng)
    left = producer.flush(FLUSH_TIMEOUT_S)
    ledger.unreported |= pending
    log(
        f"round {round_no}: codec={codec} linger={linger_ms}ms killed after {kill_after:.2f}s"
        + (" and again during recovery, " if recovery_killed else ", ")
        + f"sent {seq}, acked so far {len(ledger.acked)}, failed so far {len(ledger.failed)}"
        + (f", {left} without report" if left else "")
    )
    return seq, recovery_killed


def read_back(bootstrap: str, topic: str, partitions: int, report: Report) -> Dict[int, List[Tuple[int, str, str]]]:
    """Every record of every partition from the beginning, as (offset, key, value) per partition
    in arrival order, and the per-partition checks on log start / high watermark / gaps."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"kill-test-{uuid.uuid4()}",  # required by librdkafka; never joined
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "check.crcs": True,
            "auto.offset.reset": "error",
            "logger": _quiet_logger(),
        }
    )
    records: Dict[int, List[Tuple[int, str, str]]] = {p: [] for p in range(partitions)}
    try:
        marks = {}
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            marks[p] = (low, high)
            if low != 0:  # nothing deletes in this test, so the log must still start at 0
                report.offset_gaps += low
                report.note(f"partition {p}: log start offset {low}, expected 0")
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        at_end = {p for p in range(partitions) if marks[p][1] == marks[p][0]}
        deadline = time.monotonic() + READ_TIMEOUT_S
        while len(at_end) < partitions and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= marks[msg.partition()][1]:
                        at_end.add(msg.partition())
                elif err.code() in CORRUPTION_CODES:
                    report.corrupt_batches += 1
                    report.note(f"corrupt batch: partition {msg.partition()} offset {msg.offset()}: {err}")
                else:
                    report.consumer_errors += 1
                    report.note(f"consumer error: {err}")
                    if err.fatal():
                        break
                continue
            key = msg.key().decode(errors="replace") if msg.key() is not None else ""
            value = msg.value().decode(errors="replace") if msg.value() is not None else ""
            records[msg.partition()].append((msg.offset(), key, value))
        if len(at_end) < partitions:
            report.consumer_errors += 1
            report.note(f"read-back incomplete after {READ_TIMEOUT_S} s: partitions at end {sorted(at_end)}")
    finally:
        consumer.close()
    for p, (low, high) in marks.items():
        offsets = sorted({o for o, _, _ in records[p]})
        expected = high - low
        missing = expected - len([o for o in offsets if low <= o < high])
        if missing:
            report.offset_gaps += missing
            report.note(f"partition {p}: {missing} offsets missing in [{low}, {high}) ({len(offsets)} read)")
    return records


def check(ledger: Ledger, records: Dict[int, List[Tuple[int, str, str]]], report: Report) -> None:
    """Compare what was read with what was acknowledged; fills the report's counters."""
    by_key: Dict[str, List[Tuple[int, int]]] = {}
    at: Dict[Tuple[int, int], Tuple[str, str]] = {}
    sent = set(ledger.acked) | ledger.sent_unacknowledged()
    for p, rows in records.items():
        for offset, key, value in rows:
            if (p, offset) in at:
                report.duplicates += 1
                report.note(f"offset served twice: partition {p} offset {offset}")
                continue
            at[(p, offset)] = (key, value)
            by_key.setdefault(key, []).append((p, offset))
            if key not in sent or value != record_value(key):
                report.bad_records += 1
                report.note(f"bad record at partition {p} offset {offset}: key {key[:40]!r}")
    for key, places in by_key.items():
        if len(places) > 1:
            report.duplicates += len(places) - 1
            report.note(f"key {key} present {len(places)} times: {places[:5]}")
    for key, (p, offset) in ledger.acked.items():
        if at.get((p, offset)) != (key, record_value(key)):
            report.lost += 1
            found = by_key.get(key)
            report.note(f"acked {key} at partition {p} offset {offset}: found {found or 'nowhere'}")
    for key in ledger.sent_unacknowledged():
        if key in by_key:
            report.unacked_present += 1
        else:
            report.unacked_absent += 1
    report.acknowledged = len(ledger.acked)


def count_panics(broker: Broker) -> int:
    try:
        text = broker.log_path.read_text(errors="replace")
    except OSError:
        return 0
    return sum(1 for line in text.splitlines() if "panicked at" in line)


def run_kill_test(
    broker: Broker,
    kills: int,
    partitions: int = 3,
    seed: Optional[int] = None,
    max_seconds: float = 60.0,
    log: Log = lambda _line: None,
) -> Report:
    """The whole test against a started `broker`: up to `kills` rounds (fewer if `max_seconds`
    runs out; at least one), then the read-back and checks. The broker is left running."""
    seed = random.randrange(2**32) if seed is None else seed
    rng = random.Random(seed)
    report = Report(seed=seed)
    started = time.monotonic()
    topic = f"kill-test-{uuid.uuid4().hex[:10]}"
    create_topic(broker.bootstrap, topic, partitions)
    log(f"seed {seed}: topic {topic} ({partitions} partitions, {TOPIC_CONFIG}) on {broker.bootstrap}")
    ledger = Ledger()
    while report.kills < kills and (report.kills == 0 or time.monotonic() - started < max_seconds):
        sent, recovery_killed = produce_round(broker, topic, partitions, report.kills, rng, ledger, log)
        report.sent += sent
        report.recovery_kills += recovery_killed
        report.kills += 1
    records = read_back(broker.bootstrap, topic, partitions, report)
    check(ledger, records, report)
    report.panics = count_panics(broker)
    report.elapsed_s = time.monotonic() - started
    return report


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=60)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--max-seconds", type=float, default=1800.0, help="stop killing after this long")
    parser.add_argument("--target", choices=("brook", "kafka"), default=paths.target())
    parser.add_argument("--data-dir", type=Path, default=None, help="kept afterwards (default: temp, kept on failure)")
    parser.add_argument("--verbose", action="store_true", help="also show librdkafka's log")
    args = parser.parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.INFO)
        _quiet_logger().propagate = True
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="brook-kill-test-"))
    broker = Broker(args.target, data_dir / "broker")
    report: Optional[Report] = None
    try:
        broker.start()
        report = run_kill_test(broker, args.kills, args.partitions, args.seed, args.max_seconds, log=print)
    finally:
        broker.stop()
    print(report.summary())
    if not report.ok:
        print(f"broker log: {broker.log_path}\n--- broker log tail ---\n{broker.log_tail(40)}")
    elif args.data_dir is None:
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
