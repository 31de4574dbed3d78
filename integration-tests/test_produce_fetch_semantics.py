"""Produce and fetch semantics a client relies on beyond the matrix: acks=0 (no response,
data still written), long polling that wakes as soon as data arrives (not at max_wait_ms),
a fetch with no partition to fetch (the Java consumer's fetch-session close) answered at
once while one with an idle partition waits its max_wait_ms, so a Java consumer closes
without waiting out `fetch.max.wait.ms`, max_bytes smaller than a batch still makes
progress (minOneMessage), fetches that span
segment rolls or end inside a batch deliver every record in order (Brook sends record sets
from the files with sendfile, cut inside the last batch as Kafka's are; and, Brook-only,
from memory with `brook.fetch.zero.copy=false`), and dynamic broker configs (the
cluster-wide default) flowing into a topic's effective config.
"""

import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from harness import drivers, kafka_cli, paths, wire


def test_acks_0_writes_without_a_response(broker, topic):
    drivers.run("confluent", "create-topic", broker.bootstrap, "--topic", topic, "--partitions", "1")
    records = [{"key": f"k{i}", "value": f"v{i}"} for i in range(50)]
    produced = drivers.run("java", "produce", broker.bootstrap, "--topic", topic, "--acks", "0", records=records)
    assert [p["offset"] for p in produced] == [-1] * 50  # acks=0: the client learns no offset
    consumed = drivers.run("confluent", "consume", broker.bootstrap, "--topic", topic, "--count", "50", "--from", "earliest")
    assert [(r["offset"], r["key"], r["value"]) for r in consumed] == [(i, f"k{i}", f"v{i}") for i in range(50)]


def test_a_long_poll_returns_as_soon_as_a_record_arrives(broker, topic):
    drivers.run("confluent", "create-topic", broker.bootstrap, "--topic", topic, "--partitions", "1")
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": "unused-assign-only",
        "enable.auto.commit": False,
        # The broker may hold each fetch up to 20 s waiting for 1 byte: a broker that
        # only answered at the deadline would deliver the record ~20 s late.
        "fetch.wait.max.ms": 20000,
        "fetch.min.bytes": 1,
    })
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        # Let the first (empty) fetch reach the broker and park there.
        park_until = time.monotonic() + 2
        while time.monotonic() < park_until:
            assert consumer.poll(0.2) is None
        sent_at = []

        def produce():
            sent_at.append(time.monotonic())
            drivers.run("confluent", "produce", broker.bootstrap, "--topic", topic, records=[{"key": "k", "value": "woke"}])

        t = threading.Thread(target=produce)
        t.start()
        got = None
        deadline = time.monotonic() + 30
        while got is None and time.monotonic() < deadline:
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                got = (msg.value(), time.monotonic())
        t.join()
        assert got is not None and got[0] == b"woke"
        assert got[1] - sent_at[0] < 8, f"record arrived {got[1] - sent_at[0]:.1f} s after it was sent"
    finally:
        consumer.close()


# A long poll's max_wait_ms, and the most a fetch that must not wait may take.
FETCH_WAIT_MS = 1500
AT_ONCE_S = 0.5


def timed_fetch(bootstrap, partitions, **kwargs):
    started = time.monotonic()
    response = wire.fetch(bootstrap, partitions, max_wait_ms=FETCH_WAIT_MS, min_bytes=1, **kwargs)
    return response, time.monotonic() - started


def test_a_fetch_with_no_partition_to_fetch_is_answered_at_once(broker, topic):
    """Kafka answers at once a fetch with nothing to fetch once its session is resolved
    (ReplicaManager.fetchMessages), so the Java consumer's session close (epoch -1, no
    topics) is not held for max_wait_ms; an idle partition, named or in an incremental
    session, still holds the fetch for its max_wait_ms (the control)."""
    drivers.run("java", "create-topic", broker.bootstrap, "--topic", topic, "--partitions", "1")
    deadline = time.monotonic() + 30
    while wire.list_offsets(broker.bootstrap, topic, [0], wire.LATEST)[0]["error"] != 0:
        assert time.monotonic() < deadline, "the new topic has no leader"
        time.sleep(0.1)
    idle = {topic: {0: 0}}
    waited, took = timed_fetch(broker.bootstrap, idle)
    assert waited["error"] == 0
    assert waited["partitions"] == {(topic, 0): {"error": 0, "high_watermark": 0, "records": b""}}
    assert took >= 0.8 * FETCH_WAIT_MS / 1000, f"an idle partition's fetch came back after {took:.3f} s"

    empty, took = timed_fetch(broker.bootstrap, {})
    assert empty == {"error": 0, "session_id": 0, "throttle_time_ms": 0, "partitions": {}}
    assert took < AT_ONCE_S, f"a sessionless fetch of nothing took {took:.3f} s"

    opened = wire.fetch(broker.bootstrap, idle, max_wait_ms=0, session_epoch=0)
    session = opened["session_id"]
    assert opened["error"] == 0 and session > 0
    incremental, took = timed_fetch(broker.bootstrap, {}, session_id=session, session_epoch=1)
    assert incremental["error"] == 0 and incremental["partitions"] == {}
    assert took >= 0.8 * FETCH_WAIT_MS / 1000, f"an incremental fetch of an idle session came back after {took:.3f} s"
    closed, took = timed_fetch(broker.bootstrap, {}, session_id=session, session_epoch=wire.FINAL_EPOCH)
    assert closed == {"error": 0, "session_id": 0, "throttle_time_ms": 0, "partitions": {}}
    assert took < AT_ONCE_S, f"the session's close took {took:.3f} s"


def test_a_java_consumer_closes_without_waiting_out_its_fetch_max_wait(broker, topic):
    drivers.run("java", "create-topic", broker.bootstrap, "--topic", topic, "--partitions", "1")
    records = [{"key": f"k{i}", "value": f"v{i}"} for i in range(3)]
    drivers.run("java", "produce", broker.bootstrap, "--topic", topic, records=records)
    # The driver idles past the fetch the consumer left parked, then times close(), which
    # sends the session-closing empty Fetch: a broker holding it would add ~2 s.
    out = drivers.run("java", "consume", broker.bootstrap, "--topic", topic, "--count", "3", "--from", "earliest",
                      "--fetch-max-wait-ms", "2000", "--idle-before-close-ms", "2500")
    assert [(r["offset"], r["key"], r["value"]) for r in out[:-1]] == [(i, f"k{i}", f"v{i}") for i in range(3)]
    assert out[-1]["close_ms"] < 1000, out[-1]


def test_max_bytes_smaller_than_a_batch_still_makes_progress(broker, topic):
    drivers.run("confluent", "create-topic", broker.bootstrap, "--topic", topic, "--partitions", "1")
    records = [{"key": f"k{i}", "value": "x" * 5000} for i in range(20)]
    drivers.run("java", "produce", broker.bootstrap, "--topic", topic, "--codec", "none", records=records)
    consumed = drivers.run("java", "consume", broker.bootstrap, "--topic", topic, "--count", "20",
                           "--from", "earliest", "--max-bytes", "1024")
    assert [(r["offset"], r["key"]) for r in consumed] == [(i, f"k{i}") for i in range(20)]
    assert all(r["value"] == "x" * 5000 for r in consumed)


def test_fetches_spanning_segment_rolls_or_ending_inside_a_batch_deliver_every_record_in_order(broker, topic):
    spanning_and_cut_fetches_round_trip(broker.bootstrap, topic)


@pytest.mark.skipif(paths.target() == "kafka", reason="brook.fetch.zero.copy is Brook's own key")
def test_the_copying_fetch_path_delivers_the_same_records(broker_factory, topic):
    copying = broker_factory({"brook.fetch.zero.copy": "false"})
    spanning_and_cut_fetches_round_trip(copying.bootstrap, topic)


def spanning_and_cut_fetches_round_trip(bootstrap, topic):
    # 1 MiB segments (Kafka 4's minimum) and ~3 MiB of records: a consumer allowed 4 MB per
    # fetch reads across several segments in one response; one allowed 1,500 bytes gets
    # limits that end inside the producer's (much larger) batches.
    drivers.run("java", "create-topic", bootstrap, "--topic", topic, "--partitions", "1",
                "--config", "segment.bytes=1048576")
    records = [{"key": f"k{i}", "value": f"{i:06d}" + "v" * 994} for i in range(3000)]
    drivers.run("java", "produce", bootstrap, "--topic", topic, "--codec", "none", records=records)
    expected = [(i, r["key"], r["value"]) for i, r in enumerate(records)]
    for max_bytes in ("4000000", "1500"):
        consumed = drivers.run("java", "consume", bootstrap, "--topic", topic, "--count", "3000",
                               "--from", "earliest", "--max-bytes", max_bytes)
        assert [(r["offset"], r["key"], r["value"]) for r in consumed] == expected, max_bytes


def test_a_cluster_default_broker_config_reaches_topics_that_do_not_override_it(broker, topic):
    drivers.run("java", "create-topic", broker.bootstrap, "--topic", topic, "--partitions", "1")
    kafka_cli.run("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", broker.bootstrap,
                  "--alter", "--entity-type", "brokers", "--entity-default",
                  "--add-config", "log.retention.ms=1234567")
    deadline = time.monotonic() + 30
    while True:
        configs = drivers.run("java", "describe-configs", broker.bootstrap, "--topic", topic)["configs"]
        if configs["retention.ms"]["value"] == "1234567" or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert configs["retention.ms"]["value"] == "1234567"
    assert configs["retention.ms"]["source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    kafka_cli.run("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", broker.bootstrap,
                  "--alter", "--entity-type", "brokers", "--entity-default",
                  "--delete-config", "log.retention.ms")
    deadline = time.monotonic() + 30
    while True:
        configs = drivers.run("java", "describe-configs", broker.bootstrap, "--topic", topic)["configs"]
        if configs["retention.ms"]["value"] == "604800000" or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert configs["retention.ms"]["value"] == "604800000"
    assert configs["retention.ms"]["source"] == "DEFAULT_CONFIG"
