"""The Prometheus endpoint (`metrics.listener`) reports what the broker did: request counts
and latency histograms per API, bytes and messages in per topic, bytes out, active
connections, each partition's log end offset, where fetches read (page cache or disk), and that
fetched record sets really go out with `sendfile` (`brook_fetch_zero_copy_bytes_total`), and
not at all with `brook.fetch.zero.copy=false`.

Apache Kafka has no Prometheus endpoint of its own (it needs an external exporter), so these
tests exist only for the brook target: defined only there, not skipped on kafka.
"""

import re
import urllib.request

from harness import drivers, paths


def scrape(url: str) -> dict:
    """Parses the Prometheus text format into {(name, frozenset(labels)): value}."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$", line)
        assert m, f"unparseable metrics line {line!r}"
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        samples[(m.group(1), labels)] = float(m.group(4))
    return samples


def value(samples: dict, name: str, **labels) -> float:
    key = (name, frozenset(labels.items()))
    assert key in samples, f"{name}{labels} missing; have {sorted(n for n, _ in samples)[:50]}"
    return samples[key]


if paths.target() != "kafka":

    def test_metrics_count_requests_bytes_messages_and_log_end_offsets(broker, topic):
        drivers.run("confluent", "create-topic", broker.bootstrap, "--topic", topic, "--partitions", "2")
        records = [{"key": f"k{i}", "value": "v" * 100, "partition": i % 2} for i in range(40)]
        produced = drivers.run("confluent", "produce", broker.bootstrap, "--topic", topic, "--codec", "none", records=records)
        assert len(produced) == 40
        consumed = drivers.run("confluent", "consume", broker.bootstrap, "--topic", topic, "--count", "40", "--from", "earliest")
        assert len(consumed) == 40

        samples = scrape(broker.metrics_url)
        # Every record went through Produce; 20 landed in each partition.
        assert value(samples, "brook_topic_messages_in_total", topic=topic) == 40
        assert value(samples, "brook_partition_log_end_offset", topic=topic, partition="0") == 20
        assert value(samples, "brook_partition_log_end_offset", topic=topic, partition="1") == 20
        # 40 values of 100 bytes plus batch overhead came in; at least as much went out.
        bytes_in = value(samples, "brook_topic_bytes_in_total", topic=topic)
        assert 4000 < bytes_in < 40 * 200
        assert value(samples, "brook_topic_bytes_out_total", topic=topic) >= bytes_in
        assert value(samples, "brook_requests_total", api="Produce") >= 1
        assert value(samples, "brook_requests_total", api="Fetch") >= 1
        assert value(samples, "brook_requests_total", api="CreateTopics") == 1
        # Latency histograms per API: a count equal to the request count.
        assert value(samples, "brook_request_duration_seconds_count", api="CreateTopics") == 1
        assert value(samples, "brook_request_duration_seconds_count", api="Produce") == value(
            samples, "brook_requests_total", api="Produce"
        )
        assert value(samples, "brook_network_bytes_out_total") > 0

    def test_fetches_read_cached_data_on_the_worker_and_evicted_data_on_the_blocking_pool(broker, topic):
        """A fetch reads from the page cache without waiting (RWF_NOWAIT) and hands a
        partition whose bytes were evicted to the blocking pool: both answer the same records."""
        import os

        drivers.run("confluent", "create-topic", broker.bootstrap, "--topic", topic, "--partitions", "1")
        records = [{"key": f"k{i}", "value": f"v{i}-" + "x" * 500, "partition": 0} for i in range(300)]
        drivers.run("confluent", "produce", broker.bootstrap, "--topic", topic, "--codec", "none", records=records)

        def reads():
            samples = scrape(broker.metrics_url)
            return tuple(value(samples, "brook_fetch_partition_reads_total", path=p) for p in ("page_cache", "blocking"))

        def consume():
            got = drivers.run("confluent", "consume", broker.bootstrap, "--topic", topic, "--count", "300",
                              "--from", "earliest")  # fmt: skip
            assert [(r["offset"], r["key"], r["value"]) for r in got] == [
                (i, r["key"], r["value"]) for i, r in enumerate(records)
            ]

        cached_before, blocking_before = reads()
        consume()
        cached_after, blocking_after = reads()
        assert cached_after > cached_before, "just-written data is read from the page cache"
        assert blocking_after == blocking_before, "nothing needed the disk"

        # Write the segments back and drop them from the page cache: the next reads must wait
        # for the disk, so they go to the blocking pool, and deliver the same records.
        partition_dir = broker.log_dirs / f"{topic}-0"
        segments = sorted(partition_dir.glob("*.log"))
        assert segments, f"no segment in {partition_dir}"
        for segment in segments:
            fd = os.open(segment, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
        consume()
        _, blocking_evicted = reads()
        assert blocking_evicted > blocking_after, "evicted data is read on the blocking pool"

    def test_fetched_record_sets_go_out_with_sendfile_unless_zero_copy_is_off(broker, broker_factory, topic):
        """Over 1 MB in batches of at least 4 KiB (each record alone is larger): every record set a
        consumer fetches is large enough for `sendfile`, so the bytes sent with it cover the whole
        log at least once. A broker with `brook.fetch.zero.copy=false` answers the same read
        without a byte sent by `sendfile`."""
        records = [{"key": f"k{i}", "value": f"{i:05d}" + "v" * 5000, "partition": 0} for i in range(240)]
        expected = [(i, r["key"], r["value"]) for i, r in enumerate(records)]
        copying = broker_factory({"brook.fetch.zero.copy": "false"})

        def sent_with_sendfile(b):
            return value(scrape(b.metrics_url), "brook_fetch_zero_copy_bytes_total")

        def produce_then_consume(b):
            drivers.run("confluent", "create-topic", b.bootstrap, "--topic", topic, "--partitions", "1")
            drivers.run("confluent", "produce", b.bootstrap, "--topic", topic, "--codec", "none", records=records)
            log_bytes = sum(f.stat().st_size for f in (b.log_dirs / f"{topic}-0").glob("*.log"))
            before = sent_with_sendfile(b)
            got = drivers.run("confluent", "consume", b.bootstrap, "--topic", topic, "--count", str(len(records)),
                              "--from", "earliest")  # fmt: skip
            assert [(r["offset"], r["key"], r["value"]) for r in got] == expected
            return log_bytes, sent_with_sendfile(b) - before

        log_bytes, sent = produce_then_consume(broker)
        print(f"{sent} bytes sent with sendfile for a {log_bytes}-byte log")
        assert log_bytes > 1_000_000
        # Each batch went out whole at least once; a batch cut at a response's end goes again.
        assert log_bytes <= sent < 2 * log_bytes, f"{sent} bytes sent with sendfile for a {log_bytes}-byte log"

        copied_log_bytes, copied_sent = produce_then_consume(copying)
        assert copied_log_bytes > 1_000_000
        assert copied_sent == 0 and sent_with_sendfile(copying) == 0

    def test_active_connections_track_open_sockets(broker):
        import socket
        import time

        def active():
            return value(scrape(broker.metrics_url), "brook_active_connections")

        def wait_for(expected):
            deadline = time.monotonic() + 10
            current = active()
            while current != expected and time.monotonic() < deadline:
                time.sleep(0.1)
                current = active()
            return current

        # A baseline that holds still: the harness's readiness probe may still be closing.
        baseline = active()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            time.sleep(0.3)
            again = active()
            if again == baseline:
                break
            baseline = again
        sockets = [socket.create_connection((broker.host, broker.port), timeout=5) for _ in range(3)]
        try:
            assert wait_for(baseline + 3) == baseline + 3
        finally:
            for s in sockets:
                s.close()
        assert wait_for(baseline) == baseline

    def test_group_members_state_and_consumer_lag_are_exported(broker, topic):
        import time

        from confluent_kafka import Consumer, TopicPartition

        drivers.run("confluent", "create-topic", broker.bootstrap, "--topic", topic, "--partitions", "1")
        records = [{"key": f"k{i}", "value": f"v{i}"} for i in range(50)]
        drivers.run("confluent", "produce", broker.bootstrap, "--topic", topic, records=records)
        group = f"g-{topic}"
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            consumer.subscribe([topic])
            seen = 0
            deadline = time.monotonic() + 60
            while seen < 30 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    seen += 1
                    if seen == 30:
                        consumer.commit(offsets=[TopicPartition(topic, 0, msg.offset() + 1)], asynchronous=False)
            assert seen == 30

            def current():
                s = scrape(broker.metrics_url)
                key = ("brook_consumer_lag", frozenset({("group", group), ("topic", topic), ("partition", "0")}))
                return s, s.get(key)

            deadline = time.monotonic() + 20
            samples, lag = current()
            while (lag != 20 or samples.get(("brook_group_members", frozenset({("group", group)}))) != 1) \
                    and time.monotonic() < deadline:
                time.sleep(0.5)
                samples, lag = current()
            assert lag == 20
            assert value(samples, "kafka_consumergroup_lag", consumergroup=group, topic=topic, partition="0") == 20
            assert value(samples, "brook_group_members", group=group) == 1
            assert value(samples, "brook_group_state", group=group, state="Stable") == 1
            assert value(samples, "brook_group_state", group=group, state="Empty") == 0
            assert value(samples, "brook_group_generation", group=group) >= 1
        finally:
            consumer.close()
        # After the only member leaves, the group is Empty with no members; the lag stays.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            samples = scrape(broker.metrics_url)
            if samples.get(("brook_group_state", frozenset({("group", group), ("state", "Empty")}))) == 1:
                break
            time.sleep(0.5)
        assert value(samples, "brook_group_members", group=group) == 0
        assert value(samples, "brook_consumer_lag", group=group, topic=topic, partition="0") == 20
