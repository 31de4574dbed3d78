"""Disk faults in a 3-node cluster (issue 28, "Tests": full disk and corrupted files, three nodes;
a failing disk is test_jbod.py's). One cluster for the module; every node's log.dirs is a tmpfs
of its own (harness/disk.py, root needed), so that the node a test fills can be chosen once the
cluster runs: one that does not lead the metadata quorum (its fault then costs no controller
election on either broker). Both tests pass on Brook and on Apache Kafka 4.4
(BROOK_TEST_TARGET=kafka).

- A full disk on one node of three: an RF=3, min.insync.replicas=2 topic of three partitions,
  the full node leading one and following the two others, written by an idempotent acks=all
  producer (confluent-kafka) all along; the node's disk is filled by a filler file.
  Kafka 4.4 halts (exit code 1) at the first write that finds no space: its log directory
  fails and, that being its only one, it halts ("Shutdown broker because all log dirs in ...
  have failed"), or, when that write is the metadata log's, the raft thread's fatal fault halts
  it (`kafka_halt_cause`: which comes first varies). The controller fences it, its replicas leave
  every ISR and the partition it led is led by another replica. Brook keeps running and keeps
  its directory (a full disk is not a failed disk, storage/src/log_dir_failure.rs): the
  partition it leads stays led by it, with its full ISR, and answers KAFKA_STORAGE_ERROR to a
  record that needs space, and its follower replicas fall out of the ISRs of the two others
  once they lag replica.lag.time.max.ms (their appends fail). Meanwhile the partitions it does
  not lead take writes on both (on Kafka the one it led too, from its new leader). The filler
  is deleted (Kafka's node restarted): every ISR is full again, produce works on every
  partition, and every acknowledged record reads back once at its offset with its key and
  value.
- A corrupted segment on a follower: acknowledged records on an RF=3 topic, the follower killed
  (kill -9: its next start is not clean, so its active segment is scanned) and one byte of the
  last batch of its last segment flipped. Restarted, it cuts the log where the damaged batch
  starts (each broker logs it, naming the segment and the position), fetches the batch again
  from the leader (its segment file is the leader's again, byte for byte) and rejoins the ISR.
  The two other nodes are then stopped cleanly one after the other, so it leads alone (unclean
  leader election stays off: it leads because it is in the ISR), and it serves every
  acknowledged record at its offset with its key and value, CRCs checked by the consumer. The
  two are started again.
"""

import time

import pytest
from confluent_kafka import KafkaError

from harness import paths
from harness.cluster import Cluster
from harness.cluster_scenarios import unique
from harness.disk import Tmpfs, batch_positions, fill
from harness.records import produce_once
from harness.replication import (KeyedProducer, assert_keyed_records_read_back, create_topic_assigned,
                                 ensure_running, non_quorum_leaders, wait_isr, wait_views)

KIND = paths.target()
OVERRIDES = {"auto.create.topics.enable": "false", "auto.leader.rebalance.enable": "false"}
MIN_ISR = {"min.insync.replicas": 2}
# Kafka's halt comes at the full node's first failed write; Brook's followers leave the ISR once
# they lag replica.lag.time.max.ms (Kafka's default, 30 s). Deadlines for a loaded machine.
HALT_S = 60
ISR_SHRINK_S = 120
REJOIN_S = 180
# Long enough that no record the producer holds through a fault times out: Brook refuses the
# full node's partition until the filler is gone.
MESSAGE_TIMEOUT_MS = 600_000
ACKED_BEFORE = 300
ACKED_DURING = 100
# The filler takes every free page, but a record that fits in the last page of a segment is still
# written (tmpfs allocates whole pages): the probe needs new pages.
PROBE_BYTES = 512 * 1024
# The records of the corrupted-segment test, and the byte flipped in the last batch (inside the
# last record's value, covered by the batch CRC).
RECORDS = 600
FLIPPED_FROM_END = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The module's cluster, each node's log.dirs on a tmpfs (conftest's `cluster` overridden:
    its failure reports attach this one's log tails)."""
    c = Cluster(KIND, tmp_path_factory.mktemp("disk-faults"), overrides=OVERRIDES)
    disks = []
    try:
        for node in c.nodes:
            disks.append(Tmpfs(node.log_dirs))
        c.start()
        yield c
        c.stop()
        faults = {n.node_id: n.teardown_faults() for n in c.nodes if n.teardown_faults()}
        assert not faults, faults
    finally:
        c.kill()
        for d in disks:
            d.remove()


@pytest.fixture(autouse=True)
def all_nodes_running(cluster):
    """Each test starts with every node up (one a failed test left down is brought back)."""
    ensure_running(cluster)


def acked_in(producer: KeyedProducer, partition: int) -> int:
    return sum(1 for (p, _) in list(producer.acked) if p == partition)


def wait_acked_on_every_partition(cluster, producer: KeyedProducer, partitions, more: int, what: str) -> None:
    """Until each of `partitions` has `more` acknowledgements beyond its count now."""
    base = {p: acked_in(producer, p) for p in partitions}
    cluster.wait_for(lambda: all(acked_in(producer, p) >= base[p] + more for p in partitions), REJOIN_S,
                     lambda: f"{more} more records acknowledged on each of {list(partitions)} {what}: "
                             f"{ {p: acked_in(producer, p) - base[p] for p in partitions} }, "
                             f"failed {producer.failed[:3]}")


def kafka_halt_cause(node) -> str:
    """Why a Kafka node whose only disk filled halted, from its log ("" if it does not say).
    Kafka halts at the first write that finds no space, by the path that write takes: a
    partition's write fails the log directory, and the only one failed halts the broker
    ("Shutdown broker because all log dirs in ... have failed"); a write of the metadata log by
    the raft thread is a fatal fault of that thread ("Encountered fatal fault", the process
    halts). A write through a memory-mapped index (offset and time indexes are mapped files
    whose pages are allocated as entries reach them) fails with the JVM's InternalError rather
    than "No space left on device"."""
    log = node.log_text()
    if "No space left on device" not in log and \
            "InternalError: a fault occurred in a recent unsafe memory access" not in log:
        return ""
    if f"Shutdown broker because all log dirs in {node.log_dirs} have failed" in log:
        return "its only log dir failed"
    if "Encountered fatal fault" in log:
        return "a fatal fault of the thread whose write failed"
    return ""


def last_start_log(node) -> str:
    return node.log_text().rsplit("==== start", 1)[-1]


@pytest.mark.timeout(900)
def test_a_full_disk_on_one_node_of_three_loses_no_acknowledged_record_and_every_isr_is_full_once_space_is_freed(
        cluster):
    full, other = non_quorum_leaders(cluster)[:2]
    third = next(n for n in cluster.node_ids if n not in (full, other))
    # The full node leads partition 0 and follows in 1 and 2.
    replicas = [[full, other, third], [other, third, full], [third, full, other]]
    topic = unique("full")
    create_topic_assigned(cluster, other, topic, replicas, MIN_ISR)
    node = cluster.node(full)
    producer = KeyedProducer(cluster.bootstrap, topic, len(replicas), message_timeout_ms=MESSAGE_TIMEOUT_MS)
    filler = None
    try:
        cluster.wait_for(lambda: len(producer.acked) >= ACKED_BEFORE, 60, "records acknowledged before the disk fills")
        filler = fill(node.log_dirs)
        filled_at = time.monotonic()

        if KIND == "kafka":
            # The first write that finds no space halts Kafka, one of two ways (kafka_halt_cause).
            code = node.wait_exit(HALT_S)
            assert code == 1, f"node {full} exit code {code} with a full disk\n{node.log_tail()}"
            cause = kafka_halt_cause(node)
            assert cause, node.log_tail()
            # Fenced: out of every ISR, partition 0 led by the next replica in it.
            view = wait_views(cluster, topic, lambda v: all(full not in s["isr"] and s["leader"] not in (full, -1)
                                                            for s in v.values()),
                              ISR_SHRINK_S, f"node {full} out of every ISR of {topic}, none led by it")
            assert view[0]["leader"] == other, view
            print(f"\nkafka: node {full} halted (exit 1, {cause}) and left every ISR "
                  f"{time.monotonic() - filled_at:.1f} s after its disk filled")
            wait_acked_on_every_partition(cluster, producer, range(3), ACKED_DURING, "while the node is down")
        else:
            # Brook serves on. Its followers' appends fail: they leave the ISRs of 1 and 2.
            for p in (1, 2):
                wait_isr(cluster, topic, [r for r in replicas[p] if r != full], ISR_SHRINK_S, partition=p,
                         leader=replicas[p][0])
            print(f"\nbrook: node {full} out of the ISRs it follows in {time.monotonic() - filled_at:.1f} s")
            assert node.running, node.log_tail()
            # It still leads partition 0, and refuses to append to it.
            led = wait_views(cluster, topic, lambda v: v[0]["leader"] == full, 10, f"node {full} leads {topic}-0")[0]
            assert sorted(led["isr"]) == [1, 2, 3], led  # its followers lack nothing: none was appended
            refused = produce_once(cluster.bootstrap, topic, b"x" * PROBE_BYTES, partition=0)
            assert isinstance(refused, KafkaError) and refused.code() == KafkaError.KAFKA_STORAGE_ERROR, refused
            assert any("append failed; the partition answers KAFKA_STORAGE_ERROR" in line and f'topic="{topic}"' in line
                       and "partition=0" in line and "No space left on device" in line
                       for line in node.log_text().splitlines()), node.log_tail()
            # Partitions 1 and 2 take writes meanwhile, acknowledged by their two other replicas.
            wait_acked_on_every_partition(cluster, producer, (1, 2), ACKED_DURING, "while the disk is full")

        filler.unlink()
        filler = None
        freed_at = time.monotonic()
        if KIND == "kafka":
            node.start()  # a halted Kafka serves again only once restarted
        wait_views(cluster, topic, lambda v: all(sorted(s["isr"]) == [1, 2, 3] and s["leader"] >= 0
                                                 for s in v.values()),
                   REJOIN_S, f"every ISR of {topic} full again")
        print(f"{KIND}: every ISR full {time.monotonic() - freed_at:.1f} s after the filler was deleted")
        # Produce works again everywhere: the running producer and a fresh one without retries.
        wait_acked_on_every_partition(cluster, producer, range(3), ACKED_DURING, "once space is freed")
        for p in range(3):
            offset = produce_once(cluster.bootstrap, topic, b"after", partition=p)
            assert isinstance(offset, int), f"partition {p}: {offset}"
        producer.stop()
    finally:
        if filler is not None:
            filler.unlink()
        producer.close()
    assert not producer.failed, producer.failed[:5]
    print(f"{KIND}: {len(producer.acked)} records acknowledged, {len(producer.unplaced)} without an offset")
    assert_keyed_records_read_back(cluster.bootstrap, topic, producer)


def flip_byte_in_last_batch(segment) -> int:
    """Flips one bit inside the last record batch of `segment`; returns the batch's position."""
    data = bytearray(segment.read_bytes())
    position, size = batch_positions(bytes(data))[-1]
    data[position + size - FLIPPED_FROM_END] ^= 0x10
    segment.write_bytes(bytes(data))
    return position


def last_segment(node, topic: str, partition: int = 0):
    return sorted((node.log_dirs / f"{topic}-{partition}").glob("*.log"))[-1]


@pytest.mark.timeout(900)
def test_a_follower_cuts_a_corrupted_batch_fetches_it_again_and_serves_every_acknowledged_record_when_it_leads(
        cluster):
    follower = non_quorum_leaders(cluster)[0]
    quorum_leader = cluster.wait_quorum_leader(60)
    last = next(n for n in cluster.node_ids if n not in (follower, quorum_leader))
    # The quorum leader leads the partition and is stopped first (while two voters remain);
    # the follower comes next in the replica list, so it takes over.
    leader = quorum_leader
    topic = unique("damaged")
    create_topic_assigned(cluster, leader, topic, [[leader, follower, last]], MIN_ISR)
    producer = KeyedProducer(cluster.bootstrap, topic, 1)
    cluster.wait_for(lambda: len(producer.acked) >= RECORDS, 60, f"{RECORDS} records acknowledged")
    producer.stop()
    assert not producer.failed, producer.failed[:5]
    end = max(o for _, o in producer.acked) + 1 + len(producer.unplaced)

    node = cluster.node(follower)
    node.kill()
    segment = last_segment(node, topic)
    leaders_segment = cluster.node(leader).log_dirs / segment.relative_to(node.log_dirs)
    assert segment.read_bytes() == leaders_segment.read_bytes(), "the follower held the leader's batches"
    damaged_at = flip_byte_in_last_batch(segment)
    assert segment.read_bytes() != leaders_segment.read_bytes()

    node.start()
    # Its log is cut where the damaged batch starts.
    log = last_start_log(node)
    if KIND == "kafka":
        assert f"Found invalid messages in log segment {segment} at byte offset {damaged_at}." in log, node.log_tail()
    else:
        assert any("truncating invalid tail of segment" in line and f"path={segment} position={damaged_at} " in line
                   for line in log.splitlines()), node.log_tail()
    wait_isr(cluster, topic, [1, 2, 3], REJOIN_S, leader=leader)
    # Fetched again: the follower's copy is the leader's, the damaged batch replaced.
    cluster.wait_for(lambda: segment.read_bytes() == leaders_segment.read_bytes(), 30,
                     f"the follower's {segment.name} identical to the leader's again (damaged batch at {damaged_at})")

    try:
        cluster.node(leader).stop()
        wait_isr(cluster, topic, [follower, last], REJOIN_S, leader=follower, node_ids=[follower, last])
        cluster.node(last).stop()
        wait_isr(cluster, topic, [follower], REJOIN_S, leader=follower, node_ids=[follower])
        # Alone, from its own log: every acknowledged record, intact, at its offset.
        assert_keyed_records_read_back(cluster.bootstrap_of(follower), topic, producer)
    finally:
        for n in (leader, last):
            cluster.node(n).launch()
        for n in (leader, last):
            cluster.node(n).wait_ready(REJOIN_S)
    wait_isr(cluster, topic, [1, 2, 3], REJOIN_S)
    print(f"\n{KIND}: {end} records, the damaged batch at byte {damaged_at} of {segment.name} cut and fetched again")
