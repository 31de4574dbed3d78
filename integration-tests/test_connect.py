"""Kafka Connect against the broker under test (issue 29): a distributed worker of Apache Kafka's
Connect distribution (4.3.1 as a whole, connect-dist/pom.xml; `ConnectDistributed`) with the
FileStreamSource and FileStreamSink connectors, driven through its REST API on a loopback port.

One broker and one worker per module (harness/connect.py); the worker logs through Log4j 2 to a
file the tests read.
- The worker creates its internal topics (config, offset, status) with Connect's default
  partition counts (1, 25, 5), compacted: cleanup.policy=compact as DescribeConfigs reports it.
- FileStreamSource reads a file of N lines into a 1-partition topic: the topic holds exactly
  those lines, in order, at offsets 0..N-1; FileStreamSink writes the topic to a file: the same
  lines. The committed offsets the worker reports (GET /connectors/<name>/offsets, read back from
  the offsets topic and the sink's consumer group) are the file's size and N.
- SIGTERM stops the worker (its stop time is printed: the Java consumer's close waits for the
  broker's answer to an empty fetch); M lines are appended; the restarted worker resumes from
  the offsets topic: topic and sink file hold the N+M lines exactly once each, in order.
- No ERROR event in the worker's log, across both runs and both stops.

Every test also passes against Apache Kafka 4.4 (BROOK_TEST_TARGET=kafka).
"""

import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import paths, records
from harness.broker import Broker, free_port
from harness.connect import ConnectJvm, ConnectRest

WORKER_MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"
N_LINES = 200
M_LINES = 60
DEADLINE_S = 60
# Connect's internal topics: worker setting prefix -> (topic name, Connect's default partitions).
INTERNAL_TOPICS = {
    "config": ("brook-connect-configs", 1),
    "offset": ("brook-connect-offsets", 25),
    "status": ("brook-connect-status", 5),
}
# Generous: Kafka stops in ~1 s; a bound well above what any broker needs, so that only a worker
# that hangs in its shutdown fails it.
STOP_BOUND_S = 20.0


@pytest.fixture(scope="module")
def connect_broker(tmp_path_factory):
    b = Broker(paths.target(), tmp_path_factory.mktemp("connect-broker"))
    b.start()
    yield b
    b.stop()


@pytest.fixture
def broker(request, connect_broker):
    connect_broker.start()  # no-op while it runs
    setattr(request.node, "_brook_brokers", [connect_broker])  # its log tail on failure
    return connect_broker


@dataclass
class Worker:
    jvm: ConnectJvm
    rest: ConnectRest
    work_dir: Path

    def restart(self) -> float:
        """SIGTERM, then start again and wait for its REST API; the stop's seconds."""
        took = self.jvm.stop()
        self.jvm.start()
        self.rest.wait_ready(self.jvm)
        return took


@pytest.fixture(scope="module")
def worker(connect_broker, tmp_path_factory):
    work = tmp_path_factory.mktemp("connect-worker")
    port = free_port()
    settings = {
        "bootstrap.servers": connect_broker.bootstrap,
        "group.id": f"brook-connect-{uuid.uuid4().hex[:8]}",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "offset.flush.interval.ms": 1000,
        "listeners": f"http://127.0.0.1:{port}",
        "rest.advertised.host.name": "127.0.0.1",
        "rest.advertised.port": port,
        # Every plugin on this classpath has a ServiceLoader manifest: no 5 s classpath scan.
        "plugin.discovery": "service_load",
    }
    for prefix, (name, _partitions) in INTERNAL_TOPICS.items():
        settings[f"{prefix}.storage.topic"] = name
        settings[f"{prefix}.storage.replication.factor"] = 1  # a single-node cluster
    jvm = ConnectJvm(WORKER_MAIN, settings, work, "worker")
    jvm.start()
    try:
        rest = ConnectRest(port)
        rest.wait_ready(jvm)
        yield Worker(jvm, rest, work)
    finally:
        jvm.stop()


@dataclass
class Pipeline:
    topic: str
    source_file: Path
    sink_file: Path
    source: str
    sink: str


@pytest.fixture(scope="module")
def pipeline(connect_broker, worker):
    """A file of N lines, FileStreamSource -> a 1-partition topic -> FileStreamSink -> a file."""
    tag = uuid.uuid4().hex[:8]
    p = Pipeline(f"connect-lines-{tag}", worker.work_dir / "source.txt", worker.work_dir / "sink.txt",
                 f"file-source-{tag}", f"file-sink-{tag}")
    p.source_file.write_text("".join(line + "\n" for line in lines(0, N_LINES)))
    records.create_topic(connect_broker.bootstrap, p.topic, 1)
    worker.rest.put_connector(p.source, {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "tasks.max": "1", "file": str(p.source_file), "topic": p.topic,
    })
    worker.rest.put_connector(p.sink, {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "tasks.max": "1", "file": str(p.sink_file), "topics": p.topic,
    })
    for name in (p.source, p.sink):
        worker.rest.wait_running(name, worker.jvm)
    return p


def lines(start: int, end: int) -> list:
    """ASCII lines (so that the source's file position, counted in chars, is the byte size)."""
    return [f"line {i:05d} of the connect test, value {i * 7919 % 10007}" for i in range(start, end)]


def wait_for(what: str, probe, expected, worker: Worker, timeout_s: float = DEADLINE_S):
    """Poll `probe()` until it returns `expected`; fail with the last value otherwise."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        worker.jvm.check_alive()
        last = probe()
        if last == expected:
            return last
        time.sleep(0.2)
    pytest.fail(f"{what}: expected {expected!r}, last saw {last!r}\n{worker.jvm.log_tail(40)}")


def topic_lines(bootstrap: str, topic: str) -> list:
    return [(r["offset"], r["value"]) for r in records.read_partition(bootstrap, topic, 0)]


def sink_lines(p: Pipeline) -> list:
    try:
        return p.sink_file.read_text().splitlines()
    except FileNotFoundError:
        return []


def committed(worker: Worker, p: Pipeline) -> tuple:
    """(the source's committed file position, the sink's committed topic offset) per the REST API."""
    source = [(o["partition"], o["offset"]) for o in worker.rest.offsets(p.source)]
    sink = [(o["partition"], o["offset"]) for o in worker.rest.offsets(p.sink)]
    return source, sink


def expected_committed(p: Pipeline, count: int) -> tuple:
    return ([({"filename": str(p.source_file)}, {"position": p.source_file.stat().st_size})],
            [({"kafka_topic": p.topic, "kafka_partition": 0}, {"kafka_offset": count})])


def test_the_worker_creates_its_internal_topics_compacted(broker, worker):
    for prefix, (name, partitions) in INTERNAL_TOPICS.items():
        assert records.partition_count(broker.bootstrap, name) == partitions, f"{prefix} topic {name}"
        configs = records.topic_configs(broker.bootstrap, name)
        assert configs["cleanup.policy"].value == "compact", f"{prefix} topic {name}: {configs['cleanup.policy']}"


def test_file_source_and_sink_copy_every_line_in_order(broker, worker, pipeline):
    expected = lines(0, N_LINES)
    wait_for("records in the topic", lambda: records.end_offset(broker.bootstrap, pipeline.topic, 0), N_LINES, worker)
    assert topic_lines(broker.bootstrap, pipeline.topic) == list(enumerate(expected))
    wait_for("lines in the sink file", lambda: sink_lines(pipeline), expected, worker)
    # Both connectors' progress is committed: the source's file position in the offsets topic,
    # the sink's in its consumer group.
    wait_for("committed offsets", lambda: committed(worker, pipeline), expected_committed(pipeline, N_LINES), worker)


def test_a_restarted_worker_resumes_from_the_offsets_topic_without_duplicate_or_gap(broker, worker, pipeline):
    wait_for("lines in the sink file before the stop", lambda: len(sink_lines(pipeline)), N_LINES, worker)
    wait_for("committed offsets before the stop", lambda: committed(worker, pipeline),
             expected_committed(pipeline, N_LINES), worker)
    stop_s = worker.jvm.stop()
    print(f"connect worker SIGTERM stop: {stop_s:.2f} s ({broker.kind})")
    assert stop_s < STOP_BOUND_S, f"the worker took {stop_s:.1f} s to stop"
    with open(pipeline.source_file, "a") as f:
        f.write("".join(line + "\n" for line in lines(N_LINES, N_LINES + M_LINES)))
    worker.jvm.start()
    worker.rest.wait_ready(worker.jvm)
    for name in (pipeline.source, pipeline.sink):
        worker.rest.wait_running(name, worker.jvm)

    expected = lines(0, N_LINES + M_LINES)
    # The source resumes from its committed position and writes in file order: once the topic
    # holds N+M records, any re-read line would be among them, so the comparison shows a
    # duplicate as well as a gap.
    wait_for("records in the topic after the restart",
             lambda: records.end_offset(broker.bootstrap, pipeline.topic, 0) >= N_LINES + M_LINES, True, worker)
    assert topic_lines(broker.bootstrap, pipeline.topic) == list(enumerate(expected))
    wait_for("lines in the sink file after the restart", lambda: len(sink_lines(pipeline)) >= len(expected), True, worker)
    assert sink_lines(pipeline) == expected
    wait_for("committed offsets after the restart", lambda: committed(worker, pipeline),
             expected_committed(pipeline, N_LINES + M_LINES), worker)
    assert records.end_offset(broker.bootstrap, pipeline.topic, 0) == N_LINES + M_LINES


def test_the_worker_logs_no_error(worker, pipeline):
    """Last in the module: the worker's whole life, both stops included, has no ERROR event."""
    stop_s = worker.jvm.stop()
    print(f"connect worker SIGTERM stop: {stop_s:.2f} s")
    assert worker.jvm.log_text().count(" INFO ") > 0, "the worker logged nothing: its logging is not set up"
    events = worker.jvm.error_events()
    assert events == [], f"{len(events)} ERROR events in {worker.jvm.log_path}:\n" + "\n\n".join(events)
