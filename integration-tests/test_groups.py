"""The classic group coordinator with real clients: confluent-kafka consumers sharing a
topic's partitions and rebalancing when one leaves, committed offsets surviving a broker
restart, a commit with a stale generation refused (raw requests via kafka-python), the
admin API listing/describing/deleting groups, and kafka-consumer-groups deleting offsets.
Every test also passes against Apache Kafka (BROOK_TEST_TARGET=kafka)."""

import time
import uuid

from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.client_async import KafkaClient
from kafka.protocol.commit import OffsetCommitRequest
from kafka.protocol.group import JoinGroupRequest, SyncGroupRequest

from harness import kafka_cli
from harness.standalone_commit import alter_offsets

DEADLINE_S = 60
ILLEGAL_GENERATION = 22
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
COORDINATOR_RETRIABLE = {14, 15, 16}


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1)])
    futures[name].result(timeout=30)


def produce(bootstrap: str, topic: str, values, partition=None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        if partition is None:
            producer.produce(topic, value=v.encode())
        else:
            producer.produce(topic, value=v.encode(), partition=partition)
    assert producer.flush(30) == 0


def consumer(bootstrap: str, group: str, **extra) -> Consumer:
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "partition.assignment.strategy": "range",
    }
    config.update(extra)
    return Consumer(config)


def assigned(c: Consumer):
    return {tp.partition for tp in c.assignment()}


def poll_until(consumers, condition, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.2)
        if condition():
            return
    raise AssertionError(f"timed out waiting for {what}")


def test_two_consumers_split_the_partitions_and_one_takes_all_when_the_other_leaves(broker, topic):
    create_topic(broker.bootstrap, topic, 4)
    group = f"g-{uuid.uuid4().hex[:8]}"
    a, b = consumer(broker.bootstrap, group), consumer(broker.bootstrap, group)
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        poll_until(
            [a, b],
            lambda: assigned(a) and assigned(b) and len(assigned(a)) + len(assigned(b)) == 4,
            "both consumers to get partitions",
        )
        assert assigned(a).isdisjoint(assigned(b))
        assert assigned(a) | assigned(b) == {0, 1, 2, 3}
        b.close()
        poll_until([a], lambda: assigned(a) == {0, 1, 2, 3}, "the remaining consumer to get all 4")
    finally:
        a.close()


def consume_values(c: Consumer, count: int):
    values = []
    deadline = time.monotonic() + DEADLINE_S
    while len(values) < count and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is None or msg.error():
            continue
        values.append(msg.value().decode())
    return values


def test_committed_offsets_survive_a_restart_and_consumption_resumes_right_after_them(broker, topic):
    create_topic(broker.bootstrap, topic, 1)
    sent = [f"v{i:02d}" for i in range(10)]
    produce(broker.bootstrap, topic, sent, partition=0)
    group = f"g-{uuid.uuid4().hex[:8]}"

    first = consumer(broker.bootstrap, group)
    first.subscribe([topic])
    got = consume_values(first, 6)
    assert got[:6] == sent[:6]
    first.commit(offsets=[TopicPartition(topic, 0, 6)], asynchronous=False)
    first.close()

    broker.restart()

    second = consumer(broker.bootstrap, group)
    try:
        committed = retry_coordinator(lambda: second.committed([TopicPartition(topic, 0)], timeout=10))
        assert committed[0].offset == 6
        second.subscribe([topic])
        rest = consume_values(second, 4)
        assert rest == sent[6:], "resumes exactly after the commit: no loss, no re-delivery"
        extra = second.poll(2.0)
        assert extra is None or extra.error(), "nothing beyond the produced records"
    finally:
        second.close()


def retry_coordinator(call):
    """Kafka's coordinator answers NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS while it
    (re)loads `__consumer_offsets` after a start; clients retry those."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            return call()
        except KafkaException as e:
            if time.monotonic() > deadline or e.args[0].code() not in COORDINATOR_RETRIABLE:
                raise
            time.sleep(0.5)


def send(client: KafkaClient, request):
    deadline = time.monotonic() + DEADLINE_S
    node = None
    while time.monotonic() < deadline:
        node = client.least_loaded_node()
        if node is not None and client.ready(node):
            break
        client.poll(timeout_ms=100)
    future = client.send(node, request)
    client.poll(future=future, timeout_ms=DEADLINE_S * 1000)
    assert future.succeeded(), future.exception
    return future.value


def test_a_commit_with_a_stale_generation_is_rejected(broker, topic):
    create_topic(broker.bootstrap, topic, 1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    client = KafkaClient(bootstrap_servers=broker.bootstrap)
    try:
        # The group coordinator is the only broker; JoinGroup v2 predates KIP-394.
        join = JoinGroupRequest[2](group, 10000, 10000, "", "consumer", [("range", b"")])
        joined = send(client, join)
        deadline = time.monotonic() + DEADLINE_S
        while joined.error_code in COORDINATOR_RETRIABLE and time.monotonic() < deadline:
            time.sleep(0.5)
            joined = send(client, join)
        assert joined.error_code == 0
        member, generation = joined.member_id, joined.generation_id
        synced = send(client, SyncGroupRequest[1](group, generation, member, [(member, b"")]))
        assert synced.error_code == 0

        def commit(gen):
            response = send(
                client,
                OffsetCommitRequest[2](group, gen, member, -1, [(topic, [(0, 5, "")])]),
            )
            return response.topics[0][1][0][1]

        assert commit(generation - 1) == ILLEGAL_GENERATION
        assert commit(generation) == 0
    finally:
        client.close()


def test_admin_lists_describes_and_deletes_groups(broker, topic):

    create_topic(broker.bootstrap, topic, 2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    c = consumer(broker.bootstrap, group)
    try:
        c.subscribe([topic])
        poll_until([c], lambda: assigned(c) == {0, 1}, "the consumer to own both partitions")
        listed = admin.list_consumer_groups().result(timeout=30)
        states = {g.group_id: g.state for g in listed.valid}
        assert states.get(group) == ConsumerGroupState.STABLE
        described = admin.describe_consumer_groups([group])[group].result(timeout=30)
        assert described.state == ConsumerGroupState.STABLE
        assert len(described.members) == 1
        owned = {(tp.topic, tp.partition) for tp in described.members[0].assignment.topic_partitions}
        assert owned == {(topic, 0), (topic, 1)}
        try:
            admin.delete_consumer_groups([group])[group].result(timeout=30)
            raise AssertionError("deleting a group with members must fail")
        except KafkaException as e:
            assert e.args[0].name() == "NON_EMPTY_GROUP"
    finally:
        c.close()
    admin.delete_consumer_groups([group])[group].result(timeout=30)
    listed = admin.list_consumer_groups().result(timeout=30)
    assert group not in {g.group_id for g in listed.valid}


def test_standalone_commits_are_listed_and_the_group_tool_deletes_one_partition_offset(broker, topic):
    create_topic(broker.bootstrap, topic, 2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    # AlterConsumerGroupOffsets is an OffsetCommit from outside the group (generation -1).
    wanted = [TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 7)]
    retry_coordinator(lambda: alter_offsets(admin, group, wanted))

    def committed():
        ask = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0), TopicPartition(topic, 1)])]
        result = admin.list_consumer_group_offsets(ask)[group].result(timeout=30)
        return {tp.partition: tp.offset for tp in result.topic_partitions}

    assert committed() == {0: 3, 1: 7}
    out = kafka_cli.run(
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        "--bootstrap-server", broker.bootstrap,
        "--delete-offsets", "--group", group, "--topic", f"{topic}:0",
    ).stdout
    assert "Successful" in out, out
    remaining = committed()
    assert remaining[1] == 7
    assert remaining[0] < 0, "partition 0's offset is gone"
