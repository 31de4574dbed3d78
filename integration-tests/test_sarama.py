"""sarama (github.com/IBM/sarama, the Go client the README names) as a client of the suite: its
idempotent acks=all producer, the four codecs, ConsumerGroup with its range, roundrobin and sticky
balance strategies, ClusterAdmin, and the transactional producer, each asserted on the data read
back (by sarama's own consumer) and on sarama's exact error strings.

One broker for the module (auto.create.topics.enable=false, so a missing topic is an error);
each test names its own topics and groups. Every test also passes against Apache Kafka 4.4
(BROOK_TEST_TARGET=kafka). The driver is drivers/sarama (sarama v1.62.0 as shipped: its default
protocol version V2_8_0_0 and defaults, acks and idempotence set as each test says).
"""

import struct
import uuid
from pathlib import Path

import pytest

from harness import drivers, paths
from harness.broker import Broker
from harness.members import GroupMember, assert_disjoint_and_complete, committed, poll_until, stable_assignment

DEADLINE_S = 60
IDLE_MS = 3000  # a member stops this long after its last record
# sarama's KError strings (errors.go), which a Go application sees and matches on.
UNKNOWN_TOPIC = "kafka server: Request was for a topic or partition that does not exist on this broker"
TOPIC_EXISTS = "kafka server: Topic with this name already exists"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = Broker(paths.target(), tmp_path_factory.mktemp("sarama-broker"), {"auto.create.topics.enable": "false"})
    b.start()
    yield b
    b.stop()
    assert not b.teardown_faults(), b.teardown_faults()


def sarama(command: str, bootstrap: str, *args, records=None):
    return drivers.run("sarama", command, bootstrap, *args, records=records)


def sarama_error(command: str, bootstrap: str, *args, records=None) -> dict:
    """The {"error","code"} document a failing driver command printed last."""
    with pytest.raises(drivers.DriverError) as failure:
        sarama(command, bootstrap, *args, records=records)
    return drivers.parse_output("error", failure.value.stdout.strip().splitlines()[-1])


def new_topic(bootstrap: str, partitions: int, *configs: str) -> str:
    name = f"t-sarama-{uuid.uuid4().hex[:10]}"
    args = ["--topic", name, "--partitions", partitions]
    for c in configs:
        args += ["--config", c]
    assert sarama("create-topic", bootstrap, *args) == {"ok": True}
    return name


def consume(bootstrap: str, topic: str, count: int, *args) -> list:
    return sarama("consume", bootstrap, "--topic", topic, "--count", count, "--timeout-ms", 20000, *args)


def test_idempotent_acks_all_produce_reads_back_keys_values_headers_at_their_offsets(broker):
    topic = new_topic(broker.bootstrap, 3)
    sent = [{"key": f"k{i % 17}", "value": f"value-{i}", "headers": [["h", f"x{i}"], ["empty", ""]]}
            for i in range(300)]
    acks = sarama("produce", broker.bootstrap, "--topic", topic, "--acks", "all", "--idempotent", records=sent)
    assert len(acks) == len(sent) and all("error" not in a for a in acks)
    # Per partition, the input order is the offset order from 0, without a gap.
    by_partition = {}
    for a in acks:
        by_partition.setdefault(a["partition"], []).append(a["offset"])
    assert all(offsets == list(range(len(offsets))) for offsets in by_partition.values()), by_partition
    # sarama's hash partitioner: one key, one partition.
    key_partition = {}
    for r, a in zip(sent, acks):
        assert key_partition.setdefault(r["key"], a["partition"]) == a["partition"]

    got = {(r["partition"], r["offset"]): r for r in consume(broker.bootstrap, topic, len(sent))}
    assert len(got) == len(sent)
    for r, a in zip(sent, acks):
        back = got[(a["partition"], a["offset"])]
        assert (back["key"], back["value"], back["headers"]) == (r["key"], r["value"], r["headers"])


def first_batch_codec(log_dir: Path) -> int:
    """The compression codec (attributes & 7) of the first record batch of a partition's first
    segment: 8 base offset, 4 length, 4 leader epoch, 1 magic, 4 CRC, then 2 attributes."""
    segment = min(log_dir.glob("*.log"))
    header = segment.read_bytes()[:23]
    (attributes,) = struct.unpack(">h", header[21:23])
    return attributes & 7


CODEC_IDS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.mark.parametrize("codec", list(CODEC_IDS))
def test_each_codec_is_stored_as_sent_and_reads_back_byte_identical(broker, codec):
    topic = new_topic(broker.bootstrap, 1)
    # Compressible and not: repeated text and every byte value a JSON string can carry.
    sent = [{"key": f"k{i}", "value": ("abc" * 50 + "".join(chr(32 + (i * 7 + j) % 95) for j in range(200)))}
            for i in range(100)]
    acks = sarama("produce", broker.bootstrap, "--topic", topic, "--codec", codec, "--idempotent", records=sent)
    assert [a["offset"] for a in acks] == list(range(len(sent)))
    back = consume(broker.bootstrap, topic, len(sent))
    assert [(r["offset"], r["key"], r["value"]) for r in back] == [(i, r["key"], r["value"]) for i, r in enumerate(sent)]
    # The broker kept sarama's compressed batch as it came (compression.type=producer).
    assert first_batch_codec(broker.log_dirs / f"{topic}-0") == CODEC_IDS[codec]


def produce_per_partition(bootstrap: str, topic: str, partitions: int, per_partition: int, start: int = 0) -> list:
    records = [{"partition": p, "value": f"v-{p}-{i}"} for p in range(partitions)
               for i in range(start, start + per_partition)]
    acks = sarama("produce", bootstrap, "--topic", topic, "--idempotent", records=records)
    assert all("error" not in a for a in acks)
    return [(r["partition"], r["value"]) for r in records]


def member(bootstrap: str, group: str, topic: str, assignor: str, name: str, *extra) -> GroupMember:
    return GroupMember("sarama", bootstrap, group, topic, "--assignor", assignor, "--idle-ms", IDLE_MS,
                       "--timeout-ms", DEADLINE_S * 1000, *extra, name=name)


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky"])
def test_two_members_split_partitions_commit_and_a_new_member_resumes_after_the_commits(broker, assignor):
    partitions, per_partition = 4, 50
    topic = new_topic(broker.bootstrap, partitions)
    group = f"g-sarama-{uuid.uuid4().hex[:10]}"
    members = [member(broker.bootstrap, group, topic, assignor, n) for n in ("a", "b")]
    try:
        owned = poll_until(lambda: stable_assignment(broker.bootstrap, group, 2), DEADLINE_S, lambda: f"{members}")
        sent = produce_per_partition(broker.bootstrap, topic, partitions, per_partition)
        finals = [m.wait(DEADLINE_S * 2) for m in members]
    finally:
        for m in members:
            m.kill()
    assert_disjoint_and_complete(owned, partitions)
    assert all(f is not None and f["member_id"] for f in finals), members
    assert sorted(sorted(f["assigned"]) for f in finals) == sorted(sorted(ps) for ps in owned.values())
    got = [(r["partition"], r["value"]) for m in members for r in m.records]
    assert sorted(got) == sorted(sent), "every record exactly once"
    assert committed(broker.bootstrap, group, topic, partitions) == {p: per_partition for p in range(partitions)}

    # A new member of the group resumes exactly after the commits: only the new records.
    more = produce_per_partition(broker.bootstrap, topic, partitions, 10, start=per_partition)
    late = member(broker.bootstrap, group, topic, assignor, "c", "--count", len(more))
    try:
        final = late.wait(DEADLINE_S * 2)
    finally:
        late.kill()
    assert final is not None and sorted(final["assigned"]) == list(range(partitions))
    assert sorted((r["partition"], r["value"]) for r in late.records) == sorted(more)
    assert {r["offset"] for r in late.records} == set(range(per_partition, per_partition + 10))
    assert committed(broker.bootstrap, group, topic, partitions) == {p: per_partition + 10 for p in range(partitions)}


def test_admin_creates_a_topic_with_configs_describes_it_and_deletes_it(broker):
    topic = new_topic(broker.bootstrap, 3, "retention.ms=3600000", "cleanup.policy=compact", "max.message.bytes=200000")
    described = sarama("describe-topic", broker.bootstrap, "--topic", topic)
    assert described["name"] == topic
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    assert all(p["leader"] == 1 and p["replicas"] == [1] and p["isr"] == [1] for p in described["partitions"])
    assert described["topic_id"] != "AAAAAAAAAAAAAAAAAAAAAA"  # sarama prints a topic id base64

    configs = sarama("describe-configs", broker.bootstrap, "--topic", topic)["configs"]
    for name, value in {"retention.ms": "3600000", "cleanup.policy": "compact", "max.message.bytes": "200000"}.items():
        assert configs[name] == {"value": value, "source": "DYNAMIC_TOPIC_CONFIG", "read_only": False}
    assert configs["segment.bytes"]["source"] == "DEFAULT_CONFIG"

    again = sarama_error("create-topic", broker.bootstrap, "--topic", topic, "--partitions", 1)
    assert again["code"] == 36 and again["error"].startswith(TOPIC_EXISTS), again

    assert sarama("delete-topic", broker.bootstrap, "--topic", topic) == {"ok": True}
    gone = poll_until(lambda: _describe_error(broker.bootstrap, topic), DEADLINE_S, lambda: f"{topic} still described")
    assert gone == {"error": UNKNOWN_TOPIC, "code": 3}
    missing = sarama_error("delete-topic", broker.bootstrap, "--topic", topic)
    assert missing["code"] == 3 and missing["error"].startswith(UNKNOWN_TOPIC), missing


def _describe_error(bootstrap: str, topic: str):
    try:
        sarama("describe-topic", bootstrap, "--topic", topic)
    except drivers.DriverError as e:
        return drivers.parse_output("error", e.stdout.strip().splitlines()[-1])
    return None


def test_producing_to_a_missing_topic_fails_with_unknown_topic_or_partition(broker):
    topic = f"t-sarama-missing-{uuid.uuid4().hex[:10]}"
    failure = sarama_error("produce", broker.bootstrap, "--topic", topic, records=[{"value": "v"}])
    # sarama names the topic before the broker's error (its producer's metadata refresh).
    assert failure == {"error": f"{topic}: {UNKNOWN_TOPIC}", "code": 3}


def test_transactional_producer_commits_and_aborts_read_committed_sees_only_the_commits(broker):
    topic = new_topic(broker.bootstrap, 2)
    records = [{"txn": t, "partition": i % 2, "key": f"k{t}-{i}", "value": f"txn{t}-{i}"}
               for t in (1, 2, 3) for i in range(10)]
    acks = sarama("txn-produce", broker.bootstrap, "--topic", topic, "--transactional-id", f"tx-{uuid.uuid4().hex[:8]}",
                  "--abort", "2", records=records)
    assert [a["txn"] for a in acks] == [r["txn"] for r in records]
    # Each transaction's marker takes an offset after its records in each partition.
    for p in (0, 1):
        offsets = [a["offset"] for a in acks if a["partition"] == p]
        assert offsets == list(range(0, 5)) + list(range(6, 11)) + list(range(12, 17)), offsets

    def values(rows):
        return sorted(r["value"] for r in rows)

    # An aborted record would come before transaction 3's in its partition, so reading as many
    # records as were committed shows any that leaked (and ends without waiting for a timeout).
    committed_values = values(r for r in records if r["txn"] != 2)
    read_committed = consume(broker.bootstrap, topic, len(committed_values), "--isolation", "read_committed")
    assert values(read_committed) == committed_values
    read_uncommitted = consume(broker.bootstrap, topic, len(records), "--isolation", "read_uncommitted")
    assert values(read_uncommitted) == values(records)
    at = {(a["partition"], a["offset"]): r["value"] for a, r in zip(acks, records)}
    assert all(at[(r["partition"], r["offset"])] == r["value"] for r in read_uncommitted)
