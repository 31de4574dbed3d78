"""Partition reassignment with Kafka's own tool (issue #27 item 1, KIP-455):
`kafka-reassign-partitions --execute / --verify / --list / --cancel` on a 4-node cluster.

- Every replica of a 6-partition RF 3 topic moves from brokers {1,2,3} to {2,3,4} while an
  idempotent acks=all producer and a group consumer run: every acknowledged record is read back
  once at its offset, in order, by the producer's partition and by the group; `--verify` reports
  each partition completed; every node's Metadata shows the new replicas as the whole ISR; the
  three replicas of each partition hold the same batches on disk and broker 1 holds none.
- A reassignment throttled to 1 B/s (`--throttle`) stays in progress (`--list` shows the adding
  and removing replicas); `--cancel` restores the original replicas and clears the throttles,
  the data is untouched and the new broker's copy is deleted.
- The leader side of the throttle alone (`leader.replication.throttled.replicas` on the topic,
  `leader.replication.throttled.rate` = 1 B/s as the brokers' default, no follower throttle): the new
  replica gets empty answers once the rate is over its bound, so the move stays in progress with
  the new replica behind; once the rate is deleted it completes with every record.
- A broker retired as an operator retires one: every replica it holds moved away, SIGTERM,
  `kafka-cluster unregister` ("Broker 4 is no longer registered."; again: "Broker ID 4 is not
  currently registered"); it leaves every node's Metadata.
- A reassignment in progress (throttled) survives kill -9 of the quorum leader: the new
  controller lists it, and resubmitted with a high throttle (`--additional`) it completes.
- Refusals as Kafka's controller words them (AlterPartitionReassignments through the tool):
  an unknown broker, a replication factor change with `--disallow-replication-factor-change`
  (KIP-860), and a cancel with nothing in progress.

One 4-node cluster for the module (four combined voters). Also passes against Apache Kafka 4.4.
"""

import time

import pytest

from chaos import replicas as on_disk
from harness import kafka_cli, paths
from harness.cluster import Cluster
from harness.cluster_scenarios import unique
from harness.members import GroupMember
from harness.reassign import MOVE_S, list_reassignments, plan_of, reassign, wait_verified
from harness.replication import PacedProducer, assert_partitions_read_back, create_topic_assigned, \
    ensure_running, latest_offset, producer_perf_test, read_partition, wait_views

PARTITIONS = 6
RECORDS = 1200  # 10 ms apart: the producer runs for ~12 s, across the move


@pytest.fixture(scope="module")
def cluster4(tmp_path_factory):
    c = Cluster(paths.target(), tmp_path_factory.mktemp("cluster4"), 4,
                {"offsets.topic.replication.factor": "3", "min.insync.replicas": "2"})
    c.start()
    yield c
    c.stop()


@pytest.fixture(autouse=True)
def _all_running(cluster4):
    ensure_running(cluster4)


def rotations(brokers, count):
    return {p: [brokers[(p + i) % len(brokers)] for i in range(len(brokers))] for p in range(count)}


def test_every_replica_moves_to_new_brokers_while_producing_and_consuming_losing_nothing(cluster4, tmp_path):
    topic, group = unique("moving"), unique("g-moving")
    before = rotations([1, 2, 3], PARTITIONS)
    after = rotations([2, 3, 4], PARTITIONS)
    create_topic_assigned(cluster4, 1, topic, [before[p] for p in range(PARTITIONS)])
    sent = [f"v-{i:05d}" for i in range(RECORDS)]
    records = [{"key": f"k-{i}", "value": v, "partition": i % PARTITIONS} for i, v in enumerate(sent)]
    consumer = GroupMember("java", cluster4.bootstrap, group, topic, "--from", "earliest", "--timeout-ms", 180_000)
    producer = PacedProducer("java", cluster4.bootstrap, topic, records, "--acks", "all", "--idempotent",
                             "--interval-ms", 10, "--delivery-timeout-ms", 120_000, tmp_dir=tmp_path)
    try:
        producer.wait_results(200, 60)
        out = reassign(cluster4, "execute", plan_of(topic, after), tmp_path).stdout
        assert "Successfully started partition reassignments for " in out, out
        assert "Current partition replica assignment" in out, out

        verify_out = wait_verified(cluster4, plan_of(topic, after), tmp_path)
        results = producer.wait(120)
    finally:
        producer.kill()
    assert not [r for r in results if "error" in r], f"failed sends: {[r for r in results if 'error' in r][:5]}"
    assert len(results) == RECORDS

    want = {p: sorted(after[p]) for p in range(PARTITIONS)}
    view = wait_views(cluster4, topic, lambda v: {p: sorted(s["isr"]) for p, s in v.items()} == want
                      and all(sorted(s["replicas"]) == want[p] for p, s in v.items()), 60,
                      f"{topic}: replicas and ISR {want} on every node")
    assert all(s["leader"] in after[p] for p, s in view.items()), view
    assert "Status of partition reassignment:" in verify_out

    # Every acknowledged record once, at its offset, in send order, per partition.
    assert_partitions_read_back("java", cluster4.bootstrap, topic, records, results)

    # The group consumer read each record once, as the producer acknowledged it.
    acked = {(r["partition"], r["offset"]): sent[r["index"]] for r in results}
    cluster4.wait_for(lambda: len(consumer.records) >= RECORDS, 60, lambda: f"the group read {len(consumer.records)}")
    consumed = {(r["partition"], r["offset"]): r["value"] for r in consumer.records}
    assert len(consumer.records) == len(consumed) == RECORDS, "a record read twice by the group"
    assert consumed == acked
    consumer.stop()

    # The new replicas hold the same batches; broker 1 holds none of the topic.
    hws = {p: latest_offset(cluster4, view[p]["leader"], topic, p) for p in range(PARTITIONS)}
    dirs = {n: cluster4.node(n).log_dirs for n in cluster4.node_ids}
    compared = on_disk.compare({n: dirs[n] for n in (2, 3, 4)}, topic, hws)
    assert compared["mismatches"] == [] and compared["replicas_compared"] == 3 * PARTITIONS, compared
    cluster4.wait_for(lambda: not any((dirs[1] / f"{topic}-{p}").is_dir() for p in range(PARTITIONS)), 60,
                      f"broker 1's replicas of {topic} deleted")


def test_a_throttled_reassignment_stays_in_progress_and_cancel_restores_the_replicas(cluster4, tmp_path):
    # --throttle 1 (B/s): the new replica gets one fetch of replica.fetch.max.bytes, then
    # waits out the quota's window, so 5 MB keep the move in progress for ~40 s.
    topic = unique("cancel")
    create_topic_assigned(cluster4, 1, topic, [[1, 2, 3]])
    producer = PacedProducer("java", cluster4.bootstrap, topic,
                             [{"key": "k", "value": f"c-{i}", "partition": 0} for i in range(20)],
                             "--acks", "all", "--idempotent", "--interval-ms", 0, tmp_dir=tmp_path)
    results = producer.wait(60)
    assert sorted(r["offset"] for r in results) == list(range(20)), results
    assert producer_perf_test(cluster4.bootstrap, topic, 5000, record_size=1000)["sent"] == 5000

    plan = plan_of(topic, {0: [2, 3, 4]})
    out = reassign(cluster4, "execute", plan, tmp_path, "--throttle", 1).stdout
    assert f"Successfully started partition reassignment for {topic}-0" in out, out
    assert "The inter-broker throttle limit was set to 1 B/s" in out, out

    listed = list_reassignments(cluster4)
    assert f"{topic}-0: replicas: 2,3,4,1. adding: 4. removing: 1." in listed, listed
    verify = reassign(cluster4, "verify", plan, tmp_path, "--preserve-throttles").stdout
    assert f"Reassignment of partition {topic}-0 is still in progress." in verify, verify

    out = reassign(cluster4, "cancel", plan, tmp_path).stdout
    assert f"Successfully cancelled partition reassignment for: {topic}-0" in out, out
    assert "Clearing broker-level throttles on brokers" in out, out
    view = wait_views(cluster4, topic, lambda v: sorted(v[0]["replicas"]) == [1, 2, 3] and
                      sorted(v[0]["isr"]) == [1, 2, 3], 30, f"{topic}-0 back on 1,2,3")
    assert view[0]["leader"] in (1, 2, 3)
    listed = list_reassignments(cluster4)
    assert "No partition reassignments found." in listed, listed
    assert latest_offset(cluster4, view[0]["leader"], topic) == 5020
    read = read_partition("java", cluster4.bootstrap, topic, 0, 20)
    assert read == [(i, f"c-{i}") for i in range(20)]
    cluster4.wait_for(lambda: not (cluster4.node(4).log_dirs / f"{topic}-0").is_dir(), 60,
                      f"broker 4's copy of {topic}-0 deleted")


CONFIGS = "org.apache.kafka.tools.ConfigCommand"


def configs(cluster, *args):
    return kafka_cli.run(CONFIGS, "--bootstrap-server", cluster.bootstrap, *args, timeout=90).stdout


def test_the_leader_side_throttle_alone_holds_a_move_back_until_it_is_lifted(cluster4, tmp_path):
    topic = unique("leader-throttle")
    create_topic_assigned(cluster4, 1, topic, [[1, 2, 3]])
    assert producer_perf_test(cluster4.bootstrap, topic, 5000, record_size=1000)["sent"] == 5000
    configs(cluster4, "--alter", "--entity-type", "topics", "--entity-name", topic,
            "--add-config", "leader.replication.throttled.replicas=*")
    # The cluster-wide default, as every broker's own (one tool run instead of four).
    configs(cluster4, "--alter", "--entity-type", "brokers", "--entity-default",
            "--add-config", "leader.replication.throttled.rate=1")
    plan = plan_of(topic, {0: [2, 3, 4]})
    try:
        out = reassign(cluster4, "execute", plan, tmp_path).stdout  # no --throttle: no follower side
        assert f"Successfully started partition reassignment for {topic}-0" in out, out
        # Unthrottled, 5 MB move in about a second. Held back, broker 4 gets at most one
        # fetch of replica.fetch.max.bytes (1 MiB; none on Kafka, whose rate also counts the
        # in-sync followers' empty answers) per 11 s quota window: watched for 4 s from the
        # creation of its replica, its copy stays under 2 MB.
        replica = cluster4.node(4).log_dirs / f"{topic}-0"
        cluster4.wait_for(replica.is_dir, 30, f"broker 4's replica of {topic}-0 created")
        segment = replica / f"{0:020}.log"
        watch_until = time.monotonic() + 4
        while time.monotonic() < watch_until:
            copied = segment.stat().st_size if segment.exists() else 0
            assert copied < 2_000_000, f"broker 4 copied {copied} bytes despite the leader throttle"
            time.sleep(0.2)
        verify = reassign(cluster4, "verify", plan, tmp_path, "--preserve-throttles").stdout
        assert f"Reassignment of partition {topic}-0 is still in progress." in verify, verify
    finally:
        configs(cluster4, "--alter", "--entity-type", "brokers", "--entity-default",
                "--delete-config", "leader.replication.throttled.rate")
    wait_verified(cluster4, plan, tmp_path)
    view = wait_views(cluster4, topic, lambda v: sorted(v[0]["isr"]) == [2, 3, 4], 60, f"{topic}-0 ISR 2,3,4")
    assert latest_offset(cluster4, view[0]["leader"], topic) == 5000


def test_a_reassignment_in_progress_survives_a_controller_failover_and_completes_once_unthrottled(cluster4,
                                                                                                 tmp_path):
    topic = unique("failover")
    leader = cluster4.wait_quorum_leader(60)
    # The moving replica goes to a broker other than the quorum leader, which is killed.
    original = [n for n in cluster4.node_ids if n != leader][:2] + [leader]
    spare = next(n for n in cluster4.node_ids if n not in original)
    target = [original[0], original[1], spare]
    create_topic_assigned(cluster4, original[0], topic, [original])
    assert producer_perf_test(cluster4.bootstrap, topic, 5000, record_size=1000)["sent"] == 5000
    plan = plan_of(topic, {0: target})
    reassign(cluster4, "execute", plan, tmp_path, "--throttle", 1)
    expected = (f"{topic}-0: replicas: {','.join(map(str, target))},{leader}. "
                f"adding: {spare}. removing: {leader}.")
    assert expected in list_reassignments(cluster4)

    cluster4.node(leader).kill()
    new_leader = cluster4.wait_quorum_leader(60, not_in=(leader,))
    assert new_leader != leader
    listed = list_reassignments(cluster4)
    assert expected in listed, f"after the quorum leader {leader} died (new leader {new_leader}): {listed}"
    cluster4.node(leader).start()
    cluster4.wait_registered(60, cluster4.node_ids)

    # Resubmitted with a high throttle (--additional), the move completes; --verify clears it.
    reassign(cluster4, "execute", plan, tmp_path, "--additional", "--throttle", 1_000_000_000)

    def completed():
        text = reassign(cluster4, "verify", plan, tmp_path).stdout
        return f"Reassignment of partition {topic}-0 is completed." in text or None
    cluster4.wait_for(completed, MOVE_S, f"{topic}-0 moved to {target}", interval=1)
    view = wait_views(cluster4, topic, lambda v: sorted(v[0]["isr"]) == sorted(target), 30, f"{topic}-0 ISR {target}")
    assert sorted(view[0]["replicas"]) == sorted(target)
    assert latest_offset(cluster4, view[0]["leader"], topic) == 5000


def test_refusals_name_the_broker_and_the_missing_reassignment(cluster4, tmp_path):
    topic = unique("refused")
    create_topic_assigned(cluster4, 1, topic, [[1, 2]])
    proc = reassign(cluster4, "execute", plan_of(topic, {0: [1, 9]}), tmp_path, check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text
    assert "Unknown broker id 9" in text or \
        "The manual partition assignment includes broker 9, but no such broker is registered." in text, text

    proc = reassign(cluster4, "execute", plan_of(topic, {0: [1, 2, 3]}), tmp_path,
                    "--disallow-replication-factor-change", check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text
    assert "The replication factor is changed from 2 to 3" in text, text

    proc = reassign(cluster4, "cancel", plan_of(topic, {0: [1, 2]}), tmp_path, check=False)
    text = proc.stdout + proc.stderr
    assert "None of the specified partition reassignments are active." in text, text
    view = wait_views(cluster4, topic, lambda v: v[0]["replicas"] == [1, 2], 10, f"{topic}-0 unchanged")
    assert sorted(view[0]["isr"]) == [1, 2]


def test_a_broker_is_retired_by_moving_its_replicas_away_stopping_it_and_unregistering_it(cluster4, tmp_path):
    """Last in the module: broker 4 leaves for good (`kafka-cluster unregister`, KIP-1073)."""
    topic = unique("retire")
    create_topic_assigned(cluster4, 1, topic, [[4, 1, 2], [2, 4, 3]])
    everything = cluster4.metadata(1)["topics"]
    moves = {}
    for name, t in everything.items():
        for p, s in t["partitions"].items():
            if 4 in s["replicas"]:
                spare = next(b for b in (1, 2, 3) if b not in s["replicas"])
                moves[(name, p)] = [spare if b == 4 else b for b in s["replicas"]]
    assert (topic, 0) in moves and (topic, 1) in moves
    plan = {"version": 1, "partitions": [{"topic": n, "partition": p, "replicas": r} for (n, p), r in moves.items()]}
    reassign(cluster4, "execute", plan, tmp_path)

    def moved():
        views = cluster4.metadata(1)["topics"]
        left = [(n, p) for n, t in views.items() for p, s in t["partitions"].items()
                if 4 in s["replicas"] or 4 in s["isr"]]
        return not left or None
    cluster4.wait_for(moved, MOVE_S, "no partition lists broker 4", interval=0.5)

    cluster4.node(4).stop()
    tool = "org.apache.kafka.tools.ClusterTool"
    out = kafka_cli.run(tool, "unregister", "--bootstrap-server", cluster4.bootstrap_of(1), "--id", 4, timeout=60).stdout
    assert "Broker 4 is no longer registered." in out, out
    cluster4.wait_for(lambda: all(4 not in cluster4.metadata(n)["brokers"] for n in (1, 2, 3)), 30,
                      "broker 4 gone from every node's Metadata")
    again = kafka_cli.run(tool, "unregister", "--bootstrap-server", cluster4.bootstrap_of(1), "--id", 4,
                          timeout=60, check=False)
    assert again.returncode != 0
    assert "Broker ID 4 is not currently registered" in again.stdout + again.stderr, again.stdout + again.stderr
    view = wait_views(cluster4, topic, lambda v: all(4 not in s["replicas"] for s in v.values()), 10,
                      f"{topic} off broker 4", node_ids=[1, 2, 3])
    assert {p: sorted(s["isr"]) for p, s in view.items()} == {0: [1, 2, 3], 1: [1, 2, 3]}
