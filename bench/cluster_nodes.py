"""Three-node clusters for `make bench-cluster`: start one, measure its nodes' CPU, check replication.

The clusters are the integration tests' own (integration-tests/harness/cluster.py, imported, not
copied): three combined broker+controller nodes on loopback forming one static quorum
(`controller.quorum.voters`), Brook with those settings as `--override`s, Apache Kafka 4.4 through
integration-tests/scripts/kafka-cluster-ref.sh (each node's storage formatted with one shared
cluster id). So the benchmark measures exactly the clusters the replication tests check.

`running_cluster()` starts one on an empty directory and, whatever happens, stops it (SIGTERM to
every node, SIGKILL after the harness's deadline), keeps each node's log beside the data dir and
removes the data. `node_cpu_s()` reads utime+stime of each node process from /proc/PID/stat
(procs.process_cpu_s): that counts every thread of the process, live or exited (for Kafka the pid
is the JVM's: kafka-cluster-ref.sh ends in `exec java`). `check_replication()` reads the log end offset of every
partition from each node's own segment files, so "replicated" does not rest on what the brokers say.

Invariants: every wait polls with a deadline; only the processes the harness started are signalled.
"""

import shutil
import struct
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, List, Optional

from procs import ROOT, process_cpu_s

sys.path.insert(0, str(ROOT / "integration-tests"))
from harness import wire  # noqa: E402  (the harness is found through the path set just above)
from harness.broker import BrokerStartError  # noqa: E402
from harness.cluster import Cluster  # noqa: E402

SIZE = 3
REPLICATION_FACTOR = 3
MIN_INSYNC_REPLICAS = 2
# The harness shortens the brokers' session (6 s) and heartbeat (1 s) so fault tests run fast;
# a benchmark keeps Kafka's shipped values, on both clusters.
OVERRIDES = {"broker.session.timeout.ms": "9000", "broker.heartbeat.interval.ms": "2000"}
READY_TIMEOUT_S = 60.0
REPLICATED_TIMEOUT_S = 60.0
# Record batch header: baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8,
# crc uint32, attributes int16, lastOffsetDelta int32 -> lastOffsetDelta is at byte 23.
BATCH_PREFIX, LAST_OFFSET_DELTA_AT = 12, 23


class ClusterError(RuntimeError):
    """A cluster did not start, a topic did not become ready, or replication did not happen."""


class RunningCluster:
    """A started harness Cluster plus what the benchmark reads of it."""

    def __init__(self, cluster: Cluster, start_s: float):
        self.cluster, self.start_s = cluster, start_s

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    @property
    def pids(self) -> List[int]:
        return [n.pid for n in self.cluster.nodes if n.pid is not None]

    def node_cpu_s(self) -> List[float]:
        """utime+stime of each node process, in node order (a node that is gone raises)."""
        return [process_cpu_s(pid) for pid in self.pids]

    def log_dir(self, node_index: int) -> Path:
        return self.cluster.nodes[node_index].log_dirs


@contextmanager
def running_cluster(kind: str, base_dir: Path, keep_data: bool = False) -> Iterator[RunningCluster]:
    """A fresh 3-node `kind` cluster on empty `base_dir`; stopped, logs kept, data removed on exit."""
    shutil.rmtree(base_dir, ignore_errors=True)
    cluster = Cluster(kind, base_dir, size=SIZE, overrides=OVERRIDES)
    try:
        t0 = time.monotonic()
        try:
            cluster.start()  # every node serving and listing all three
        except BrokerStartError as e:
            raise ClusterError(str(e)[-3000:]) from None
        yield RunningCluster(cluster, time.monotonic() - t0)
    finally:
        cluster.stop()
        _keep_logs(cluster, base_dir)
        if not keep_data:
            shutil.rmtree(base_dir, ignore_errors=True)


def _keep_logs(cluster: Cluster, base_dir: Path) -> None:
    """Each node's log next to the data dir (base_dir-node-N.log), so a failure can be read later."""
    for n in cluster.nodes:
        if n.log_path.is_file():
            shutil.copyfile(n.log_path, base_dir.parent / f"{base_dir.name}-node-{n.node_id}.log")


def _poll(predicate, timeout_s: float, interval_s: float = 0.2):
    """`predicate()` until it returns (True, detail) or the deadline; returns the last (ok, detail)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            ok, detail = predicate()
        except (OSError, ValueError) as e:  # a node busy or between states: not yet
            ok, detail = False, repr(e)
        if ok or time.monotonic() >= deadline:
            return ok, detail
        time.sleep(interval_s)


def isr_view(rc: RunningCluster, topic: str, partitions: int) -> Dict[int, Dict[int, List[int]]]:
    """{node id: {partition: isr}} as each node's own Metadata answer says (missing: absent)."""
    views = {}
    for n in rc.cluster.nodes:
        md = wire.metadata(n.bootstrap, [topic])["topics"].get(topic) or {"partitions": {}}
        views[n.node_id] = {p: sorted(info["isr"]) for p, info in md["partitions"].items()
                            if info["error"] == 0 and info["leader"] >= 0}  # fmt: skip
    return views


def _full_isr(views: Dict[int, Dict[int, List[int]]], partitions: int) -> bool:
    everyone = list(range(1, SIZE + 1))
    return all(len(v) == partitions and all(isr == everyone for isr in v.values()) for v in views.values())


def wait_topic_ready(rc: RunningCluster, topic: str, partitions: int) -> None:
    """Until every node sees every partition with a leader and all three replicas in sync."""
    ok, detail = _poll(lambda: (lambda v: (_full_isr(v, partitions), v))(isr_view(rc, topic, partitions)),
                       READY_TIMEOUT_S)  # fmt: skip
    if not ok:
        raise ClusterError(f"{topic}: not every partition led with ISR of {SIZE} within {READY_TIMEOUT_S} s: {detail}")


def min_insync_replicas(rc: RunningCluster, topic: str) -> Optional[str]:
    """The topic's min.insync.replicas as node 1 describes it."""
    return wire.describe_topic_configs(rc.cluster.nodes[0].bootstrap, topic, ["min.insync.replicas"])["configs"].get(
        "min.insync.replicas")


def segment_log_end_offset(path: Path) -> Optional[int]:
    """One past the last offset of the last complete batch in a segment file (None: no batch)."""
    leo, pos = None, 0
    size = path.stat().st_size
    with open(path, "rb") as f:
        while pos + LAST_OFFSET_DELTA_AT + 4 <= size:
            f.seek(pos)
            base, length = struct.unpack(">qi", f.read(BATCH_PREFIX))
            if length <= 0 or pos + BATCH_PREFIX + length > size:
                break  # preallocated zeros, or a batch still being written
            f.seek(pos + LAST_OFFSET_DELTA_AT)
            (delta,) = struct.unpack(">i", f.read(4))
            leo, pos = base + delta + 1, pos + BATCH_PREFIX + length
    return leo


def partition_log_end_offset(partition_dir: Path) -> int:
    """The log end offset of one partition directory: segments are named by their base offset, so
    the newest non-empty one holds the end (an empty newest segment starts at the end)."""
    segments = sorted(partition_dir.glob("*.log"), key=lambda p: int(p.stem))
    if not segments:
        raise ValueError(f"no segment in {partition_dir}")
    for seg in reversed(segments):
        leo = segment_log_end_offset(seg)
        if leo is not None:
            return leo
    return int(segments[-1].stem)


def disk_log_end_offsets(rc: RunningCluster, topic: str, partitions: int) -> Dict[int, List[int]]:
    """{node id: [log end offset of partition 0..n-1]} read from each node's own files."""
    return {n.node_id: [partition_log_end_offset(rc.log_dir(i) / f"{topic}-{p}") for p in range(partitions)]
            for i, n in enumerate(rc.cluster.nodes)}  # fmt: skip


def check_replication(rc: RunningCluster, topic: str, partitions: int, records: int) -> Dict:
    """Poll until every node holds all `records` acknowledged records of `topic` in its own files
    (equal log end offsets, summing to `records`) and every node's Metadata shows every partition's
    ISR as all three nodes. Returns the evidence; "ok" False when the deadline passed first."""

    def replicated():
        leo = disk_log_end_offsets(rc, topic, partitions)
        same = all(offsets == leo[1] for offsets in leo.values())
        isr = isr_view(rc, topic, partitions)
        ok = same and sum(leo[1]) == records and _full_isr(isr, partitions)
        return ok, {"log_end_offsets": leo, "records_on_disk": {n: sum(v) for n, v in leo.items()},
                    "isr": {n: {p: v[p] for p in sorted(v)} for n, v in isr.items()}}  # fmt: skip

    ok, detail = _poll(replicated, REPLICATED_TIMEOUT_S, interval_s=0.5)
    if not isinstance(detail, dict):
        detail = {"error": detail}
    return {"ok": ok, "expected_records": records, **detail}
