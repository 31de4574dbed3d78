"""Apache Kafka's kafka-consumer-groups tool (org.apache.kafka.tools.consumer.group.
ConsumerGroupCommand, from the 4.4 jars) against the broker: --list shows a group, --describe
shows CURRENT-OFFSET / LOG-END-OFFSET / LAG per partition with the right numbers,
--reset-offsets --to-earliest and --to-datetime move an inactive group's offsets (a consumer
then reads from there), and --delete removes an empty group. Every test also passes against
Apache Kafka (BROOK_TEST_TARGET=kafka)."""

import time
import uuid
from datetime import datetime, timezone

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness import kafka_cli
from harness.standalone_commit import alter_offsets

TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
DEADLINE_S = 60
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
COORDINATOR_RETRIABLE = {14, 15, 16}


def new_group() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


def groups_tool(broker, *args) -> str:
    return kafka_cli.run(TOOL, "--bootstrap-server", broker.bootstrap, *args).stdout


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)


def produce(bootstrap: str, topic: str, partition: int, count: int, timestamps=None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        extra = {} if timestamps is None else {"timestamp": timestamps[i]}
        producer.produce(topic, value=f"v-{partition}-{i}".encode(), partition=partition, **extra)
    assert producer.flush(30) == 0


def commit(bootstrap: str, group: str, topic: str, offsets: dict) -> None:
    """Commit from outside the group (AlterConsumerGroupOffsets), retrying while the
    coordinator loads: the group then exists, Empty, with these committed offsets."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = [TopicPartition(topic, p, o) for p, o in offsets.items()]
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            alter_offsets(admin, group, partitions)
            return
        except KafkaException as e:
            if time.monotonic() > deadline or e.args[0].code() not in COORDINATOR_RETRIABLE:
                raise
            time.sleep(0.5)


def describe_rows(broker, group: str, topic: str) -> dict:
    """--describe's table -> {partition: (CURRENT-OFFSET, LOG-END-OFFSET, LAG)} for `topic`."""
    out = groups_tool(broker, "--describe", "--group", group)
    lines = [line.split() for line in out.splitlines() if line.split()]
    header = next(cols for cols in lines if cols[:2] == ["GROUP", "TOPIC"])
    rows = {}
    for cols in lines:
        if len(cols) >= len(header) - 3 and cols[0] == group and cols[1] == topic:
            row = dict(zip(header, cols))
            rows[int(row["PARTITION"])] = (row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"])
    return rows


def read_group(bootstrap: str, group: str, topic: str, count: int) -> list:
    """Join `group` and read `count` records (no commit); returns [(partition, offset)]."""
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "latest",
        "enable.auto.commit": False, "session.timeout.ms": 10000,
    })
    got = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < count and time.monotonic() < deadline:
            msg = c.poll(0.3)
            if msg is not None and not msg.error():
                got.append((msg.partition(), msg.offset()))
    finally:
        c.close()
    return got


def test_list_shows_the_group_and_describe_shows_offsets_log_end_and_lag(broker, topic):
    create_topic(broker.bootstrap, topic, 3)
    for p in range(3):
        produce(broker.bootstrap, topic, p, 50)
    group = new_group()
    commit(broker.bootstrap, group, topic, {0: 30, 1: 50, 2: 0})

    assert group in groups_tool(broker, "--list").split()
    rows = describe_rows(broker, group, topic)
    assert rows == {0: ("30", "50", "20"), 1: ("50", "50", "0"), 2: ("0", "50", "50")}


def test_reset_to_earliest_on_an_inactive_group_makes_a_consumer_reread_from_zero(broker, topic):
    create_topic(broker.bootstrap, topic, 2)
    for p in range(2):
        produce(broker.bootstrap, topic, p, 20)
    group = new_group()
    commit(broker.bootstrap, group, topic, {0: 20, 1: 15})

    out = groups_tool(broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert "NEW-OFFSET" in out, out
    assert describe_rows(broker, group, topic) == {0: ("0", "20", "20"), 1: ("0", "20", "20")}
    # auto.offset.reset=latest in read_group: only the committed 0 can make it start at 0.
    got = read_group(broker.bootstrap, group, topic, 40)
    assert sorted(got) == [(p, o) for p in range(2) for o in range(20)]


def test_reset_to_datetime_picks_the_first_offset_at_or_after_that_time(broker, topic):
    create_topic(broker.bootstrap, topic, 1)
    base = (int(time.time()) - 3600) * 1000  # a whole second, an hour ago
    produce(broker.bootstrap, topic, 0, 10, timestamps=[base + i * 1000 for i in range(10)])
    group = new_group()
    commit(broker.bootstrap, group, topic, {0: 10})

    when = datetime.fromtimestamp((base + 4500) / 1000, tz=timezone.utc)
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
    groups_tool(broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-datetime", stamp, "--execute")
    # Record 5 (base + 5000) is the first whose timestamp is >= base + 4500.
    assert describe_rows(broker, group, topic) == {0: ("5", "10", "5")}
    assert read_group(broker.bootstrap, group, topic, 5) == [(0, o) for o in range(5, 10)]


def test_delete_removes_an_empty_group_from_the_list(broker, topic):
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, 0, 5)
    group = new_group()
    commit(broker.bootstrap, group, topic, {0: 5})
    assert group in groups_tool(broker, "--list").split()

    out = groups_tool(broker, "--delete", "--group", group)
    assert "successful" in out, out
    assert group not in groups_tool(broker, "--list").split()
