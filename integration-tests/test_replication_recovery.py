"""What a returning replica must and must not bring back (issue #11, "Tests"):

* a former leader with an unreplicated tail truncates it on return: RF=3, min.insync.replicas=1;
  10 records with acks=all reach every replica; both followers are paused (SIGSTOP, shorter than
  broker.session.timeout.ms, so they stay in the ISR and the high watermark stays at 10) while
  5 records are acknowledged with acks=1 by the leader alone; the leader is killed (SIGKILL) and
  the followers resumed; a follower is elected with a higher epoch and takes 7 more records with
  acks=all at offsets 10..16. The old leader restarts, rejoins the ISR and is made leader again
  (preferred election): it serves exactly the 10 + 7 records at offsets 0..16, none of the 5
  tail records (acks=1 promised nothing beyond the leader, and the new epoch replaced them);
* `__consumer_offsets` with replication factor 3: a group's commits acknowledged by its
  coordinator survive the coordinator's SIGKILL: the new leader of the group's offsets partition
  answers with every committed offset, and a member resumes exactly there.

One cluster for the module (offsets topic RF 3, no automatic leader rebalancing). Also passes
against Apache Kafka.
"""

import os
import signal
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from harness import wire
from harness.cluster_scenarios import unique
from harness.group_scenarios import new_group, produce
from harness.members import committed
from harness.replication import (PacedProducer, create_topic_assigned, elect_leaders, ensure_running,
                                 non_quorum_leaders, read_partition, wait_isr, wait_views)

CLUSTER_OVERRIDES = {"auto.leader.rebalance.enable": "false", "offsets.topic.replication.factor": "3"}
FAILOVER_S = 45
REJOIN_S = 60


@pytest.fixture(autouse=True)
def all_nodes_running(cluster):
    ensure_running(cluster)
    yield
    for n in cluster.node_ids:
        node = cluster.node(n)
        if node.running:
            try:
                os.killpg(node.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass


def produce_values(cluster, bootstrap: str, topic: str, values, acks: str, tmp_path) -> list:
    """`values` to partition 0 with Java's producer (non-idempotent, no retries); the results."""
    records = [{"key": "k", "value": v, "partition": 0} for v in values]
    p = PacedProducer("java", bootstrap, topic, records, "--acks", acks, "--retries", 0,
                      "--request-timeout-ms", 10000, "--delivery-timeout-ms", 20000, tmp_dir=tmp_path)
    results = p.wait(90)
    failed = [r for r in results if "error" in r]
    assert not failed, f"acks={acks} sends failed: {failed[:3]}"
    return results


@pytest.mark.timeout(300)
def test_a_former_leaders_unreplicated_tail_is_truncated_and_never_served(cluster, tmp_path):
    leader = non_quorum_leaders(cluster)[0]
    followers = [n for n in cluster.node_ids if n != leader]
    topic = unique("t-tail")
    before = create_topic_assigned(cluster, followers[0], topic, [[leader] + followers],
                                   {"min.insync.replicas": 1})
    committed_values = [f"committed-{i}" for i in range(10)]
    produce_values(cluster, cluster.bootstrap_of(leader), topic, committed_values, "all", tmp_path)

    # The tail: acknowledged by the leader alone while both followers are frozen.
    for f in followers:
        os.killpg(cluster.node(f).pid, signal.SIGSTOP)
    try:
        tail = produce_values(cluster, cluster.bootstrap_of(leader), topic, [f"tail-{i}" for i in range(5)],
                              "1", tmp_path)
        assert [r["offset"] for r in tail] == list(range(10, 15)), tail
        cluster.node(leader).kill()
    finally:
        for f in followers:
            os.killpg(cluster.node(f).pid, signal.SIGCONT)

    moved = wait_views(cluster, topic, lambda v: v[0]["leader"] in followers, FAILOVER_S,
                       f"{topic} led by one of {followers}", node_ids=followers)
    assert moved[0]["epoch"] > before[0]["epoch"], (moved, before)
    later = [f"later-{i}" for i in range(7)]
    results = produce_values(cluster, cluster.bootstrap_of(moved[0]["leader"]), topic, later, "all", tmp_path)
    assert [r["offset"] for r in results] == list(range(10, 17)), results

    cluster.node(leader).start()
    wait_isr(cluster, topic, [leader] + followers, REJOIN_S)
    elect_leaders(cluster, followers[0], "PREFERRED", topic)
    back = wait_views(cluster, topic, lambda v: v[0]["leader"] == leader, 30, f"{topic} led by {leader} again")
    assert back[0]["epoch"] > moved[0]["epoch"]
    read = read_partition("confluent", cluster.bootstrap_of(leader), topic, 0, 17)
    assert read == list(enumerate(committed_values + later)), read
    assert wire.list_offsets(cluster.bootstrap_of(leader), topic, [0], wire.LATEST)[0]["offset"] == 17


@pytest.mark.timeout(300)
def test_commits_acknowledged_by_a_killed_coordinator_are_served_by_the_next_one(cluster, tmp_path):
    victim = non_quorum_leaders(cluster)[0]
    survivor = next(n for n in cluster.node_ids if n != victim)
    topic = unique("t-offsets")
    create_topic_assigned(cluster, survivor, topic, [[survivor, victim] + [n for n in cluster.node_ids
                                                                          if n not in (survivor, victim)]])
    produce(cluster.bootstrap, topic, 1, 30, "r")
    # A group whose coordinator is the victim.
    group = next(g for g in (new_group() for _ in range(500))
                 if wire.find_coordinator(cluster.bootstrap_of(survivor), g)["node_id"] == victim)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_of(victim), "group.id": group,
                         "enable.auto.commit": False})
    try:
        for offset in (5, 12, 20):
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()
    assert committed(cluster.bootstrap_of(victim), group, topic, 1) == {0: 20}

    cluster.node(victim).kill()
    try:
        wait_views(cluster, "__consumer_offsets", lambda v: all(s["leader"] != victim for s in v.values()),
                   FAILOVER_S, f"__consumer_offsets led without {victim}", node_ids=[survivor])
        survivors = ",".join(cluster.bootstrap_of(n) for n in cluster.node_ids if n != victim)
        cluster.wait_for(lambda: committed(survivors, group, topic, 1) == {0: 20}, FAILOVER_S,
                         lambda: f"the new coordinator serves offset 20: {committed(survivors, group, topic, 1)}")
        # A member resumes exactly at the committed offset.
        member = Consumer({"bootstrap.servers": survivors, "group.id": group, "enable.auto.commit": False,
                           "auto.offset.reset": "earliest"})
        try:
            member.subscribe([topic])
            got = []
            end = time.monotonic() + 60
            while len(got) < 10 and time.monotonic() < end:
                m = member.poll(1.0)
                if m is not None and m.error() is None:
                    got.append((m.offset(), m.value().decode()))
        finally:
            member.close()
        assert got == [(o, f"r-0-{o}") for o in range(20, 30)], got
    finally:
        cluster.node(victim).start()
