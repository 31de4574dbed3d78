"""The ISR and min.insync.replicas (issue #11, "Tests"), on RF=3 topics with min.insync.replicas=2:

* two of three brokers stopped (SIGTERM, one after the other: each controlled shutdown takes the
  broker out of the ISR while a quorum remains): once the ISR is only the leader, Java's acks=all
  (retries=0) fails with NOT_ENOUGH_REPLICAS and writes nothing, acks=1 is acknowledged but stays
  invisible (ListOffsets LATEST, a consumer: the high watermark does not move while the ISR is
  below min.insync.replicas; kafka-topics cannot be asked then: without a quorum its AdminClient
  hangs on Kafka too);
  restarted, the two rejoin the ISR, acks=all succeeds and the acks=1 record becomes visible;
* a follower killed while 100,000 records are produced with acks=all (ISR of two) catches up
  after its restart and rejoins the ISR within a deadline; made leader again by a preferred
  election, it serves the same log end offset and the last record;
* kafka-topics --describe --under-replicated-partitions lists a partition while a follower is
  paused (SIGSTOP: fenced after broker.session.timeout.ms, out of the ISR) and not once it has
  resumed and rejoined.

One cluster for the module (no automatic leader rebalancing); also passes against Apache Kafka.
"""

import time

import pytest

from harness import paths
from harness.cluster import wait_for
from harness.cluster_scenarios import unique
from harness.drivers import run
from harness.replication import (ensure_running, PacedProducer, create_topic_assigned, elect_leaders, latest_offset,
                                 non_quorum_leaders, partition_state, producer_perf_test, read_partition,
                                 under_replicated, wait_isr, wait_views)

CLUSTER_OVERRIDES = {"auto.leader.rebalance.enable": "false"}


@pytest.fixture(autouse=True)
def all_nodes_running(cluster):
    """Each test starts with every node up (one a failed test left down is brought back)."""
    ensure_running(cluster)


MIN_ISR = {"min.insync.replicas": 2}
ISR_CHANGE_S = 30
REJOIN_S = 60
PERF_RECORDS = 100_000


def produce_one(cluster, topic: str, value: str, acks: str, tmp_path, *extra) -> dict:
    """One record to partition 0 by Java's producer (non-idempotent, no retries, short timeouts):
    its result line."""
    p = PacedProducer("java", cluster.bootstrap, topic, [{"key": "k", "value": value, "partition": 0}],
                      "--acks", acks, "--retries", 0, "--request-timeout-ms", 5000, "--delivery-timeout-ms", 10000,
                      *extra, tmp_dir=tmp_path)
    (result,) = p.wait(60)
    return result


def start_all(cluster, node_ids) -> None:
    for n in node_ids:
        cluster.node(n).launch()
    for n in node_ids:
        cluster.node(n).wait_ready(120)


@pytest.mark.timeout(300)
def test_below_min_insync_acks_all_is_refused_acks_1_stays_invisible_until_the_isr_is_back(cluster, tmp_path):
    quorum_leader = cluster.wait_quorum_leader(60)
    leader = next(n for n in cluster.node_ids if n != quorum_leader)
    first_stop = quorum_leader  # stopped while two voters remain: a new quorum leader is elected
    second_stop = next(n for n in cluster.node_ids if n not in (leader, first_stop))
    topic = unique("t-min-isr")
    create_topic_assigned(cluster, leader, topic, [[leader, first_stop, second_stop]], MIN_ISR)
    base = [f"base-{i}" for i in range(5)]
    acks = run("franz", "produce", cluster.bootstrap, "--topic", topic, "--acks", "all",
               records=[{"key": "k", "value": v, "partition": 0} for v in base])
    assert [a["offset"] for a in acks] == [0, 1, 2, 3, 4]

    try:
        cluster.node(first_stop).stop()
        wait_isr(cluster, topic, [leader, second_stop], ISR_CHANGE_S, leader=leader)
        cluster.node(second_stop).stop()
        shrunk = wait_isr(cluster, topic, [leader], ISR_CHANGE_S, leader=leader, node_ids=[leader])
        assert shrunk["replicas"] == [leader, first_stop, second_stop], shrunk

        refused = produce_one(cluster, topic, "all-while-alone", "all", tmp_path)
        assert refused.get("error") == "NOT_ENOUGH_REPLICAS", f"acks=all with ISR [{leader}]: {refused}"
        accepted = produce_one(cluster, topic, "one-while-alone", "1", tmp_path)
        assert accepted == {"index": 0, "partition": 0, "offset": len(base)}, f"acks=1 with ISR [{leader}]: {accepted}"
        # The high watermark stays below the acks=1 record while the ISR is under min.insync.replicas.
        assert latest_offset(cluster, leader, topic) == len(base)
        visible = read_partition("franz", cluster.bootstrap_of(leader), topic, 0, len(base) + 1, timeout_s=3)
        assert visible == list(enumerate(base)), f"a consumer sees only the replicated records: {visible}"
    finally:
        start_all(cluster, [first_stop, second_stop])

    wait_isr(cluster, topic, [1, 2, 3], REJOIN_S, leader=leader)
    after = produce_one(cluster, topic, "all-after-restart", "all", tmp_path)
    assert after == {"index": 0, "partition": 0, "offset": len(base) + 1}, after
    assert latest_offset(cluster, leader, topic) == len(base) + 2
    read = read_partition("franz", cluster.bootstrap_of(leader), topic, 0, len(base) + 2)
    assert read == list(enumerate(base + ["one-while-alone", "all-after-restart"])), read


@pytest.mark.timeout(300)
def test_a_follower_down_during_100k_records_catches_up_and_rejoins_the_isr(cluster, tmp_path):
    follower, leader = non_quorum_leaders(cluster)[:2]
    other = next(n for n in cluster.node_ids if n not in (follower, leader))
    topic = unique("t-catch-up")
    before = create_topic_assigned(cluster, leader, topic, [[follower, leader, other]], MIN_ISR)[0]

    cluster.node(follower).kill()
    try:
        # The killed node led the partition: once it is fenced, the next ISR member leads.
        moved = wait_views(cluster, topic, lambda v: v[0]["leader"] == leader and sorted(v[0]["isr"]) == sorted([leader, other]),
                           ISR_CHANGE_S, f"{topic}: leader {leader}, isr without {follower}", node_ids=[leader, other])[0]
        assert moved["epoch"] > before["epoch"], (before, moved)
        perf = producer_perf_test(cluster.bootstrap_of(leader), topic, PERF_RECORDS, record_size=100)
        assert perf["sent"] == PERF_RECORDS, perf["stdout"][-500:]
        marker = run("franz", "produce", cluster.bootstrap_of(leader), "--topic", topic, "--acks", "all",
                     records=[{"key": "end", "value": "the-last-record", "partition": 0}])
        assert marker == [{"partition": 0, "offset": PERF_RECORDS}], marker
        end = latest_offset(cluster, leader, topic)
        assert end == PERF_RECORDS + 1
    finally:
        restarted_at = time.monotonic()
        cluster.node(follower).start()
    back = wait_isr(cluster, topic, [1, 2, 3], REJOIN_S, leader=leader)
    print(f"node {follower} back in the ISR {time.monotonic() - restarted_at:.1f} s after its restart "
          f"({PERF_RECORDS} records behind; perf test {perf['avg_ms']} ms avg, {perf['max_ms']} ms max latency)")

    # Make the returned follower the leader again (it is replicas[0]) and read the tail from it.
    out = elect_leaders(cluster, other, "PREFERRED", topic, 0).stdout
    assert f"Successfully completed leader election (PREFERRED) for partitions {topic}-0" in out, out
    led = wait_views(cluster, topic, lambda v: v[0]["leader"] == follower and v[0]["epoch"] > back["epoch"], 30,
                     f"{topic}: node {follower} leads again")[0]
    assert sorted(led["isr"]) == [1, 2, 3], led
    assert latest_offset(cluster, follower, topic) == end
    tail = run("franz", "consume", cluster.bootstrap_of(follower), "--topic", topic, "--partitions", 0,
               "--from", PERF_RECORDS, "--count", 1, "--timeout-ms", 20000)
    assert [(r["offset"], r["key"], r["value"]) for r in tail] == [(PERF_RECORDS, "end", "the-last-record")], tail


@pytest.mark.timeout(240)
def test_under_replicated_partitions_listed_while_a_follower_is_paused_and_not_after(cluster):
    leader, follower = non_quorum_leaders(cluster)[:2]
    other = next(n for n in cluster.node_ids if n not in (follower, leader))
    topic = unique("t-urp")
    create_topic_assigned(cluster, leader, topic, [[leader, follower, other]], MIN_ISR)
    assert under_replicated(cluster, leader, topic) == []

    node = cluster.node(leader)
    expands_before = node.metric("kafka_server_replicamanager_isrexpands_total")
    cluster.node(follower).pause()
    try:
        wait_isr(cluster, topic, [leader, other], ISR_CHANGE_S, leader=leader, node_ids=[leader, other])
        assert under_replicated(cluster, leader, topic) == [0]
        assert under_replicated(cluster, other, topic, "--under-min-isr-partitions") == []
        if paths.target() == "brook":
            # The leader's Prometheus gauges say the same (refreshed every second).
            wait_for(lambda: node.metric("kafka_server_replicamanager_underreplicatedpartitions") >= 1, 10,
                     "the leader's under-replicated gauge")
            wait_for(lambda: node.metric("brook_replica_follower_lag_seconds", topic=topic,
                                         replica=follower) > 0, 10, "the paused follower's lag in seconds")
    finally:
        cluster.node(follower).resume()
    wait_isr(cluster, topic, [1, 2, 3], REJOIN_S, leader=leader)
    assert under_replicated(cluster, leader, topic) == []
    assert partition_state(cluster, follower, topic)["leader"] == leader
    if paths.target() == "brook":
        # A fenced follower leaves the ISR through the fence, not an AlterPartition; the leader
        # counts the expansion when it rejoins.
        assert node.metric("kafka_server_replicamanager_isrexpands_total") > expands_before
