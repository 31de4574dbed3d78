"""Helpers of the replication tests (test_replication_*.py, issue #11): paced producers whose
acknowledgements are read while they run, topics with a chosen replica assignment, each node's
view of one partition (leader, epoch, replicas, isr), waits on the ISR, read-back checks, and
Kafka's own tools (kafka-topics --under-replicated-partitions, kafka-leader-election,
kafka-producer-perf-test).

`KeyedProducer` is the in-process one (confluent-kafka): an idempotent acks=all producer that
writes keyed records until stopped, for a fault that lasts as long as the test needs
(test_jbod.py, test_cluster_disk_faults.py); `assert_keyed_records_read_back` checks its
acknowledgements against the partitions read back with CRC checks.

`produce-paced` (one small program per client, beside its driver, named replication_produce.*;
the Java one is a class of the driver jar with its own main):

    <program> produce-paced --bootstrap B --topic T --input FILE [--acks all|1|0] [--idempotent]
        [--interval-ms 10] [--retries N] [--request-timeout-ms MS] [--delivery-timeout-ms MS]

sends the input records (driver-protocol JSON lines; key, value, partition) one by one,
`interval-ms` apart, with ONE producer (so idempotence spans the whole run), and prints one JSON
line per record as its result arrives (completion order): {"index": I, "partition": P,
"offset": O} or {"index": I, "error": NAME, "message": ..}. NAME is the Kafka error name
(NOT_ENOUGH_REPLICAS) where the client gives one (java, confluent, franz, kafkajs,
kafka-python), kcat's text otherwise. A failed send is data, not a driver failure.
"""

import re
import threading
import time
import uuid
from collections import Counter
from typing import Dict, List, Optional

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from . import kafka_cli, wire
from .cluster import Cluster, wait_for
from .cluster_scenarios import partitions_view
from .drivers import ALIASES, run
from .members import MemberProcess
from .paths import TESTS_DIR

_PY = "python3"
PACED_ARGV = {
    "java": ["java", "-cp", str(TESTS_DIR / "drivers/java/target/brook-driver.jar"), "dev.brook.driver.ReplicationProduce"],
    "confluent": [_PY, str(TESTS_DIR / "drivers/confluent/replication_produce.py")],
    "kafka_python": [_PY, str(TESTS_DIR / "drivers/kafka_python/replication_produce.py")],
    "kcat": [_PY, str(TESTS_DIR / "drivers/kcat/replication_produce.py")],
    "franz": [str(TESTS_DIR / "drivers/franz/franz-driver")],
    "kafkajs": ["node", str(TESTS_DIR / "drivers/kafkajs/replication_produce.js")],
}
TOPICS_TOOL = "org.apache.kafka.tools.TopicCommand"
ELECTION_TOOL = "org.apache.kafka.tools.LeaderElectionCommand"
PERF_TOOL = "org.apache.kafka.tools.ProducerPerformance"


class PacedProducer(MemberProcess):
    """A running `produce-paced`: `results()` are the lines printed so far (by index)."""

    def __init__(self, client: str, bootstrap: str, topic: str, records: List[dict], *extra, tmp_dir=None):
        import json
        import sys
        import tempfile

        client = ALIASES.get(client, client)
        self.client, self.name, self.total = client, f"{client}-paced", len(records)
        argv0 = list(PACED_ARGV[client])
        if argv0[0] == _PY:
            argv0[0] = sys.executable
        fd, self.input_path = tempfile.mkstemp(prefix=f"brook-paced-{client}-", suffix=".jsonl", dir=tmp_dir)
        with open(fd, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
        self.records: List[dict] = []
        self.argv = [*argv0, "produce-paced", "--bootstrap", bootstrap, "--topic", topic, "--input", self.input_path,
                     *(str(a) for a in extra)]
        self._start(self.argv, cwd=TESTS_DIR)

    def _on_stdout(self, doc: dict, line: str) -> None:
        if "index" in doc:
            self.records.append(doc)
        else:
            self._stderr.append(f"(unexpected stdout) {line}\n")

    def acked(self) -> List[dict]:
        return [r for r in self.snapshot() if "error" not in r]

    def failed(self) -> List[dict]:
        return [r for r in self.snapshot() if "error" in r]

    def wait_results(self, count: int, timeout: float, acked_only: bool = True) -> List[dict]:
        """Until `count` records are acknowledged (or have any result, `acked_only=False`)."""
        def enough():
            got = self.acked() if acked_only else self.snapshot()
            return got if len(got) >= count else None
        return wait_for(enough, timeout, lambda: f"{self.name}: {count} results; so far {len(self.snapshot())} "
                                                 f"({len(self.failed())} failed)\n{self.stderr_tail()}")

    def wait(self, timeout: float) -> List[dict]:
        """Wait for the program to end by itself (exit 0); every result, by index."""
        self._wait_exit(timeout)
        return sorted(self.snapshot(), key=lambda r: r["index"])


class KeyedProducer:
    """An idempotent acks=all producer (confluent-kafka, in this process) writing keyed records
    round-robin over `partitions` partitions in a thread until `stop()`: `acked` maps
    (partition, offset) to (key, value), `unplaced` holds (partition, key, value) of records
    delivered without an offset, `failed` the delivery errors. `message_timeout_ms`: how long
    a record is retried before it fails (a fault the test lets last must fit in it)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, message_timeout_ms: int = 60000):
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5, "message.timeout.ms": message_timeout_ms})
        self.topic, self.partitions = topic, partitions
        self.acked, self.failed, self.unplaced, self.sent = {}, [], [], 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _deliver(self, err, msg):
        if err is not None:
            self.failed.append(err)
        elif msg.offset() is None or msg.offset() < 0:
            # Delivered, but librdkafka did not learn the offset (a retried batch whose
            # first answer was lost): checked by content.
            self.unplaced.append((msg.partition(), msg.key(), msg.value()))
        else:
            self.acked[(msg.partition(), msg.offset())] = (msg.key(), msg.value())

    def _run(self):
        while not self.done.is_set():
            key = b"k%06d" % self.sent
            self.producer.produce(self.topic, key=key, value=b"v%06d-" % self.sent + key,
                                  partition=self.sent % self.partitions, on_delivery=self._deliver)
            self.sent += 1
            self.producer.poll(0.005)

    def acked_since(self, count: int, partitions: List[int]) -> int:
        """Records acknowledged, after the first `count`, in any of `partitions`."""
        return sum(1 for (p, o) in list(self.acked)[count:] if p in partitions)

    def stop(self, timeout: float = 90):
        """Stops producing and waits until every record sent has its delivery report."""
        self.done.set()
        self.thread.join(30)
        left = self.producer.flush(timeout)
        assert left == 0, f"{left} records never delivered"

    def close(self):
        """Stops producing, drops what is not delivered yet (nothing, after `stop()`) and closes
        the client, so that after a failure it does not go on reconnecting to a cluster that is
        going away."""
        self.done.set()
        self.thread.join(30)
        self.producer.purge()
        self.producer.close()


CORRUPT = (KafkaError._BAD_MSG, KafkaError.INVALID_MSG)  # INVALID_MSG: Kafka's CORRUPT_MESSAGE


def read_keyed(bootstrap: str, topic: str, partition: int, timeout_s: float = 60) -> Dict[int, tuple]:
    """Every record of the partition from offset 0 to its high watermark (taken first), CRCs
    checked: {offset: (key, value)}."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", "check.crcs": True})
    got = {}
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        consumer.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + timeout_s
        while len(got) < end and time.monotonic() < deadline:
            for m in consumer.consume(500, 1.0):
                # A record that fails its CRC (or does not parse) is served damaged: never fine.
                # Other errors (a node restarting) are retried by the consumer.
                assert m.error() is None or m.error().code() not in CORRUPT, f"{topic}-{partition}: {m.error()}"
                if m.error() is None and m.offset() < end:
                    got[m.offset()] = (m.key(), m.value())
    finally:
        consumer.close()
    return got


def assert_keyed_records_read_back(bootstrap: str, topic: str, producer: KeyedProducer) -> None:
    """Every record `producer` had acknowledged is read back from `bootstrap` once: at its
    offset with its key and value, or (acknowledged without one) somewhere in its partition;
    each partition is read whole, from offset 0 to its high watermark, without gaps."""
    for p in range(producer.partitions):
        mine = {o: kv for (q, o), kv in producer.acked.items() if q == p}
        unplaced = [(k, v) for (q, k, v) in producer.unplaced if q == p]
        if not mine and not unplaced:
            continue
        got = read_keyed(bootstrap, topic, p)
        lost = sorted(o for o in mine if got.get(o) != mine[o])
        assert not lost, f"partition {p}: {len(lost)} acknowledged records missing or changed, first {lost[:5]}"
        assert sorted(got) == list(range(len(got))), f"partition {p}: offsets with gaps"
        counts = Counter(got.values())
        twice = sorted(o for o, kv in mine.items() if counts[kv] != 1)
        assert not twice, f"partition {p}: acknowledged records read more than once, at offsets {twice[:5]}"
        missing = [kv for kv in unplaced if counts[kv] != 1]
        assert not missing, f"partition {p}: acknowledged records without an offset not read once: {missing[:5]}"


# -- topics and views ----------------------------------------------------------------------------

def create_topic_assigned(cluster: Cluster, node_id: int, topic: str, replicas: List[List[int]],
                          configs: Optional[dict] = None) -> Dict[int, dict]:
    """CreateTopics (v4, to node `node_id`) with an explicit assignment: partition p on brokers
    `replicas[p]` (the first is the preferred leader); waits until every running node shows the
    topic led by replicas[p][0] with the full ISR, and returns that view."""
    schema = [("topics", wire.A([("name", "string"), ("num_partitions", "int32"), ("replication_factor", "int16"),
                                 ("assignments", wire.A([("partition_index", "int32"), ("broker_ids", wire.A("int32"))])),
                                 ("configs", wire.A([("name", "string"), ("value", "nstring")]))])),
              ("timeout_ms", "int32"), ("validate_only", "bool")]
    request = {"topics": [{"name": topic, "num_partitions": -1, "replication_factor": -1,
                           "assignments": [{"partition_index": p, "broker_ids": r} for p, r in enumerate(replicas)],
                           "configs": [{"name": k, "value": str(v)} for k, v in (configs or {}).items()]}],
               "timeout_ms": 30000, "validate_only": False}
    r = wire.call(cluster.bootstrap_of(node_id), 19, 4, schema, request,
                  [("throttle_time_ms", "int32"),
                   ("topics", wire.A([("name", "string"), ("error_code", "int16"), ("error_message", "nstring")]))],
                  timeout=35)
    errors = {t["name"]: t["error_code"] for t in r["topics"]}
    assert errors == {topic: 0}, f"CreateTopics {topic} {replicas} via node {node_id}: {r['topics']}"
    want = {p: (r[0], sorted(r)) for p, r in enumerate(replicas)}
    return wait_views(cluster, topic, lambda v: {p: (s["leader"], sorted(s["isr"])) for p, s in v.items()} == want,
                      30, f"{topic} led by {[r[0] for r in replicas]} with full ISRs")


def wait_views(cluster: Cluster, topic: str, condition, timeout: float, what: str,
               node_ids: Optional[List[int]] = None) -> Dict[int, dict]:
    """Until every node of `node_ids` (default: running ones) sees `topic` and `condition(view)`
    holds for each node's view ({partition: {"leader", "epoch", "replicas", "isr", "error"}});
    returns the first node's view."""
    last = {}

    def ok():
        ids = node_ids if node_ids is not None else cluster.running_ids()
        views = {}
        for i in ids:
            v = partitions_view(cluster, i, topic)
            views[i] = v
            if v is None or not condition(v):
                last.clear()
                last.update(views)
                return None
        return views[ids[0]]

    return wait_for(ok, timeout, lambda: f"{what}; views: {last}", interval=0.2)


def partition_state(cluster: Cluster, node_id: int, topic: str, partition: int = 0) -> dict:
    view = partitions_view(cluster, node_id, topic)
    assert view is not None, f"node {node_id} does not know {topic}"
    return view[partition]


def wait_isr(cluster: Cluster, topic: str, isr: List[int], timeout: float, partition: int = 0,
             leader: Optional[int] = None, node_ids: Optional[List[int]] = None) -> dict:
    """Until every node of `node_ids` (default: running ones) shows partition `partition` with
    exactly `isr` (as a set) and, if given, `leader`; returns that partition's state."""
    def cond(v):
        s = v.get(partition)
        return s is not None and sorted(s["isr"]) == sorted(isr) and (leader is None or s["leader"] == leader)
    return wait_views(cluster, topic, cond, timeout,
                      f"{topic}-{partition}: isr {sorted(isr)}" + ("" if leader is None else f", leader {leader}"),
                      node_ids)[partition]


def latest_offset(cluster: Cluster, node_id: int, topic: str, partition: int = 0) -> int:
    """ListOffsets LATEST (the high watermark, read_uncommitted) asked of node `node_id`, which
    must lead the partition."""
    r = wire.list_offsets(cluster.bootstrap_of(node_id), topic, [partition], wire.LATEST)[partition]
    assert r["error"] == 0, f"ListOffsets LATEST on node {node_id}: {wire.error_name(r['error'])}"
    return r["offset"]


def read_partition(client: str, bootstrap: str, topic: str, partition: int, count: int,
                   timeout_s: float = 30) -> List[tuple]:
    """(offset, value) of the first `count` records of one partition, read by `client` from the start."""
    got = run(client, "consume", bootstrap, "--topic", topic, "--count", count, "--partitions", partition,
              "--from", "earliest", "--timeout-ms", int(timeout_s * 1000), timeout=timeout_s + 60)
    return [(r["offset"], r["value"]) for r in got if r["partition"] == partition]


def assert_acked_read_back_once(read: List[tuple], sent: List[str], results: List[dict], exact: bool) -> None:
    """`read`: (offset, value) of a whole partition read from offset 0; `sent`: the values in send
    order; `results`: the producer's lines. Every acknowledged record is at its acknowledged offset
    with its value, once; offsets are contiguous from 0; values keep send order. `exact` (an
    idempotent producer that reported no failure): the log is exactly `sent`, no duplicate."""
    offsets = [o for o, _ in read]
    assert offsets == list(range(len(read))), f"offsets not contiguous from 0: {offsets[:20]}..."
    by_offset = dict(read)
    acked = [r for r in results if "error" not in r]
    for r in acked:
        assert by_offset.get(r["offset"]) == sent[r["index"]], (
            f"record {r['index']} ({sent[r['index']]!r}) acknowledged at offset {r['offset']}, "
            f"read there: {by_offset.get(r['offset'])!r}")
    values = [v for _, v in read]
    counts = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    dup_acked = sorted(sent[r["index"]] for r in acked if counts.get(sent[r["index"]], 0) != 1)
    assert not dup_acked, f"acknowledged records read more than once or never: {dup_acked[:10]}"
    order = {v: i for i, v in enumerate(sent)}
    seq = [order[v] for v in values if v in order]
    assert len(seq) == len(values), f"values read that were never sent: {[v for v in values if v not in order][:5]}"
    if exact:
        assert values == sent, (f"an idempotent producer without failures: the log must be exactly what was sent "
                                f"({len(values)} read, {len(sent)} sent; first difference at "
                                f"{next((i for i, (a, b) in enumerate(zip(values, sent)) if a != b), min(len(values), len(sent)))})")
    seen, first = set(), []
    for i in seq:
        if i not in seen:
            seen.add(i)
            first.append(i)
    acked_indexes = {r["index"] for r in acked}
    acked_seq = [i for i in first if i in acked_indexes]
    assert acked_seq == sorted(acked_seq), f"acknowledged records out of send order: {acked_seq[:40]}"


def assert_partitions_read_back(client: str, bootstrap: str, topic: str, records: List[dict],
                                results: List[dict], exact: bool = True) -> None:
    """`records` (each with its "partition") sent by one paced producer across partitions,
    `results` its lines: each partition read back from offset 0 by `client` and checked with
    `assert_acked_read_back_once` against that partition's share of the sends."""
    for p in sorted({r["partition"] for r in records}):
        indexes = [i for i, r in enumerate(records) if r["partition"] == p]
        position = {i: n for n, i in enumerate(indexes)}
        sent_p = [records[i]["value"] for i in indexes]
        results_p = [{**r, "index": position[r["index"]]} for r in results if r.get("partition") == p]
        read = read_partition(client, bootstrap, topic, p, len(sent_p))
        assert_acked_read_back_once(read, sent_p, results_p, exact)


# -- Kafka's tools -------------------------------------------------------------------------------

def under_replicated(cluster: Cluster, node_id: int, topic: str, option: str = "--under-replicated-partitions") -> List[int]:
    """Partitions of `topic` that `kafka-topics --describe <option>` lists, asked of node `node_id`."""
    proc = kafka_cli.run(TOPICS_TOOL, "--bootstrap-server", cluster.bootstrap_of(node_id), "--describe",
                         "--topic", topic, option, timeout=60)
    return sorted(kafka_cli.parse_topic_description(proc.stdout)["partitions"])


def elect_leaders(cluster: Cluster, node_id: int, election_type: str, topic: str, partition: int = 0,
                  check: bool = True):
    """`kafka-leader-election --election-type TYPE --topic T --partition P` against node
    `node_id`; returns the CompletedProcess (its stdout names the partitions elected)."""
    return kafka_cli.run(ELECTION_TOOL, "--bootstrap-server", cluster.bootstrap_of(node_id), "--election-type",
                         election_type, "--topic", topic, "--partition", partition, timeout=90, check=check)


PERF_LINE = re.compile(r"(\d+) records sent, .* (\d+(?:\.\d+)?) ms avg latency, (\d+(?:\.\d+)?) ms max latency")


def producer_perf_test(bootstrap: str, topic: str, records: int, record_size: int = 100, acks: str = "all",
                       timeout: float = 180) -> dict:
    """`kafka-producer-perf-test --num-records N --record-size S --throughput -1` with acks=`acks`
    (the client's other defaults: idempotent); {"sent": N, "avg_ms", "max_ms", "stdout"} from its
    final summary line."""
    proc = kafka_cli.run(PERF_TOOL, "--topic", topic, "--num-records", records, "--record-size", record_size,
                         "--throughput", -1, "--producer-props", f"bootstrap.servers={bootstrap}", f"acks={acks}",
                         timeout=timeout)
    summaries = PERF_LINE.findall(proc.stdout)
    assert summaries, f"no summary line in the perf tool's output: {proc.stdout[-2000:]} {proc.stderr[-2000:]}"
    sent, avg, mx = summaries[-1]
    return {"sent": int(sent), "avg_ms": float(avg), "max_ms": float(mx), "stdout": proc.stdout}


def non_quorum_leaders(cluster: Cluster) -> List[int]:
    """The running nodes that do not lead the metadata quorum (killing one keeps the quorum's
    leader, so a test measures data-plane failover, not a controller election as well)."""
    leader = cluster.wait_quorum_leader(60)
    return [n for n in cluster.running_ids() if n != leader]


def ensure_running(cluster: Cluster, timeout: float = 120) -> None:
    """Bring back any node a failed test left stopped or paused, and wait until every node lists
    every node (a no-op costing one Metadata call per node when all run)."""
    for node in cluster.nodes:
        node.resume()
        if not node.running:
            node.start()
    cluster.wait_registered(timeout, cluster.node_ids)
