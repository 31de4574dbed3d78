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
"""

import json
import re
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
from harness.members import GroupMember, poll_until

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
