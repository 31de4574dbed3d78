"""Leader elections (issue #11, "Tests"), on RF=3 topics with min.insync.replicas=2:

* preferred leader election: the preferred replica (replicas[0]) is killed, another ISR member
  leads, the preferred one restarts and rejoins the ISR but does not lead (no automatic
  rebalancing in this module); `kafka-leader-election --election-type PREFERRED` moves the
  leadership back: the tool says so, every node shows replicas[0] leading with a higher leader
  epoch, and it serves every record produced before and after the failover;
* controlled shutdown: SIGTERM to a broker leading two of three partitions while Java's
  idempotent acks=all producer runs: its partitions are led elsewhere (as another node answers)
  before the process has exited, it exits within 30 s, the producer has no failed send and every
  record is in its partition, in send order, once. The broker then restarts and rejoins.

One cluster for the module; also passes against Apache Kafka.
"""

import os
import signal
import threading
import time

import pytest

from harness.broker import CLEAN_EXIT_CODES
from harness.cluster_scenarios import unique
from harness.drivers import run
from harness.replication import (ensure_running, PacedProducer, create_topic_assigned, elect_leaders, non_quorum_leaders,
                                 read_partition, wait_isr, wait_views)

CLUSTER_OVERRIDES = {"auto.leader.rebalance.enable": "false"}


@pytest.fixture(autouse=True)
def all_nodes_running(cluster):
    """Each test starts with every node up (one a failed test left down is brought back)."""
    ensure_running(cluster)


MIN_ISR = {"min.insync.replicas": 2}
FAILOVER_S = 30
REJOIN_S = 60
EXIT_S = 30
OBSERVATION_SLACK_S = 1.0  # see the controlled-shutdown test


def values(tag: str, count: int):
    return [f"{tag}-{i:03d}" for i in range(count)]


@pytest.mark.timeout(240)
def test_preferred_leader_election_moves_leadership_back_to_the_first_replica(cluster):
    preferred = non_quorum_leaders(cluster)[0]
    others = [n for n in cluster.node_ids if n != preferred]
    topic = unique("t-preferred")
    before = create_topic_assigned(cluster, others[0], topic, [[preferred, *others]], MIN_ISR)[0]
    first = values("before", 20)
    acks = run("franz", "produce", cluster.bootstrap, "--topic", topic, "--acks", "all",
               records=[{"key": "k", "value": v, "partition": 0} for v in first])
    assert [a["offset"] for a in acks] == list(range(20))

    cluster.node(preferred).kill()
    try:
        failed_over = wait_views(cluster, topic, lambda v: v[0]["leader"] in others and v[0]["epoch"] > before["epoch"],
                                 FAILOVER_S, f"{topic}: a new leader among {others}", node_ids=others)[0]
        second = values("after", 20)
        acks = run("franz", "produce", ",".join(cluster.bootstrap_of(n) for n in others), "--topic", topic,
                   "--acks", "all", records=[{"key": "k", "value": v, "partition": 0} for v in second])
        assert [a["offset"] for a in acks] == list(range(20, 40))
    finally:
        cluster.node(preferred).start()
    rejoined = wait_isr(cluster, topic, [1, 2, 3], REJOIN_S, leader=failed_over["leader"])
    assert rejoined["replicas"][0] == preferred and rejoined["leader"] != preferred, rejoined

    proc = elect_leaders(cluster, others[1], "PREFERRED", topic, 0)
    assert f"Successfully completed leader election (PREFERRED) for partitions {topic}-0" in proc.stdout, proc.stdout
    elected = wait_views(cluster, topic, lambda v: v[0]["leader"] == preferred and v[0]["epoch"] > rejoined["epoch"],
                         30, f"{topic}: node {preferred} leads again with an epoch above {rejoined['epoch']}")[0]
    assert sorted(elected["isr"]) == [1, 2, 3], elected
    read = read_partition("franz", cluster.bootstrap_of(preferred), topic, 0, 40)
    assert read == list(enumerate(first + second)), read

    again = elect_leaders(cluster, others[0], "PREFERRED", topic, 0, check=False)
    assert "Successfully completed leader election" not in again.stdout, again.stdout
    assert wait_views(cluster, topic, lambda v: v[0]["leader"] == preferred, 5, "unchanged")[0]["epoch"] == elected["epoch"]


@pytest.mark.timeout(240)
def test_controlled_shutdown_moves_leaders_before_exit_and_the_producer_loses_nothing(cluster, tmp_path):
    victim = non_quorum_leaders(cluster)[0]
    a, b = [n for n in cluster.node_ids if n != victim]
    topic = unique("t-controlled")
    assignment = [[victim, a, b], [victim, b, a], [a, b, victim]]
    before = create_topic_assigned(cluster, a, topic, assignment, MIN_ISR)
    led = [p for p, s in before.items() if s["leader"] == victim]
    assert led == [0, 1], before

    per_partition = 200
    sent = {p: values(f"p{p}", per_partition) for p in range(3)}
    records = [{"key": f"k{p}", "value": sent[p][i], "partition": p} for i in range(per_partition) for p in range(3)]
    producer = PacedProducer("java", cluster.bootstrap, topic, records, "--acks", "all", "--idempotent",
                             "--interval-ms", 10, tmp_dir=tmp_path)
    node = cluster.node(victim)
    exited = {}

    def stop():
        started = time.monotonic()
        os.killpg(node.pid, signal.SIGTERM)  # as Broker.stop() does; the exit is timed here
        code = node.wait_exit(EXIT_S + 5)
        exited["code"], exited["at"], exited["took"] = code, time.monotonic(), time.monotonic() - started

    try:
        producer.wait_results(60, 60)
        stopper = threading.Thread(target=stop)
        stopper.start()
        moved = wait_views(cluster, topic, lambda v: all(v[p]["leader"] in (a, b) for p in led), EXIT_S,
                           f"partitions {led} led by {a} or {b}", node_ids=[a])
        moved_at = time.monotonic()
        stopper.join(EXIT_S + 10)
        assert exited.get("code") in CLEAN_EXIT_CODES[cluster.kind], \
            f"node {victim} after SIGTERM: exit {exited.get('code')} (None: still running after {EXIT_S} s)"
        # The move is observed by polling another node, up to one poll (plus a request) late;
        # a broker that exits within that time after its controlled shutdown committed
        # (brook: ~0.2 s) would otherwise look late. A move made only when the session expired
        # after the exit would come broker.session.timeout.ms (6 s) after it.
        assert moved_at <= exited["at"] + OBSERVATION_SLACK_S, "leadership moved only after the process had exited"
        results = producer.wait(120)
    finally:
        if producer.alive:
            producer.kill()
        if node.running and exited.get("code") is None:
            node.kill()
        node.start()
    print(f"node {victim} exited {exited['code']} {exited['took']:.1f} s after SIGTERM; "
          f"its partitions were seen moved {exited['at'] - moved_at:.1f} s before the exit")
    for p in led:
        assert moved[p]["epoch"] > before[p]["epoch"] and victim not in moved[p]["isr"], (p, moved[p], before[p])
    failed = [r for r in results if "error" in r]
    assert not failed, f"sends failed across the controlled shutdown: {failed[:5]}"
    assert len(results) == len(records)
    for p in range(3):
        read = read_partition("franz", cluster.bootstrap_of(a), topic, p, per_partition)
        assert read == list(enumerate(sent[p])), f"partition {p}: {read[:5]}... ({len(read)} records)"
    wait_isr(cluster, topic, [1, 2, 3], REJOIN_S, partition=0)
    wait_isr(cluster, topic, [1, 2, 3], REJOIN_S, partition=1)
