"""KIP-848 regex subscriptions (issue 26 item 3): a member subscribes with a pattern
(`SubscribedTopicRegex`), the coordinator resolves it against the topics of the metadata and
follows topics created and deleted later, as Kafka 4.4's GroupMetadataManager does.

One broker for the module, on both targets, with the consumer protocol enabled and short
consumer-group timers (as test_group_consumer_protocol.py). Kafka re-resolves a group's patterns
at most every 10 s after the metadata changed, so waits allow for that.

Members: the Java 4.4 consumer (the driver's `group-consume --subscription-pattern`, i.e.
`subscribe(SubscriptionPattern)`: the broker resolves the RE2/J pattern; and `--pattern`,
`subscribe(java.util.regex.Pattern)`, which the Java client matches itself and sends as topic
names) and confluent-kafka (librdkafka sends `subscribe(["^prefix.*"])` to the broker as a
pattern). Each test uses its own topic prefix, so patterns never see another test's topics.
"""

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness import kafka_cli, paths, wire
from harness.broker import Broker
from harness.members import GroupMember, poll_until

OVERRIDES = {
    "group.consumer.session.timeout.ms": 8000,
    "group.consumer.min.session.timeout.ms": 6000,
    "group.consumer.heartbeat.interval.ms": 1000,
    "group.consumer.min.heartbeat.interval.ms": 1000,
    # Both targets' default (Kafka's also lists streams), set so the module states what it needs.
    "group.coordinator.rebalance.protocols": "classic,consumer",
}
DEADLINE_S = 90
GROUPS_TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


@pytest.fixture(scope="module")
def rx_broker(tmp_path_factory):
    b = Broker(paths.target(), tmp_path_factory.mktemp("rx-broker"), OVERRIDES)
    b.start()
    yield b
    b.stop()
    faults = b.teardown_faults()
    assert not faults, f"unclean broker teardown: {faults}"


def new_name(kind: str) -> str:
    return f"rx-{kind}-{uuid.uuid4().hex[:10]}"


def create_topics(bootstrap: str, *names: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for name, future in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).items():
        future.result(30)


def produce(bootstrap: str, topic: str, per_partition: int, partitions: int = 2) -> set:
    """Keyed records to each partition of a new topic: {(topic, partition, offset, key, value)}."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    sent = set()
    for p in range(partitions):
        for i in range(per_partition):
            key, value = f"k-{topic}-{p}-{i}", f"v-{topic}-{p}-{i}"
            producer.produce(topic, key=key.encode(), value=value.encode(), partition=p)
            sent.add((topic, p, i, key, value))
    assert producer.flush(30) == 0
    return sent


def java_member(bootstrap: str, group: str, how: str, pattern: str) -> GroupMember:
    """`how`: "subscription-pattern" (resolved by the broker) or "pattern" (by the client)."""
    return GroupMember("java", bootstrap, group, None, "--group-protocol", "consumer", "--events",
                       "--timeout-ms", DEADLINE_S * 1000 * 2, f"--{how}", pattern, name=how)


def owned(m: GroupMember) -> set:
    """The "topic:partition"s `m` owns now, replayed from its listener events."""
    mine = set()
    for e in list(m.events):
        if e["event"] == "assigned":
            mine |= set(e["topic_partitions"])
        elif e["event"] in ("revoked", "lost"):
            mine -= set(e["topic_partitions"])
    return mine


def wait_owned(m: GroupMember, want: set) -> None:
    poll_until(lambda: owned(m) == want, DEADLINE_S,
               lambda: f"{m.name} owns {sorted(owned(m))}, not {sorted(want)}; events {m.events[-4:]}\n"
                       f"{m.stderr_tail(10)}")


def records(m: GroupMember) -> set:
    return {(r["topic"], r["partition"], r["offset"], r["key"], r["value"]) for r in m.snapshot()}


def described_member(bootstrap: str, group: str) -> dict:
    """The group's only member as ConsumerGroupDescribe shows it."""
    d = wire.consumer_group_describe(bootstrap, group)
    assert d["error"] == 0, d
    (member,) = d["members"].values()
    return member


def stop(m: GroupMember) -> None:
    if m.alive:
        m.stop()


@pytest.mark.parametrize("how", ["subscription-pattern", "pattern"])
def test_a_java_pattern_member_picks_up_a_topic_created_later_and_reads_it(rx_broker, how):
    prefix = new_name("later")
    first, later = f"{prefix}-a", f"{prefix}-b"
    create_topics(rx_broker.bootstrap, first)
    group = new_name("g")
    m = java_member(rx_broker.bootstrap, group, how, f"{prefix}-.*")
    try:
        wait_owned(m, {f"{first}:0", f"{first}:1"})
        create_topics(rx_broker.bootstrap, later)
        wait_owned(m, {f"{first}:0", f"{first}:1", f"{later}:0", f"{later}:1"})
        sent = produce(rx_broker.bootstrap, first, 5) | produce(rx_broker.bootstrap, later, 5)
        poll_until(lambda: sent <= records(m), DEADLINE_S, lambda: f"missing {sorted(sent - records(m))[:5]}")
        member = described_member(rx_broker.bootstrap, group)
        verbose = kafka_cli.run(GROUPS_TOOL, "--bootstrap-server", rx_broker.bootstrap, "--describe", "--group",
                                group, "--members", "--verbose").stdout
    finally:
        stop(m)
    assert records(m) == sent, "every record once, at its offset"
    both = {first: [0, 1], later: [0, 1]}
    assert (member["assignment"], member["target"]) == (both, both)
    if how == "subscription-pattern":
        # The broker resolves it: the member subscribes by the pattern alone.
        assert (member["subscribed_topic_regex"], member["subscribed_topic_names"]) == (f"{prefix}-.*", [])
    else:
        # java.util.regex.Pattern is matched by the client, which sends the names it found;
        # Kafka describes "no pattern" as "".
        assert (member["subscribed_topic_regex"], sorted(member["subscribed_topic_names"])) == ("", [first, later])
    row = next(line.split() for line in verbose.splitlines() if line.startswith(group + " "))
    assert f"{first}:0,1;{later}:0,1" in row, verbose


def test_confluent_kafka_subscribes_to_a_prefix_and_picks_up_topics_created_later(rx_broker):
    prefix = new_name("rdk")
    first, later = f"{prefix}-a", f"{prefix}-b"
    create_topics(rx_broker.bootstrap, first)
    group = new_name("g")
    consumer = Consumer({"bootstrap.servers": rx_broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got = set()

    def poll_for(condition):
        def step():
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None or msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                if msg.error() is None:
                    got.add((msg.topic(), msg.partition(), msg.offset(), msg.key().decode(), msg.value().decode()))
            return condition()
        return step

    try:
        consumer.subscribe([f"^{prefix}-.*"])
        assigned = lambda: {(tp.topic, tp.partition) for tp in consumer.assignment()}  # noqa: E731
        poll_until(poll_for(lambda: assigned() == {(first, 0), (first, 1)}), DEADLINE_S, lambda: f"{assigned()}")
        create_topics(rx_broker.bootstrap, later)
        sent = produce(rx_broker.bootstrap, first, 5) | produce(rx_broker.bootstrap, later, 5)
        poll_until(poll_for(lambda: sent <= got), DEADLINE_S,
                   lambda: f"assigned {assigned()}, missing {sorted(sent - got)[:5]}")
        member = described_member(rx_broker.bootstrap, group)
    finally:
        consumer.close()
    assert got == sent
    # librdkafka sends its regex subscriptions joined as one alternation, each in parentheses.
    assert member["subscribed_topic_regex"] == f"(^{prefix}-.*)", member


def test_a_pattern_matches_whole_topic_names_only(rx_broker):
    name = new_name("abc")
    create_topics(rx_broker.bootstrap, f"{name}-1", name)
    group = new_name("g")
    # librdkafka's own advice for the consumer protocol: `^topic` no longer matches `topic-1`.
    m = java_member(rx_broker.bootstrap, group, "subscription-pattern", f"^{name}")
    try:
        wait_owned(m, {f"{name}:0", f"{name}:1"})
        # Both topics existed when the pattern was resolved: the target has the one it matched.
        member = described_member(rx_broker.bootstrap, group)
    finally:
        stop(m)
    assert member["target"] == {name: [0, 1]}, member


def test_a_deleted_matching_topic_leaves_the_assignment(rx_broker):
    prefix = new_name("del")
    keep, gone = f"{prefix}-keep", f"{prefix}-gone"
    create_topics(rx_broker.bootstrap, keep, gone)
    group = new_name("g")
    m = java_member(rx_broker.bootstrap, group, "subscription-pattern", f"{prefix}-.*")
    try:
        wait_owned(m, {f"{keep}:0", f"{keep}:1", f"{gone}:0", f"{gone}:1"})
        admin = AdminClient({"bootstrap.servers": rx_broker.bootstrap})
        admin.delete_topics([gone])[gone].result(30)
        wait_owned(m, {f"{keep}:0", f"{keep}:1"})
        poll_until(lambda: described_member(rx_broker.bootstrap, group)["assignment"] == {keep: [0, 1]}, DEADLINE_S,
                   lambda: f"{described_member(rx_broker.bootstrap, group)}")
        member = described_member(rx_broker.bootstrap, group)
    finally:
        stop(m)
    assert member["target"] == {keep: [0, 1]}, member


def test_a_bad_pattern_is_refused_with_kafkas_error(rx_broker):
    prefix = new_name("bad")
    m = java_member(rx_broker.bootstrap, new_name("g"), "subscription-pattern", f"({prefix}")
    m.proc.wait(DEADLINE_S)
    m._join_readers()
    err = m.stderr_tail(80)
    assert m.proc.returncode == 1, err
    # poll() throws InvalidRegularExpression: the client's words, then the broker's message.
    assert ('{"error":"InvalidRegularExpression","message":"Invalid RE2J SubscriptionPattern provided in the '
            'call to subscribe. SubscribedTopicRegex `(' + prefix
            + '` is not a valid regular expression: missing closing )."}') in err, err
    assert ("ConsumerGroupHeartbeatRequest failed due to INVALID_REGULAR_EXPRESSION: SubscribedTopicRegex `("
            + prefix + "` is not a valid regular expression: missing closing ).") in err, err


def test_an_internal_topic_is_matched_like_any_other_as_kafka_4_4_does(rx_broker):
    # Kafka 4.4's TopicRegexResolver matches every topic of the metadata image (only DESCRIBE
    # ACLs filter), __consumer_offsets included; it exists once a group has used it.
    group = new_name("g")
    m = java_member(rx_broker.bootstrap, group, "subscription-pattern", "__consumer_offs.*")
    try:
        def target():
            d = wire.consumer_group_describe(rx_broker.bootstrap, group)
            return d["error"] == 0 and d["members"] and next(iter(d["members"].values()))["target"]

        target = poll_until(target, DEADLINE_S, lambda: f"{owned(m)}\n{m.stderr_tail(10)}")
    finally:
        stop(m)
    assert list(target) == ["__consumer_offsets"] and target["__consumer_offsets"], target
