"""The internal topic `__consumer_offsets`: created on the first group use with Kafka's
settings and shown as internal; committed offsets go through it in Kafka's record format
(Kafka's own OffsetsMessageFormatter reads them); they survive a clean restart and a
kill -9 right after the commit is acknowledged; clients cannot produce to it; and offsets
of an empty group expire after the retention. Every test but the retention one (which
needs Brook's millisecond retention key) also passes against Apache Kafka
(BROOK_TEST_TARGET=kafka)."""

import json
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness import kafka_cli, paths
from harness.standalone_commit import alter_offsets

OFFSETS = "__consumer_offsets"
DEADLINE_S = 60
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
COORDINATOR_RETRIABLE = {14, 15, 16}
TOPICS_TOOL = "org.apache.kafka.tools.TopicCommand"
GROUPS_TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def offsets_partition(group: str, partitions: int = 50) -> int:
    """Kafka's `Utils.abs(group.hashCode) % partitions` (Java's String.hashCode)."""
    h = 0
    units = group.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= (1 << 31) else h
    return 0 if h == -(1 << 31) else abs(h) % partitions


def new_group() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)


def retrying(call):
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            return call()
        except KafkaException as e:
            if time.monotonic() > deadline or e.args[0].code() not in COORDINATOR_RETRIABLE:
                raise
            time.sleep(0.5)


def commit(bootstrap: str, group: str, topic: str, offsets: dict) -> None:
    """A standalone commit (AlterConsumerGroupOffsets: OffsetCommit with generation -1)."""
    def attempt():
        # A fresh client and request per attempt: librdkafka objects are not reused after
        # an error (reusing them crashed the interpreter against a restarting Kafka).
        admin = AdminClient({"bootstrap.servers": bootstrap})
        return alter_offsets(admin, group, [TopicPartition(topic, p, o) for p, o in offsets.items()])

    retrying(attempt)


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict:
    """OffsetFetch through a consumer of the group that never joins: {(topic, p): offset}
    for the partitions with a committed offset. (The AdminClient's ListConsumerGroupOffsets
    crashed the interpreter right after an Apache Kafka restart; the consumer does not.)"""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
            return {(tp.topic, tp.partition): tp.offset for tp in tps if tp.offset >= 0}
        except KafkaException as e:
            if time.monotonic() > deadline or e.args[0].code() not in COORDINATOR_RETRIABLE:
                raise
            time.sleep(0.5)
        finally:
            c.close()


def committed_after_restart(bootstrap: str, group: str, topic: str, partitions: int, expected: dict) -> dict:
    """`committed`, polled while a restarted coordinator may still be loading the group
    (Apache Kafka answers with no offsets until it has read __consumer_offsets)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        got = committed(bootstrap, group, topic, partitions)
        if got == expected or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def test_a_standalone_commit_creates_the_internal_topic_with_kafkas_settings(broker, topic):
    create_topic(broker.bootstrap, topic, 1)
    commit(broker.bootstrap, new_group(), topic, {0: 3})

    listed = kafka_cli.run(TOPICS_TOOL, "--bootstrap-server", broker.bootstrap, "--list").stdout.split()
    assert OFFSETS in listed and topic in listed
    # Only an internal topic disappears with --exclude-internal.
    public = kafka_cli.run(
        TOPICS_TOOL, "--bootstrap-server", broker.bootstrap, "--list", "--exclude-internal"
    ).stdout.split()
    assert OFFSETS not in public and topic in public

    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(OFFSETS, timeout=30)
    assert len(md.topics[OFFSETS].partitions) == 50
    described = kafka_cli.run(
        TOPICS_TOOL, "--bootstrap-server", broker.bootstrap, "--describe", "--topic", OFFSETS
    ).stdout
    assert "PartitionCount: 50" in described, described
    assert "cleanup.policy=compact" in described, described
    assert "segment.bytes=104857600" in described, described
    assert "compression.type=producer" in described, described


def test_kafkas_offsets_formatter_reads_the_committed_offset_from_the_topic(broker, topic):
    create_topic(broker.bootstrap, topic, 2)
    group = new_group()
    commit(broker.bootstrap, group, topic, {1: 42})

    deadline = time.monotonic() + DEADLINE_S
    found = []
    while not found and time.monotonic() < deadline:
        out = kafka_cli.run(
            "org.apache.kafka.tools.consumer.ConsoleConsumer",
            "--bootstrap-server", broker.bootstrap,
            # The group's own partition: this also checks Brook hashes groups as Kafka does.
            "--topic", OFFSETS, "--partition", offsets_partition(group), "--offset", "earliest",
            "--formatter", "org.apache.kafka.tools.consumer.OffsetsMessageFormatter",
            "--timeout-ms", "5000",
            check=False,
        ).stdout
        for line in out.splitlines():
            if not line.startswith("{"):
                continue
            record = json.loads(line)
            key, value = record["key"]["data"], (record.get("value") or {}).get("data")
            if key.get("group") == group and key.get("topic") == topic and key.get("partition") == 1:
                found.append(value)
    assert found, "the commit never showed up in __consumer_offsets"
    assert found[-1]["offset"] == 42
    assert found[-1]["commitTimestamp"] > 0


def test_clients_cannot_produce_to_the_internal_topic(broker, topic):
    create_topic(broker.bootstrap, topic, 1)
    commit(broker.bootstrap, new_group(), topic, {0: 1})  # the topic now exists
    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 10000, "retries": 0})
    producer.produce(OFFSETS, value=b"x", partition=0, on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(30)
    assert len(errors) == 1 and errors[0] is not None
    # INVALID_TOPIC_EXCEPTION (17), as librdkafka names it.
    assert (errors[0].code(), errors[0].name(), errors[0].str()) == (17, "TOPIC_EXCEPTION", "Broker: Invalid topic"), errors[0]


def test_a_consumers_commit_survives_a_clean_restart(broker, topic):
    create_topic(broker.bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for p in range(2):
        for i in range(10):
            producer.produce(topic, value=f"{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0
    group = new_group()
    c = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "session.timeout.ms": 10000,
    })
    got = 0
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + DEADLINE_S
        while got < 20 and time.monotonic() < deadline:
            msg = c.poll(0.3)
            if msg is not None and not msg.error():
                got += 1
        assert got == 20
        c.commit(asynchronous=False)
    finally:
        c.close()

    broker.restart()
    expected = {(topic, 0): 10, (topic, 1): 10}
    assert committed_after_restart(broker.bootstrap, group, topic, 2, expected) == expected


def test_a_commit_survives_kill_9_right_after_it_is_acknowledged(broker, topic):
    create_topic(broker.bootstrap, topic, 3)
    group = new_group()
    commit(broker.bootstrap, group, topic, {0: 5, 2: 7})
    broker.kill()
    broker.start()
    expected = {(topic, 0): 5, (topic, 2): 7}
    assert committed_after_restart(broker.bootstrap, group, topic, 3, expected) == expected
    # A later commit lands on top of the replayed state and survives another crash.
    commit(broker.bootstrap, group, topic, {0: 6})
    broker.kill()
    broker.start()
    expected = {(topic, 0): 6, (topic, 2): 7}
    assert committed_after_restart(broker.bootstrap, group, topic, 3, expected) == expected


@pytest.mark.skipif(paths.target() == "kafka", reason="Kafka has only offsets.retention.minutes")
def test_offsets_of_an_empty_group_expire_after_the_retention(broker_factory, topic):
    b = broker_factory({"brook.offsets.retention.ms": "3000", "offsets.retention.check.interval.ms": "500"})
    create_topic(b.bootstrap, topic, 1)
    group = new_group()
    commit(b.bootstrap, group, topic, {0: 4})
    assert committed(b.bootstrap, group, topic, 1) == {(topic, 0): 4}

    deadline = time.monotonic() + DEADLINE_S
    while committed(b.bootstrap, group, topic, 1) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert committed(b.bootstrap, group, topic, 1) == {}
    out = kafka_cli.run(GROUPS_TOOL, "--bootstrap-server", b.bootstrap, "--describe", "--group", group, check=False)
    # The group is gone with its offsets: DescribeGroups answers GROUP_ID_NOT_FOUND, which Kafka
    # 4.4's tool reports in these words.
    assert out.stdout.strip() == (f"Error: Executing consumer group command failed due to "
                                  f"org.apache.kafka.common.errors.GroupIdNotFoundException: Group {group} not found."), \
        out.stdout + out.stderr
    assert topic not in out.stdout
    # Expiry is durable: the tombstones are in the log.
    b.restart()
    assert committed(b.bootstrap, group, topic, 1) == {}


def offset_commit_key(key: bytes):
    """Kafka's OffsetCommit record key (version 0 or 1): (group, topic, partition)."""
    version = int.from_bytes(key[0:2], "big")
    assert version in (0, 1), f"not an offset-commit key: version {version}"
    pos = 2
    fields = []
    for _ in range(2):
        n = int.from_bytes(key[pos:pos + 2], "big")
        fields.append(key[pos + 2:pos + 2 + n].decode())
        pos += 2 + n
    return fields[0], fields[1], int.from_bytes(key[pos:pos + 4], "big", signed=True)


def test_a_commit_wakes_a_long_polling_reader_of_the_internal_topic(broker, topic):
    """The coordinator's appends complete waiting fetches like a producer's do: a reader
    parked at the end of the group's partition with a 10 s fetch wait gets each commit's
    record at once, not when its wait runs out."""
    create_topic(broker.bootstrap, topic, 1)
    group = new_group()
    commit(broker.bootstrap, group, topic, {0: 1})  # creates the topic and the partition's tail
    partition = offsets_partition(group)
    reader = Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": new_group(),  # never joins: assign() only
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 10000,
        "fetch.min.bytes": 1,
    })
    try:
        high = None
        deadline = time.monotonic() + DEADLINE_S
        while high is None:
            try:
                _low, high = reader.get_watermark_offsets(TopicPartition(OFFSETS, partition), timeout=30)
            except KafkaException:
                # Apache Kafka may still be electing the new partition's leader.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        reader.assign([TopicPartition(OFFSETS, partition, high)])
        assert reader.poll(1.5) is None  # now parked in a long poll at the end
        waits = []
        for offset in (10, 20, 30):
            started = time.monotonic()
            commit(broker.bootstrap, group, topic, {0: offset})
            msg = None
            while msg is None and time.monotonic() - started < 15:
                msg = reader.poll(0.1)
                assert msg is None or msg.error() is None, msg and msg.error()
            assert msg is not None, f"no record for the commit of offset {offset}"
            waits.append(time.monotonic() - started)
            assert offset_commit_key(msg.key()) == (group, topic, 0)
            # OffsetCommit value: version int16, then the committed offset (int64).
            assert int.from_bytes(msg.value()[2:10], "big", signed=True) == offset
        # Unwoken, each would wait out a random part of the 10 s fetch wait.
        assert max(waits) < 2.0, waits
    finally:
        reader.close()
