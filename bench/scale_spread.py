"""`make bench-scale-spread`: throughput with records spread over every partition, on one node
and on 3 nodes (RF 3), Brook beside Apache Kafka 4.4, at many partitions (issue 24, "Measure").

For each layout ("1": one node, RF 1; "3": three combined broker+controller nodes, RF 3 —
the integration tests' harness/cluster.py, as `make bench-cluster` runs it), each server and each
size (topics of 1,000 partitions), on a fresh data directory:
1. create the topics, one CreateTopics each, until the Metadata of every node shows every
   partition with a leader (and, RF 3, an ISR of all three); RSS and open files of each node;
2. first record: one 5-byte record to every partition (franz-go, bench/go/scaleperf `first`);
3. spread produce: `--records` 1 KB records over all partitions (franz-go `produce`: passes of
   15 consecutive records per partition, batch.size 16384 so each batch holds 15, linger 5 ms,
   32 MiB buffer, acks=all, idempotent, no compression); MB/s = 10^6 bytes of values per second;
4. spread fetch: every partition from offset 0, no group, until each gave all its records
   (franz-go `fetch`, its defaults: 50 MB per fetch, 1 MB per partition);
5. RSS and open files of each node after the load, a Metadata (all topics) p50 on node 1, and the
   wall time of `kafka-topics --describe` of all topics (the JVM tool, beside the same tool
   describing one topic: most of that is its JVM start);
6. three nodes only: restart-to-serving of a node that is not the quorum leader (clean stop;
   spawn → ApiVersions, and spawn → every partition led with an ISR of three again, seen by
   another node), then controller failover (kill -9 of the quorum leader → the other nodes
   report a new leader → a CreateTopics through them succeeds).
Beside the figures taken after each phase, a sampler records each node's peak RSS and open files
per phase every 0.5 s (a transient excess, say of open files during a fetch, shows there).
`--skip-load` stops after step 1 and takes step 5's Metadata and describe (a server too slow for
the load at a size). A phase that fails or passes `--phase-timeout` ends that size's row with
why (and the log's tail), and larger sizes are skipped for that server. The load average is printed before and after
each row: the machine is shared, and figures taken under load are indicative. Never a CI gate.

    python3 bench/scale_spread.py --layout 1 --sizes 1000,10000,100000 --servers brook,kafka
    python3 bench/scale_spread.py --layout 3 --sizes 1000,5000 --records 750000
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Dict, List, Optional

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_nodes import OVERRIDES  # noqa: E402
from procs import ROOT, Server, go_build, read_rss_kb  # noqa: E402
from scale import metadata_latencies  # noqa: E402

sys.path.insert(0, str(ROOT / "integration-tests"))
from harness import kafka_cli  # noqa: E402
from harness.cluster import Cluster  # noqa: E402

BENCH_DIR = Path(__file__).resolve().parent
SCALEPERF_SOURCE = BENCH_DIR / "go" / "scaleperf"
SCALEPERF = BENCH_DIR / ".build" / "scaleperf"
RESULTS = BENCH_DIR / "results"
PER_TOPIC = 1_000
BURST = 15  # 1 KB records per 16384-byte batch
PHASE_TIMEOUT_S = 900.0
TOPIC_TOOL = "org.apache.kafka.tools.TopicCommand"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def load_average() -> List[float]:
    return [round(x, 2) for x in os.getloadavg()]


def ensure_scaleperf() -> None:
    """go build into bench/.build unless the binary is newer than its sources."""
    go_build(SCALEPERF_SOURCE, SCALEPERF)


def scaleperf(mode: str, bootstrap: str, topics: int, *args: str) -> Dict:
    """One scaleperf run (bounded by its -timeout and a kill after it); its JSON figures."""
    argv = [str(SCALEPERF), mode, "-bootstrap", bootstrap, "-prefix", "scale", "-topics", str(topics),
            "-partitions", str(PER_TOPIC), "-timeout", f"{PHASE_TIMEOUT_S:.0f}s", *args]  # fmt: skip
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=PHASE_TIMEOUT_S + 30,
                              stdin=subprocess.DEVNULL)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"scaleperf {mode} killed after {PHASE_TIMEOUT_S + 30:.0f} s") from None
    line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"scaleperf {mode} exited {proc.returncode}: {(proc.stdout + proc.stderr)[-500:]}")
    return json.loads(line)


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


class PeakSampler:
    """Every `interval_s` on a daemon thread: each pid's RSS and open files, kept as the peak per
    phase (`phase` is set by the caller), so a transient excess (say of open files during a
    fetch) shows even when the figures after the phase are back under the bound."""

    def __init__(self, pids: Callable[[], List[int]], interval_s: float = 0.5):
        self.pids, self.interval_s = pids, interval_s
        self.phase = "idle"
        self.peaks: Dict[str, Dict[str, List[int]]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "PeakSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            pids = self.pids()
            now = {"rss_mb": [round((read_rss_kb(p) or 0) / 1024) for p in pids], "open_fds": [open_fds(p) for p in pids]}
            peak = self.peaks.setdefault(self.phase, {k: list(v) for k, v in now.items()})
            for key, values in now.items():
                if len(peak[key]) == len(values):
                    peak[key] = [max(a, b) for a, b in zip(peak[key], values)]


class Nodes:
    """The servers of one row: one procs.Server (layout 1) or a harness Cluster (layout 3)."""

    def __init__(self, kind: str, layout: int, data: Path):
        self.kind, self.layout = kind, layout
        if layout == 1:
            self.server: Optional[Server] = Server(kind, data, brook_bin=Path(os.environ["BROOK_BIN"]))
            self.cluster: Optional[Cluster] = None
        else:
            self.server, self.cluster = None, Cluster(kind, data, size=3, overrides=OVERRIDES)

    def start(self) -> None:
        if self.server is not None:
            self.server.start()
        else:
            self.cluster.start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
        elif self.cluster is not None:
            self.cluster.stop()

    @property
    def bootstrap(self) -> str:
        return self.server.bootstrap if self.server is not None else self.cluster.bootstrap

    @property
    def first_port(self) -> int:
        return self.server.port if self.server is not None else self.cluster.nodes[0].port

    def pids(self) -> List[int]:
        if self.server is not None:
            return [self.server.pid]
        return [n.pid for n in self.cluster.nodes if n.pid is not None]

    def usage(self) -> Dict:
        """RSS (MB) and open files of every node, in node order."""
        return {"rss_mb": [round((read_rss_kb(p) or 0) / 1024) for p in self.pids()],
                "open_fds": [open_fds(p) for p in self.pids()]}  # fmt: skip

    def keep_logs(self, prefix: Path) -> None:
        """Each cluster node's log beside the data dir (PREFIX-node-N.log), so a failure can be read
        later; a single node's log is there already (procs.Server)."""
        for n in self.cluster.nodes if self.cluster is not None else []:
            if n.log_path.is_file():
                shutil.copyfile(n.log_path, f"{prefix}-node-{n.node_id}.log")

    def log_tail(self) -> str:
        if self.server is not None:
            try:
                return " | ".join(self.server.log_path.read_text(errors="replace").splitlines()[-6:])[-800:]
            except OSError:
                return ""
        return self.cluster.log_tails(6)[-2400:]


def partitions_ready(bootstrap: str, topics: List[str], partitions: int, rf: int) -> bool:
    """Every partition of `topics` has a leader and (rf > 1) an ISR of `rf`, in one node's Metadata."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(timeout=60)
    ready = sum(1 for t in topics if t in md.topics for p in md.topics[t].partitions.values()
                if p.leader >= 0 and p.error is None and len(p.isrs) >= rf)  # fmt: skip
    return ready == partitions


def wait_ready(bootstraps: List[str], topics: List[str], partitions: int, rf: int, timeout_s: float) -> float:
    """Seconds until every one of `bootstraps` sees all partitions ready (partitions_ready)."""
    t0 = time.monotonic()
    pending = list(bootstraps)
    while pending:
        try:
            if partitions_ready(pending[0], topics, partitions, rf):
                pending.pop(0)
                continue
        except Exception:  # a node between states: not yet
            pass
        if time.monotonic() - t0 > timeout_s:
            raise RuntimeError(f"not every partition led (ISR {rf}) on {pending[0]} within {timeout_s:.0f} s")
        time.sleep(0.2)
    return time.monotonic() - t0


def timed(fn: Callable[[], object]) -> float:
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def describe_all(bootstrap: str, topics: int) -> Dict:
    """Wall time of `kafka-topics --describe` (all topics) and of one topic's, for the JVM's share."""
    one = timed(lambda: kafka_cli.run(TOPIC_TOOL, "--bootstrap-server", bootstrap, "--describe", "--topic", "scale0",
                                      timeout=PHASE_TIMEOUT_S))  # fmt: skip
    t0 = time.monotonic()
    proc = kafka_cli.run(TOPIC_TOOL, "--bootstrap-server", bootstrap, "--describe", timeout=PHASE_TIMEOUT_S)
    wall = time.monotonic() - t0
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip().startswith("Topic:") and "Partition:" in ln]
    if len(lines) < topics * PER_TOPIC:
        raise RuntimeError(f"kafka-topics --describe listed {len(lines)} partitions, not {topics * PER_TOPIC}")
    return {"describe_all_s": wall, "describe_one_topic_s": one}


def restart_one(nodes: Nodes, topics: List[str], partitions: int) -> Dict:
    """Clean stop of a node that is not the quorum leader, then spawn → ApiVersions → all led with
    full ISR again (as another node's Metadata says)."""
    cluster = nodes.cluster
    leader = cluster.quorum_leader()
    node = next(n for n in cluster.nodes if n.node_id != leader)
    other = next(n for n in cluster.nodes if n.node_id not in (leader, node.node_id))
    stop_s = timed(node.stop)
    t0 = time.monotonic()
    node.launch()
    node.wait_ready(PHASE_TIMEOUT_S)
    serving = time.monotonic() - t0
    wait_ready([other.bootstrap], topics, partitions, 3, PHASE_TIMEOUT_S)
    return {"restart_node": node.node_id, "restart_stop_s": stop_s, "restart_serving_s": serving,
            "restart_isr_full_s": time.monotonic() - t0}  # fmt: skip


def controller_failover(nodes: Nodes) -> Dict:
    """kill -9 of the quorum leader → a new leader reported by the others → a CreateTopics through
    them succeeds (retried with short timeouts until then)."""
    cluster = nodes.cluster
    leader = cluster.quorum_leader()
    others = [n for n in cluster.nodes if n.node_id != leader]
    cluster.node(leader).kill()
    t0 = time.monotonic()
    new = cluster.wait_new_quorum_leader(leader, 120, node_ids=[n.node_id for n in others])
    elected = time.monotonic() - t0
    admin = AdminClient({"bootstrap.servers": ",".join(n.bootstrap for n in others)})
    error = None
    while time.monotonic() - t0 < 120:
        try:
            admin.create_topics([NewTopic("failover-probe", 1, 2)], request_timeout=5)["failover-probe"].result(10)
            break
        except Exception as e:  # noqa: BLE001 — the controller is not back yet; retry until the deadline
            error = e
            time.sleep(0.05)
    else:
        raise RuntimeError(f"CreateTopics failed for 120 s after the controller's kill: {error}")
    return {"failover_old_leader": leader, "failover_new_leader": new, "failover_elected_s": elected,
            "failover_create_ok_s": time.monotonic() - t0}  # fmt: skip


def describe_only(row: Dict, nodes: "Nodes", count: int) -> Dict:
    row["metadata_p50_ms"] = metadata_latencies(nodes.first_port, count=10, gap_s=0.05)["metadata_p50_ms"]
    row.update(describe_all(nodes.bootstrap.split(",")[0], count))
    log(f"  metadata p50 {row['metadata_p50_ms']:.1f} ms, describe {row['describe_all_s']:.1f} s")
    return row


def run_row(kind: str, layout: int, size: int, records: int, work: Path, skip_load: bool = False) -> Dict:
    rf = 1 if layout == 1 else 3
    data = work / f"{kind}-{layout}n-{size}"
    shutil.rmtree(data, ignore_errors=True)
    nodes = Nodes(kind, layout, data)
    per_partition = max(BURST, records // size // BURST * BURST)
    row: Dict = {"server": kind, "nodes": layout, "rf": rf, "partitions": size, "per_partition": per_partition,
                 "load_before": load_average()}  # fmt: skip
    phase = "start"
    sampler = PeakSampler(nodes.pids)
    try:
        nodes.start()
        sampler.__enter__()
        count = size // PER_TOPIC
        topics = [f"scale{i}" for i in range(count)]
        node_bootstraps = nodes.bootstrap.split(",")
        admin = AdminClient({"bootstrap.servers": nodes.bootstrap})
        phase = sampler.phase = "create"
        t0 = time.monotonic()
        # One topic per request: KRaft refuses a CreateTopics of more than
        # max.records.per.user.op (10,000) records with POLICY_VIOLATION.
        for topic in topics:
            admin.create_topics([NewTopic(topic, PER_TOPIC, rf)],
                                request_timeout=PHASE_TIMEOUT_S)[topic].result(timeout=PHASE_TIMEOUT_S)
        wait_ready(node_bootstraps, topics, size, rf, PHASE_TIMEOUT_S)
        row["create_s"] = time.monotonic() - t0
        row["idle"] = nodes.usage()
        log(f"{kind} {layout}n {size}: created in {row['create_s']:.1f} s, {row['idle']}")
        if skip_load:  # the metadata phases only (a server too slow for the load at this size)
            return describe_only(row, nodes, count)
        phase = sampler.phase = "first record"
        row["first"] = scaleperf("first", nodes.bootstrap, count)
        log(f"  first record: {row['first']['partitions_per_s']:.0f} partitions/s")
        phase = sampler.phase = "spread produce"
        row["produce"] = scaleperf("produce", nodes.bootstrap, count, "-per-partition", str(per_partition),
                                   "-burst", str(BURST))  # fmt: skip
        row["load"] = nodes.usage()
        log(f"  produce: {row['produce']['mb_per_s']:.1f} MB/s, {row['produce']['records_per_batch']:.1f} rec/batch")
        phase = sampler.phase = "spread fetch"
        row["fetch"] = scaleperf("fetch", nodes.bootstrap, count, "-per-partition", str(per_partition + 1))
        row["after_load"] = nodes.usage()
        log(f"  fetch: {row['fetch']['mb_per_s']:.1f} MB/s; {row['after_load']}")
        phase = sampler.phase = "metadata"
        row["metadata_p50_ms"] = metadata_latencies(nodes.first_port, count=10, gap_s=0.05)["metadata_p50_ms"]
        phase = sampler.phase = "describe"
        row.update(describe_all(node_bootstraps[0], count))
        log(f"  metadata p50 {row['metadata_p50_ms']:.1f} ms, describe {row['describe_all_s']:.1f} s")
        if layout == 3:
            phase = sampler.phase = "restart one node"
            row.update(restart_one(nodes, topics, size))
            log(f"  restart: serving {row['restart_serving_s']:.1f} s, ISR full {row['restart_isr_full_s']:.1f} s")
            phase = sampler.phase = "controller failover"
            row.update(controller_failover(nodes))
            log(f"  failover: elected {row['failover_elected_s']:.2f} s, create ok {row['failover_create_ok_s']:.2f} s")
    except Exception as e:  # the row says where and why the server stopped
        row["error"] = f"{phase}: {type(e).__name__}: {e}"[:600]
        row["log_tail"] = nodes.log_tail()
        log(f"  FAILED {row['error']}")
    finally:
        sampler.__exit__()
        row["peaks"] = sampler.peaks
        nodes.stop()
        nodes.keep_logs(work / data.name)
        shutil.rmtree(data, ignore_errors=True)
        row["load_after"] = load_average()
    return row


def cell(row: Dict, key: str, fmt: str) -> str:
    value = row
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return "—"
        value = value[part]
    if isinstance(value, list):
        return "/".join(fmt.format(v) for v in value)
    return fmt.format(value)


COLUMNS = [("partitions", "partitions", "{:,}"), ("server", "server", "{}"), ("create_s", "create s", "{:.1f}"),
           ("first.partitions_per_s", "first record partitions/s", "{:,.0f}"),
           ("produce.mb_per_s", "produce MB/s", "{:.1f}"), ("produce.records_per_batch", "records/batch", "{:.1f}"),
           ("fetch.mb_per_s", "fetch MB/s", "{:.1f}"), ("idle.rss_mb", "RSS MB idle", "{}"),
           ("load.rss_mb", "RSS MB after produce", "{}"), ("peaks.spread fetch.rss_mb", "RSS MB peak in fetch", "{}"),
           ("after_load.open_fds", "open fds", "{}"), ("peaks.spread produce.open_fds", "fds peak in produce", "{}"),
           ("peaks.spread fetch.open_fds", "fds peak in fetch", "{}"),
           ("metadata_p50_ms", "Metadata p50 ms", "{:.1f}"), ("describe_all_s", "describe all s", "{:.1f}"),
           ("describe_one_topic_s", "describe 1 topic s", "{:.1f}"), ("restart_serving_s", "restart → serving s", "{:.1f}"),
           ("restart_isr_full_s", "restart → ISR full s", "{:.1f}"),
           ("failover_elected_s", "failover: new leader s", "{:.2f}"),
           ("failover_create_ok_s", "failover: CreateTopics ok s", "{:.2f}"), ("load_before", "load before", "{}"),
           ("load_after", "load after", "{}")]  # fmt: skip


def table(rows: List[Dict]) -> str:
    layout = rows[0]["nodes"] if rows else 1
    columns = [c for c in COLUMNS if layout == 3 or not c[0].startswith(("restart", "failover"))]
    out = ["| " + " | ".join(h for _, h, _ in columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        out.append("| " + " | ".join(cell(r, k, f) for k, _, f in columns) + " |")
    errors = [f"- {r['server']} at {r['partitions']:,}: {r['error']}" for r in rows if "error" in r]
    return "\n".join(out + ([""] + errors if errors else []))


def main() -> None:
    global PHASE_TIMEOUT_S
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layout", type=int, choices=(1, 3), default=1, help="one node RF 1, or three nodes RF 3")
    ap.add_argument("--sizes", default=None, help="partitions (default 1000,10000,100000; 3 nodes 1000,5000)")
    ap.add_argument("--servers", default="brook,kafka")
    ap.add_argument("--brook-bin", type=Path, default=Path(os.environ.get("BROOK_BIN", ROOT / "target/release/brook")))
    ap.add_argument("--records", type=int, default=1_500_000, help="1 KB records of the spread produce, in all")
    ap.add_argument("--phase-timeout", type=float, default=PHASE_TIMEOUT_S, help="seconds a phase may take")
    ap.add_argument("--skip-load", action="store_true", help="create, then Metadata and describe only")
    ap.add_argument("--work", type=Path, default=None)
    args = ap.parse_args()
    PHASE_TIMEOUT_S = args.phase_timeout
    sizes = [int(s) for s in (args.sizes or ("1000,10000,100000" if args.layout == 1 else "1000,5000")).split(",")]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # as an operator's ulimit -n would
    os.environ["BROOK_BIN"] = str(args.brook_bin.resolve())  # for Nodes and the harness's Cluster
    os.environ.setdefault("KAFKA_HEAP_OPTS", "-Xmx1G -Xms1G")  # both layouts: kafka-ref.sh's default heap
    ensure_scaleperf()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-scale-spread-"))
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = RESULTS / f"{stamp}-scale-spread-{args.layout}n.json"
    rows: List[Dict] = []
    for kind in args.servers.split(","):
        for size in sizes:
            log(f"{kind}, {args.layout} node(s), {size:,} partitions, load {load_average()}")
            row = run_row(kind, args.layout, size, args.records, work, args.skip_load)
            rows.append(row)
            out.write_text(json.dumps({"brook_bin": str(args.brook_bin), "records": args.records, "rows": rows},
                                      indent=1) + "\n")  # fmt: skip
            if "error" in row:
                break  # a server that failed at a size is not tried larger
    text = table(rows)
    print(text)
    out.with_suffix(".md").write_text(text + "\n")
    log(f"wrote {out} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
