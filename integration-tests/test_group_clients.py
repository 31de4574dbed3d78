"""Consumer groups with every real client (issue 4's list): two members of one group split a
4-partition topic and together read each of its 400 records exactly once (Java with range,
cooperative-sticky and static membership; confluent-kafka; kcat -G; franz-go; kafka-python);
committed offsets survive a broker restart (Java, confluent); auto.offset.reset earliest vs
latest for a new group; a static Java member that closes (no LeaveGroup, KIP-345) and rejoins
keeps its assignment and the group's generation.

Java and franz run as concurrent driver processes (`group-consume`, see README.md); kcat runs
`kcat -G`; the Python clients run in threads. Every test also passes against Apache Kafka
(BROOK_TEST_TARGET=kafka).
"""

import json
import subprocess
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer

from harness.drivers import DRIVER_ARGV
from harness.kcat_group import KcatGroupMember
from harness.paths import TESTS_DIR

DEADLINE_S = 60
IDLE_MS = 8000  # generous: this 2-core machine stalls processes for seconds under load
PARTITIONS = 4
PER_PARTITION = 100


def new_group() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)


def produce(bootstrap: str, topic: str, per_partition: dict, prefix: str = "v") -> list:
    """Produce `per_partition[p]` records to each partition p; returns the (partition, value) sent."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    sent = []
    for p, n in per_partition.items():
        for i in range(n):
            value = f"{prefix}-{p}-{i}"
            producer.produce(topic, value=value.encode(), partition=p)
            sent.append((p, value))
    assert producer.flush(30) == 0
    return sent


def describe(bootstrap: str, group: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(timeout=30)


def wait_until_members_own_partitions(bootstrap: str, group: str, members: int) -> dict:
    """Poll DescribeGroups until the group is Stable with `members` members, each owning at least
    one partition; returns {group.instance.id or member id: set of partitions}."""
    deadline = time.monotonic() + DEADLINE_S
    last = None
    while time.monotonic() < deadline:
        try:
            last = describe(bootstrap, group)
        except (KafkaException, TimeoutError):  # coordinator loading; a stalled 2-core machine
            time.sleep(0.3)
            continue
        owned = {
            (m.group_instance_id or m.member_id): {tp.partition for tp in m.assignment.topic_partitions}
            for m in last.members
        }
        if last.state == ConsumerGroupState.STABLE and len(owned) == members and all(owned.values()):
            return owned
        time.sleep(0.3)
    raise AssertionError(f"group {group} never had {members} members owning partitions: {last}")


class Member:
    """A group member in its own process; `result()` waits for it: (records, final line)."""

    def __init__(self, argv: list):
        self.argv = argv
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, cwd=TESTS_DIR
        )

    def result(self, timeout: float = DEADLINE_S * 2):
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            raise AssertionError(f"{self.argv} did not finish\n{err[-3000:]}")
        assert self.proc.returncode == 0, f"{self.argv} exited {self.proc.returncode}\n{err[-3000:]}\n{out[-2000:]}"
        lines = [json.loads(line) for line in out.splitlines() if line.strip()]
        assert lines and "assigned" in lines[-1], f"no final assignment line: {out[-2000:]}\n{err[-3000:]}"
        return lines[:-1], lines[-1]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def driver_member(client: str, bootstrap: str, group: str, topic: str, *extra) -> Member:
    argv = [*DRIVER_ARGV[client], "group-consume", "--bootstrap", bootstrap, "--group", group, "--topic", topic]
    return Member(argv + [str(a) for a in extra])


class PythonMember:
    """A confluent-kafka or kafka-python group member in a thread, with the driver command's
    semantics: commit after each record batch, stop after `count` or when idle after the first."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str, count=None, reset="earliest"):
        self.client, self.bootstrap, self.group, self.topic = client, bootstrap, group, topic
        self.count, self.reset = count, reset
        self.records, self.assigned, self.error = [], set(), None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            if self.client == "confluent":
                self._run_confluent()
            else:
                self._run_kafka_python()
        except Exception as e:  # reported by result()
            self.error = e

    def _done(self, deadline, last) -> bool:
        if time.monotonic() > deadline:
            return True
        if self.count is not None and len(self.records) >= self.count:
            return True
        return self.count is None and bool(self.records) and time.monotonic() - last > IDLE_MS / 1000

    def _run_confluent(self):
        c = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group, "auto.offset.reset": self.reset,
            "enable.auto.commit": False, "session.timeout.ms": 30000, "heartbeat.interval.ms": 1000,
            "partition.assignment.strategy": "range",
        })
        c.subscribe([self.topic])
        deadline, last = time.monotonic() + DEADLINE_S, time.monotonic()
        try:
            while not self._done(deadline, last):
                msg = c.poll(0.2)
                if msg is None or msg.error():
                    continue
                self.records.append({"partition": msg.partition(), "offset": msg.offset(), "value": msg.value().decode()})
                c.commit(message=msg, asynchronous=False)
                last = time.monotonic()
            self.assigned = {tp.partition for tp in c.assignment()}
        finally:
            c.close()

    def _run_kafka_python(self):
        c = KafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group, auto_offset_reset=self.reset,
            enable_auto_commit=False, session_timeout_ms=30000, heartbeat_interval_ms=1000,
        )
        c.subscribe([self.topic])
        deadline, last = time.monotonic() + DEADLINE_S, time.monotonic()
        try:
            while not self._done(deadline, last):
                wanted = None if self.count is None else self.count - len(self.records)
                batches = c.poll(timeout_ms=200, max_records=wanted)
                for records in batches.values():
                    for r in records:
                        self.records.append({"partition": r.partition, "offset": r.offset, "value": r.value.decode()})
                        last = time.monotonic()
                if batches:
                    c.commit()  # the positions: exactly the records just returned
            self.assigned = {tp.partition for tp in c.assignment()}
        finally:
            c.close()

    def result(self):
        self.thread.join(DEADLINE_S * 2)
        assert not self.thread.is_alive(), f"{self.client} member did not finish"
        if self.error is not None:
            raise self.error
        return self.records, {"assigned": sorted(self.assigned)}


def assert_split_exactly_once(sent, results, owned: dict):
    """`results`: per member (records, final line); `owned`: the group's assignment while both
    members were in it (DescribeGroups). Together the members read every record exactly once,
    each from its own partitions: the two assignments are disjoint and cover the topic. (A
    member's final line can show more: the first to finish leaves, and the other takes over its
    partitions, which have nothing left to read.)"""
    got = [(r["partition"], r["value"]) for records, _ in results for r in records]
    per_member = [(len(records), sorted({r["partition"] for r in records}), final) for records, final in results]
    assert len(got) == len(sent), f"{len(got)} records delivered for {len(sent)} sent: {per_member}, owned {owned}"
    assert sorted(got) == sorted(sent), "every record exactly once"
    assignments = sorted(sorted(ps) for ps in owned.values())
    assert len(assignments) == 2 and all(assignments), f"two members owning partitions: {owned}"
    assert set(assignments[0]).isdisjoint(assignments[1]), f"assignments overlap: {owned}"
    assert set(assignments[0]) | set(assignments[1]) == set(range(PARTITIONS))
    read = sorted(sorted({r["partition"] for r in records}) for records, _ in results)
    assert read == assignments, f"each member read exactly its own partitions: read {read}, owned {owned}"


DRIVER_CASES = {
    "java-range": ("java", []),
    "java-cooperative-sticky": ("java", ["--assignor", "cooperative-sticky"]),
    "java-static": ("java", ["--instance-id"]),
    "franz-range": ("franz", []),
    "franz-cooperative-sticky": ("franz", ["--assignor", "cooperative-sticky"]),
}


@pytest.mark.parametrize("case", list(DRIVER_CASES))
def test_two_driver_members_split_a_topic_and_read_every_record_once(broker, topic, case):
    client, extra = DRIVER_CASES[case]
    create_topic(broker.bootstrap, topic, PARTITIONS)
    group = new_group()

    def args(name):
        more = [*extra, f"{group}-{name}"] if extra[-1:] == ["--instance-id"] else list(extra)
        return [*more, "--idle-ms", IDLE_MS, "--timeout-ms", DEADLINE_S * 1000]

    members = [driver_member(client, broker.bootstrap, group, topic, *args(n)) for n in ("a", "b")]
    try:
        owned = wait_until_members_own_partitions(broker.bootstrap, group, 2)
        sent = produce(broker.bootstrap, topic, {p: PER_PARTITION for p in range(PARTITIONS)})
        results = [m.result() for m in members]
    finally:
        for m in members:
            m.stop()
    assert_split_exactly_once(sent, results, owned)
    if "range" in case:
        # The range assignor: two members, four partitions -> two contiguous partitions each.
        assert sorted(map(sorted, owned.values())) == [[0, 1], [2, 3]]


@pytest.mark.parametrize("client", ["confluent", "kafka_python"])
def test_two_python_members_split_a_topic_and_read_every_record_once(broker, topic, client):
    create_topic(broker.bootstrap, topic, PARTITIONS)
    group = new_group()
    members = [PythonMember(client, broker.bootstrap, group, topic) for _ in range(2)]
    owned = wait_until_members_own_partitions(broker.bootstrap, group, 2)
    sent = produce(broker.bootstrap, topic, {p: PER_PARTITION for p in range(PARTITIONS)})
    assert_split_exactly_once(sent, [m.result() for m in members], owned)


QUIET_S = 3


def test_two_kcat_balanced_consumers_split_a_topic_and_read_every_record_once(broker, topic):
    create_topic(broker.bootstrap, topic, PARTITIONS)
    group = new_group()
    members = [KcatGroupMember(broker.bootstrap, group, topic, {"session.timeout.ms": 30000}, name=n) for n in "ab"]
    try:
        owned = wait_until_members_own_partitions(broker.bootstrap, group, 2)
        sent = produce(broker.bootstrap, topic, {p: PER_PARTITION for p in range(PARTITIONS)})
        deadline = time.monotonic() + DEADLINE_S
        while sum(len(m.snapshot()) for m in members) < len(sent) and time.monotonic() < deadline:
            time.sleep(0.1)
        # kcat never stops by itself: keep reading a while so a duplicate would be seen.
        time.sleep(QUIET_S)
        results = [(m.snapshot(), {"assigned": sorted(m.assigned() or ())}) for m in members]
    finally:
        for m in members:
            m.kill()
    assert_split_exactly_once(sent, results, owned)
    assert sorted(sorted(final["assigned"]) for _, final in results) == sorted(map(sorted, owned.values()))


@pytest.mark.parametrize("client", ["java", "confluent"])
def test_committed_offsets_survive_a_restart_and_a_new_member_resumes_at_them(broker, topic, client):
    create_topic(broker.bootstrap, topic, 1)
    sent = produce(broker.bootstrap, topic, {0: 200})
    group = new_group()
    if client == "java":
        first, _ = driver_member(client, broker.bootstrap, group, topic, "--count", 100).result()
    else:
        first, _ = PythonMember(client, broker.bootstrap, group, topic, count=100).result()
    assert [r["offset"] for r in first] == list(range(100))

    broker.restart()

    if client == "java":
        rest, final = driver_member(
            client, broker.bootstrap, group, topic, "--idle-ms", IDLE_MS, "--timeout-ms", DEADLINE_S * 1000
        ).result()
    else:
        rest, final = PythonMember(client, broker.bootstrap, group, topic).result()
    assert [r["offset"] for r in rest] == list(range(100, 200)), "resumes at 100: no loss, no re-delivery"
    assert [r["value"] for r in first + rest] == [v for _, v in sent]
    assert final["assigned"] == [0]


@pytest.mark.parametrize("client", ["confluent", "kafka_python"])
def test_a_new_group_with_earliest_reads_older_records_and_with_latest_does_not(broker, topic, client):
    create_topic(broker.bootstrap, topic, 1)
    before = [v for _, v in produce(broker.bootstrap, topic, {0: 10}, prefix="before")]

    early, _ = PythonMember(client, broker.bootstrap, new_group(), topic, count=10, reset="earliest").result()
    assert [r["value"] for r in early] == before
    assert [r["offset"] for r in early] == list(range(10))

    # latest: the position is fixed when the member first fetches, so keep producing until it
    # reads something; nothing produced before its join may show up.
    late = PythonMember(client, broker.bootstrap, new_group(), topic, count=1, reset="latest")
    deadline = time.monotonic() + DEADLINE_S
    n = 0
    while late.thread.is_alive() and time.monotonic() < deadline:
        produce(broker.bootstrap, topic, {0: 1}, prefix=f"after{n}")
        n += 1
        late.thread.join(1.0)
    records, _ = late.result()
    assert len(records) == 1
    assert records[0]["value"].startswith("after"), records
    assert records[0]["offset"] >= 10


def test_a_static_member_that_closes_and_rejoins_keeps_its_assignment_and_the_generation(broker, topic):
    create_topic(broker.bootstrap, topic, PARTITIONS)
    group = new_group()

    def static(instance):
        return driver_member("java", broker.bootstrap, group, topic, "--instance-id", instance,
                             "--count", 1, "--timeout-ms", DEADLINE_S * 1000)

    a = static("a")
    b1 = static("b")
    started = [a, b1]
    try:
        owned = wait_until_members_own_partitions(broker.bootstrap, group, 2)
        b_partition = min(owned["b"])
        produce(broker.bootstrap, topic, {b_partition: 1}, prefix="wake1")
        _, b1_final = b1.result()
        # b's process is gone; a static member sends no LeaveGroup, so the group still has it.
        assert len(describe(broker.bootstrap, group).members) == 2

        b2 = static("b")
        started.append(b2)
        produce(broker.bootstrap, topic, {b_partition: 1}, prefix="wake2")
        b2_records, b2_final = b2.result()
        produce(broker.bootstrap, topic, {min(owned["a"]): 1}, prefix="wakea")
        a_records, a_final = a.result()
    finally:
        for m in started:
            m.stop()
    assert b2_records == [{"partition": b_partition, "offset": 1, "key": None, "value": f"wake2-{b_partition}-0"}]
    assert set(b1_final["assigned"]) == owned["b"]
    assert b2_final["assigned"] == b1_final["assigned"], "the same assignment after the rejoin"
    assert b2_final["generation"] == b1_final["generation"], "no rebalance: the generation is unchanged"
    assert a_final["generation"] == b1_final["generation"]
    assert set(a_final["assigned"]) == owned["a"]
    assert [r["value"] for r in a_records] == [f"wakea-{min(owned['a'])}-0"]
