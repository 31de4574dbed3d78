"""Automatic preferred-leader rebalancing (`auto.leader.rebalance.enable`, the README's claim,
issue 28 item 6): a preferred replica that was killed, lost its leadership and came back leads
again without anyone running `kafka-leader-election`, once it is in the ISR and the next
imbalance check (`leader.imbalance.check.interval.seconds`, 1 s here) runs; Kafka also needs
the broker's share of lost preferred leaderships above `leader.imbalance.per.broker.percentage`
(10 %: one of one here). Every record produced before and after the failover is served by the
returned leader, in order. test_replication_elections.py checks the opposite with rebalancing
off: the returned replica does not lead until an election is asked for.

One cluster for the module; also passes against Apache Kafka.
"""

import pytest

from harness.cluster_scenarios import unique
from harness.drivers import run
from harness.replication import (create_topic_assigned, ensure_running, non_quorum_leaders, read_partition, wait_isr,
                                 wait_views)

CLUSTER_OVERRIDES = {"auto.leader.rebalance.enable": "true", "leader.imbalance.check.interval.seconds": "1"}
MIN_ISR = {"min.insync.replicas": 2}
FAILOVER_S = 30
REJOIN_S = 60
# The rejoined replica leads at the first imbalance check after it is in the ISR.
REBALANCE_S = 30


@pytest.fixture(autouse=True)
def all_nodes_running(cluster):
    ensure_running(cluster)


def produce(bootstrap: str, topic: str, values: list, first_offset: int) -> None:
    acks = run("franz", "produce", bootstrap, "--topic", topic, "--acks", "all",
               records=[{"key": "k", "value": v, "partition": 0} for v in values])
    assert [a["offset"] for a in acks] == list(range(first_offset, first_offset + len(values))), acks


@pytest.mark.timeout(240)
def test_a_returning_preferred_replica_leads_again_without_an_election_being_asked(cluster):
    preferred = non_quorum_leaders(cluster)[0]
    others = [n for n in cluster.node_ids if n != preferred]
    topic = unique("t-rebalance")
    before = create_topic_assigned(cluster, others[0], topic, [[preferred, *others]], MIN_ISR)[0]
    assert before["leader"] == preferred, before
    first = [f"before-{i:03d}" for i in range(20)]
    produce(cluster.bootstrap, topic, first, 0)

    cluster.node(preferred).kill()
    try:
        failed_over = wait_views(cluster, topic, lambda v: v[0]["leader"] in others and v[0]["epoch"] > before["epoch"],
                                 FAILOVER_S, f"{topic}: a new leader among {others}", node_ids=others)[0]
        second = [f"after-{i:03d}" for i in range(20)]
        produce(",".join(cluster.bootstrap_of(n) for n in others), topic, second, 20)
    finally:
        cluster.node(preferred).start()

    back = wait_views(cluster, topic, lambda v: v[0]["leader"] == preferred and v[0]["epoch"] > failed_over["epoch"],
                      REJOIN_S + REBALANCE_S, f"{topic}: node {preferred} leads again by itself")[0]
    assert back["replicas"][0] == preferred, back
    settled = wait_isr(cluster, topic, [1, 2, 3], REJOIN_S, leader=preferred)
    assert settled["epoch"] == back["epoch"], (settled, back)
    read = read_partition("franz", cluster.bootstrap_of(preferred), topic, 0, 40)
    assert read == list(enumerate(first + second)), read
