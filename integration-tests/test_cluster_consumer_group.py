"""KIP-848 consumer groups survive the loss of their coordinator (issue 26 item 5), 3-node cluster.

The coordinator writes every change of a consumer group to `__consumer_offsets` as Kafka's
records (group epoch, members, target and current assignments) before it answers, and the broker
that becomes the leader of the group's partition rebuilds the group from them. So when the
coordinator is killed with SIGKILL, the members (Java 4.4 consumers, `group.protocol=consumer`)
find the new coordinator and carry on with the member ids, epochs and partitions they had:

- stable group: three members own 2 of 6 partitions each; kill -9 the coordinator; the new one
  (another node) describes the same members with the same epochs and assignments, no member sees
  a partition revoked, lost or assigned after the kill, and every record produced before and after
  is read exactly once (each member commits after each poll);
- during reconciliation: a third member joins a group of two and the coordinator is killed at
  once, while partitions are being handed over; the group settles at 2/2/2 on the new coordinator
  without any member being fenced (no partition `lost`), and every record is read exactly once.

`__consumer_offsets` at replication factor 3. Also passes against Apache Kafka 4.4
(BROOK_TEST_TARGET=kafka), configured the same way.
"""

import uuid

import pytest

from harness import wire
from harness.cluster import wait_for
from test_group_consumer_protocol import (OVERRIDES, consumed, describe_members, member, owned, produce, stop_all,
                                          wait_consumed, wait_split)
from confluent_kafka.admin import AdminClient, NewTopic

CLUSTER_OVERRIDES = {**OVERRIDES, "offsets.topic.replication.factor": "3"}
PARTITIONS = 6
DEADLINE_S = 90


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 3)])[name].result(30)


def coordinator_of(cluster, group: str, exclude=()) -> int:
    """The node every live node names as `group`'s coordinator (other than `exclude`)."""
    def agreed():
        answers = [wire.find_coordinator(cluster.bootstrap_of(i), group) for i in cluster.running_ids()]
        nodes = {a["node_id"] for a in answers if a["error"] == 0}
        if len(answers) == len(cluster.running_ids()) and len(nodes) == 1 and not nodes & set(exclude):
            return nodes.pop()
        return None
    return wait_for(agreed, DEADLINE_S, f"every node naming {group}'s coordinator")


def settled_view(bootstrap: str, group: str, size: int):
    """The described members once there are `size` of them, all at one epoch."""
    view = describe_members(bootstrap, group)
    epochs = {epoch for epoch, _ in view.values()}
    return view if len(view) == size and len(epochs) == 1 else None


def events_after(m, index: int) -> list:
    return [e for e in list(m.events)[index:] if e.get("event") in ("assigned", "revoked", "lost")]


def assert_each_read_once(members, sent: set) -> None:
    got = consumed(members)
    seen = [(p, k, v) for p, k, v, _ in got]
    duplicates = {r for r in seen if seen.count(r) > 1}
    assert not duplicates, f"{len(duplicates)} records read twice, e.g. {sorted(duplicates)[:3]}"
    assert set(seen) == sent, f"missing {len(sent - set(seen))}, unexpected {len(set(seen) - sent)}"


def clean_up(cluster, members, killed) -> None:
    """Kills the members left and brings the killed node back (the module's cluster is shared)."""
    for m in members:
        m.kill()
    if killed is not None:
        cluster.node(killed).start()
        cluster.wait_registered()


def kill_and_wait_successor(cluster, group: str, node: int) -> int:
    cluster.node(node).kill()
    return coordinator_of(cluster, group, exclude=(node,))


def test_a_stable_group_keeps_its_members_epochs_and_partitions_when_its_coordinator_is_killed(cluster):
    topic, group = f"t-cgfail-{uuid.uuid4().hex[:8]}", f"cg-fail-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap, topic)
    members = [member(cluster.bootstrap, group, topic, n) for n in "abc"]
    killed = None
    try:
        split = wait_split(members, per_member=2)
        sent = produce(cluster.bootstrap, topic, 20, "before")
        wait_consumed(members, sent)
        before = wait_for(lambda: settled_view(cluster.bootstrap, group, 3), DEADLINE_S, "3 members at one epoch")
        marks = [len(m.events) for m in members]
        killed = coordinator_of(cluster, group)

        successor = kill_and_wait_successor(cluster, group, killed)
        after_sent = produce(cluster.bootstrap, topic, 20, "after")
        sent |= after_sent
        wait_consumed(members, sent)
        after = wait_for(lambda: settled_view(cluster.bootstrap, group, 3), DEADLINE_S,
                         "the new coordinator describing 3 members")
        assert successor != killed
        assert after == before, f"members before the kill {before}, after {after}"
        for m, mark in zip(members, marks):
            assert events_after(m, mark) == [], f"{m.name} rebalanced after the kill: {events_after(m, mark)}"
        assert {m.name: owned(m) for m in members} == split
        stop_all(members)
        assert_each_read_once(members, sent)
    finally:
        clean_up(cluster, members, killed)


def test_a_group_reconciling_when_its_coordinator_is_killed_settles_on_the_new_one_without_fencing(cluster):
    topic, group = f"t-cgrec-{uuid.uuid4().hex[:8]}", f"cg-rec-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap, topic)
    members = [member(cluster.bootstrap, group, topic, n) for n in "ab"]
    killed = None
    try:
        wait_split(members, per_member=3)
        sent = produce(cluster.bootstrap, topic, 20, "before")
        wait_consumed(members, sent)
        killed = coordinator_of(cluster, group)
        members.append(member(cluster.bootstrap, group, topic, "c"))
        # The newcomer's join is the group's change: kill as soon as the coordinator has it.
        wait_for(lambda: len(describe_members(cluster.bootstrap, group)) == 3, DEADLINE_S, "c joined")
        kill_and_wait_successor(cluster, group, killed)
        sent |= produce(cluster.bootstrap, topic, 20, "after")
        wait_split(members, per_member=2)
        wait_consumed(members, sent)
        lost = [(m.name, e) for m in members for e in list(m.events) if e.get("event") == "lost"]
        assert not lost, f"members were fenced across the failover: {lost}"
        stop_all(members)
        assert_each_read_once(members, sent)
    finally:
        clean_up(cluster, members, killed)
