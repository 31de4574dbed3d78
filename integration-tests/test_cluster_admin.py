"""Admin requests sent to a node that is NOT the controller (issue #10): CreateTopics,
CreatePartitions, IncrementalAlterConfigs and DeleteTopics are forwarded to the quorum and
succeed, and their effect is visible in every node's own answers (Metadata, DescribeConfigs)
within 1 s of the response; DeleteRecords is served by the partition's leader (a non-controller
node here) and refused by the others, and the new log start offset is what every node's
clients then see.

Clients route admin requests to the controller themselves, so the requests here are sent with
harness/wire.py to a chosen node. One cluster for the module; also passes against Apache Kafka.
"""

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from harness import wire
from harness.cluster_scenarios import create_topic_via, non_controller, unique, wait_topic_everywhere

VISIBLE_S = 1.0
DEFAULT_MAX_MESSAGE_BYTES = "1048588"


@pytest.fixture(scope="module")
def via(cluster):
    """The non-controller node the module's admin requests go to."""
    return non_controller(cluster)


def visible_everywhere(cluster, what: str, check, deadline_s: float = VISIBLE_S):
    """Poll `check(node_id)` on every node, all within one deadline of `deadline_s` from now; fail
    naming the nodes that never passed and their last answers."""
    deadline = time.monotonic() + deadline_s
    pending, last = set(cluster.node_ids), {}
    while pending:
        for node_id in sorted(pending):
            last[node_id] = check(node_id)
            if last[node_id] is True:
                pending.discard(node_id)
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    assert not pending, f"{what}: not within {deadline_s} s on nodes {sorted(pending)}; " \
                        f"their last answers: { {n: last[n] for n in sorted(pending)} }"


def view(cluster, node_id: int, topic: str):
    return cluster.metadata(node_id, [topic])["topics"].get(topic)


def test_create_topics_through_a_non_controller_is_visible_on_every_node_within_1s(cluster, via):
    topic = unique("t-create")
    assert wire.create_topics(cluster.bootstrap_of(via), {topic: (4, 1, {"retention.ms": "3600000"})}) == {topic: 0}

    def created(node_id):
        t = view(cluster, node_id, topic)
        ok = t is not None and t["error"] == 0 and sorted(t["partitions"]) == [0, 1, 2, 3] and all(
            p["leader"] in cluster.node_ids and p["replicas"] == [p["leader"]] for p in t["partitions"].values())
        return ok or t

    visible_everywhere(cluster, f"{topic} with 4 led partitions", created)

    def configured(node_id):
        d = wire.describe_topic_configs(cluster.bootstrap_of(node_id), topic, ["retention.ms"])
        return d == {"error": 0, "configs": {"retention.ms": "3600000"}} or d

    visible_everywhere(cluster, f"{topic} retention.ms=3600000", configured)
    again = [n for n in cluster.node_ids if n != via][0]
    assert wire.create_topics(cluster.bootstrap_of(again), {topic: (4, 1, None)}) == {topic: 36}, \
        "a second creation through another node: TOPIC_ALREADY_EXISTS"


def test_create_partitions_through_a_non_controller_is_visible_on_every_node_within_1s(cluster, via):
    topic = unique("t-grow")
    before = create_topic_via(cluster, via, topic, 2)
    assert wire.create_partitions(cluster.bootstrap_of(via), {topic: 6}) == {topic: 0}

    def grown(node_id):
        t = view(cluster, node_id, topic)
        if t is None or sorted(t["partitions"]) != list(range(6)):
            return t
        parts = t["partitions"]
        old_kept = all((parts[p]["leader"], parts[p]["epoch"]) == (before[p]["leader"], before[p]["epoch"]) for p in (0, 1))
        return (old_kept and all(parts[p]["leader"] in cluster.node_ids for p in range(2, 6))) or t

    visible_everywhere(cluster, f"{topic} grown to 6 led partitions, 0 and 1 untouched", grown)
    common = wait_topic_everywhere(cluster, topic, 6, timeout=5)
    assert {v["leader"] for v in common.values()} == {1, 2, 3}, f"6 partitions spread over 3 brokers: {common}"


def test_incremental_alter_configs_through_a_non_controller_is_visible_on_every_node_within_1s(cluster, via):
    topic = unique("t-configs")
    create_topic_via(cluster, via, topic, 1, configs={"max.message.bytes": "200000"})
    ops = {"retention.ms": "123456789", "cleanup.policy": "compact", "max.message.bytes": None}
    assert wire.incremental_alter_topic_configs(cluster.bootstrap_of(via), topic, ops) == 0

    expected = {"retention.ms": "123456789", "cleanup.policy": "compact", "max.message.bytes": DEFAULT_MAX_MESSAGE_BYTES}

    def altered(node_id):
        d = wire.describe_topic_configs(cluster.bootstrap_of(node_id), topic, sorted(expected))
        return d == {"error": 0, "configs": expected} or d

    visible_everywhere(cluster, f"{topic} configs {expected}", altered)


def test_delete_topics_through_a_non_controller_is_visible_on_every_node_within_1s(cluster, via):
    topic = unique("t-delete")
    create_topic_via(cluster, via, topic, 3)
    assert wire.delete_topics(cluster.bootstrap_of(via), [topic]) == {topic: 0}

    def gone(node_id):
        named = view(cluster, node_id, topic)
        listed = topic in cluster.metadata(node_id)["topics"]
        return (named is not None and named["error"] == 3 and not listed) or (named, listed)

    visible_everywhere(cluster, f"{topic} unknown (UNKNOWN_TOPIC_OR_PARTITION) and unlisted", gone)


def test_delete_records_on_a_non_controller_leader_moves_the_log_start_seen_through_every_node(cluster, via):
    topic = unique("t-delrec")
    parts = create_topic_via(cluster, via, topic, 3)
    led_by = {v["leader"]: p for p, v in parts.items()}
    assert sorted(led_by) == [1, 2, 3], f"one partition per broker: {parts}"
    producer = Producer({"bootstrap.servers": cluster.bootstrap_of(via), "linger.ms": 5})
    for p in range(3):
        for i in range(50):
            producer.produce(topic, value=f"v-{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0

    mine = led_by[via]
    elsewhere = led_by[next(n for n in cluster.node_ids if n != via)]
    answer = wire.delete_records(cluster.bootstrap_of(via), topic, {mine: 20, elsewhere: 20})
    assert answer[mine] == {"error": 0, "low_watermark": 20}
    assert answer[elsewhere]["error"] == 6, f"a partition {via} does not lead: NOT_LEADER_OR_FOLLOWER, got {answer}"

    def log_start(node_id):
        got = wire.list_offsets(cluster.bootstrap_of(node_id), topic, [mine, elsewhere])
        want_mine = {"error": 0, "offset": 20} if node_id == via else {"error": 6}
        want_elsewhere = {"error": 0, "offset": 0} if node_id == parts[elsewhere]["leader"] else {"error": 6}
        ok = all({k: got[p][k] for k in want} == want for p, want in ((mine, want_mine), (elsewhere, want_elsewhere)))
        return ok or got

    visible_everywhere(cluster, f"log start 20 of partition {mine} at its leader {via}, 0 of partition {elsewhere}",
                       log_start)
    for node_id in cluster.node_ids:  # a client bootstrapped from any node reads from the new start
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_of(node_id), "group.id": unique("g"),
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, mine), timeout=10)
            assert (low, high) == (20, 50), f"through node {node_id}"
            consumer.assign([TopicPartition(topic, mine, 0)])  # 0 is below the start: reset to earliest
            msg = None
            deadline = time.monotonic() + 20
            while msg is None and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
            assert msg is not None and msg.error() is None, msg and msg.error()
            assert (msg.offset(), msg.value()) == (20, f"v-{mine}-20".encode()), f"through node {node_id}"
        finally:
            consumer.close()
