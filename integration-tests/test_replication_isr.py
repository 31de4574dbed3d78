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
  resumed and rejoined;
* the partition's own error codes of one raw acks=all Produce (harness/wire.py) while a follower
  is paused: with the ISR still full, REQUEST_TIMED_OUT for each of its five partitions after
  the request's 1 s timeout (one deadline for the request, not one per partition), the
  records appended all the same (read back at its offset once the follower caught up); with
  min.insync.replicas=3, the ISR falling to two (the paused follower fenced) while the produce
  waits does not end the wait: Kafka 4's high watermark stands still below min.insync.replicas,
  so the answer is REQUEST_TIMED_OUT at the timeout, not NOT_ENOUGH_REPLICAS_AFTER_APPEND; the
  next produce gets NOT_ENOUGH_REPLICAS and writes nothing; resumed, the follower rejoins and the
  first record is committed. One follower is paused, not both: every node is also a metadata
  voter, and two paused voters leave no quorum to shrink the ISR.

One cluster for the module (no automatic leader rebalancing); also passes against Apache Kafka.
"""

import concurrent.futures
import time

import pytest

from harness import paths, wire
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


ACK_TIMEOUT_MS = 1000
# Partitions in the timed-out request: waited for in turn with the full timeout each, they
# would answer after 5 s instead of 1.
TIMEOUT_PARTITIONS = 5
# Outlives the paused follower's fence (broker.session.timeout.ms, 6 s, plus the controller's
# check and the leader learning of it), so the ISR shrinks while the produce still waits.
SHRINK_WAIT_TIMEOUT_MS = 12_000
REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS = 7, 19


def produce_raw(cluster, leader: int, topic: str, value: str, timeout_ms: int) -> dict:
    """One acks=all record to partition 0, sent to its leader as one Produce request (no client
    retries; the partition's own error code): {"error", "base_offset", ...}."""
    return wire.produce(cluster.bootstrap_of(leader), topic, 0, [("k", value)], acks=-1, timeout_ms=timeout_ms)


@pytest.mark.timeout(180)
def test_acks_all_unreplicated_within_its_timeout_gets_request_timed_out_and_stays_in_the_log(cluster):
    leader, follower = non_quorum_leaders(cluster)[:2]
    other = next(n for n in cluster.node_ids if n not in (follower, leader))
    topic = unique("t-acks-timeout")
    create_topic_assigned(cluster, leader, topic, [[leader, follower, other]] * TIMEOUT_PARTITIONS, MIN_ISR)
    partitions = range(TIMEOUT_PARTITIONS)

    # One paused follower holds the high watermark back while it stays in the ISR (well within
    # replica.lag.time.max.ms and the session timeout); the quorum keeps two running voters.
    cluster.node(follower).pause()
    try:
        started = time.monotonic()
        # One request for every partition: its timeout bounds the whole request (Kafka's one
        # DelayedProduce), not each partition's wait in turn.
        timed_out = wire.produce_partitions(cluster.bootstrap_of(leader), topic,
                                            {p: [("k", "timed-out")] for p in partitions}, acks=-1,
                                            timeout_ms=ACK_TIMEOUT_MS)
        took = time.monotonic() - started
        during = partition_state(cluster, leader, topic)
    finally:
        cluster.node(follower).resume()
    print(f"acks=all to {TIMEOUT_PARTITIONS} partitions with node {follower} paused: "
          f"{sorted({wire.error_name(r['error']) for r in timed_out.values()})} after {took:.3f} s "
          f"(timeout {ACK_TIMEOUT_MS} ms)")
    assert {p: r["error"] for p, r in timed_out.items()} == {p: REQUEST_TIMED_OUT for p in partitions}, timed_out
    assert ACK_TIMEOUT_MS / 1000 - 0.05 <= took <= ACK_TIMEOUT_MS / 1000 + 2.0, f"answered after {took:.3f} s"
    assert sorted(during["isr"]) == [1, 2, 3], f"the follower was still in the ISR: {during}"

    # The timeout only ends the wait: the records were appended and are committed once the
    # follower caught up, before the next ones.
    again = wire.produce_partitions(cluster.bootstrap_of(leader), topic, {p: [("k", "after")] for p in partitions},
                                    acks=-1, timeout_ms=10_000)
    assert {p: (r["error"], r["base_offset"]) for p, r in again.items()} == {p: (0, 1) for p in partitions}, again
    read = read_partition("franz", cluster.bootstrap_of(leader), topic, 0, 2)
    assert read == [(0, "timed-out"), (1, "after")], read


@pytest.mark.timeout(240)
def test_acks_all_waiting_while_the_isr_falls_below_min_insync_times_out_then_writes_are_refused(cluster):
    leader, follower = non_quorum_leaders(cluster)[:2]
    other = next(n for n in cluster.node_ids if n not in (follower, leader))
    topic = unique("t-acks-shrink")
    create_topic_assigned(cluster, leader, topic, [[leader, follower, other]], {"min.insync.replicas": 3})

    cluster.node(follower).pause()
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            started = time.monotonic()
            waiting = pool.submit(produce_raw, cluster, leader, topic, "appended", SHRINK_WAIT_TIMEOUT_MS)
            # The paused follower is fenced and leaves the ISR while the produce waits.
            wait_isr(cluster, topic, [leader, other], SHRINK_WAIT_TIMEOUT_MS / 1000 - 1, leader=leader,
                     node_ids=[leader, other])
            shrunk_after = time.monotonic() - started
            assert not waiting.done(), f"answered before the ISR shrank: {waiting.result()}"
            answer = waiting.result()
            took = time.monotonic() - started
        refused = produce_raw(cluster, leader, topic, "refused", 5000)
    finally:
        cluster.node(follower).resume()
    print(f"acks=all, min.insync.replicas 3, node {follower} paused: ISR [{leader}, {other}] after "
          f"{shrunk_after:.3f} s; answer {wire.error_name(answer['error'])} after {took:.3f} s "
          f"(timeout {SHRINK_WAIT_TIMEOUT_MS} ms); next produce {wire.error_name(refused['error'])}")
    # Kafka's DelayedProduce: the high watermark stands still while the ISR is below
    # min.insync.replicas, so the wait ends at the request's timeout (NOT_ENOUGH_REPLICAS_AFTER_APPEND
    # needs the high watermark to cover the write first).
    assert answer["error"] == REQUEST_TIMED_OUT, answer
    assert took >= SHRINK_WAIT_TIMEOUT_MS / 1000 - 0.05, f"answered after {took:.3f} s"
    # Below min.insync.replicas an acks=all write is refused before it is appended.
    assert refused["error"] == NOT_ENOUGH_REPLICAS, refused

    wait_isr(cluster, topic, [1, 2, 3], REJOIN_S, leader=leader)
    after = produce_raw(cluster, leader, topic, "after", 10_000)
    assert (after["error"], after["base_offset"]) == (0, 1), after
    read = read_partition("franz", cluster.bootstrap_of(leader), topic, 0, 2)
    assert read == [(0, "appended"), (1, "after")], read
