"""Retention, DeleteRecords and the log start offset, with real clients.

- time retention (`retention.ms`) and size retention (`retention.bytes`) delete whole closed
  segments; segments are rolled by `segment.ms` (Kafka 4 refuses `segment.bytes` < 1 MiB);
- `kafka-delete-records` (DeleteRecordsCommand) moves the log start offset;
- a consumer positioned below the log start gets OFFSET_OUT_OF_RANGE and, with
  `auto.offset.reset=earliest`, resumes at the new start.

Brokers run with `log.retention.check.interval.ms=500` (and Kafka's internal
`log.initial.task.delay.ms=0`, which Brook ignores with a warning) so retention acts within
about a second; every check polls with a deadline. Measured figures are printed (`-s`).
"""

import json
import os
import tempfile
import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from harness import drivers, kafka_cli, paths

DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"
FAST_RETENTION = {"log.retention.check.interval.ms": "500", "log.initial.task.delay.ms": "0"}
DEADLINE_S = 60.0


def eventually(check, timeout=DEADLINE_S, interval=0.25):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() >= deadline:
                raise
        time.sleep(interval)


def create_topic(broker, topic, *configs):
    args = ["--topic", topic, "--partitions", 1]
    for c in configs:
        args += ["--config", c]
    assert drivers.run("confluent", "create-topic", broker.bootstrap, *args) == {"ok": True}


def produce(broker, topic, values, timestamp_ms=0):
    """Produces `values` to partition 0 as one flush (with `timestamp_ms`, 0 = now); returns
    their offsets."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    offsets = []

    def delivered(err, msg):
        assert err is None, err
        offsets.append(msg.offset())

    for v in values:
        producer.produce(topic, value=v.encode(), partition=0, on_delivery=delivered, timestamp=timestamp_ms)
    assert producer.flush(30) == 0
    return offsets


def offset(broker, topic, spec):
    return drivers.run("confluent", "offsets", broker.bootstrap, "--topic", topic, "--spec", spec)["0"]["offset"]


def consume_from_earliest(broker, topic, count, timeout_ms=5000):
    return drivers.run(
        "confluent", "consume", broker.bootstrap, "--topic", topic, "--count", count,
        "--from", "earliest", "--timeout-ms", timeout_ms,
    )


def produce_in_segments(broker, topic, rounds, value_len=16):
    """One record per round, 1.2 s apart, so `segment.ms=1000` rolls a segment per round."""
    values = []
    for i in range(rounds):
        value = f"r{i}-" + uuid.uuid4().hex * (value_len // 32 + 1)
        values.append(value[:value_len] if value_len > 8 else value)
        produce(broker, topic, [values[-1]])
        if i + 1 < rounds:
            time.sleep(1.2)
    return values


def test_time_retention_moves_the_earliest_offset_and_old_records_are_gone(broker_factory, topic):
    broker = broker_factory(FAST_RETENTION)
    create_topic(broker, topic, "retention.ms=5000", "segment.ms=1000")
    old = [f"old-{i}" for i in range(5)]
    assert produce(broker, topic, old) == [0, 1, 2, 3, 4]
    produced_at = time.monotonic()
    time.sleep(1.2)
    # Rolls: the old records are now closed. Stamped 10 minutes ahead (within both brokers'
    # `log.message.timestamp.after.max.ms`, 1 h), so no retention pass of this test can expire
    # it (Kafka expires the active segment too, by its newest timestamp) and the read below must
    # return it.
    future_ms = int(time.time() * 1000) + 600_000
    assert produce(broker, topic, ["new-0"], timestamp_ms=future_ms) == [5]
    assert offset(broker, topic, "earliest") == 0

    def earliest_moved():
        earliest = offset(broker, topic, "earliest")
        assert earliest >= 5, earliest
        return earliest

    earliest = eventually(earliest_moved)
    print(f"\ntime retention acted {time.monotonic() - produced_at:.1f} s after produce; earliest={earliest}")
    assert earliest == 5, earliest
    records = consume_from_earliest(broker, topic, 1, timeout_ms=10000)
    assert [(r["offset"], r["value"]) for r in records] == [(5, "new-0")], records


def test_size_retention_keeps_the_partition_near_its_bound(broker_factory, topic):
    broker = broker_factory(FAST_RETENTION)
    # ~10 KB per segment; keep at least 25 000 bytes: of 5 segments the 2 oldest go
    # (Kafka: delete while size - segment size >= retention.bytes).
    create_topic(broker, topic, "retention.bytes=25000", "segment.ms=1000")
    values = produce_in_segments(broker, topic, 5, value_len=10_000)
    started = time.monotonic()

    def earliest_is_2():
        earliest = offset(broker, topic, "earliest")
        assert earliest == 2, earliest
        return earliest

    eventually(earliest_is_2)
    print(f"\nsize retention acted within {time.monotonic() - started:.1f} s; 2 segments deleted")
    records = consume_from_earliest(broker, topic, 3)
    assert [r["offset"] for r in records] == [2, 3, 4]
    assert [r["value"] for r in records] == values[2:]
    # It stays there: the remaining 3 segments are the smallest set >= the bound.
    time.sleep(1.5)
    assert offset(broker, topic, "earliest") == 2


def delete_records(broker, topic, partition_offset):
    fd, path = tempfile.mkstemp(suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump({"partitions": [{"topic": topic, "partition": 0, "offset": partition_offset}], "version": 1}, f)
    try:
        return kafka_cli.run(DELETE_RECORDS, "--bootstrap-server", broker.bootstrap, "--offset-json-file", path)
    finally:
        os.unlink(path)


def test_delete_records_cli_moves_the_earliest_offset(broker, topic):
    create_topic(broker, topic)
    values = [f"v{i}" for i in range(10)]
    assert produce(broker, topic, values) == list(range(10))
    out = delete_records(broker, topic, 4).stdout
    assert f"partition: {topic}-0\tlow_watermark: 4" in out, out
    assert offset(broker, topic, "earliest") == 4
    assert offset(broker, topic, "latest") == 10
    records = consume_from_earliest(broker, topic, 6)
    assert [r["offset"] for r in records] == list(range(4, 10))
    assert [r["value"] for r in records] == values[4:]
    # Never backwards; above the high watermark is an error; -1 means the high watermark.
    assert "low_watermark: 4" in delete_records(broker, topic, 2).stdout
    bad = delete_records(broker, topic, 11).stdout
    assert "error" in bad.lower() and "OffsetOutOfRange" in bad, bad
    assert "low_watermark: 10" in delete_records(broker, topic, -1).stdout
    assert offset(broker, topic, "earliest") == 10


def test_a_consumer_below_the_log_start_gets_out_of_range_and_resets_to_earliest(broker, topic):
    create_topic(broker, topic)
    assert produce(broker, topic, [f"v{i}" for i in range(8)]) == list(range(8))
    assert "low_watermark: 5" in delete_records(broker, topic, 5).stdout

    def consumer(reset):
        c = Consumer({
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": reset,
        })
        c.assign([TopicPartition(topic, 0, 0)])  # explicitly below the log start
        return c

    strict = consumer("error")
    try:
        deadline = time.monotonic() + 20
        error = None
        while error is None and time.monotonic() < deadline:
            msg = strict.poll(0.5)
            if msg is not None:
                assert msg.error() is not None, f"read offset {msg.offset()} below the log start"
                error = msg.error()
        assert error is not None and error.code() == KafkaError._AUTO_OFFSET_RESET, error
    finally:
        strict.close()

    lenient = consumer("earliest")
    try:
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 3 and time.monotonic() < deadline:
            msg = lenient.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append((msg.offset(), msg.value().decode()))
        assert got == [(5, "v5"), (6, "v6"), (7, "v7")]
    finally:
        lenient.close()


def test_the_log_start_offset_survives_restarts(broker_factory, topic):
    broker = broker_factory({})
    create_topic(broker, topic)
    assert produce(broker, topic, [f"v{i}" for i in range(6)]) == list(range(6))
    assert "low_watermark: 3" in delete_records(broker, topic, 3).stdout
    broker.restart()
    assert eventually(lambda: offset(broker, topic, "earliest")) == 3
    assert [r["offset"] for r in consume_from_earliest(broker, topic, 3)] == [3, 4, 5]
    if paths.target() == "brook":
        # Brook persists the start before answering DeleteRecords, so even a crash keeps
        # it (Kafka checkpoints it periodically and at clean shutdown only).
        assert "low_watermark: 4" in delete_records(broker, topic, 4).stdout
        broker.kill()
        broker.start()
        assert eventually(lambda: offset(broker, topic, "earliest")) == 4


def test_a_retention_change_applies_to_an_existing_topic(broker_factory, topic):
    broker = broker_factory(FAST_RETENTION)
    create_topic(broker, topic, "segment.ms=1000")
    assert produce(broker, topic, ["a0", "a1"]) == [0, 1]
    time.sleep(1.2)
    assert produce(broker, topic, ["b0"]) == [2]
    time.sleep(1.0)
    assert offset(broker, topic, "earliest") == 0  # 7 days of retention by default
    assert drivers.run(
        "confluent", "alter-configs", broker.bootstrap, "--topic", topic, "--set", "retention.ms=1000"
    ) == {"ok": True}
    changed = time.monotonic()

    def earliest_moved():
        earliest = offset(broker, topic, "earliest")
        assert earliest >= 2, earliest
        return earliest

    eventually(earliest_moved)
    print(f"\nretention change acted {time.monotonic() - changed:.1f} s after alter-configs")


def test_delete_records_is_refused_on_a_compacted_topic(broker, topic):
    create_topic(broker, topic, "cleanup.policy=compact")
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3):
        producer.produce(topic, key=b"k", value=f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    out = delete_records(broker, topic, 2).stdout
    assert "PolicyViolation" in out, out
    assert offset(broker, topic, "earliest") == 0
