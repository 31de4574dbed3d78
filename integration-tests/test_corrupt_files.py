"""Brook only: damaged files found at start (issue 28, disk faults). The tests write
records through the real binary, stop or kill it, damage one of its files the way a crash
or a bad disk does, start it again and read everything back: what was intact is served
with the same keys, values and offsets; what was damaged is cut off or rebuilt, never
served; the log names the file. They poke Brook's own files, so they do not run against
Apache Kafka (its file layout and recovery are alike but not the same code: a Kafka test
would test Kafka).

- A torn segment tail (a crash in the middle of a write): truncated to the last whole
  batch; the next record takes the next offset.
- A bit flipped inside a batch of a segment the broker must scan (it crashed before its
  recovery point passed it): the batch's CRC fails, the log is cut before it.
- A garbled offset index under a trusted segment (clean shutdown): found inconsistent, the
  segment is scanned and its index rebuilt; a read from the middle of the segment returns
  the right records.
- Garbled checkpoints (recovery point, high watermark, leader epochs) and a garbled producer
  snapshot: ignored with a warning naming the file, rebuilt from the log; every record is
  served and the idempotent producer's sequence carries on.
"""

import struct
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness import paths
from harness.broker import Broker
from harness.disk import batch_positions

pytestmark = pytest.mark.skipif(paths.target() == "kafka",
                                reason="damages Brook's own files; Kafka's recovery is its own code")


def _topic(broker: Broker, config: dict = None) -> str:
    topic = f"damaged-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config or {})])[topic].result(timeout=30)
    return topic


def _produce_one_batch_each(broker: Broker, topic: str, count: int, start: int = 0) -> list:
    """`count` records, each acknowledged before the next is sent (one batch each)."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    offsets = []

    def report(err, msg):
        assert err is None, err
        offsets.append(msg.offset())

    for i in range(start, start + count):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0, on_delivery=report)
        assert producer.flush(30) == 0
    return offsets


def _read(broker: Broker, topic: str, start: int = 0, limit: int = None, quiet_s: float = 3.0) -> list:
    """(offset, key, value) from `start` until `limit` records or `quiet_s` without one."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100, "check.crcs": True})
    try:
        consumer.assign([TopicPartition(topic, 0, start)])
        out = []
        idle = 0.0
        while idle < quiet_s and (limit is None or len(out) < limit):
            msgs = consumer.consume(num_messages=1000, timeout=0.5)
            idle = idle + 0.5 if not msgs else 0.0
            for msg in msgs:
                assert msg.error() is None, msg.error()
                out.append((msg.offset(), msg.key(), msg.value()))
        return out[:limit]
    finally:
        consumer.close()


def _expected(first: int, last_exclusive: int) -> list:
    return [(i, f"k{i}".encode(), f"v{i}".encode()) for i in range(first, last_exclusive)]


def _last_start_log(broker: Broker) -> str:
    return broker.log_text().rsplit("==== start", 1)[-1]


@pytest.fixture
def broker(tmp_path):
    node = Broker("brook", tmp_path / "node")
    node.start()
    yield node
    node.stop()


def test_a_torn_segment_tail_is_cut_to_the_last_whole_batch(broker):
    topic = _topic(broker)
    assert _produce_one_batch_each(broker, topic, 20) == list(range(20))
    broker.kill()
    segment = broker.log_dirs / f"{topic}-0" / f"{0:020}.log"
    data = segment.read_bytes()
    last_position, last_size = batch_positions(data)[-1]
    # A crash in the middle of the last write: half of the last batch reached the disk.
    segment.write_bytes(data[: last_position + last_size // 2])

    broker.start()
    assert _read(broker, topic) == _expected(0, 19)
    log = _last_start_log(broker)
    assert "truncating invalid tail of segment" in log and str(segment) in log, broker.log_tail()
    assert _produce_one_batch_each(broker, topic, 1, start=19) == [19]
    assert _read(broker, topic, start=19) == _expected(19, 20)


def test_a_flipped_bit_in_a_batch_the_broker_must_scan_is_cut_off_not_served(broker):
    topic = _topic(broker)
    assert _produce_one_batch_each(broker, topic, 20) == list(range(20))
    broker.kill()
    partition_dir = broker.log_dirs / f"{topic}-0"
    segment = partition_dir / f"{0:020}.log"
    data = bytearray(segment.read_bytes())
    position, size = batch_positions(bytes(data))[12]
    data[position + size - 3] ^= 0x10  # inside the record's value, covered by the CRC
    segment.write_bytes(bytes(data))
    # The crash came before the recovery point passed these batches: the log is scanned.
    (broker.log_dirs / "recovery-point-offset-checkpoint").unlink(missing_ok=True)

    broker.start()
    assert _read(broker, topic) == _expected(0, 12)
    log = _last_start_log(broker)
    assert "truncating invalid tail of segment" in log and str(segment) in log, broker.log_tail()
    # The log continues after the cut, without a gap.
    assert _produce_one_batch_each(broker, topic, 1, start=12) == [12]


def test_a_garbled_offset_index_under_a_trusted_segment_is_rebuilt(broker):
    # Two segments of 1 MiB (Kafka's smallest segment.bytes), an index entry every 4 KiB.
    topic = _topic(broker, {"segment.bytes": str(1 << 20)})
    # Batches of ~16 KiB (librdkafka's default is 1 MB: one batch, no index entry).
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 16384})
    count = 1500
    for i in range(count):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode() + b"." * 1000, partition=0)
    assert producer.flush(60) == 0
    del producer
    broker.stop()
    assert broker.returncode == 0, broker.log_tail()
    partition_dir = broker.log_dirs / f"{topic}-0"
    index = partition_dir / f"{0:020}.index"
    entries = index.read_bytes()
    assert len(entries) >= 16 and (partition_dir / f"{0:020}.log").stat().st_size > 500_000
    # The last entry's offset and position swapped for garbage: a read planned from it
    # would start inside a batch.
    index.write_bytes(entries[:-8] + struct.pack(">ii", 7, 12345))

    broker.start()
    middle = 600
    got = _read(broker, topic, start=middle, limit=5)
    assert [(o, k) for o, k, _ in got] == [(i, f"k{i}".encode()) for i in range(middle, middle + 5)]
    assert all(v == f"v{o}".encode() + b"." * 1000 for o, _, v in got)
    assert len(_read(broker, topic)) == count
    log = _last_start_log(broker)
    assert "indexes disagree with its log" in log and str(index) in log, broker.log_tail()


def _garble(path) -> None:
    """A flipped byte in the middle and the last two bytes lost."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data[: max(1, len(data) - 2)]))


def _logged(broker: Broker, message: str, path) -> bool:
    return any(message in line and str(path) in line for line in _last_start_log(broker).splitlines())


def test_garbled_checkpoints_and_a_garbled_producer_snapshot_are_ignored_and_rebuilt(broker):
    topic = _topic(broker)
    assert _produce_one_batch_each(broker, topic, 10) == list(range(10))
    broker.stop()
    assert broker.returncode == 0, broker.log_tail()
    partition_dir = broker.log_dirs / f"{topic}-0"

    # The producer snapshot first (the recovery point intact, so the load reads it).
    snapshots = sorted(partition_dir.glob("*.snapshot"))
    assert snapshots, sorted(p.name for p in partition_dir.iterdir())
    _garble(snapshots[-1])
    broker.start()
    assert _read(broker, topic) == _expected(0, 10)
    assert _logged(broker, "corrupt producer snapshot ignored", snapshots[-1]), broker.log_tail()
    # The producer state came back from the log: a new idempotent producer writes on.
    assert _produce_one_batch_each(broker, topic, 1, start=10) == [10]
    broker.stop()
    assert broker.returncode == 0, broker.log_tail()

    checkpoints = {"malformed offset checkpoint ignored": [broker.log_dirs / "recovery-point-offset-checkpoint",
                                                           broker.log_dirs / "replication-offset-checkpoint"],
                   "malformed leader epoch checkpoint": [partition_dir / "leader-epoch-checkpoint"]}
    for paths_ in checkpoints.values():
        for path in paths_:
            assert path.exists(), path
            _garble(path)
    broker.start()
    assert _read(broker, topic) == _expected(0, 11)
    for message, paths_ in checkpoints.items():
        for path in paths_:
            assert _logged(broker, message, path), (message, path, broker.log_tail())
    assert _produce_one_batch_each(broker, topic, 1, start=11) == [11]
    assert _read(broker, topic) == _expected(0, 12)
