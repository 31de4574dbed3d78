"""The log cleaner engine seen by a client: kafka-python produces keyed records in
gzip-compressed batches (so the cleaner must decompress, filter and recompress), with
tombstones; after cleaning, reading from the earliest offset gives exactly the newest value of
every live key, tombstoned keys are gone after `delete.retention.ms`, offsets strictly increase
with gaps, and a restart serves the same compacted log.

The broker runs with `log.cleaner.backoff.ms=200`; the topic rolls its segment every 100 ms
(`segment.ms`), and the test keeps appending a `roll` record so the data segments close and
become cleanable. Every wait polls with a deadline.
"""

import time

from confluent_kafka import Consumer, KafkaException, TopicPartition
from kafka import KafkaProducer

from harness import drivers

DEADLINE_S = 90.0
ROLL = "roll"
CONFIGS = [
    "cleanup.policy=compact",
    "segment.ms=100",
    "min.cleanable.dirty.ratio=0.01",
    "delete.retention.ms=500",
    "min.compaction.lag.ms=0",
]


def produce(bootstrap, topic, records):
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip", linger_ms=50)
    try:
        futures = [
            producer.send(topic, key=k.encode(), value=None if v is None else v.encode(), partition=0)
            for k, v in records
        ]
        producer.flush(30)
        return [f.get(timeout=30).offset for f in futures]
    finally:
        producer.close()


def read_all(bootstrap, topic):
    """(offset, key, value) of every record of partition 0, earliest to the high watermark."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "compaction-engine-reader",
        "enable.auto.commit": False,
    })
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, low)])
        out = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (not out or out[-1][0] < high - 1):
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            decode = lambda b: None if b is None else b.decode()  # noqa: E731
            out.append((msg.offset(), decode(msg.key()), decode(msg.value())))
        return out
    finally:
        consumer.close()


def data(records):
    view = {}
    for _, key, value in records:
        if key != ROLL:
            view.setdefault(key, []).append(value)
    return view


def test_the_cleaner_keeps_the_newest_value_per_key_from_compressed_batches(broker_factory, topic):
    broker = broker_factory({"log.cleaner.backoff.ms": "200"})
    args = ["--topic", topic, "--partitions", 1]
    for c in CONFIGS:
        args += ["--config", c]
    assert drivers.run("confluent", "create-topic", broker.bootstrap, *args) == {"ok": True}

    keys = [f"key-{i}" for i in range(8)]
    records = [(k, f"{k}-v{round_}") for round_ in range(4) for k in keys]
    deleted = ["key-2", "key-5"]
    records += [(k, None) for k in deleted]
    offsets = produce(broker.bootstrap, topic, records)
    assert offsets == list(range(len(records)))
    expected = {k: [f"{k}-v3"] for k in keys if k not in deleted}

    started = time.monotonic()
    i = 0
    while True:
        produce(broker.bootstrap, topic, [(ROLL, f"r{i}")])
        i += 1
        seen = read_all(broker.bootstrap, topic)
        if data(seen) == expected:
            break
        assert time.monotonic() - started < DEADLINE_S, f"not compacted after {DEADLINE_S} s: {data(seen)}"
        time.sleep(0.3)

    seen_offsets = [o for o, _, _ in seen]
    assert seen_offsets == sorted(set(seen_offsets))
    assert seen_offsets[-1] - seen_offsets[0] + 1 > len(seen_offsets), "compaction leaves offset gaps"
    # Each kept value sits at the offset it was produced at.
    produced_at = {f"{k}-v3": o for (k, v), o in zip(records, offsets) if v is not None}
    for offset, key, value in seen:
        if key != ROLL:
            assert offset == produced_at[value]

    broker.restart()
    # A restarted broker may briefly answer NOT_LEADER while it loads its logs: poll.
    deadline = time.monotonic() + 60
    while True:
        try:
            after = data(read_all(broker.bootstrap, topic))
        except KafkaException as e:
            assert time.monotonic() < deadline, f"not readable after the restart: {e}"
            time.sleep(0.5)
            continue
        if after == expected or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert after == expected
