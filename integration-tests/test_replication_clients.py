"""Leader failover under every client's acks=all producer (issue #11, "Tests"):

For each client (java, confluent, kcat, franz, kafka_python, kafkajs): an RF=3 topic with
min.insync.replicas=2 and one partition, led by a broker that does not lead the metadata
quorum. The client's idempotent acks=all producer (harness/replication.py's `produce-paced`:
one producer, records 10 ms apart, results printed as they arrive) sends 300 records; after the
first acknowledgements, while it still runs, the leader is killed with SIGKILL. The survivors
elect a new leader from the ISR with a higher leader epoch; the producer rides the failover out
(no failed send); every acknowledged record is read back (by the same client, from a survivor)
exactly once, in send order, at its acknowledged offset, offsets contiguous, and nothing else is
in the log. The killed node restarts and rejoins the ISR before the next case.

Java also runs a consumer-group member from before the kill: it reads across the failover from
the new leader (the Java consumer validates its position with OffsetForLeaderEpoch after the
leader change; on brook its /metrics show that request reached a survivor), every record once
at its offset, and its committed offset ends after the last.

One cluster for the module (leaders are never rebalanced automatically here, so the new leader
stays put); also passes against Apache Kafka.
"""

import sys
import time

import pytest

from harness import paths, wire
from harness.cluster import wait_for
from harness.cluster_scenarios import unique
from harness.drivers import CLIENTS
from harness.members import GroupMember, committed
from harness.replication import (ensure_running, PacedProducer, assert_acked_read_back_once, create_topic_assigned,
                                 non_quorum_leaders, partition_state, read_partition, wait_isr, wait_views)

CLUSTER_OVERRIDES = {"auto.leader.rebalance.enable": "false"}


@pytest.fixture(autouse=True)
def all_nodes_running(cluster):
    """Each test starts with every node up (one a failed test left down is brought back)."""
    ensure_running(cluster)


RECORDS = 300
KILL_AFTER = 30  # acknowledgements before the kill
INTERVAL_MS = 10
FAILOVER_S = 30  # kill -> new leader: broker.session.timeout.ms (6 s) + election, generously
REJOIN_S = 60


def find_group(cluster, not_on: int, prefix: str) -> str:
    """A fresh group id whose coordinator (as every node answers) is not node `not_on`."""
    names = iter(f"{prefix}-{i}" for i in range(10_000))

    def probe():
        name = next(names)
        answers = [wire.find_coordinator(cluster.bootstrap_of(n), name) for n in cluster.running_ids()]
        nodes = {a["node_id"] for a in answers}
        if any(a["error"] for a in answers) or len(nodes) != 1 or not_on in nodes:
            return None
        return name

    return wait_for(probe, 60, f"a group not coordinated by node {not_on}", interval=0.2)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("client", CLIENTS)
def test_leader_killed_mid_stream_every_acked_record_read_back_once(cluster, client, tmp_path):
    candidates = non_quorum_leaders(cluster)
    victim = candidates[CLIENTS.index(client) % len(candidates)]
    others = [n for n in cluster.node_ids if n != victim]
    topic = unique(f"t-failover-{client}")
    before = create_topic_assigned(cluster, others[0], topic, [[victim, *others]], {"min.insync.replicas": 2})[0]
    assert before["leader"] == victim and sorted(before["isr"]) == [1, 2, 3], before

    sent = [f"{client}-{i:04d}" for i in range(RECORDS)]
    records = [{"key": f"k{i % 7}", "value": v, "partition": 0} for i, v in enumerate(sent)]
    member = None
    if client == "java":
        group = find_group(cluster, victim, unique("g-failover"))
        member = GroupMember("java", cluster.bootstrap, group, topic, "--count", RECORDS, "--timeout-ms", 120_000,
                             "--events", name="java-group")
        wait_for(lambda: any(e["event"] == "assigned" and e["partitions"] == [0] for e in member.events), 60,
                 lambda: f"the group member is assigned partition 0: {member.events}\n{member.stderr_tail()}")

    validations_before = sum(cluster.node(n).requests_served("OffsetForLeaderEpoch") for n in others)
    producer = PacedProducer(client, cluster.bootstrap, topic, records, "--acks", "all", "--idempotent",
                             "--interval-ms", INTERVAL_MS, tmp_dir=tmp_path)
    try:
        producer.wait_results(KILL_AFTER, 60)
        if member is not None:
            wait_for(lambda: member.snapshot(), 30, "the group member has read something before the kill")
        cluster.node(victim).kill()
        killed_at = time.monotonic()
        acked_at_kill = len(producer.acked())
        read_at_kill = len(member.snapshot()) if member is not None else None
        assert acked_at_kill < RECORDS and producer.alive, "the producer must still be running at the kill"

        after = wait_views(cluster, topic,
                           lambda v: v[0]["leader"] in others and v[0]["epoch"] > before["epoch"]
                           and victim not in v[0]["isr"],
                           FAILOVER_S, f"a new leader among {others} with an epoch above {before['epoch']}",
                           node_ids=others)[0]
        failover_s = time.monotonic() - killed_at
        cluster.node(victim).launch()
        results = producer.wait(120)
        produced_s = time.monotonic() - killed_at
    finally:
        if producer.alive:
            producer.kill()
        if member is not None and member.alive and sys.exc_info()[0] is not None:
            member.kill()
        cluster.node(victim).launch()  # a no-op once relaunched above; a failed test's next one waits for it
    failed = [r for r in results if "error" in r]
    assert not failed, f"{client}: sends failed across the failover: {failed[:5]}"
    assert sorted(r["index"] for r in results) == list(range(RECORDS)), "one result per record"
    print(f"{client}: leader {victim} killed after {acked_at_kill} acks; new leader {after['leader']} "
          f"(epoch {before['epoch']} -> {after['epoch']}) after {failover_s:.1f} s; producer done after {produced_s:.1f} s")

    t0 = time.monotonic()
    read = read_partition(client, cluster.bootstrap_of(after["leader"]), topic, 0, RECORDS)
    print(f"{client}: read back in {time.monotonic() - t0:.1f} s")
    assert_acked_read_back_once(read, sent, results, exact=True)

    if member is not None:
        member.wait(90)
        got = [(r["offset"], r["value"]) for r in member.records]
        assert got == list(enumerate(sent)), (
            f"the group member read {len(got)} records across the failover (had {read_at_kill} at the kill); "
            f"first difference at {next((i for i, (a, b) in enumerate(zip(got, enumerate(sent))) if a != b), len(got))}")
        assert 0 < read_at_kill < RECORDS
        assert committed(cluster.bootstrap, group, topic, 1) == {0: RECORDS}
        if paths.target() == "brook":
            # KIP-320: after the leader change the Java consumer validates its position with
            # OffsetForLeaderEpoch at the new leader before fetching on (brook's /metrics).
            validations = sum(cluster.node(n).requests_served("OffsetForLeaderEpoch") for n in others)
            assert validations > validations_before, "the Java consumer's position validation reached the broker"

    cluster.node(victim).wait_ready(120)
    state = wait_isr(cluster, topic, [1, 2, 3], REJOIN_S)
    assert state["leader"] == after["leader"] and state["epoch"] >= after["epoch"], (state, after)
    final = partition_state(cluster, victim, topic)
    assert final["leader"] == after["leader"] and final["epoch"] > before["epoch"], final
