"""A full disk (issue 28 item 4, first bullet): the broker's log.dirs on a small tmpfs this module
mounts (root needed; unmounted at teardown), filled with a filler file and then with produce.

What each broker does, both checked here (BROOK_TEST_TARGET=kafka for Apache Kafka 4.4):

* Apache Kafka: the append's IOException ("No space left on device") fails the log directory
  (LogDirFailureChannel) and, that being its only one, the broker halts: exit code 1, "Shutdown
  broker because all log dirs in ... have failed". It serves again when restarted with space.
* Brook does better than a crash: the partition answers KAFKA_STORAGE_ERROR (56) while the disk
  is full, the failed append leaves its segment and indexes as they were (storage
  `Segment::append`), reads keep being served, and produce succeeds again as soon as space is
  freed, without a restart. A write that failed was never acknowledged, so undoing it is safe
  (an fsync failure is another matter, not this test's).

On both: every acknowledged record is read back intact (CRC-checked by librdkafka) at its
offset, once space is freed and again after a restart.
"""

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness import paths
from harness.broker import Broker
from harness.disk import Tmpfs, fill
from harness.members import poll_until
from harness.records import produce_once

LEFT_FREE = 3 * 1024 * 1024  # what the filler leaves for produce to fill
VALUE_BYTES = 16 * 1024
# The filling producer's largest batch. A failed append's bytes are undone, so what is free
# after it is less than that batch: a probe of PROBE_BYTES cannot fit.
BATCH_BYTES = 64 * 1024
PROBE_BYTES = 512 * 1024
DEADLINE_S = 60
KAFKA_STORAGE_ERROR = 56


@pytest.fixture(scope="module")
def full_disk_broker(tmp_path_factory):
    b = Broker(paths.target(), tmp_path_factory.mktemp("disk-full"), {"auto.create.topics.enable": "false"})
    disk = Tmpfs(b.log_dirs)
    try:
        b.start()
        yield b
        b.stop()
        assert not b.teardown_faults(), b.teardown_faults()
    finally:
        b.kill()
        disk.remove()


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=30)


def produce_until_full(bootstrap: str, topic: str) -> dict:
    """Idempotent acks=all produce of unique values until deliveries fail; {offset: value} of
    every acknowledged record."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                         "batch.size": BATCH_BYTES, "message.timeout.ms": 5000})
    acked, failed = {}, []

    def delivered(err, msg):
        if err is None:
            acked[msg.offset()] = msg.value()
        else:
            failed.append(err)

    for i in range(10_000):
        producer.produce(topic, key=b"k%d" % i, value=(b"%08d" % i) * (VALUE_BYTES // 8), on_delivery=delivered)
        if i % 10 == 9:
            producer.flush(30)
        if failed:
            break
    producer.flush(30)
    assert failed, f"the disk never filled: {len(acked)} records acknowledged"
    return acked


def read_all(bootstrap: str, topic: str, end: int) -> dict:
    """{offset: value} of offsets 0..end-1 (assigned, no group), CRCs checked."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "check.crcs": True, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = {}
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(got) < end and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                continue
            got[msg.offset()] = msg.value()
    finally:
        consumer.close()
    return got


def assert_every_acknowledged_record_reads_back(bootstrap: str, topic: str, acked: dict, extra: int = 0) -> None:
    end = max(acked) + 1 + extra
    got = read_all(bootstrap, topic, end)
    lost = sorted(o for o in acked if got.get(o) != acked[o])
    assert not lost, f"{len(lost)} acknowledged records missing or changed, first offsets {lost[:5]}"
    assert sorted(got) == list(range(len(got))), "offsets without gaps from 0"


def test_a_full_log_dir_fails_produce_loses_nothing_acknowledged_and_the_broker_serves_once_space_is_freed(
        full_disk_broker):
    b = full_disk_broker
    topic, quiet = f"t-full-{uuid.uuid4().hex[:8]}", f"t-quiet-{uuid.uuid4().hex[:8]}"
    create_topic(b.bootstrap, topic)
    create_topic(b.bootstrap, quiet)
    assert isinstance(produce_once(b.bootstrap, quiet, b"before"), int)
    filler = fill(b.log_dirs, leave=LEFT_FREE)

    acked = produce_until_full(b.bootstrap, topic)
    assert len(acked) > 10, "some records fit before the disk filled"

    if b.kind == "kafka":
        # Kafka's model: the only log dir failed, the broker halts.
        poll_until(lambda: not b.running, DEADLINE_S, lambda: "Kafka still running with a full log dir")
        assert b.returncode == 1
        assert "Shutdown broker because all log dirs in" in b.log_text()
        assert "No space left on device" in b.log_text()
    else:
        # Brook's: the partition refuses appends with KAFKA_STORAGE_ERROR and the broker serves on.
        refused = produce_once(b.bootstrap, topic, b"x" * PROBE_BYTES)
        assert isinstance(refused, KafkaError) and refused.code() == KAFKA_STORAGE_ERROR, refused
        assert b.running
        assert "append failed; the partition answers KAFKA_STORAGE_ERROR" in b.log_text()
        assert_every_acknowledged_record_reads_back(b.bootstrap, topic, acked)
        assert read_all(b.bootstrap, quiet, 1) == {0: b"before"}

    filler.unlink()
    if b.kind == "kafka":
        b.start()  # Kafka serves again only once restarted
    # Space freed: appends succeed again (Brook without a restart), after every acknowledged record.
    after = poll_until(lambda: _offset_or_none(produce_once(b.bootstrap, topic, b"after")), DEADLINE_S,
                       lambda: "produce still failing after space was freed")
    assert after > max(acked)
    assert_every_acknowledged_record_reads_back(b.bootstrap, topic, acked)

    b.restart()
    assert_every_acknowledged_record_reads_back(b.bootstrap, topic, acked)
    assert read_all(b.bootstrap, topic, after + 1).get(after) == b"after"
    assert produce_once(b.bootstrap, topic, b"after restart") == after + 1


def _offset_or_none(result):
    return result if isinstance(result, int) else None
