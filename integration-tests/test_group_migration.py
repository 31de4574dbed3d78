"""Online migration between classic and consumer groups (KIP-848, issue 26 item 6):
`group.consumer.migration.policy` on a running group of Java 4.4 consumers.

Under `bidirectional` (Kafka's default) two classic members reading a 6-partition topic while a
producer writes keyed records are replaced one by one by `group.protocol=consumer` members: the
first consumer member converts the group online (ListGroups/`kafka-consumer-groups --list
--type` turns from Classic to Consumer, and ConsumerGroupDescribe shows the remaining classic
member as such), the classic member keeps JoinGroup/SyncGroup/Heartbeat and is assigned by the
coordinator. Then back: classic members replace the consumer ones and when the last consumer
member leaves the group is a classic group again. Every produced record is consumed (the
members commit after each poll; a record may be read twice around a rebalance, never skipped).
Under `disabled` the first consumer member is refused with Kafka's exact error.

A static consumer-protocol member stopped (a static member's temporary leave) and replaced within
the session timeout by a classic member with the same `group.instance.id`, while the other
member is classic, downgrades the group at once (Kafka 4.4's `classicGroupJoinToConsumerGroup`):
a classic group again, the newcomer holding its predecessor's partitions, every record read once.
With `group.consumer.max.size` 2 a classic group of three is not upgraded: the consumer member
is refused with Kafka's exact error.

One broker per policy, shared by the module, on both targets, with short consumer-group timers
(`group.consumer.heartbeat.interval.ms` 1000) and no initial rebalance delay.
"""

import threading
import time
import uuid
from collections import defaultdict

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness import kafka_cli, paths
from harness.broker import Broker
from harness.members import GroupMember, poll_until

OVERRIDES = {
    "group.consumer.session.timeout.ms": 8000,
    "group.consumer.min.session.timeout.ms": 6000,
    "group.consumer.heartbeat.interval.ms": 1000,
    "group.consumer.min.heartbeat.interval.ms": 1000,
    "group.initial.rebalance.delay.ms": 0,
    "group.coordinator.rebalance.protocols": "classic,consumer",
}
DEADLINE_S = 60
PARTITIONS = 6
GROUPS_TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def start_broker(tmp_path_factory, name, policy):
    b = Broker(paths.target(), tmp_path_factory.mktemp(name),
               {**OVERRIDES, "group.consumer.migration.policy": policy})
    b.start()
    return b


def stop_broker(b):
    b.stop()
    faults = b.teardown_faults()
    assert not faults, f"unclean broker teardown: {faults}"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # Case-insensitive, as Kafka parses it.
    b = start_broker(tmp_path_factory, "migration", "BIDIRECTIONAL")
    yield b
    stop_broker(b)


@pytest.fixture(scope="module")
def limits_broker(tmp_path_factory):
    b = Broker(paths.target(), tmp_path_factory.mktemp("migration-limits"),
               {**OVERRIDES, "group.consumer.migration.policy": "bidirectional", "group.consumer.max.size": 2})
    b.start()
    yield b
    stop_broker(b)


@pytest.fixture(scope="module")
def disabled_broker(tmp_path_factory):
    b = start_broker(tmp_path_factory, "migration-disabled", "disabled")
    yield b
    stop_broker(b)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


class KeyedProducer:
    """Writes keyed records round the partitions on a thread until stopped; `acked` holds
    {(partition, offset): (key, value)} from the delivery reports."""

    def __init__(self, bootstrap: str, topic: str, prefix: str):
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
        self.topic, self.prefix = topic, prefix
        self.acked, self.failed = {}, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _report(self, err, msg):
        if err is not None:
            self.failed.append(str(err))
        else:
            self.acked[(msg.partition(), msg.offset())] = (msg.key().decode(), msg.value().decode())

    def _run(self):
        seq = 0
        while not self._stop.is_set():
            key = f"k-{self.prefix}-{seq}"
            self.producer.produce(self.topic, key=key.encode(), value=f"v-{self.prefix}-{seq}".encode(),
                                  partition=seq % PARTITIONS, on_delivery=self._report)
            self.producer.poll(0)
            seq += 1
            time.sleep(0.01)
        self.producer.flush(30)

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join(60)
        assert not self.failed, self.failed[:5]
        return dict(self.acked)


def classic(bootstrap, group, topic, name, *extra) -> GroupMember:
    return GroupMember("java", bootstrap, group, topic, "--events", "--session-timeout-ms", 10000,
                       "--timeout-ms", 600000, *extra, name=name)


def consumer(bootstrap, group, topic, name, *extra) -> GroupMember:
    return GroupMember("java", bootstrap, group, topic, "--group-protocol", "consumer", "--events",
                       "--timeout-ms", 600000, *extra, name=name)


def produce_keyed(bootstrap: str, topic: str, prefix: str, count: int, partitions: int) -> dict:
    """Writes `count` keyed records round the partitions; {(partition, offset): (key, value)}."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    acked, failed = {}, []

    def report(err, msg):
        if err is not None:
            failed.append(str(err))
        else:
            acked[(msg.partition(), msg.offset())] = (msg.key().decode(), msg.value().decode())

    for seq in range(count):
        producer.produce(topic, key=f"k-{prefix}-{seq}".encode(), value=f"v-{prefix}-{seq}".encode(),
                         partition=seq % partitions, on_delivery=report)
    assert producer.flush(30) == 0
    assert not failed and len(acked) == count, failed[:5]
    return acked


def owned(m: GroupMember) -> set:
    mine = set()
    for e in list(m.events):
        if e["event"] == "assigned":
            mine |= set(e["partitions"])
        elif e["event"] in ("revoked", "lost"):
            mine -= set(e["partitions"])
    return mine


def wait_owned_by(members) -> None:
    """Until the live `members` together own every partition, each by one of them."""
    def split():
        views = [owned(m) for m in members]
        every = [p for v in views for p in v]
        return sorted(every) == list(range(PARTITIONS))

    poll_until(split, DEADLINE_S, lambda: f"{[(m.name, owned(m), m.events[-3:], m.stderr_tail(5)) for m in members]}")


def group_type(bootstrap: str, group: str):
    """The group's type as ListGroups v5 gives it to confluent-kafka: "Classic" or "Consumer"."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups().result(timeout=30).valid
    kind = next((g.type for g in listed if g.group_id == group), None)
    return None if kind is None else kind.name.capitalize()


def cli_group_type(bootstrap: str, group: str):
    """The TYPE column of `kafka-consumer-groups --list --type` for the group."""
    listed = kafka_cli.run(GROUPS_TOOL, "--bootstrap-server", bootstrap, "--list", "--type").stdout
    row = next((line.split() for line in listed.splitlines() if line.startswith(group + " ")), None)
    return row[1] if row else None


def wait_type(bootstrap: str, group: str, want: str) -> None:
    poll_until(lambda: group_type(bootstrap, group) == want, DEADLINE_S,
               lambda: f"group type {group_type(bootstrap, group)}, want {want}")
    assert cli_group_type(bootstrap, group) == want


def upgraded(bootstrap: str, group: str) -> list:
    """The UPGRADED column of `kafka-consumer-groups --describe --members --verbose`
    (ConsumerGroupDescribe v1's member types), one value per member; empty when the tool prints
    no such column (it does only for a group with classic members)."""
    out = kafka_cli.run(GROUPS_TOOL, "--bootstrap-server", bootstrap, "--describe", "--group", group,
                        "--members", "--verbose").stdout
    lines = out.splitlines()
    header = next((line.split() for line in lines if line.startswith("GROUP ")), [])
    if "UPGRADED" not in header:
        return []
    at = header.index("UPGRADED")
    return [line.split()[at] for line in lines if line.startswith(group + " ")]


def committed_of(bootstrap: str, group: str, topic: str, partitions: int) -> dict:
    """{partition: committed offset} of the group over `partitions` partitions (OffsetFetch)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    result = admin.list_consumer_group_offsets([request])[group].result(30)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def committed(bootstrap: str, group: str, topic: str) -> dict:
    return committed_of(bootstrap, group, topic, PARTITIONS)


def consumed(members) -> dict:
    """{(partition, offset): (key, value)} read by any of `members`."""
    out = {}
    for m in members:
        for r in m.snapshot():
            out[(r["partition"], r["offset"])] = (r["key"], r["value"])
    return out


def test_a_rolling_upgrade_and_downgrade_of_a_running_group_loses_no_record(broker, topic):
    create_topic(broker.bootstrap, topic, PARTITIONS)
    group = f"mig-{uuid.uuid4().hex[:10]}"
    producer = KeyedProducer(broker.bootstrap, topic, "r")
    everyone = []
    try:
        c1, c2 = classic(broker.bootstrap, group, topic, "c1"), classic(broker.bootstrap, group, topic, "c2")
        everyone += [c1, c2]
        wait_owned_by([c1, c2])
        assert group_type(broker.bootstrap, group) == "Classic"

        # Rolling upgrade: the first consumer member converts the group online.
        n1 = consumer(broker.bootstrap, group, topic, "n1")
        everyone.append(n1)
        wait_type(broker.bootstrap, group, "Consumer")
        poll_until(lambda: owned(n1), DEADLINE_S, lambda: f"n1 never got a partition: {n1.events[-3:]}")
        wait_owned_by([c1, c2, n1])
        # ConsumerGroupDescribe v1's member types: the tool's verbose listing adds an UPGRADED
        # column to a group with classic members, true for the consumer-protocol member only.
        poll_until(lambda: sorted(upgraded(broker.bootstrap, group)) == ["false", "false", "true"], DEADLINE_S,
                   lambda: f"members {upgraded(broker.bootstrap, group)}")
        c1.stop()
        n2 = consumer(broker.bootstrap, group, topic, "n2")
        everyone.append(n2)
        poll_until(lambda: owned(n2), DEADLINE_S, lambda: f"n2 never got a partition: {n2.events[-3:]}")
        c2.stop()
        wait_owned_by([n1, n2])
        assert group_type(broker.bootstrap, group) == "Consumer"

        # Rolling downgrade: when the last consumer member leaves, a classic group again.
        c3 = classic(broker.bootstrap, group, topic, "c3")
        everyone.append(c3)
        poll_until(lambda: owned(c3), DEADLINE_S, lambda: f"c3 never got a partition: {c3.events[-3:]}")
        n1.stop()
        c4 = classic(broker.bootstrap, group, topic, "c4")
        everyone.append(c4)
        poll_until(lambda: owned(c4), DEADLINE_S, lambda: f"c4 never got a partition: {c4.events[-3:]}")
        assert group_type(broker.bootstrap, group) == "Consumer"
        n2.stop()
        wait_type(broker.bootstrap, group, "Classic")
        wait_owned_by([c3, c4])
        produced = producer.stop()

        # Every acknowledged record is read, at its offset, by some member; none is skipped.
        def missing():
            got = consumed(everyone)
            return {k: v for k, v in produced.items() if got.get(k) != v}

        poll_until(lambda: not missing(), DEADLINE_S, lambda: f"{len(missing())} of {len(produced)} records unread")
        assert len(produced) > 500
        per_partition = defaultdict(set)
        for p, o in produced:
            per_partition[p].add(o)
        assert sorted(per_partition) == list(range(PARTITIONS))
        for p, offsets in per_partition.items():
            assert offsets == set(range(min(offsets), max(offsets) + 1)), f"partition {p} has gaps"
        # The classic members of the downgraded group commit their progress to the end.
        ends = {p: max(offsets) + 1 for p, offsets in per_partition.items()}
        poll_until(lambda: committed(broker.bootstrap, group, topic) == ends, DEADLINE_S,
                   lambda: f"committed {committed(broker.bootstrap, group, topic)}, log ends {ends}")
    finally:
        if not producer._stop.is_set():
            producer.stop()
        for m in everyone:
            if m.alive:
                m.stop()


def test_with_migration_disabled_a_consumer_member_is_refused_by_a_classic_group(disabled_broker, topic):
    create_topic(disabled_broker.bootstrap, topic, 2)
    group = f"mig-{uuid.uuid4().hex[:10]}"
    c = classic(disabled_broker.bootstrap, group, topic, "classic")
    try:
        poll_until(lambda: owned(c) == {0, 1}, DEADLINE_S, lambda: f"classic member {c.events}")
        newcomer = consumer(disabled_broker.bootstrap, group, topic, "newcomer")
        newcomer.proc.wait(DEADLINE_S)
        newcomer._join_readers()
        err = newcomer.stderr_tail(80)
        assert c.alive and owned(c) == {0, 1}, "the classic group goes on"
        assert group_type(disabled_broker.bootstrap, group) == "Classic"
    finally:
        if c.alive:
            c.stop()
    assert newcomer.proc.returncode != 0
    assert ('{"error":"GroupIdNotFoundException","message":"Cannot upgrade classic group '
            f'{group} to consumer group because online upgrade is disabled."}}') in err, err


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades_the_group(broker, topic):
    partitions = 4
    create_topic(broker.bootstrap, topic, partitions)
    group = f"mig-{uuid.uuid4().hex[:10]}"
    instance = f"seat-{group}"
    produced = produce_keyed(broker.bootstrap, topic, "a", 200, partitions)
    everyone = []
    try:
        # A consumer group: the static consumer-protocol member first, then a classic member.
        s1 = consumer(broker.bootstrap, group, topic, "s1", "--instance-id", instance)
        everyone.append(s1)
        poll_until(lambda: len(owned(s1)) == partitions, DEADLINE_S, lambda: f"s1 {s1.events[-3:]}")
        c = classic(broker.bootstrap, group, topic, "c")
        everyone.append(c)
        poll_until(lambda: owned(c) and len(owned(s1)) + len(owned(c)) == partitions
                   and not owned(s1) & owned(c), DEADLINE_S,
                   lambda: f"s1 {owned(s1)} c {owned(c)} {c.events[-3:]}")
        assert group_type(broker.bootstrap, group) == "Consumer"
        ends = {p: 1 + max(o for q, o in produced if q == p) for p in range(partitions)}
        # Nothing in flight at the handover: every record read and committed.
        poll_until(lambda: committed_of(broker.bootstrap, group, topic, partitions) == ends, DEADLINE_S,
                   lambda: f"committed {committed_of(broker.bootstrap, group, topic, partitions)}, ends {ends}")

        # The static member stops (a temporary leave: its seat is kept for the session timeout)
        # and a classic member takes the seat: the group is a classic group at once.
        seat = owned(s1)
        s1.stop()
        s2 = classic(broker.bootstrap, group, topic, "s2", "--instance-id", instance)
        everyone.append(s2)
        wait_type(broker.bootstrap, group, "Classic")
        # The assignment was current: the newcomer holds its predecessor's partitions.
        poll_until(lambda: owned(s2) == seat, DEADLINE_S, lambda: f"s2 {owned(s2)} {s2.events[-3:]}, seat {seat}")
        assert owned(c) == set(range(partitions)) - seat

        more = produce_keyed(broker.bootstrap, topic, "b", 200, partitions)
        produced.update(more)
        ends = {p: 1 + max(o for q, o in produced if q == p) for p in range(partitions)}
        poll_until(lambda: committed_of(broker.bootstrap, group, topic, partitions) == ends, DEADLINE_S,
                   lambda: f"committed {committed_of(broker.bootstrap, group, topic, partitions)}, ends {ends}")
        assert group_type(broker.bootstrap, group) == "Classic"
        # Every record read once, at its offset, with its key and value.
        reads = defaultdict(list)
        for m in everyone:
            for r in m.snapshot():
                reads[(r["partition"], r["offset"])].append((r["key"], r["value"]))
        assert {k: v[0] for k, v in reads.items()} == produced
        assert all(len(v) == 1 for v in reads.values()), {k: v for k, v in reads.items() if len(v) > 1}
        assert len(produced) == 400
    finally:
        for m in everyone:
            if m.alive:
                m.stop()


def test_a_classic_group_larger_than_the_consumer_max_size_is_not_upgraded(limits_broker, topic):
    bootstrap = limits_broker.bootstrap
    create_topic(bootstrap, topic, 3)
    group = f"mig-{uuid.uuid4().hex[:10]}"
    members = [classic(bootstrap, group, topic, f"c{i}") for i in range(3)]
    try:
        poll_until(lambda: all(len(owned(m)) == 1 for m in members), DEADLINE_S,
                   lambda: f"{[(m.name, owned(m)) for m in members]}")
        newcomer = consumer(bootstrap, group, topic, "newcomer")
        newcomer.proc.wait(DEADLINE_S)
        newcomer._join_readers()
        err = newcomer.stderr_tail(80)
        assert all(m.alive and len(owned(m)) == 1 for m in members), "the classic group goes on"
        assert group_type(bootstrap, group) == "Classic"
    finally:
        for m in members:
            if m.alive:
                m.stop()
    assert newcomer.proc.returncode != 0
    assert ('{"error":"GroupIdNotFoundException","message":"Cannot upgrade classic group '
            f'{group} to consumer group because the group size exceeds the consumer group maximum size."}}') in err, err
