"""kcat's cells of issue 4's group matrix (librdkafka 2.0.2's balanced consumer, `kcat -G`, each
member a process: harness/kcat_group.py), the scenarios test_group_failover.py and
test_group_resume.py run with the driver clients:

* a member killed with SIGKILL (no LeaveGroup) is evicted once `session.timeout.ms` passes,
  and the survivor takes over its partitions and reads everything produced after the kill,
  exactly once (the victim had committed what it read: librdkafka auto-commits every 100 ms);
* a third member joins a group of two, then one leaves (SIGTERM: kcat closes, LeaveGroup): at
  every step the Stable group's assignment (DescribeGroups) is disjoint and complete, is the
  one the kcat processes log in their rebalance lines, and every record is read exactly once;
* committed offsets survive a broker restart and a new kcat member resumes exactly after them.

Between membership changes the scenarios wait until every record produced so far is read and
committed, so no record is in flight across a rebalance and a duplicate is a real failure.
Every test also passes against Apache Kafka (BROOK_TEST_TARGET=kafka).
"""

import time


from harness.kcat_group import KcatGroupMember
from harness.group_scenarios import create_topic, new_group, produce, values, wait_read_and_committed
from harness.members import assert_disjoint_and_complete, committed, poll_until, stable_assignment

SESSION_MS = 6000  # Kafka's group.min.session.timeout.ms default: the fastest eviction allowed
DEADLINE_S = 60


def logged_assignments(members) -> list:
    """The members' assignments from their own rebalance lines, comparable to DescribeGroups'."""
    return sorted(sorted(m.assigned() or ()) for m in members)


def test_a_killed_kcat_member_is_evicted_after_the_session_timeout_and_the_survivor_reads_its_partitions(
    broker, topic
):
    partitions, per_partition = 4, 25
    create_topic(broker.bootstrap, topic, partitions)
    group = new_group()
    settings = {"session.timeout.ms": SESSION_MS}
    members = [KcatGroupMember(broker.bootstrap, group, topic, settings, name=n) for n in ("a", "b")]
    try:
        owned_two = poll_until(lambda: stable_assignment(broker.bootstrap, group, 2), DEADLINE_S,
                               lambda: f"2 members: {members}")
        before = produce(broker.bootstrap, topic, partitions, per_partition, "before")
        wait_read_and_committed(broker.bootstrap, group, topic, partitions, members, before)
        victim, survivor = members
        victim_partitions = {r["partition"] for r in victim.snapshot()}
        assert victim_partitions and victim_partitions.isdisjoint({r["partition"] for r in survivor.snapshot()})
        survivor_before = len(survivor.snapshot())

        victim.kill()
        killed_at = time.monotonic()
        after = produce(broker.bootstrap, topic, partitions, per_partition, "after")
        victims_after = {v for v in after if int(v.split("-")[1]) in victim_partitions}
        first_taken_over = []

        def survivor_has_everything():
            got = {r["value"] for r in survivor.snapshot()[survivor_before:]}
            if not first_taken_over and got & victims_after:
                first_taken_over.append(time.monotonic() - killed_at)
            return set(after) <= got

        poll_until(survivor_has_everything, DEADLINE_S,
                   lambda: f"survivor read {len(survivor.snapshot()) - survivor_before} of {len(after)}; "
                   f"{survivor.stderr_tail(10)}")
        owned_one = poll_until(lambda: stable_assignment(broker.bootstrap, group, 1), DEADLINE_S, lambda: "1 member")
        survivor_assigned = survivor.assigned()
        # Anything still in flight would show up as a duplicate: let the survivor's committed
        # offsets reach the end too (auto-commit), then close it.
        wait_read_and_committed(broker.bootstrap, group, topic, partitions, members, before + after)
        assert survivor.stop() == 0, survivor.stderr_tail()
    finally:
        for m in members:
            m.kill()
    assert_disjoint_and_complete(owned_two, partitions)
    assert victim_partitions in owned_two.values(), f"the victim read exactly its partitions: {owned_two}"
    # The victim's heartbeats stopped at most a heartbeat interval (1 s) before the kill, so
    # Kafka's session timer expires 5-6 s after it: not sooner (no eviction on disconnect).
    assert first_taken_over and first_taken_over[0] >= SESSION_MS / 1000 - 2, first_taken_over
    assert list(owned_one.values()) == [set(range(partitions))]
    assert survivor_assigned == set(range(partitions)), f"kcat's own rebalance line: {survivor.rebalances}"
    survivor_after = [r["value"] for r in survivor.records[survivor_before:]]
    assert sorted(survivor_after) == sorted(after), "the survivor reads every later record exactly once"
    assert sorted(values(members)) == sorted(before + after), "no loss, no duplicate"


def test_a_third_kcat_member_joins_then_one_leaves_and_the_assignment_stays_disjoint_and_complete(broker, topic):
    partitions, per_partition = 6, 20
    create_topic(broker.bootstrap, topic, partitions)
    group = new_group()

    def member(name):
        return KcatGroupMember(broker.bootstrap, group, topic, {"session.timeout.ms": 10000}, name=name)

    def settled(members):
        """DescribeGroups' Stable assignment once it covers the topic and every running kcat
        has logged it (its last rebalance line), so both views are of the same generation."""
        owned = stable_assignment(broker.bootstrap, group, len(members))
        if not owned or {p for ps in owned.values() for p in ps} != set(range(partitions)):
            return None
        if logged_assignments(members) != sorted(sorted(ps) for ps in owned.values()):
            return None
        return owned

    a, b = member("a"), member("b")
    started, sent, steps = [a, b], [], []
    try:
        steps.append(poll_until(lambda: settled([a, b]), DEADLINE_S, lambda: f"2 members: {started}"))
        sent += produce(broker.bootstrap, topic, partitions, per_partition, "two")
        wait_read_and_committed(broker.bootstrap, group, topic, partitions, started, sent)

        c = member("c")
        started.append(c)
        steps.append(poll_until(lambda: settled([a, b, c]), DEADLINE_S, lambda: f"3 members: {started}"))
        sent += produce(broker.bootstrap, topic, partitions, per_partition, "three")
        wait_read_and_committed(broker.bootstrap, group, topic, partitions, started, sent)
        c_read_three = {r["value"] for r in c.snapshot()}

        b_exit = b.stop()
        steps.append(poll_until(lambda: settled([a, c]), DEADLINE_S, lambda: f"2 members after b left: {started}"))
        sent += produce(broker.bootstrap, topic, partitions, per_partition, "after")
        wait_read_and_committed(broker.bootstrap, group, topic, partitions, started, sent)
        exits = [a.stop(), c.stop()]
    finally:
        for m in started:
            m.kill()
    for owned in steps:
        assert_disjoint_and_complete(owned, partitions)
    assert [len(s) for s in steps] == [2, 3, 2]
    # librdkafka's default partition.assignment.strategy is "range,roundrobin": range is
    # chosen, so 6 partitions split [3, 3], then [2, 2, 2], then [3, 3] again.
    assert [sorted(len(ps) for ps in s.values()) for s in steps] == [[3, 3], [2, 2, 2], [3, 3]]
    assert b_exit == 0 and exits == [0, 0], f"graceful closes: b {b_exit}, a/c {exits}\n{b.stderr_tail()}"
    assert b.rebalances[-1][0] == "revoked", f"b gave its partitions back on close: {b.rebalances}"
    assert c_read_three and all(v.startswith("three-") for v in c_read_three), "c read its share after joining"
    assert not any(r["value"].startswith("after-") for r in b.records), "nothing reaches a member that left"
    assert sorted(values(started)) == sorted(sent), "every record exactly once across the changes"


def test_committed_offsets_survive_a_restart_and_a_new_kcat_member_resumes_exactly_after_them(broker, topic):
    create_topic(broker.bootstrap, topic, 1)
    sent = produce(broker.bootstrap, topic, 1, 200, "v")
    group = new_group()
    first = KcatGroupMember(broker.bootstrap, group, topic, count=100, name="first")
    first.wait(DEADLINE_S * 2)  # -c 100: kcat closes the consumer, committing what it printed
    assert [r["offset"] for r in first.records] == list(range(100))
    assert committed(broker.bootstrap, group, topic, 1) == {0: 100}

    broker.restart()

    rest = KcatGroupMember(broker.bootstrap, group, topic, name="rest")
    try:
        # The committed offset reaching 200 means kcat was handed every record up to the end;
        # a re-delivery of an already committed record would show up among them.
        poll_until(lambda: set(sent[100:]) <= set(values([rest]))
                   and committed(broker.bootstrap, group, topic, 1) == {0: 200}, DEADLINE_S,
                   lambda: f"{rest}, committed {committed(broker.bootstrap, group, topic, 1)}\n{rest.stderr_tail()}")
        assert rest.stop() == 0, rest.stderr_tail()
    finally:
        rest.kill()
    assert [r["offset"] for r in rest.records] == list(range(100, 200)), "resumes at 100: no loss, no re-delivery"
    assert [r["value"] for r in first.records + rest.records] == sent
    assert rest.rebalances[0] == ("assigned", frozenset({0})), rest.rebalances
