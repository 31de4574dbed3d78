"""Consumer-group cells of issue 4's matrix not covered by test_group_clients.py, each member a
driver process (`group-consume`, harness/members.py):

* kafkajs' group consumer (its round-robin assigner): two members split a 4-partition topic
  disjointly and together read each record exactly once;
* committed offsets survive a broker restart and a new member resumes exactly after them (no
  loss, no re-delivery): franz-go, kafka-python, kafkajs (Java and confluent are in
  test_group_clients.py).

Every test also passes against Apache Kafka (BROOK_TEST_TARGET=kafka).
"""

import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness.members import GroupMember, assert_disjoint_and_complete, poll_until, stable_assignment

DEADLINE_S = 60
IDLE_MS = 8000  # generous: this 2-core machine stalls processes for seconds under load


def new_group() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> list:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    sent = []
    for p in range(partitions):
        for i in range(per_partition):
            value = f"v-{p}-{i}"
            producer.produce(topic, value=value.encode(), partition=p)
            sent.append((p, value))
    assert producer.flush(30) == 0
    return sent


def test_two_kafkajs_members_split_a_topic_and_read_every_record_once(broker, topic):
    partitions = 4
    create_topic(broker.bootstrap, topic, partitions)
    group = new_group()
    members = [
        GroupMember("kafkajs", broker.bootstrap, group, topic, "--idle-ms", IDLE_MS, "--timeout-ms", DEADLINE_S * 1000,
                    name=n)
        for n in ("a", "b")
    ]
    try:
        owned = poll_until(lambda: stable_assignment(broker.bootstrap, group, 2), DEADLINE_S, lambda: f"{members}")
        sent = produce(broker.bootstrap, topic, partitions, 100)
        finals = [m.wait(DEADLINE_S * 2) for m in members]
    finally:
        for m in members:
            m.kill()
    assert_disjoint_and_complete(owned, partitions)
    got = [(r["partition"], r["value"]) for m in members for r in m.records]
    assert sorted(got) == sorted(sent), "every record exactly once"
    read = sorted(sorted({r["partition"] for r in m.records}) for m in members)
    assert read == sorted(sorted(ps) for ps in owned.values()), "each member read exactly its own partitions"
    assert all(f is not None and f["member_id"] for f in finals)


@pytest.mark.parametrize("client", ["franz", "kafka_python", "kafkajs"])
def test_committed_offsets_survive_a_restart_and_a_new_member_resumes_exactly_after_them(broker, topic, client):
    create_topic(broker.bootstrap, topic, 1)
    sent = [v for _, v in produce(broker.bootstrap, topic, 1, 200)]
    group = new_group()
    first = GroupMember(client, broker.bootstrap, group, topic, "--count", 100, "--timeout-ms", DEADLINE_S * 1000)
    first.wait(DEADLINE_S * 2)
    assert [r["offset"] for r in first.records] == list(range(100))

    broker.restart()

    rest = GroupMember(client, broker.bootstrap, group, topic, "--idle-ms", IDLE_MS, "--timeout-ms", DEADLINE_S * 1000)
    final = rest.wait(DEADLINE_S * 2)
    assert [r["offset"] for r in rest.records] == list(range(100, 200)), "resumes at 100: no loss, no re-delivery"
    assert [r["value"] for r in first.records + rest.records] == sent
    assert final is not None and final["assigned"] == [0]
