"""Log compaction with real clients (Java, kcat, confluent-kafka).

- A compacted topic (`cleanup.policy=compact`, tiny `segment.ms`, `min.cleanable.dirty.ratio`
  0.01, `delete.retention.ms` 1000) keeps only the newest value per key once cleaned, and
  tombstoned keys disappear after `delete.retention.ms`; offsets keep increasing with gaps and
  the earliest offset does not move. Each client produces the data (tombstones are null
  values: kcat sends an empty value as NULL with -Z) and reads it back.
- A record without a key on a compacted topic is refused with INVALID_RECORD (Kafka's
  LogValidator: "Compacted topic cannot accept message without key"), nothing is appended.
- DeleteRecords works on a `compact,delete` topic and gets POLICY_VIOLATION on a `compact` one.

The cleaner only cleans closed segments, so while waiting the tests keep appending a record
under a separate key (`roll`): each append after `segment.ms` rolls the active segment, and
Kafka's cleaner removes a tombstone only on a later pass, after its delete horizon. Every check
polls with a deadline; the broker runs with `log.cleaner.backoff.ms=200`.
"""

import json
import os
import re
import tempfile
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from harness import drivers, kafka_cli

DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"
FAST_CLEANER = {
    "log.cleaner.backoff.ms": "200",
    "log.retention.check.interval.ms": "500",
    "log.initial.task.delay.ms": "0",
}
COMPACT = [
    "cleanup.policy=compact",
    "segment.ms=100",
    "min.cleanable.dirty.ratio=0.01",
    "delete.retention.ms=1000",
    "min.compaction.lag.ms=0",
]
DEADLINE_S = 90.0
PRODUCERS = ["java", "kcat", "confluent"]
ROLL_KEY = "roll"
# How each client reports INVALID_RECORD (87); the Java client shows the broker's per-record
# message (ProduceResponse v8+ record_errors), librdkafka its own text for the code.
REFUSAL = {
    "java": re.compile(r"InvalidRecordException.*Compacted topic cannot accept message without key"),
    "kcat": re.compile(r"Broker failed to validate record"),
    "confluent": re.compile(r"INVALID_RECORD"),
}


def create_topic(broker, topic, *configs):
    args = ["--topic", topic, "--partitions", 1]
    for c in configs:
        args += ["--config", c]
    assert drivers.run("confluent", "create-topic", broker.bootstrap, *args) == {"ok": True}


def earliest(broker, topic):
    return drivers.run("confluent", "offsets", broker.bootstrap, "--topic", topic, "--spec", "earliest")["0"]["offset"]


def append_roll_record(broker, topic, i):
    """One keyed record under `roll`: makes the segment before it closed, hence cleanable."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    errors = []
    producer.produce(topic, key=ROLL_KEY, value=f"r{i}", partition=0, on_delivery=lambda err, _: errors.append(err))
    assert producer.flush(30) == 0
    assert errors == [None], errors


def read_all(broker, topic, timeout_s=15.0):
    """Every record of partition 0 from the earliest offset up to the high watermark:
    (offset, key, value) with None for null."""
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": "unused",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, -2)])  # OFFSET_BEGINNING
        out = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if out and out[-1][0] >= high - 1:
                break
            position = consumer.position([TopicPartition(topic, 0)])[0].offset
            if position >= high:
                break
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            decode = lambda b: None if b is None else b.decode()  # noqa: E731
            out.append((msg.offset(), decode(msg.key()), decode(msg.value())))
        return out
    finally:
        consumer.close()


def data_view(records):
    """The records apart from the `roll` ones, as {key: [values in offset order]}."""
    view = {}
    for _, key, value in records:
        if key != ROLL_KEY:
            view.setdefault(key, []).append(value)
    return view


@pytest.mark.parametrize("client", PRODUCERS)
def test_compaction_keeps_the_newest_value_per_key_and_tombstones_go(broker_factory, topic, client):
    broker = broker_factory(FAST_CLEANER)
    create_topic(broker, topic, *COMPACT)
    keys = [f"k{i}" for i in range(6)]
    records = [{"key": k, "value": f"{k}-v{r}", "partition": 0} for r in range(3) for k in keys]
    tombstoned = ["k1", "k4"]
    records += [{"key": k, "value": None, "partition": 0} for k in tombstoned]
    produced = drivers.run(client, "produce", broker.bootstrap, "--topic", topic, records=records)
    assert [p["offset"] for p in produced] == list(range(len(records)))
    expected = {k: [f"{k}-v2"] for k in keys if k not in tombstoned}

    started = time.monotonic()
    i = 0
    while True:
        append_roll_record(broker, topic, i)
        i += 1
        seen = read_all(broker, topic)
        if data_view(seen) == expected:
            break
        assert time.monotonic() - started < DEADLINE_S, f"not compacted after {DEADLINE_S} s: {data_view(seen)}"
        time.sleep(0.5)
    print(f"\n{client}: compacted, tombstones gone after {time.monotonic() - started:.1f} s ({i} roll records)")

    offsets = [o for o, _, _ in seen]
    assert offsets == sorted(set(offsets)), offsets  # strictly increasing
    assert offsets[-1] - offsets[0] + 1 > len(offsets), "compaction leaves gaps"
    data_offsets = {key: o for o, key, _ in seen if key != ROLL_KEY}
    # Each kept record keeps the offset it was produced at (the last round: 12..17).
    assert data_offsets == {k: 12 + keys.index(k) for k in expected}
    assert earliest(broker, topic) == 0

    # The producing client reads the compacted log too (gaps included). The cleaner may still
    # be compacting the `roll` records, so only the data records are compared; they come
    # first, and at least the newest `roll` record follows them.
    kept = [r for r in seen if r[1] != ROLL_KEY]
    consumed = drivers.run(
        client, "consume", broker.bootstrap, "--topic", topic, "--from", "earliest",
        "--count", len(kept) + 1, "--timeout-ms", 15000,
    )
    got = [(r["offset"], r["key"], r["value"]) for r in consumed]
    assert got[: len(kept)] == kept
    assert [o for o, _, _ in got] == sorted(set(o for o, _, _ in got))


@pytest.mark.parametrize("client", PRODUCERS)
def test_a_record_without_a_key_is_refused_on_a_compacted_topic(broker_factory, topic, client):
    broker = broker_factory(FAST_CLEANER)
    create_topic(broker, topic, *COMPACT)
    ok = drivers.run(client, "produce", broker.bootstrap, "--topic", topic,
                     records=[{"key": "a", "value": "1", "partition": 0}])
    assert [r["offset"] for r in ok] == [0]
    with pytest.raises(drivers.DriverError) as refused:
        drivers.run(client, "produce", broker.bootstrap, "--topic", topic,
                    records=[{"key": None, "value": "no key", "partition": 0}], timeout=60)
    said = refused.value.stdout + refused.value.stderr
    print(f"\n{client} reported: {said.strip()[-300:]}")
    assert REFUSAL[client].search(said), said
    # Nothing was appended: the next keyed record gets offset 1.
    again = drivers.run(client, "produce", broker.bootstrap, "--topic", topic,
                        records=[{"key": "b", "value": "2", "partition": 0}])
    assert [r["offset"] for r in again] == [1]
    assert [(k, v) for _, k, v in read_all(broker, topic)] == [("a", "1"), ("b", "2")]


def test_a_keyless_record_gets_invalid_record_and_the_broker_message(broker_factory, topic):
    """confluent-kafka exposes the error code: INVALID_RECORD (87), not retried."""
    broker = broker_factory(FAST_CLEANER)
    create_topic(broker, topic, *COMPACT)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    errors = []
    producer.produce(topic, value=b"v", partition=0, on_delivery=lambda err, _: errors.append(err))
    # Separate flushes: the whole batch holding a key-less record is refused.
    assert producer.flush(30) == 0
    producer.produce(topic, key=b"k", value=b"v", partition=0, on_delivery=lambda err, _: errors.append(err))
    assert producer.flush(30) == 0
    assert len(errors) == 2
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD, errors
    assert not errors[0].retriable()
    assert errors[1] is None, errors
    assert [(k, v) for _, k, v in read_all(broker, topic)] == [("k", "v")]


def delete_records(broker, topic, offset):
    fd, path = tempfile.mkstemp(suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump({"partitions": [{"topic": topic, "partition": 0, "offset": offset}], "version": 1}, f)
    try:
        return kafka_cli.run(DELETE_RECORDS, "--bootstrap-server", broker.bootstrap, "--offset-json-file", path)
    finally:
        os.unlink(path)


@pytest.mark.parametrize("policy", ["compact,delete", "compact"])
def test_delete_records_needs_the_delete_policy(broker, topic, policy):
    create_topic(broker, topic, f"cleanup.policy={policy}")
    records = [{"key": f"k{i}", "value": f"v{i}", "partition": 0} for i in range(6)]
    drivers.run("confluent", "produce", broker.bootstrap, "--topic", topic, records=records)
    out = delete_records(broker, topic, 3).stdout
    if policy == "compact,delete":
        assert f"partition: {topic}-0\tlow_watermark: 3" in out, out
        assert earliest(broker, topic) == 3
    else:
        assert "error" in out.lower() and "PolicyViolation" in out, out
        assert earliest(broker, topic) == 0
