"""KIP-848 consumer groups (`group.protocol=consumer`, issue 26): the broker assigns partitions
(ConsumerGroupHeartbeat) and hands them over through member epochs.

One broker for the module, on both targets, with short consumer-group timers so that a killed
member is fenced in seconds: `group.consumer.session.timeout.ms` 8000 and
`group.consumer.heartbeat.interval.ms` 1000 (and Kafka's lower bounds for them), and
`group.consumer.migration.policy=disabled` (so Kafka 4.4 and Brook refuse a consumer member in
a classic group and a classic member in a consumer group; the online migration the default
policy allows is test_group_migration.py's).

Members are Java 4.4 consumers (the driver's `group-consume --group-protocol consumer --events`)
and, in their own cells, confluent-kafka (librdkafka >= 2.12) and franz-go (the same driver
command: `kgo.ServerSideBalancer`, its next-generation group consumer), alone and beside a Java
member in one group. Ownership is followed from each member's rebalance-listener events (with
this protocol the listener gets the partitions added or taken, never the whole assignment), so
"each partition owned by exactly one member" is checked from the members' own view, not only
from the broker's. franz-go falls back to the classic protocol by itself when the broker does
not serve ConsumerGroupHeartbeat, so its cells also check the broker's side: the group is listed
as a `consumer` group and ConsumerGroupDescribe shows the franz-go members and their partitions.

Fencing, epochs and static members are driven partly with raw requests (harness.wire's
ConsumerGroupHeartbeat v1 and OffsetCommit v9), for a member that does exactly what the test
needs and no client does on purpose: one that never revokes (fenced `rebalance_timeout_ms` after
it was asked to, then UNKNOWN_MEMBER_ID), a stand-in heartbeating with a frozen Java member's id
so its epoch goes stale (FENCED_MEMBER_EPOCH; the Java member loses its partitions and rejoins at
epoch 0), commits at an older epoch (STALE_MEMBER_EPOCH, per partition as Kafka 4.4 checks it),
and a second member with a live static member's `group.instance.id` (UNRELEASED_INSTANCE_ID).
A group is created only by a join (epoch 0): a heartbeat or a leave for a group id there is no
consumer group of is GROUP_ID_NOT_FOUND (a classic group of that id is left alone), and a Java
member whose group was deleted while it was frozen fails with GroupIdNotFoundException.
Error codes and messages are asserted as Kafka 4.4 answers them.
"""

import base64
import json
import re
import signal
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, KafkaError, Producer
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

from harness import kafka_cli, paths, wire
from harness.broker import Broker
from harness.members import GroupMember, committed, poll_until

SESSION_TIMEOUT_MS = 8000
OVERRIDES = {
    "group.consumer.session.timeout.ms": SESSION_TIMEOUT_MS,
    "group.consumer.min.session.timeout.ms": 6000,
    "group.consumer.heartbeat.interval.ms": 1000,
    "group.consumer.min.heartbeat.interval.ms": 1000,
    "group.consumer.migration.policy": "disabled",
    # Both targets' default (Kafka's also lists streams), set so the module states what it needs.
    "group.coordinator.rebalance.protocols": "classic,consumer",
}
DEADLINE_S = 90
PARTITIONS = 6
GROUPS_TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
DUMP_TOOL = "org.apache.kafka.tools.DumpLogSegments"
# "| offset: 3 ... key: {json} payload: {json}" (or "payload: <DELETE>" for a tombstone)
OFFSETS_RECORD = re.compile(r" key: (\{.*\}) payload: (\{.*\}|<DELETE>)$")
# The client.id each driver sets (drivers/java/.../Main.java, drivers/franz/main.go).
CLIENT_IDS = {"java": "brook-driver-java", "franz": "brook-franz-driver"}


@pytest.fixture(scope="module")
def cg_broker(tmp_path_factory):
    b = Broker(paths.target(), tmp_path_factory.mktemp("cg-broker"), OVERRIDES)
    b.start()
    yield b
    b.stop()
    faults = b.teardown_faults()
    assert not faults, f"unclean broker teardown: {faults}"


def new_group() -> str:
    return f"cg-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def produce(bootstrap: str, topic: str, per_partition: int, prefix: str, partitions=PARTITIONS) -> set:
    """`per_partition` keyed records to each partition; returns {(partition, key, value)}."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    sent = set()
    for p in range(partitions):
        for i in range(per_partition):
            key, value = f"k-{prefix}-{p}-{i}", f"v-{prefix}-{p}-{i}"
            producer.produce(topic, key=key.encode(), value=value.encode(), partition=p)
            sent.add((p, key, value))
    assert producer.flush(30) == 0
    return sent


def member(bootstrap, group, topic, name, *extra, client="java") -> GroupMember:
    return GroupMember(client, bootstrap, group, topic, "--group-protocol", "consumer", "--events",
                       "--timeout-ms", DEADLINE_S * 1000 * 2, *extra, name=name)


def owned(m: GroupMember) -> set:
    """The partitions `m` owns now, replayed from its listener events."""
    mine = set()
    for e in list(m.events):
        if e["event"] == "assigned":
            mine |= set(e["partitions"])
        elif e["event"] in ("revoked", "lost"):
            mine -= set(e["partitions"])
    return mine


def wait_split(members, partitions=PARTITIONS, per_member=None) -> dict:
    """Until the live members own disjoint sets covering every partition (each `per_member`
    partitions if given); returns {name: partitions}."""
    def split():
        views = {m.name: owned(m) for m in members}
        counts = Counter(p for ps in views.values() for p in ps)
        if sorted(counts) != list(range(partitions)) or any(c != 1 for c in counts.values()):
            return None
        if per_member is not None and any(len(ps) != per_member for ps in views.values()):
            return None
        return views

    return poll_until(split, DEADLINE_S, lambda: f"split {[(m.name, owned(m), m.events[-3:]) for m in members]}"
                      f"\n{members[0].stderr_tail(10)}")


def consumed(members) -> list:
    return [(r["partition"], r["key"], r["value"], r["offset"]) for m in members for r in m.snapshot()]


def wait_consumed(members, sent: set) -> None:
    want = {(p, k, v) for p, k, v in sent}
    poll_until(lambda: want <= {(p, k, v) for p, k, v, _ in consumed(members)}, DEADLINE_S,
               lambda: f"{len(want - {(p, k, v) for p, k, v, _ in consumed(members)})} of {len(want)} records missing")


def describe_members(bootstrap: str, group: str) -> dict:
    """{member id: (current epoch, current assignment)} from `kafka-consumer-groups --describe
    --members --verbose` (the ConsumerGroupDescribe answer)."""
    out = kafka_cli.run(GROUPS_TOOL, "--bootstrap-server", bootstrap, "--describe", "--group", group,
                        "--members", "--verbose").stdout
    lines = out.splitlines()
    header = next(line.split() for line in lines if line.startswith("GROUP "))
    epoch_at, assignment_at = header.index("CURRENT-EPOCH"), header.index("CURRENT-ASSIGNMENT")
    members = {}
    for line in lines:
        if line.startswith(group + " "):
            row = line.split()
            members[row[1]] = (int(row[epoch_at]), row[assignment_at])
    return members


def stop_all(members) -> None:
    for m in members:
        if m.alive:
            m.stop()


def group_type(bootstrap: str, group: str):
    """The group's type as ListGroups (v5) lists it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer is in
    listed = admin.list_consumer_groups().result(30).valid
    return next((g.type for g in listed if g.group_id == group), None)


def wait_described(bootstrap: str, group: str, topic: str, split: dict) -> dict:
    """ConsumerGroupDescribe once the coordinator's view is the members' own (`split`, from
    their listeners): Stable, each member at the group epoch owning the partitions it says it
    owns; returns {member id: (client id, partitions)}."""
    seen = {}

    def agrees():
        d = seen["d"] = wire.consumer_group_describe(bootstrap, group)
        assert d["error"] != 69, f"GROUP_ID_NOT_FOUND: not a consumer group (a classic join?): {d}"
        members = d["members"].values()
        if d["error"] != 0 or d["state"] != "Stable" or any(m["member_epoch"] != d["group_epoch"] for m in members):
            return None
        if sorted(m["assignment"].get(topic, []) for m in members) != sorted(sorted(ps) for ps in split.values()):
            return None
        return {mid: (m["client_id"], set(m["assignment"][topic])) for mid, m in d["members"].items()}

    return poll_until(agrees, DEADLINE_S, lambda: f"ConsumerGroupDescribe {seen.get('d')} vs {split}")


def assert_each_record_once_by_its_owner(members, split: dict, sent: set, per_partition: int) -> None:
    """Every record of `sent` read exactly once, offsets 0..per_partition-1 in each partition,
    and each member read only the partitions it owns in `split`."""
    got = consumed(members)
    assert len(got) == len(sent), "no duplicates"
    assert {(p, k, v) for p, k, v, _ in got} == sent
    for p in range(PARTITIONS):
        assert sorted(o for q, _, _, o in got if q == p) == list(range(per_partition))
    for m in members:
        assert {r["partition"] for r in m.records} == split[m.name], f"{m.name} read only its own partitions"


def run_consumer_protocol_group(bootstrap: str, topic: str, clients: list, per_partition: int) -> None:
    """Members of `clients` (named a, b, ...) with the consumer protocol split a PARTITIONS-
    partition topic evenly; the broker lists the group as a consumer group and describes each
    member (its client id, its partitions) as the member sees itself; every record produced is
    read once, by the owner of its partition."""
    create_topic(bootstrap, topic, PARTITIONS)
    group = new_group()
    names = "abcdef"[:len(clients)]
    members = [member(bootstrap, group, topic, n, client=c) for n, c in zip(names, clients)]
    try:
        split = wait_split(members, per_member=PARTITIONS // len(members))
        described = wait_described(bootstrap, group, topic, split)
        listed_as = group_type(bootstrap, group)
        sent = produce(bootstrap, topic, per_partition, "f")
        wait_consumed(members, sent)
        time.sleep(1)  # a duplicate would show up meanwhile
    finally:
        stop_all(members)
    assert listed_as == ConsumerGroupType.CONSUMER
    # The members' own ids (their final lines) are the ones the coordinator describes.
    by_id = {m.final["member_id"]: m for m in members}
    assert set(described) == set(by_id), (described, by_id)
    for mid, (client_id, partitions) in described.items():
        m = by_id[mid]
        assert (client_id, partitions) == (CLIENT_IDS[m.client], split[m.name]), (m.name, described[mid])
    assert_each_record_once_by_its_owner(members, split, sent, per_partition)


def test_three_members_share_six_partitions_exactly_and_read_every_record_once(cg_broker, topic):
    create_topic(cg_broker.bootstrap, topic, PARTITIONS)
    group = new_group()
    members = [member(cg_broker.bootstrap, group, topic, n) for n in "abc"]
    try:
        split = wait_split(members, per_member=2)
        sent = produce(cg_broker.bootstrap, topic, 50, "x")
        wait_consumed(members, sent)
        time.sleep(2)  # a duplicate would show up meanwhile
    finally:
        stop_all(members)
    # Offsets are exactly 0..49 per partition, each partition read by the member owning it.
    assert_each_record_once_by_its_owner(members, split, sent, 50)


@pytest.mark.parametrize("how", ["close", "kill"])
def test_a_member_that_leaves_or_is_killed_hands_its_partitions_over_and_nothing_is_lost(cg_broker, topic, how):
    create_topic(cg_broker.bootstrap, topic, PARTITIONS)
    group = new_group()
    members = [member(cg_broker.bootstrap, group, topic, n) for n in "abc"]
    try:
        before = wait_split(members, per_member=2)
        first = produce(cg_broker.bootstrap, topic, 20, "one")
        wait_consumed(members, first)
        gone, rest = members[0], members[1:]
        started = time.monotonic()
        if how == "close":
            gone.stop()
        else:
            gone.kill()
        after = wait_split(rest, per_member=3)
        moved_after_s = time.monotonic() - started
        second = produce(cg_broker.bootstrap, topic, 20, "two")
        wait_consumed(rest, second)
        time.sleep(2)
    finally:
        stop_all(members)
    got = consumed(members)
    assert {(p, k, v) for p, k, v, _ in got} == first | second, "no record lost"
    dups = [x for x, n in Counter(got).items() if n > 1]
    if how == "close":
        assert not dups, f"a graceful leave commits first: no record twice: {dups[:5]}"
    else:
        # The killed member may have printed records it never committed: only its partitions.
        assert {p for p, *_ in dups} <= before[gone.name], dups[:5]
        # Fenced by the session timeout, not before (the others never saw it leave).
        assert moved_after_s >= SESSION_TIMEOUT_MS / 1000 - 1, moved_after_s
    assert set().union(*after.values()) == set(range(PARTITIONS))


def test_the_range_assignor_gives_each_member_a_contiguous_range(cg_broker, topic):
    create_topic(cg_broker.bootstrap, topic, PARTITIONS)
    group = new_group()
    members = [member(cg_broker.bootstrap, group, topic, n, "--remote-assignor", "range") for n in "abc"]
    try:
        split = wait_split(members, per_member=2)
    finally:
        stop_all(members)
    assert sorted(sorted(ps) for ps in split.values()) == [[0, 1], [2, 3], [4, 5]]


def test_committed_offsets_survive_a_restart_of_the_consumers(cg_broker, topic):
    create_topic(cg_broker.bootstrap, topic, 1)
    sent = produce(cg_broker.bootstrap, topic, 200, "r", partitions=1)
    group = new_group()
    first = member(cg_broker.bootstrap, group, topic, "first", "--count", 100)
    first.wait(DEADLINE_S)
    second = member(cg_broker.bootstrap, group, topic, "second", "--idle-ms", 5000)
    second.wait(DEADLINE_S * 2)
    assert [r["offset"] for r in first.records] == list(range(100))
    assert [r["offset"] for r in second.records] == list(range(100, 200)), "resumes at the commit"
    assert {(r["partition"], r["key"], r["value"]) for r in first.records + second.records} == sent


def test_kafka_consumer_groups_tool_lists_the_group_as_consumer_and_describes_its_members(cg_broker, topic):
    create_topic(cg_broker.bootstrap, topic, PARTITIONS)
    group = new_group()
    members = [member(cg_broker.bootstrap, group, topic, n) for n in "abc"]
    try:
        wait_split(members, per_member=2)
        listed = kafka_cli.run(GROUPS_TOOL, "--bootstrap-server", cg_broker.bootstrap, "--list", "--type").stdout
        row = next(line.split() for line in listed.splitlines() if line.startswith(group + " "))
        assert row[1] == "Consumer", listed

        def described():
            out = kafka_cli.run(GROUPS_TOOL, "--bootstrap-server", cg_broker.bootstrap, "--describe",
                                "--group", group, "--members").stdout
            rows = [line.split() for line in out.splitlines() if line.startswith(group + " ")]
            return rows if len(rows) == 3 and all(r[-1] == "2" for r in rows) else None

        rows = poll_until(described, DEADLINE_S, lambda: "describe --members never showed 3 members of 2")
        state = kafka_cli.run(GROUPS_TOOL, "--bootstrap-server", cg_broker.bootstrap, "--describe",
                              "--group", group, "--state").stdout
    finally:
        stop_all(members)
    assert all(len(r[1]) == 22 for r in rows), "client-generated member ids (KIP-1082 UUIDs)"
    assert " Stable " in state and "uniform" in state, state


def test_a_consumer_member_cannot_join_a_classic_group_with_members(cg_broker, topic):
    create_topic(cg_broker.bootstrap, topic, 2)
    group = new_group()
    classic = GroupMember("java", cg_broker.bootstrap, group, topic, "--events", "--timeout-ms", 60000, name="classic")
    try:
        poll_until(lambda: owned(classic) == {0, 1}, DEADLINE_S, lambda: f"classic member {classic.events}")
        newcomer = member(cg_broker.bootstrap, group, topic, "newcomer")
        newcomer.proc.wait(DEADLINE_S)
        newcomer._join_readers()
        err = newcomer.stderr_tail(80)
        assert classic.alive and owned(classic) == {0, 1}, "the classic group goes on"
    finally:
        stop_all([classic])
    assert newcomer.proc.returncode != 0
    assert ('{"error":"GroupIdNotFoundException","message":"Cannot upgrade classic group '
            f'{group} to consumer group because online upgrade is disabled."}}') in err, err


def test_a_classic_member_cannot_join_a_consumer_group_with_members(cg_broker, topic):
    create_topic(cg_broker.bootstrap, topic, 2)
    group = new_group()
    new = member(cg_broker.bootstrap, group, topic, "new")
    try:
        poll_until(lambda: owned(new) == {0, 1}, DEADLINE_S, lambda: f"new member {new.events}")
        classic = GroupMember("java", cg_broker.bootstrap, group, topic, "--events", "--timeout-ms", 60000,
                              name="classic")
        classic.proc.wait(DEADLINE_S)
        classic._join_readers()
        err = classic.stderr_tail(80)
        assert new.alive and owned(new) == {0, 1}, "the consumer group goes on"
    finally:
        stop_all([new])
    assert classic.proc.returncode != 0
    assert '{"error":"InconsistentGroupProtocolException"' in err, err


def test_confluent_kafka_members_with_the_consumer_protocol_split_a_topic(cg_broker, topic):
    create_topic(cg_broker.bootstrap, topic, PARTITIONS)
    group = new_group()
    sent = produce(cg_broker.bootstrap, topic, 20, "c")
    consumers = [Consumer({"bootstrap.servers": cg_broker.bootstrap, "group.id": group,
                           "group.protocol": "consumer", "auto.offset.reset": "earliest",
                           "enable.auto.commit": False}) for _ in range(2)]
    got = [[], []]
    try:
        for c in consumers:
            c.subscribe([topic])
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and len(got[0]) + len(got[1]) < len(sent):
            for i, c in enumerate(consumers):
                msg = c.poll(0.2)
                if msg is None:
                    continue
                assert msg.error() is None or msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                if msg.error() is None:
                    got[i].append((msg.partition(), msg.key().decode(), msg.value().decode()))
                    c.commit(message=msg, asynchronous=False)
        assignments = [{tp.partition for tp in c.assignment()} for c in consumers]
    finally:
        for c in consumers:
            c.close()
    assert sorted(got[0] + got[1]) == sorted(sent)
    assert len(set(got[0] + got[1])) == len(sent), "no duplicates"
    assert assignments[0] | assignments[1] == set(range(PARTITIONS)) and not assignments[0] & assignments[1]


def test_franz_go_members_with_the_consumer_protocol_split_a_topic_and_read_every_record_once(cg_broker, topic):
    run_consumer_protocol_group(cg_broker.bootstrap, topic, ["franz", "franz", "franz"], 30)


def test_a_java_and_a_franz_go_member_share_one_consumer_protocol_group(cg_broker, topic):
    run_consumer_protocol_group(cg_broker.bootstrap, topic, ["java", "franz"], 30)


def test_the_new_apis_and_group_version_are_advertised_as_kafka_4_4_does(cg_broker):
    advertised = wire.api_versions(cg_broker.bootstrap)
    assert advertised[68] == (0, 1), "ConsumerGroupHeartbeat"
    assert advertised[69] == (0, 1), "ConsumerGroupDescribe"
    out = kafka_cli.run("org.apache.kafka.tools.FeatureCommand", "--bootstrap-server", cg_broker.bootstrap,
                        "describe").stdout
    line = next(line for line in out.splitlines() if line.startswith("Feature: group.version"))
    fields = dict(re.findall(r"(\w+): (\S+)", line))
    assert (fields["SupportedMinVersion"], fields["SupportedMaxVersion"], fields["FinalizedVersionLevel"]) == (
        "0", "1", "1"), line


def decoded_offsets_records(b, group: str) -> list:
    """Every `__consumer_offsets` record of `group` as `kafka-dump-log --offsets-decoder` decodes
    it, in log order: [(key, payload)] (JSON objects; payload None for a tombstone)."""
    found = []
    for d in sorted(Path(b.log_dirs).glob("__consumer_offsets-*")):
        files = sorted(str(f) for f in d.glob("*.log") if f.stat().st_size > 0)
        if not files:
            continue
        out = kafka_cli.run(DUMP_TOOL, "--offsets-decoder", "--files", ",".join(files)).stdout
        assert "isvalid: false" not in out, out[-2000:]
        for line in out.splitlines():
            m = OFFSETS_RECORD.search(line)
            if m and f'"groupId":"{group}"' in m.group(1):
                found.append((json.loads(m.group(1)), json.loads(m.group(2)) if m.group(2) != "<DELETE>" else None))
    return found


def test_kafka_dump_log_decodes_the_groups_records_as_kafkas(cg_broker, topic):
    """The group's state is written as Kafka's records (types 3, 5, 6, 7, 8): Kafka's own
    `kafka-dump-log --offsets-decoder` reads them, and their latest values are what
    ConsumerGroupDescribe shows."""
    create_topic(cg_broker.bootstrap, topic, PARTITIONS)
    group = new_group()
    members = [member(cg_broker.bootstrap, group, topic, n) for n in "ab"]
    try:
        wait_split(members, per_member=3)
        view = poll_until(lambda: (lambda v: v if len(v) == 2 and len({e for e, _ in v.values()}) == 1 else None)(
            describe_members(cg_broker.bootstrap, group)), DEADLINE_S, lambda: "2 members at one epoch")
        admin = AdminClient({"bootstrap.servers": cg_broker.bootstrap})
        topic_id = admin.describe_topics(TopicCollection([topic]))[topic].result(30).topic_id
        latest = {}
        def written():
            latest.clear()
            for key, payload in decoded_offsets_records(cg_broker, group):
                latest[json.dumps(key, sort_keys=True)] = (key, payload)
            by_type = {}
            for key, payload in latest.values():
                by_type.setdefault(int(key["type"]), []).append((key["data"], payload and payload["data"]))
            epochs = [p["memberEpoch"] for _, p in by_type.get(8, []) if p]
            return by_type if len(epochs) == 2 and set(epochs) == {next(iter(view.values()))[0]} else None
        by_type = poll_until(written, DEADLINE_S, lambda: f"records of {group}: {list(latest)}")
    finally:
        stop_all(members)
    epoch = next(iter(view.values()))[0]
    assert [p["epoch"] for _, p in by_type[3]] == [epoch]
    assert [p["assignmentEpoch"] for _, p in by_type[6]] == [epoch]
    assert {k["memberId"] for k, _ in by_type[5]} == set(view)
    assert all(p["subscribedTopicNames"] == [topic] for _, p in by_type[5])
    assigned = {}
    for k, p in by_type[8]:
        parts = [(tp["topicId"], q) for tp in p["assignedPartitions"] for q in tp["partitions"]]
        assert len(parts) == 3 and p["partitionsPendingRevocation"] == [], p
        assigned[k["memberId"]] = parts
    # Kafka prints a topic id in URL-safe base64 (Uuid.toString); confluent-kafka in the standard one.
    kafka_topic_id = str(topic_id).replace("+", "-").replace("/", "_")
    assert sorted(q for parts in assigned.values() for q in parts) == [(kafka_topic_id, q) for q in range(PARTITIONS)]
    targets = {k["memberId"]: sorted((tp["topicId"], q) for tp in p["topicPartitions"] for q in tp["partitions"])
               for k, p in by_type[7]}
    assert targets == {m: sorted(parts) for m, parts in assigned.items()}


# -- fencing, stale epochs and static members (raw requests beside the Java members) --------------
UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, STALE_MEMBER_EPOCH = 25, 110, 111, 113
GROUP_ID_NOT_FOUND = 69
COORDINATOR_NOT_READY = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR
REBALANCE_TIMEOUT_MS = 4000
HEARTBEAT_S = 1.0  # the module's group.consumer.heartbeat.interval.ms


def new_member_id() -> str:
    """A member id as a KIP-1082 client generates it: a random UUID in URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def topic_id_hex(bootstrap: str, topic: str) -> str:
    """The topic's id as harness.wire spells a uuid (32 hex digits)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic_id = admin.describe_topics(TopicCollection([topic]))[topic].result(30).topic_id
    return base64.b64decode(str(topic_id).replace("-", "+").replace("_", "/") + "==").hex()


def heartbeat(bootstrap: str, group: str, member_id: str, epoch: int, **fields) -> dict:
    """wire.consumer_group_heartbeat, repeated while the group's coordinator is not ready (on a
    fresh broker, FindCoordinator is what creates `__consumer_offsets`)."""
    def answered():
        r = wire.consumer_group_heartbeat(bootstrap, group, member_id, epoch, **fields)
        if r["error"] in COORDINATOR_NOT_READY:
            wire.find_coordinator(bootstrap, group)
            return None
        return r

    return poll_until(answered, DEADLINE_S, lambda: f"{group}'s coordinator never answered")


def join_raw(bootstrap: str, group: str, topic: str, rebalance_timeout_ms: int) -> dict:
    """A raw member joins (epoch 0, owning nothing); the answer, with its "member_id"."""
    member_id = new_member_id()
    r = heartbeat(bootstrap, group, member_id, 0, topics=[topic], owned={}, rebalance_timeout_ms=rebalance_timeout_ms)
    assert r["error"] == 0 and r["member_id"] == member_id, r
    return r


def only_member(bootstrap: str, group: str, partitions: int) -> tuple:
    """(member id, epoch) of the group's one member once ConsumerGroupDescribe shows it owning
    partitions 0..`partitions`-1."""
    def described():
        members = wire.consumer_group_describe(bootstrap, group)["members"]
        if len(members) == 1:
            (member_id, m), = members.items()
            if sum(m["assignment"].values(), []) == list(range(partitions)):
                return member_id, m["member_epoch"]
        return None

    return poll_until(described, DEADLINE_S, lambda: f"{group}: {wire.consumer_group_describe(bootstrap, group)}")


def test_a_member_that_never_revokes_is_fenced_after_its_rebalance_timeout(cg_broker, topic):
    """A raw member owning both partitions is asked to give one to a Java member that joins,
    keeps heartbeating (so its session never expires) but keeps reporting both partitions: the
    coordinator fences it `rebalance_timeout_ms` after it asked, and only then does the Java
    member get the partition, then the other one too, and read every record."""
    bootstrap = cg_broker.bootstrap
    create_topic(bootstrap, topic, 2)
    sent = produce(bootstrap, topic, 10, "rt", partitions=2)
    group = new_group()
    topic_id = topic_id_hex(bootstrap, topic)
    stubborn = join_raw(bootstrap, group, topic, rebalance_timeout_ms=REBALANCE_TIMEOUT_MS)
    assert stubborn["assignment"] == {topic_id: [0, 1]}, stubborn
    stubborn_id, epoch = stubborn["member_id"], stubborn["member_epoch"]
    java = member(bootstrap, group, topic, "java")
    try:
        asked_at, kept = None, None
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            # Looked at before the heartbeat: if that heartbeat is answered, the raw member was
            # still in the group when the Java member owned this.
            java_owned = owned(java)
            r = heartbeat(bootstrap, group, stubborn_id, epoch, owned={topic_id: [0, 1]})
            answered_at = time.monotonic()
            if r["error"]:
                break
            assert r["member_epoch"] == epoch, "it stays at its epoch until it revokes"
            if asked_at is None and r["assignment"] is not None:
                asked_at, kept = answered_at, r["assignment"][topic_id]
            assert not java_owned, "no partition moves before its owner revoked it"
            time.sleep(HEARTBEAT_S)  # the member's heartbeat interval
        assert asked_at is not None, "the coordinator never asked the raw member to revoke"
        assert len(kept) == 1, kept
        assert r["error"] == UNKNOWN_MEMBER_ID, r
        assert r["message"] == f"Member {stubborn_id} is not a member of group {group}.", r
        # Seen at the first heartbeat after the fencing: within a heartbeat interval of it (and
        # some slack for a loaded machine).
        fenced_after_s = answered_at - asked_at
        timeout_s = REBALANCE_TIMEOUT_MS / 1000
        assert timeout_s - HEARTBEAT_S <= fenced_after_s <= timeout_s + 3 * HEARTBEAT_S, fenced_after_s
        poll_until(lambda: owned(java) == {0, 1}, DEADLINE_S, lambda: f"java member {java.events}")
        wait_consumed([java], sent)
    finally:
        stop_all([java])
    got = consumed([java])
    assert sorted(got) == sorted((p, f"k-rt-{p}-{i}", f"v-rt-{p}-{i}", i) for p in range(2) for i in range(10))


def test_a_java_member_whose_epoch_is_stale_is_fenced_and_rejoins_at_epoch_zero(cg_broker, topic):
    """The Java member is frozen (SIGSTOP) while its member id moves on twice without it: a
    stand-in heartbeats with its id through two new assignment epochs (a partition added each
    time). The epoch it still holds is then neither the member's nor the previous one: a
    heartbeat with it gets FENCED_MEMBER_EPOCH, and so does the Java member's own once it is
    resumed; it gives its partitions up as lost, rejoins at epoch 0 with the same id, gets all
    four partitions and goes on from its commits."""
    bootstrap = cg_broker.bootstrap
    create_topic(bootstrap, topic, 2)
    first = produce(bootstrap, topic, 3, "one", partitions=2)
    group = new_group()
    topic_id = topic_id_hex(bootstrap, topic)
    java = member(bootstrap, group, topic, "java")
    try:
        # Records read and committed: the member has long acknowledged its assignment, so what
        # it sends once resumed is an ordinary heartbeat at its old epoch.
        wait_consumed([java], first)
        poll_until(lambda: committed(bootstrap, group, topic, 2) == {0: 3, 1: 3}, DEADLINE_S,
                   lambda: f"committed {committed(bootstrap, group, topic, 2)}")
        member_id, epoch = only_member(bootstrap, group, 2)
        assert owned(java) == {0, 1} and java.events[-1]["generation"] == epoch, java.events
        seen = len(java.events)
        java._signal(signal.SIGSTOP)
        try:
            current, held = epoch, [0, 1]
            for partitions in (3, 4):
                assert wire.create_partitions(bootstrap, {topic: partitions}) == {topic: 0}

                def next_epoch():
                    r = heartbeat(bootstrap, group, member_id, current, owned={topic_id: held})
                    assert r["error"] == 0, r
                    return r if r["member_epoch"] > current else None

                r = poll_until(next_epoch, DEADLINE_S, lambda: f"{member_id} stayed at epoch {current}")
                assert r["assignment"] == {topic_id: list(range(partitions))}, r
                current, held = r["member_epoch"], list(range(partitions))
            stale = heartbeat(bootstrap, group, member_id, epoch, owned={topic_id: [0, 1]})
        finally:
            java._signal(signal.SIGCONT)
        assert stale["error"] == FENCED_MEMBER_EPOCH, stale
        assert stale["message"] == (
            f"The consumer group member has a smaller member epoch ({epoch}) than the one known by the group "
            f"coordinator ({current}). The member must abandon all its partitions and rejoin."), stale
        poll_until(lambda: owned(java) == {0, 1, 2, 3}, DEADLINE_S, lambda: f"java member {java.events}")
        second = produce(bootstrap, topic, 5, "two", partitions=4)
        wait_consumed([java], second)
        rejoined_id, rejoined_epoch = only_member(bootstrap, group, 4)
        events = list(java.events)  # before the close revokes everything
    finally:
        stop_all([java])
    assert [(e["event"], e["partitions"]) for e in events[seen:]] == [("lost", [0, 1]), ("assigned", [0, 1, 2, 3])], \
        events
    assert events[-1]["generation"] == rejoined_epoch > epoch
    assert rejoined_id == member_id, "a fenced member rejoins with the id it generated"
    # Each record once: partitions 0 and 1 resume at the commits made before the fencing.
    assert sorted(consumed([java])) == sorted(
        [(p, f"k-one-{p}-{i}", f"v-one-{p}-{i}", i) for p in range(2) for i in range(3)]
        + [(p, f"k-two-{p}-{i}", f"v-two-{p}-{i}", i + (3 if p < 2 else 0)) for p in range(4) for i in range(5)])


def test_a_commit_with_a_stale_member_epoch_is_refused_and_changes_no_offset(cg_broker, topic):
    """OffsetCommit v9 carries the member epoch. Once the Java member has moved to a new epoch
    (a partition was added), a commit in its name with its previous epoch that includes the new
    partition gets STALE_MEMBER_EPOCH for every partition and commits nothing. Kafka 4.4 checks
    an older epoch per partition (KIP-1251): the same old epoch still commits a partition the
    member has held since then; and the current epoch commits the new partition."""
    bootstrap = cg_broker.bootstrap
    create_topic(bootstrap, topic, 2)
    sent = produce(bootstrap, topic, 10, "st", partitions=2)
    group = new_group()
    java = member(bootstrap, group, topic, "java")
    try:
        wait_consumed([java], sent)
        poll_until(lambda: committed(bootstrap, group, topic, 2) == {0: 10, 1: 10}, DEADLINE_S,
                   lambda: f"committed {committed(bootstrap, group, topic, 2)}")
        member_id, epoch = only_member(bootstrap, group, 2)
        assert wire.create_partitions(bootstrap, {topic: 3}) == {topic: 0}
        member_id, current = only_member(bootstrap, group, 3)
        assert current > epoch
        # Nothing more to read: the Java member commits nothing meanwhile.
        stale = wire.offset_commit_member(bootstrap, group, member_id, epoch, topic, {0: 3, 1: 3, 2: 3})
        after_stale = committed(bootstrap, group, topic, 3)
        held_since = wire.offset_commit_member(bootstrap, group, member_id, epoch, topic, {1: 7})
        taken = wire.offset_commit_member(bootstrap, group, member_id, current, topic, {2: 0})
        after = committed(bootstrap, group, topic, 3)
    finally:
        stop_all([java])
    assert stale == {0: STALE_MEMBER_EPOCH, 1: STALE_MEMBER_EPOCH, 2: STALE_MEMBER_EPOCH}, stale
    assert after_stale == {0: 10, 1: 10, 2: -1001}, "nothing committed"
    assert held_since == {1: 0} and taken == {2: 0}
    assert after == {0: 10, 1: 7, 2: 0}


def test_a_static_member_restarted_within_its_session_keeps_its_partitions_and_a_twin_is_refused(cg_broker, topic):
    """A static member (group.instance.id) closed and restarted within the session timeout gets
    back exactly its partitions, resumes at its commits, and the other member sees nothing
    happen (no listener event). While it is live, a second member with its instance id is
    refused with UNRELEASED_INSTANCE_ID: a raw join, and a Java consumer, which fails."""
    bootstrap = cg_broker.bootstrap
    create_topic(bootstrap, topic, 4)
    group = new_group()
    instance = f"static-{uuid.uuid4().hex[:8]}"
    static = member(bootstrap, group, topic, "static", "--instance-id", instance)
    other = member(bootstrap, group, topic, "other")
    restarted = None
    try:
        before = wait_split([static, other], partitions=4, per_member=2)
        first = produce(bootstrap, topic, 5, "one", partitions=4)
        wait_consumed([static, other], first)
        poll_until(lambda: committed(bootstrap, group, topic, 4) == {p: 5 for p in range(4)}, DEADLINE_S,
                   lambda: f"committed {committed(bootstrap, group, topic, 4)}")
        other_seen = len(other.events)
        static.stop()  # a static member's close leaves temporarily (epoch -2): its partitions wait
        stopped_at = time.monotonic()
        restarted = member(bootstrap, group, topic, "restarted", "--instance-id", instance)
        poll_until(lambda: owned(restarted) == before["static"], DEADLINE_S,
                   lambda: f"restarted {restarted.events}")
        back_after_s = time.monotonic() - stopped_at
        # A Java twin starts while the restarted member reads on (refused, it changes nothing).
        java_twin = member(bootstrap, group, topic, "twin", "--instance-id", instance)
        owner = next(m for m, d in wire.consumer_group_describe(bootstrap, group)["members"].items()
                     if d["instance_id"] == instance)
        twin_id = new_member_id()
        raw_twin = heartbeat(bootstrap, group, twin_id, 0, instance_id=instance, rebalance_timeout_ms=30000,
                             topics=[topic], owned={})
        second = produce(bootstrap, topic, 5, "two", partitions=4)
        wait_consumed([restarted, other], second)
        java_twin.proc.wait(DEADLINE_S)
        java_twin._join_readers()
        twin_err = java_twin.stderr_tail(80)
        assert restarted.alive and other.alive
        # Before the closes revoke everything.
        restarted_events, other_events = list(restarted.events), list(other.events)
    finally:
        stop_all([static, other] + ([restarted] if restarted else []))
    assert back_after_s < SESSION_TIMEOUT_MS / 1000, "restarted within the session timeout"
    assert [(e["event"], e["partitions"]) for e in restarted_events] == [("assigned", sorted(before["static"]))]
    assert other_events[other_seen:] == [], "the other member was not disturbed"
    assert sorted((p, k, v, o) for p, k, v, o in consumed([restarted])) == sorted(
        (p, f"k-two-{p}-{i}", f"v-two-{p}-{i}", 5 + i) for p in before["static"] for i in range(5)), \
        "resumed at the first run's commits"
    assert raw_twin["error"] == UNRELEASED_INSTANCE_ID, raw_twin
    assert raw_twin["message"] == (f"Static member {twin_id} with instance id {instance} cannot join the group "
                                   f"because the instance id is owned by {owner} member."), raw_twin
    assert java_twin.proc.returncode != 0
    assert re.search(r'\{"error":"UnreleasedInstanceIdException","message":"Static member [\w-]{22} with instance id '
                     + re.escape(instance) + r' cannot join the group because the instance id is owned by '
                     + re.escape(owner) + r' member\."\}', twin_err), twin_err


def test_a_heartbeat_or_leave_for_a_group_that_does_not_exist_is_group_id_not_found(cg_broker, topic):
    """Only a join (epoch 0) creates a consumer group. A heartbeat at a member epoch for a group
    id there is no group of gets GROUP_ID_NOT_FOUND "Consumer group <g> not found.", a leave (-1,
    or a static member's -2) "Group <g> not found.", and none creates the group. A group id that
    is a classic group (committed offsets only) gets "Group <g> is not a consumer group." for
    both, and keeps its offsets."""
    bootstrap = cg_broker.bootstrap
    create_topic(bootstrap, topic, 1)
    group, member_id = new_group(), new_member_id()
    r = heartbeat(bootstrap, group, member_id, 3, owned={})
    assert (r["error"], r["message"]) == (GROUP_ID_NOT_FOUND, f"Consumer group {group} not found."), r
    for epoch, instance_id in ((-1, None), (-2, f"static-{uuid.uuid4().hex[:8]}")):
        r = heartbeat(bootstrap, group, member_id, epoch, instance_id=instance_id)
        assert (r["error"], r["message"]) == (GROUP_ID_NOT_FOUND, f"Group {group} not found."), (epoch, r)
    described = wire.consumer_group_describe(bootstrap, group)
    assert described["error"] == GROUP_ID_NOT_FOUND, f"no group was created: {described}"

    classic = new_group()
    poll_until(lambda: wire.offset_commit(bootstrap, classic, -1, "", topic, {0: 3}) == {0: 0}, DEADLINE_S,
               lambda: f"{classic}'s commit")
    for epoch in (3, -1):
        r = heartbeat(bootstrap, classic, member_id, epoch)
        assert (r["error"], r["message"]) == (GROUP_ID_NOT_FOUND, f"Group {classic} is not a consumer group."), \
            (epoch, r)
    assert committed(bootstrap, classic, topic, 1) == {0: 3}, "the classic group keeps its offsets"


def test_a_java_member_whose_group_was_deleted_while_it_was_frozen_fails_with_group_id_not_found(cg_broker, topic):
    """A Java member is frozen (SIGSTOP) until the coordinator fences it (its session timeout),
    the emptied group is deleted (DeleteGroups), and the member is resumed: its next heartbeat,
    at its old epoch, is answered GROUP_ID_NOT_FOUND, which the Java consumer treats as fatal:
    poll throws GroupIdNotFoundException with the coordinator's message and the member exits."""
    bootstrap = cg_broker.bootstrap
    create_topic(bootstrap, topic, 2)
    group = new_group()
    java = member(bootstrap, group, topic, "java")
    try:
        poll_until(lambda: owned(java) == {0, 1}, DEADLINE_S, lambda: f"java member {java.events}")
        java._signal(signal.SIGSTOP)
        try:
            poll_until(lambda: wire.consumer_group_describe(bootstrap, group)["members"] == {}, DEADLINE_S,
                       lambda: f"{group} never emptied: {wire.consumer_group_describe(bootstrap, group)}")
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.delete_consumer_groups([group])[group].result(30)
        finally:
            java._signal(signal.SIGCONT)
        java.proc.wait(DEADLINE_S)
        java._join_readers()
        err = java.stderr_tail(80)
    finally:
        stop_all([java])
    assert java.proc.returncode != 0
    assert f'{{"error":"GroupIdNotFoundException","message":"Consumer group {group} not found."}}' in err, err
