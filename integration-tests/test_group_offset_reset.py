"""`auto.offset.reset` for a new consumer group (no committed offsets), the cells of issue 4's
matrix test_group_clients.py leaves out (it has confluent-kafka and kafka-python): Java,
franz-go and kafkajs as driver processes (`group-consume --from earliest|latest`, mapped to
auto.offset.reset, kgo.ConsumeResetOffset and kafkajs' `fromBeginning`), kcat as `kcat -G -X
auto.offset.reset=...` (harness/kcat_group.py).

* earliest: the new group reads every record that existed before it, from offset 0, in order;
* latest: the new group reads none of the older records; once it has its assignment it reads
  exactly the records produced after that, at their offsets, and commits up to the end.

"latest" is resolved after the assignment (OffsetFetch finds nothing, then ListOffsets
LATEST), so a record produced in between is rightly skipped (librdkafka 2.0.2, for one, sends
that ListOffsets ~100 ms after kcat logs its assignment: a record produced on seeing the
rebalance line was skipped in 1 of 5 runs). So after the assignment the test produces single
probe records until the member prints one, which pins its position, then produces the new
records and expects exactly (the probes from the first it printed) + them.
Every test also passes against Apache Kafka (BROOK_TEST_TARGET=kafka).
"""

import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness.kcat_group import KcatGroupMember
from harness.members import GroupMember, committed, poll_until, stable_assignment

CLIENTS = ["java", "franz", "kafkajs", "kcat"]
DEADLINE_S = 60
MEMBER_TIMEOUT_MS = 100000  # a safety net only: every member here stops by count or SIGTERM
OLD = 10
NEW = 10
PROBE_WAIT_S = 1.0  # how long a probe may take to show up before the next one is produced


def new_group() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=30)


def produce(bootstrap: str, topic: str, values: list) -> list:
    # A producer per call, like the neighbouring tests: none outlives its records (a failed
    # test's frame would keep one reconnecting to the stopped broker, flooding stderr).
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for value in values:
        producer.produce(topic, value=value.encode(), partition=0)
    assert producer.flush(30) == 0
    return values


def member(client: str, bootstrap: str, group: str, topic: str, reset: str, count=None):
    if client == "kcat":
        return KcatGroupMember(bootstrap, group, topic, {"auto.offset.reset": reset}, count=count, name="kcat")
    extra = ["--from", reset, "--timeout-ms", MEMBER_TIMEOUT_MS]
    if count is not None:
        extra += ["--count", count]
    return GroupMember(client, bootstrap, group, topic, *extra)


def poll_until_or_not(condition, timeout: float) -> bool:
    """Poll `condition` for up to `timeout` seconds; False (no error) if it never held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("client", CLIENTS)
def test_a_new_group_with_earliest_reads_every_older_record_from_offset_zero(broker, topic, client):
    create_topic(broker.bootstrap, topic)
    before = produce(broker.bootstrap, topic, [f"before-{i}" for i in range(OLD)])
    group = new_group()

    m = member(client, broker.bootstrap, group, topic, "earliest", count=OLD)
    try:
        final = m.wait(DEADLINE_S * 2)
    finally:
        m.kill()
    assert [(r["offset"], r["value"]) for r in m.records] == list(enumerate(before))
    assert committed(broker.bootstrap, group, topic, 1) == {0: OLD}, "the member committed what it read"
    if client == "kcat":
        assert m.rebalances[0] == ("assigned", frozenset({0})), m.rebalances
    else:
        assert final is not None and final["assigned"] == [0]


@pytest.mark.parametrize("client", CLIENTS)
def test_a_new_group_with_latest_reads_only_the_records_produced_after_its_assignment(broker, topic, client):
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [f"before-{i}" for i in range(OLD)])
    group = new_group()

    m = member(client, broker.bootstrap, group, topic, "latest")
    probes, after = [], []
    try:
        if client == "kcat":
            poll_until(lambda: m.assigned() == {0}, DEADLINE_S, lambda: f"kcat's rebalance line: {m.stderr_tail()}")
        else:
            poll_until(lambda: stable_assignment(broker.bootstrap, group, 1), DEADLINE_S,
                       lambda: f"an assignment: {m.stderr_tail()}")
        deadline = time.monotonic() + DEADLINE_S
        while not m.snapshot():
            assert time.monotonic() < deadline, f"no probe read: {m.records}\n{m.stderr_tail()}"
            produce(broker.bootstrap, topic, [f"probe-{len(probes)}"])
            probes.append(f"probe-{len(probes)}")
            poll_until_or_not(lambda: m.snapshot(), PROBE_WAIT_S)
        after = produce(broker.bootstrap, topic, [f"after-{i}" for i in range(NEW)])
        end = OLD + len(probes) + NEW
        poll_until(lambda: set(after) <= {r["value"] for r in m.snapshot()}
                   and committed(broker.bootstrap, group, topic, 1) == {0: end}, DEADLINE_S,
                   lambda: f"{m}: committed {committed(broker.bootstrap, group, topic, 1)}\n{m.stderr_tail()}")
        stopped = m.stop()
    finally:
        m.kill()
    got = [r["value"] for r in m.records]
    assert not any(v.startswith("before-") for v in got), f"latest: no older record: {got}"
    assert got and got[0] in probes, got
    first = probes.index(got[0])
    assert got == probes[first:] + after, "exactly the records produced after the position was fixed"
    assert [r["offset"] for r in m.records] == list(range(OLD + first, OLD + len(probes) + NEW))
    if client == "kcat":
        assert stopped == 0, m.stderr_tail()
    else:
        assert stopped is not None and stopped["assigned"] == [0], m.stderr_tail()

