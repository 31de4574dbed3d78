"""Compaction of a topic with aborted transactions (issue #12 item 4), as Kafka's cleaner does it.

A Java 4.4 transactional producer (the `txn-shell` of harness/txn_shell.py) writes to a compacted
topic with tiny segments (`segment.ms` 100, `min.cleanable.dirty.ratio` 0.01,
`delete.retention.ms` 1000): committed transactions, aborted ones that overwrite committed keys
and write new keys, a committed overwrite, then a last committed transaction (so no aborted batch
is the producer's last one, which the cleaner keeps, emptied, for its sequence state). Each
transaction takes longer than `segment.ms`, so the cleaner may start meanwhile. The test then
appends records under a separate key (`roll`, as test_compaction.py: the cleaner only cleans
closed segments) until the cleaner has run: a read_uncommitted consumer (librdkafka) then sees only committed
records, the latest committed value of each key, at the offsets the producer's sends returned,
and never an aborted value (an aborted record must neither survive nor, kept out of the key map,
remove the older committed value of its key); read_committed sees the same.

Passes against Apache Kafka 4.4 too (BROOK_TEST_TARGET=kafka); the broker runs with
`log.cleaner.backoff.ms` 200 in both cases.
"""

import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition

from harness import drivers
from harness.txn_shell import TxnShell
from test_compaction import COMPACT, FAST_CLEANER

DEADLINE_S = 45.0
ROLL_KEY = "roll"

# (end, {key: value}) in order; every transaction writes partition 0 only.
TRANSACTIONS = [
    ("commit", {"k0": "c1-k0", "k1": "c1-k1", "k2": "c1-k2", "k3": "c1-k3"}),
    ("abort", {"k0": "x1-k0", "k1": "x1-k1", "k9": "x1-k9"}),   # overwrites committed keys, a new key
    ("commit", {"k2": "c2-k2", "k4": "c2-k4"}),                  # a committed overwrite
    ("abort", {"k4": "x2-k4", "k3": "x2-k3"}),
    ("commit", {"k5": "c3-k5"}),
]


def read_all(bootstrap, topic, isolation, timeout_s=15.0):
    """Every record of partition 0 up to its end offset under `isolation`:
    [(offset, key, value)]."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "unused",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": isolation,
    })
    try:
        tp = TopicPartition(topic, 0)
        # The high watermark; with no transaction open, also the last stable offset.
        _, high = consumer.get_watermark_offsets(tp, timeout=10)
        consumer.assign([TopicPartition(topic, 0, -2)])  # OFFSET_BEGINNING
        out = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if consumer.position([tp])[0].offset >= high:
                break
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append((msg.offset(), msg.key().decode(), msg.value().decode()))
        else:
            raise AssertionError(f"{isolation} read of {topic} did not reach {high} in {timeout_s} s")
        return out
    finally:
        consumer.close()


def data(records):
    return [r for r in records if r[1] != ROLL_KEY]


def test_compaction_of_a_topic_with_aborted_transactions(broker_factory, topic):
    broker = broker_factory(FAST_CLEANER)
    args = ["--topic", topic, "--partitions", 1]
    for c in COMPACT:
        args += ["--config", c]
    assert drivers.run("confluent", "create-topic", broker.bootstrap, *args) == {"ok": True}

    shell = TxnShell(broker.bootstrap)
    try:
        shell.ok("producer", name="p", transactional_id=f"tid-{uuid.uuid4().hex[:10]}", init=True)
        produced = []  # (offset, key, value, end)
        for end, values in TRANSACTIONS:
            records = [{"key": k, "value": v, "partition": 0} for k, v in values.items()]
            shell.ok("begin", name="p")
            sent = shell.send("p", topic, records)
            shell.ok(end, name="p")
            produced += [(s["offset"], r["key"], r["value"], end) for r, s in zip(records, sent)]
    finally:
        shell.close()

    latest = {}
    for offset, key, value, end in produced:
        if end == "commit":
            latest[key] = (offset, key, value)
    expected = sorted(latest.values())
    aborted = {value for _, _, value, end in produced if end == "abort"}

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    started = time.monotonic()
    i = 0
    while True:
        errors = []
        producer.produce(topic, key=ROLL_KEY, value=f"r{i}", partition=0,
                         on_delivery=lambda err, _: errors.append(err))
        assert producer.flush(30) == 0 and errors == [None], errors
        i += 1
        seen = data(read_all(broker.bootstrap, topic, "read_uncommitted"))
        if seen == expected:
            break
        # Until the cleaner has run, `seen` may hold older and aborted values; it must never lose
        # the latest committed value of a key (an aborted record must not shadow it).
        assert set(expected) <= set(seen), f"a committed value was lost: {seen}"
        assert time.monotonic() - started < DEADLINE_S, f"not compacted after {DEADLINE_S} s: {seen}"
        time.sleep(0.3)
    print(f"\ncompacted after {time.monotonic() - started:.1f} s ({i} roll records)")

    # Only committed records, the latest value per key, at the offsets they were produced at.
    assert all(v not in aborted for _, _, v in seen)
    assert [o for o, _, _ in seen] == [latest[k][0] for _, k, _ in seen]
    # A read_committed consumer reads the same data.
    assert data(read_all(broker.bootstrap, topic, "read_committed")) == expected
