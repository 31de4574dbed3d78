"""Files damaged while the broker was down, found at its next start (issue 28 item 4, third
bullet), with the real binary. Storage's own tests cover each case below the binary
(storage/tests/recovery.rs, recovery_point.rs, checkpoint.rs, index/, producer_snapshot.rs);
this checks that the process does the same end to end: what it finds is detected and recovered
(or the file set aside), the file named in its log, and nothing damaged is served: every
acknowledged record reads back (CRCs checked by the consumer) at its offset, and the next
produce continues right after the last of them.

- a torn tail: part of a batch appended to the active segment after a clean stop (the recovery
  point is the log end, so only that tail is scanned): truncated, "truncating invalid tail of
  segment" with its path;
- a bit-flipped offset index of a closed segment: the index is not trusted over the log, every
  offset still reads back (consumers assigned at offsets throughout the segment);
- a garbled recovery-point-offset-checkpoint: "malformed offset checkpoint ignored" with its
  path, and every segment recovered by scanning.

Brook-only: Kafka's recovery is the reference for the rules, not for the log lines. Not covered
here (and not by Kafka): a bit flip inside data below the recovery point is not found at start,
since trusted segments are not scanned; consumers reject such a batch by its CRC.
"""

import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness import paths
from harness.broker import Broker
from test_disk_full import produce_once, read_all

pytestmark = pytest.mark.skipif(paths.target() == "kafka", reason="brook's own recovery messages")

RECORDS = 300
SEGMENT_BYTES = 1024 * 1024  # the smallest Kafka (and Brook) accept


@pytest.fixture(scope="module")
def stopped_broker(tmp_path_factory):
    """A broker with a topic of several segments and RECORDS acknowledged records, stopped
    cleanly: (broker, topic, {offset: value})."""
    b = Broker(paths.target(), tmp_path_factory.mktemp("corrupt"), {"auto.create.topics.enable": "false"})
    try:
        b.start()
        topic = f"t-corrupt-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": str(SEGMENT_BYTES)})])[topic].result(30)
        producer = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "linger.ms": 2})
        acked = {}
        for i in range(RECORDS):
            producer.produce(topic, value=b"value-%05d-" % i + b"x" * 12_000,
                             on_delivery=lambda err, msg: err is None and acked.__setitem__(msg.offset(), msg.value()))
            if i % 20 == 19:
                producer.flush(30)
        assert producer.flush(30) == 0 and len(acked) == RECORDS
        b.stop()
        yield b, topic, acked
        b.stop()
        assert not b.teardown_faults(), b.teardown_faults()
    finally:
        b.kill()


def segments(b: Broker, topic: str) -> list:
    return sorted((b.log_dirs / f"{topic}-0").glob("*.log"))


def restart_and_check(b: Broker, topic: str, acked: dict) -> None:
    """Start: every acknowledged record reads back at its offset, the next produce follows
    them. The broker is left running."""
    b.start()
    got = read_all(b.bootstrap, topic, max(acked) + 1)
    wrong = sorted(o for o in acked if got.get(o) != acked[o])
    assert not wrong, f"{len(wrong)} records missing or changed, first offsets {wrong[:5]}"
    assert sorted(got) == sorted(acked)
    offset = produce_once(b.bootstrap, topic, b"after restart")
    assert offset == max(acked) + 1, offset
    acked[offset] = b"after restart"


def test_a_torn_tail_a_flipped_index_and_a_garbled_checkpoint_are_recovered_and_never_served(stopped_broker):
    b, topic, acked = stopped_broker
    assert len(segments(b, topic)) >= 3, "several segments"
    log_lines = len(b.log_text())

    # A torn tail: the first 40 bytes of the active segment's first batch appended to it.
    active = segments(b, topic)[-1]
    head = active.read_bytes()[:40]
    with open(active, "ab") as f:
        f.write(head)
    restart_and_check(b, topic, acked)
    log = b.log_text()[log_lines:]
    assert "truncating invalid tail of segment" in log and str(active) in log, log[-3000:]
    assert "panicked at" not in log

    # A bit flipped in a closed segment's offset index.
    b.stop()
    index = segments(b, topic)[0].with_suffix(".index")
    data = bytearray(index.read_bytes())
    assert len(data) >= 16, "the closed segment has index entries"
    data[len(data) // 2] ^= 0x40
    index.write_bytes(bytes(data))
    log_lines = len(b.log_text())
    restart_and_check(b, topic, acked)
    # Reads that start inside that segment find their records through the index.
    first_of_next = int(segments(b, topic)[1].stem)
    for start in range(0, first_of_next, max(1, first_of_next // 7)):
        got = read_all_from(b, topic, start, first_of_next)
        assert all(got.get(o) == acked[o] for o in range(start, first_of_next)), f"reading from {start}"
    assert "panicked at" not in b.log_text()[log_lines:]

    # A garbled recovery point checkpoint: every segment is scanned, nothing trusted from it.
    b.stop()
    checkpoint = b.log_dirs / "recovery-point-offset-checkpoint"
    assert checkpoint.is_file()
    checkpoint.write_bytes(b"0\n1\n" + topic.encode() + b" 0 \xff\xfe garbage\n")
    log_lines = len(b.log_text())
    restart_and_check(b, topic, acked)
    log = b.log_text()[log_lines:]
    assert "malformed offset checkpoint ignored" in log and str(checkpoint) in log, log[-3000:]
    assert "panicked at" not in log


def read_all_from(b: Broker, topic: str, start: int, end: int) -> dict:
    """{offset: value} for offsets start..end-1, a consumer assigned at `start`."""
    consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "check.crcs": True})
    consumer.assign([TopicPartition(topic, 0, start)])
    got = {}
    try:
        for _ in range(60):
            for m in consumer.consume(500, 1.0):
                if m.error() is None and start <= m.offset() < end:
                    got[m.offset()] = m.value()
            if len(got) >= end - start:
                break
    finally:
        consumer.close()
    return got
