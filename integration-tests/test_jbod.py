"""JBOD in a 3-node cluster (issue 27 item 5, issue 28 item 4's three-node disk part).

Every node has two log directories, each an ext4 filesystem on its own loop device
(harness/disk.py); the first also holds the metadata log. One topic of 6 partitions, RF 3, is
created with an explicit assignment that has node 1 lead four of them, so node 1 leads
partitions in both of its directories (both brokers place a new log in the directory holding
the fewest).

- Failure: while an idempotent acks=all producer writes keyed records, node 1's second
  directory is shut down (EXT4_IOC_SHUTDOWN: real EIO). Within LEADER_MOVE_S the partitions
  whose node-1 replica lived there are led by another node, list node 1 among their offline
  replicas and leave it out of their ISR (the broker reports its failed directory to the
  controller: Kafka's BrokerHeartbeat offline dirs, Brook's MarkReplicasOffline); node 1 keeps
  leading and serving the partitions in its other directory; the producer never fails and
  every acknowledged record reads back at its offset. `kafka-log-dirs --describe` prints the
  failed directory with Kafka's error name. Node 1 is then killed, the disk remounted
  (repaired) and node 1 started: its replicas catch up and rejoin every ISR.
- AlterReplicaLogDirs: `kafka-reassign-partitions --execute` with a `log_dirs` entry moves
  node 1's replica of a partition it leads to its other directory while records are produced;
  `--verify` reports it completed, `kafka-log-dirs` shows it there, and the records read back
  identical.
"""

import json
import time
import uuid

import pytest

from harness import kafka_cli, paths, wire
from harness.cluster import Cluster
from harness.disk import Ext4Disk
from harness.reassign import reassign
from harness.replication import KeyedProducer, assert_keyed_records_read_back

KIND = paths.target()
LOG_DIRS_TOOL = "org.apache.kafka.tools.LogDirsCommand"
PARTITIONS = 6
# Node 1 first (the preferred leader) in partitions 0-3.
ASSIGNMENT = {0: [1, 2, 3], 1: [1, 3, 2], 2: [1, 2, 3], 3: [1, 3, 2], 4: [2, 3, 1], 5: [3, 1, 2]}
# From the fault to the last affected partition led elsewhere (Kafka's broker reports the dir
# in its next heartbeat, every broker.heartbeat.interval.ms = 1 s here).
LEADER_MOVE_S = 10
REJOIN_S = 90
STORAGE_EXCEPTION = "org.apache.kafka.common.errors.KafkaStorageException"


@pytest.fixture(scope="module")
def jbod(tmp_path_factory):
    """The cluster and each node's two disks ({node id: [first, second]})."""
    root = tmp_path_factory.mktemp("jbod")
    cluster = Cluster(KIND, root, overrides={"auto.create.topics.enable": "false"})
    disks = {}
    try:
        for node in cluster.nodes:
            n = node.node_id
            disks[n] = [Ext4Disk(root / f"n{n}-{d}.img", root / f"n{n}-disks" / d) for d in ("a", "b")]
            node.overrides["log.dirs"] = ",".join(str(d.mount_point) for d in disks[n])
        cluster.start()
        yield cluster, disks
        cluster.stop()
        faults = {n.node_id: n.teardown_faults() for n in cluster.nodes if n.teardown_faults()}
        assert not faults, faults
    finally:
        cluster.kill()
        for pair in disks.values():
            for d in pair:
                d.remove()


def create_topic(cluster, disks, name: str) -> None:
    """The topic with ASSIGNMENT (kafka-topics --replica-assignment) and min.insync.replicas 2,
    once every replica's log exists (brokers create them as they apply the new topic)."""
    assignment = ",".join(":".join(map(str, ASSIGNMENT[p])) for p in range(PARTITIONS))
    kafka_cli.run("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", cluster.bootstrap, "--create",
                  "--topic", name, "--replica-assignment", assignment, "--config", "min.insync.replicas=2",
                  timeout=60)
    cluster.wait_for(lambda: all(len(p["isr"]) == 3 and p["leader"] == ASSIGNMENT[i][0]
                                 for i, p in partitions(cluster, name).items()) and
                     len(partitions(cluster, name)) == PARTITIONS, 60, f"{name} led by its preferred replicas")
    cluster.wait_for(lambda: all(any((d.mount_point / f"{name}-{p}").is_dir() for d in disks[n])
                                 for n in disks for p in range(PARTITIONS)), 60, f"every log of {name} created")


def partitions(cluster, topic: str, node: int = 2) -> dict:
    """Node `node`'s Metadata view of `topic`'s partitions."""
    return wire.metadata(cluster.bootstrap_of(node), [topic])["topics"][topic]["partitions"]


def replica_dir(disks, node: int, topic: str, partition: int) -> int:
    """Which of `node`'s disks (0 or 1) holds its replica of the partition."""
    found = [i for i, d in enumerate(disks[node]) if (d.mount_point / f"{topic}-{partition}").is_dir()]
    assert len(found) == 1, f"{topic}-{partition} on node {node}: in dirs {found}"
    return found[0]


def log_dirs(cluster, broker: int, topic: str) -> dict:
    """`kafka-log-dirs --describe --broker-list <broker> --topic-list <topic>`:
    {logDir: (error, {partition name: isFuture})}."""
    out = kafka_cli.run(LOG_DIRS_TOOL, "--bootstrap-server", cluster.bootstrap, "--describe",
                        "--broker-list", broker, "--topic-list", topic, timeout=60).stdout
    doc = json.loads(out.strip().splitlines()[-1])
    [described] = [b for b in doc["brokers"] if b["broker"] == broker]
    return {d["logDir"]: (d["error"], {p["partition"]: p["isFuture"] for p in d["partitions"]})
            for d in described["logDirs"]}


def test_a_failed_log_dir_moves_its_partitions_leadership_the_other_dir_serves_and_nothing_acknowledged_is_lost(
        jbod):
    cluster, disks = jbod
    topic = f"jbod-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, disks, topic)
    on_failing = [p for p in range(PARTITIONS) if replica_dir(disks, 1, topic, p) == 1]
    led_there = [p for p in on_failing if ASSIGNMENT[p][0] == 1]
    led_elsewhere = [p for p in range(4) if p not in on_failing]
    assert led_there and led_elsewhere, f"node 1 leads partitions in both dirs; second dir holds {on_failing}"

    producer = KeyedProducer(cluster.bootstrap, topic, PARTITIONS)
    cluster.wait_for(lambda: len(producer.acked) >= 300, 60, "records acknowledged before the fault")
    failing = disks[1][1]
    failing.fail()
    faulted_at, acked_at_fault = time.monotonic(), len(producer.acked)

    def moved():
        view = partitions(cluster, topic)
        return all(view[p]["leader"] not in (1, -1) and 1 in view[p]["offline"] and 1 not in view[p]["isr"]
                   for p in on_failing) and view
    view = cluster.wait_for(moved, LEADER_MOVE_S, lambda: f"partitions {on_failing} moved off node 1's failed dir")
    moved_s = time.monotonic() - faulted_at
    print(f"\n{KIND}: leadership of {led_there} moved {moved_s:.2f} s after the fault")
    # Node 1 still leads what lies in its other directory, and those replicas are not offline.
    assert all(view[p]["leader"] == 1 and 1 not in view[p]["offline"] for p in led_elsewhere), view
    # The producer carries on: records acknowledged after the fault in both kinds of partition.
    cluster.wait_for(lambda: producer.acked_since(acked_at_fault, on_failing) >= 100 and
                     producer.acked_since(acked_at_fault, led_elsewhere) >= 100, 60,
                     "records acknowledged after the fault on moved and on unaffected partitions")
    producer.stop()
    assert not producer.failed, producer.failed[:5]
    print(f"{KIND}: {len(producer.acked)} records acknowledged, {len(producer.unplaced)} without an offset")

    dirs = log_dirs(cluster, 1, topic)
    failed_dir, other_dir = (str(d.mount_point.resolve()) for d in disks[1][::-1])
    assert dirs[failed_dir] == (STORAGE_EXCEPTION, {}), dirs
    assert dirs[other_dir][0] is None and \
        set(dirs[other_dir][1]) == {f"{topic}-{p}" for p in range(PARTITIONS) if p not in on_failing}, dirs
    assert_keyed_records_read_back(cluster.bootstrap, topic, producer)
    log = cluster.node(1).log_text()
    assert str(failing.mount_point) in log and "Input/output error" in log, cluster.node(1).log_tail()
    assert cluster.node(1).running

    # The disk repaired: node 1 restarts on it and its replicas rejoin every ISR.
    cluster.node(1).kill()
    failing.replace()
    cluster.node(1).start()
    cluster.wait_for(lambda: all(len(p["isr"]) == 3 and not p["offline"] for p in partitions(cluster, topic).values()),
                     REJOIN_S, lambda: f"node 1 back in every ISR of {topic}: {partitions(cluster, topic)}")
    assert_keyed_records_read_back(cluster.bootstrap, topic, producer)


def test_alter_replica_log_dirs_moves_a_replica_to_the_other_dir_and_its_records_read_back_identical(
        jbod, tmp_path):
    cluster, disks = jbod
    topic = f"jbod-move-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, disks, topic)
    partition = 0
    source = replica_dir(disks, 1, topic, partition)
    target = str(disks[1][1 - source].mount_point.resolve())
    producer = KeyedProducer(cluster.bootstrap, topic, PARTITIONS)
    cluster.wait_for(lambda: len(producer.acked) >= 600, 60, "records acknowledged before the move")

    plan = {"version": 1, "partitions": [{"topic": topic, "partition": partition, "replicas": ASSIGNMENT[partition],
                                          "log_dirs": [target, "any", "any"]}]}
    out = reassign(cluster, "execute", plan, tmp_path).stdout
    assert f"Successfully started moving log directory to {target} for replica {topic}-{partition} with broker 1" \
        in out, out
    replica = f"{topic}-{partition}"

    def verified():
        text = reassign(cluster, "verify", plan, tmp_path).stdout
        return text if f"Reassignment of replica {replica}-1 completed successfully." in text else None
    text = cluster.wait_for(verified, 60, f"{replica} moved on broker 1", interval=1)
    assert f"Reassignment of partition {replica} is completed." in text, text
    acked_at_move = len(producer.acked)
    cluster.wait_for(lambda: producer.acked_since(acked_at_move, [partition]) >= 50, 60,
                     "records acknowledged to the moved replica's partition after the move")
    producer.stop()
    assert not producer.failed, producer.failed[:5]

    dirs = log_dirs(cluster, 1, topic)
    assert dirs[target][1].get(replica) is False, dirs
    assert all(replica not in found for d, (_, found) in dirs.items() if d != target), dirs
    assert replica_dir(disks, 1, topic, partition) == 1 - source
    assert partitions(cluster, topic)[partition]["leader"] == 1
    # Read from node 1 itself (it leads the partition): the moved copy serves every record.
    assert_keyed_records_read_back(cluster.bootstrap, topic, producer)
