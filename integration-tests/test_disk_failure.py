"""A failing disk under a running broker (issue 28 item 4, second bullet).

The fault is real: log.dirs is an ext4 filesystem this module makes on a loop device, and the
test shuts it down with the kernel's EXT4_IOC_SHUTDOWN ioctl (what `xfs_io -c shutdown` does).
After it every write, fsync and read on that filesystem fails with EIO, as on a disk that died.
Why not the other ways: `mount -o remount,ro` under a running broker fails with EBUSY (files
are open for writing), this kernel has no device-mapper (no dm-error target), and libfiu's
LD_PRELOAD would not reach the JVM's and RocksDB's I/O the same way on both brokers. The
shutdown syncs the filesystem first (flag 0, EXT4_GOING_FLAGS_DEFAULT), so what was written
before the fault is on the device: the test measures what the broker does after it, not
page-cache loss (acks=all on one node is not fsync on either broker).

What both brokers do with their only log directory failed (Kafka's LogDirFailureChannel and
Brook's storage/src/log_dir_failure.rs): the broker halts with exit code 1, logging "shutdown
broker because all log dirs in <dirs> have failed"; nothing is acknowledged after the fault.
Once the disk is back (remounted) and the broker restarted, every acknowledged record reads
back at its offset and produce works again.
"""

import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness import paths
from harness.broker import Broker
from harness.disk import Ext4Disk
from harness.members import poll_until
from harness.records import produce_once
from test_disk_full import KAFKA_STORAGE_ERROR, assert_every_acknowledged_record_reads_back, create_topic

EXIT_DEADLINE_S = 60
RECORDS = 200


@contextmanager
def broker_with_failing_disk(root: Path, second_dir: bool):
    """A broker whose only log dir, or with `second_dir` whose second one (the first, a plain
    directory, keeps the metadata log), is an ext4 disk that can be made to fail."""
    b = Broker(paths.target(), root / "node", {"auto.create.topics.enable": "false"})
    disk = Ext4Disk(root / "disk.img", root / "second" if second_dir else b.log_dirs)
    if second_dir:
        b.overrides["log.dirs"] = f"{b.log_dirs},{disk.mount_point}"
    try:
        b.start()
        yield b, disk
        b.stop()
        assert not b.teardown_faults(), b.teardown_faults()
    finally:
        b.kill()
        disk.remove()


@pytest.fixture(scope="module")
def failing_disk_broker(tmp_path_factory):
    with broker_with_failing_disk(tmp_path_factory.mktemp("disk-failure"), second_dir=False) as served:
        yield served


def test_a_broker_whose_only_log_dir_fails_halts_and_after_the_disk_is_back_every_acknowledged_record_reads(
        failing_disk_broker):
    b, disk = failing_disk_broker
    topic = f"t-eio-{uuid.uuid4().hex[:8]}"
    create_topic(b.bootstrap, topic)
    acked = {}
    for i in range(RECORDS):
        offset = produce_once(b.bootstrap, topic, b"v%05d" % i)
        assert isinstance(offset, int), offset
        acked[offset] = b"v%05d" % i

    disk.fail()
    after_fault = produce_once(b.bootstrap, topic, b"after the fault")
    assert not isinstance(after_fault, int), f"acknowledged at {after_fault} on a failed disk"
    code = b.wait_exit(EXIT_DEADLINE_S)
    assert code == 1, f"{b.kind} exit code {code}\n{b.log_tail()}"
    log = b.log_text()
    assert f"hutdown broker because all log dirs in {b.log_dirs} have failed" in log, b.log_tail()
    assert "Input/output error" in log
    if b.kind == "brook":
        assert "log directory failed" in log and "panicked at" not in log

    disk.replace()
    b.start()
    assert_every_acknowledged_record_reads_back(b.bootstrap, topic, acked)
    assert produce_once(b.bootstrap, topic, b"disk back") == max(acked) + 1


def create_topic_partitions(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)


@pytest.fixture(scope="module")
def two_dir_broker(tmp_path_factory):
    with broker_with_failing_disk(tmp_path_factory.mktemp("disk-failure-jbod"), second_dir=True) as served:
        yield served


def produce_to(bootstrap: str, topic: str, partition: int, value: bytes):
    """One acks=all record to `partition`, no retries: its offset, or the KafkaError."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0, "enable.idempotence": False,
                         "message.timeout.ms": 5000})
    out = []
    producer.produce(topic, value=value, partition=partition,
                     on_delivery=lambda err, msg: out.append(err or msg.offset()))
    producer.flush(10)
    return out[0] if out else None


def leader_of(bootstrap: str, topic: str, partition: int) -> int:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return md.topics[topic].partitions[partition].leader


def test_a_failed_log_dir_takes_only_its_partitions_offline_and_the_broker_serves_the_others(two_dir_broker):
    b, disk = two_dir_broker
    topic = f"t-jbod-{uuid.uuid4().hex[:8]}"
    create_topic_partitions(b.bootstrap, topic, 4)
    dirs = [b.log_dirs, disk.mount_point]
    # Logs are created as the broker applies the new topic, after CreateTopics answers.
    poll_until(lambda: all(any((d / f"{topic}-{p}").is_dir() for d in dirs) for p in range(4)), EXIT_DEADLINE_S,
               lambda: "partition logs not created")
    on_disk = [p for p in range(4) if (disk.mount_point / f"{topic}-{p}").is_dir()]
    elsewhere = [p for p in range(4) if p not in on_disk]
    assert on_disk and elsewhere, f"partitions in both dirs: {on_disk} on the failing disk"
    bad, good = on_disk[0], elsewhere[0]
    assert produce_to(b.bootstrap, topic, bad, b"before") == 0
    assert produce_to(b.bootstrap, topic, good, b"before") == 0

    disk.fail()
    refused = produce_to(b.bootstrap, topic, bad, b"after the fault")
    assert not isinstance(refused, int), f"acknowledged at {refused} on a failed disk"
    if b.kind == "brook":
        assert refused.code() == KAFKA_STORAGE_ERROR, refused
    # Its partitions have no leader (one node: no other replica to elect), the broker serves on.
    poll_until(lambda: all(leader_of(b.bootstrap, topic, p) == -1 for p in on_disk), EXIT_DEADLINE_S,
               lambda: f"partitions on the failed dir still led: {on_disk}")
    assert b.running
    assert produce_to(b.bootstrap, topic, good, b"after the fault") == 1
    assert all(leader_of(b.bootstrap, topic, p) >= 0 for p in elsewhere)
    log = b.log_text()
    assert str(disk.mount_point) in log and "Input/output error" in log
    assert "hutdown broker" not in log
