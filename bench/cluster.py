"""`make bench-cluster`: 3 Brook nodes against 3 Apache Kafka 4.4 nodes on this machine, RF=3 acks=all.

    python3 bench/cluster.py [--quick] [--rounds N] [--records N] [--sizes 1024,100] [--partitions N]
                             [--e2e-rate R] [--e2e-duration S] [--e2e-warmup S] [--skip-e2e]
                             [--clusters kafka,brook] [--brook-bin PATH] [--kafka-heap OPTS]
                             [--data-dir DIR] [--keep-data] [--report JSON]

One cluster at a time, each started fresh on an empty directory under --data-dir and removed
afterwards (cluster_nodes.py: the integration tests' 3-node clusters, combined broker+controller
nodes on one static quorum). Each round:
1. throughput, Kafka then Brook: per record size, a topic with --partitions partitions, RF 3 and
   min.insync.replicas 2; kafka-producer-perf-test acks=all (idempotent, the client's default)
   at --throughput -1 against all three nodes; CPU-seconds of the three node processes over the
   perf tool's run; then each node's own segment files must hold every acknowledged record and
   every node must show all three replicas in every ISR, else the run fails loudly.
2. end-to-end latency, Kafka then Brook, each on a fresh cluster: driver.py's fixed-rate e2e
   run (1 KB, acks=all) at R = --e2e-rate or half the smaller of the two clusters' 1 KB
   records/s from step 1 of this round, so both sustain it.
Medians over rounds go to a table (Brook, Kafka, Brook/Kafka, the goals) on stdout,
bench/results/<UTC>-cluster.json (raw runs, medians, configuration, machine, load) and a PNG.
A figure for people, never a CI gate. Exit status 3 when a replication check failed.

Invariants: every child has a timeout; a cluster is always stopped before the next starts, even
on error or Ctrl-C, and its data dir removed (its nodes' logs stay in --data-dir).
"""

import argparse
import json
import os
import sys
import time
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, List, Optional

import cluster_nodes
import cluster_report
import driver
import report
from bench import log, save
from cluster_nodes import MIN_INSYNC_REPLICAS, REPLICATION_FACTOR, ClusterError, RunningCluster, running_cluster
from procs import GB, ROOT, CpuMeter, RssSampler
from workloads import Workload, create_topic, produce, reason

BENCH_DIR = Path(__file__).resolve().parent
KINDS = ("kafka", "brook")
IDLE_S = 3.0  # the nodes' idle CPU is measured over this window after start
E2E_SIZE, E2E_TOPIC = 1024, "e2e-acks-all"
TOPIC_CONFIGS = {"min.insync.replicas": str(MIN_INSYNC_REPLICAS)}


def workloads(sizes: List[int]) -> List[Workload]:
    return [Workload(size, "all", "none") for size in sizes]


def children_cpu_s() -> float:
    """CPU seconds of the children waited for so far (the perf tool's JVM, once it has exited)."""
    t = os.times()
    return t.children_user + t.children_system


def idle_cores(rc: RunningCluster, window_s: float) -> float:
    """The three nodes' CPU use at rest (raft heartbeats, JIT, GC), in cores: a baseline, not a load."""
    before = sum(rc.node_cpu_s())
    time.sleep(window_s)  # a measurement window, not a wait for a condition
    return (sum(rc.node_cpu_s()) - before) / window_s


def prepare_topic(rc: RunningCluster, topic: str, partitions: int) -> None:
    """Create `topic` with RF 3 and min.insync.replicas 2 and wait until every partition is led
    with a full ISR on every node; the topic's min.insync.replicas must read back as set."""
    err = create_topic(rc.bootstrap, topic, partitions, REPLICATION_FACTOR, TOPIC_CONFIGS)
    if err:
        raise ClusterError(f"{topic}: {err}")
    cluster_nodes.wait_topic_ready(rc, topic, partitions)
    got = cluster_nodes.min_insync_replicas(rc, topic)
    if got != str(MIN_INSYNC_REPLICAS):
        raise ClusterError(f"{topic}: min.insync.replicas reads back as {got!r}, not {MIN_INSYNC_REPLICAS}")


def measured_produce(rc: RunningCluster, w: Workload, records: int) -> Dict:
    """One perf-tool run; its figures plus the nodes' CPU over it. Raises ClusterError on failure."""
    timeout_s = 60 + records / 1000  # slower than 1,000 records/s counts as a failure anyway
    cpu0, client0 = rc.node_cpu_s(), children_cpu_s()
    figures, out = produce(rc.bootstrap, w, records, timeout_s)
    cpu1, client1 = rc.node_cpu_s(), children_cpu_s()
    if figures is None:
        raise ClusterError(f"produce {w.name}: {reason(out)}")
    per_node = [b - a for a, b in zip(cpu0, cpu1)]
    gb = records * w.record_size / GB  # every record acknowledged (else produce() returned None)
    figures.update(node_cpu_s=sum(per_node), node_cpu_s_each=per_node, gb_acked=gb,
                   cpu_s_per_gb=sum(per_node) / gb, client_cpu_s=client1 - client0)  # fmt: skip
    return figures


def throughput_run(kind: str, round_no: int, args: argparse.Namespace) -> Dict:
    """A fresh cluster: each record size's perf-tool run, then the replication checks."""
    result: Dict = {"cluster": kind, "round": round_no, "phase": "throughput", "produce": {}, "replication": {},
                    "errors": []}  # fmt: skip
    cpu = CpuMeter()
    try:
        with running_cluster(kind, args.data_dir / f"{kind}-r{round_no}-throughput", args.keep_data) as rc:
            result["start_s"] = rc.start_s
            result["node_idle_cores"] = idle_cores(rc, IDLE_S)
            log(f"{kind} cluster round {round_no}: up in {rc.start_s:.1f} s, idle {result['node_idle_cores']:.2f} cores")
            with ExitStack() as stack:
                samplers = [stack.enter_context(RssSampler(pid)) for pid in rc.pids]
                for s in samplers:
                    s.phase = "load"
                for w in workloads(args.sizes):
                    run_workload(rc, w, result, args)
            result["rss_peak_mb_each"] = [s.peak_mb("load") for s in samplers]
            for w in workloads(args.sizes):
                if w.name in result["produce"]:
                    check = cluster_nodes.check_replication(rc, w.topic, args.partitions, args.records)
                    result["replication"][w.name] = check
                    log(f"{kind} replication {w.name}: {'ok' if check['ok'] else 'FAILED'} "
                        f"(records on disk per node: {check.get('records_on_disk')})")  # fmt: skip
    except (ClusterError, OSError, ValueError) as e:
        result["errors"].append(str(e)[-2000:])
        log(f"{kind} round {round_no} throughput: {str(e)[:500]}")
    for name, check in result["replication"].items():
        if not check["ok"]:
            result["errors"].append(f"REPLICATION CHECK FAILED {name}: {json.dumps(check)[:1500]}")
    result["other_load_cores"] = cpu.other_cores()
    return result


def run_workload(rc: RunningCluster, w: Workload, result: Dict, args: argparse.Namespace) -> None:
    try:
        prepare_topic(rc, w.topic, args.partitions)
        figures = measured_produce(rc, w, args.records)
    except ClusterError as e:
        result["errors"].append(str(e)[-2000:])
        log(f"{result['cluster']} produce {w.name}: FAILED {str(e)[:300]}")
        return
    result["produce"][w.name] = figures
    log(f"{result['cluster']} produce {w.name}: {figures['records_per_s']:,.0f} records/s, {figures['mb_per_s']:.1f} MB/s, "
        f"p99 {figures['p99_ms']:.0f} ms, {figures['cpu_s_per_gb']:.1f} node CPU-s/GB")  # fmt: skip


def e2e_run(kind: str, round_no: int, rate: float, args: argparse.Namespace) -> Dict:
    """A fresh cluster: the fixed-rate end-to-end run, 1 KB, acks=all, plus the nodes' CPU over it."""
    result: Dict = {"cluster": kind, "round": round_no, "phase": "e2e", "e2e_rate": rate, "e2e": {}, "errors": []}
    name = "1KB acks=all"
    cpu = CpuMeter()
    try:
        with running_cluster(kind, args.data_dir / f"{kind}-r{round_no}-e2e", args.keep_data) as rc:
            result["start_s"] = rc.start_s
            prepare_topic(rc, E2E_TOPIC, args.partitions)
            cpu0 = sum(rc.node_cpu_s())
            figures, out = driver.e2e(rc.bootstrap, E2E_TOPIC, rate, args.e2e_warmup, args.e2e_duration, "all", E2E_SIZE)
            node_cpu = sum(rc.node_cpu_s()) - cpu0
            if figures is None:
                raise ClusterError(f"e2e {name}: {reason(out)}")
            figures.update(node_cpu_s=node_cpu, node_cpu_s_per_gb=node_cpu / (figures["acked"] * E2E_SIZE / GB))
            result["e2e"][name] = figures
            log(f"{kind} e2e {name} at {rate:,.0f} msg/s: p50 {figures['e2e_p50_ms']:.1f} ms, "
                f"p99 {figures['e2e_p99_ms']:.1f} ms, max {figures['e2e_max_ms']:.1f} ms")  # fmt: skip
    except (ClusterError, OSError, ValueError) as e:
        result["errors"].append(str(e)[-2000:])
        log(f"{kind} round {round_no} e2e: {str(e)[:500]}")
    result["other_load_cores"] = cpu.other_cores()
    return result


def e2e_rate_of(round_runs: List[Dict], args: argparse.Namespace) -> Optional[float]:
    """--e2e-rate, else half the smaller 1 KB records/s of this round's throughput runs: a rate
    both clusters sustained at full speed, with headroom."""
    if args.e2e_rate:
        return args.e2e_rate
    name = Workload(E2E_SIZE, "all", "none").name
    measured = [r["produce"][name]["records_per_s"] for r in round_runs if name in r["produce"]]
    return min(measured) / 2 if measured else None


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="3 Brook nodes vs 3 Apache Kafka nodes, RF=3 acks=all")
    ap.add_argument("--quick", action="store_true", help="1 round of 300,000 records, 2 s + 8 s e2e (under 10 minutes)")
    ap.add_argument("--rounds", type=int, help="rounds (default 3; 1 with --quick)")
    ap.add_argument("--records", type=int, help="records per perf-tool run (default 2,000,000; 300,000 with --quick)")
    ap.add_argument("--sizes", default="1024,100", help="record sizes in bytes (default 1024,100; 1024 is needed "
                    "for the default e2e rate)")  # fmt: skip
    ap.add_argument("--partitions", type=int, default=6, help="partitions per topic (default 6)")
    ap.add_argument("--clusters", default=",".join(KINDS), help="clusters to run, in order (default kafka,brook)")
    ap.add_argument("--brook-bin", type=Path, default=ROOT / "target" / "release" / "brook")
    ap.add_argument("--kafka-heap", default="-Xmx1G -Xms1G", help="each Kafka node's heap (default: the single-node "
                    "bench's -Xmx1G -Xms1G)")  # fmt: skip
    ap.add_argument("--data-dir", type=Path, default=BENCH_DIR / ".data")
    ap.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    ap.add_argument("--keep-data", action="store_true", help="keep each cluster's data dirs")
    ap.add_argument("--e2e-rate", type=float, help="fixed e2e rate, msg/s (default: half the smaller 1 KB maximum)")
    ap.add_argument("--e2e-duration", type=float, help="e2e measured seconds (default 30; 8 with --quick)")
    ap.add_argument("--e2e-warmup", type=float, help="e2e warm-up seconds (default 5; 2 with --quick)")
    ap.add_argument("--skip-e2e", action="store_true", help="only the throughput runs")
    ap.add_argument("--report", type=Path, help="only print the table and draw the chart of a saved results json")
    args = ap.parse_args()
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.records = args.records or (300_000 if args.quick else 2_000_000)
    args.e2e_duration = args.e2e_duration or (8.0 if args.quick else 30.0)
    args.e2e_warmup = args.e2e_warmup if args.e2e_warmup is not None else (2.0 if args.quick else 5.0)
    try:
        args.sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        ap.error("--sizes takes comma-separated byte counts")
    args.clusters = [k.strip() for k in args.clusters.split(",") if k.strip()]
    if not args.clusters or any(k not in KINDS for k in args.clusters):
        ap.error(f"--clusters takes a comma-separated subset of {','.join(KINDS)}")
    if args.rounds < 1 or args.records < 1 or args.partitions < 1 or not args.sizes or min(args.sizes) < 1:
        ap.error("--rounds, --records, --partitions and --sizes must be positive")
    return args


def document(args: argparse.Namespace, stamp: str, load_before, runs: List[Dict], complete: bool) -> Dict:
    doc = {
        "started_utc": stamp,
        "complete": complete,
        "machine": report.machine(),
        "config": {
            "mode": "cluster",
            "nodes": cluster_nodes.SIZE,
            "replication_factor": REPLICATION_FACTOR,
            "min_insync_replicas": MIN_INSYNC_REPLICAS,
            "acks": "all",
            "rounds": args.rounds,
            "records": args.records,
            "partitions": args.partitions,
            "workloads": [w.name for w in workloads(args.sizes)],
            "clusters": args.clusters,
            "brook_bin": str(args.brook_bin),
            "kafka_heap": args.kafka_heap,
            "node_overrides": cluster_nodes.OVERRIDES,
            "e2e_rate_override": args.e2e_rate,
            "e2e_warmup_s": args.e2e_warmup,
            "e2e_duration_s": args.e2e_duration,
            "gb_bytes": GB,
        },
        "load": report.load_note(load_before, os.getloadavg(), runs),
        "runs": runs,
    }
    doc["medians"] = cluster_report.medians(runs)
    return doc


def render(doc: Dict, json_path: Path) -> None:
    if not doc.get("complete", True):
        print(f"PARTIAL RUN: {len(doc['runs'])} cluster runs finished")
    print(cluster_report.table(doc))
    png_path = json_path.with_suffix(".png")
    try:
        cluster_report.chart(doc, png_path)
    except ImportError:  # run without bench.sh's venv: the table and the json are the result
        png_path = None
    print(f"\nraw figures: {json_path}" + (f"\nchart:       {png_path}" if png_path else "\n(no chart: matplotlib missing)"))


def run_rounds(args: argparse.Namespace, on_run) -> List[Dict]:
    runs: List[Dict] = []
    for round_no in range(1, args.rounds + 1):
        tput = []
        for kind in args.clusters:
            tput.append(throughput_run(kind, round_no, args))
            runs.append(tput[-1])
            on_run(runs)
        if args.skip_e2e:
            continue
        rate = e2e_rate_of(tput, args)
        if rate is None:
            runs[-1]["errors"].append("e2e: no 1 KB records/s measured this round: pass --e2e-rate")
            continue
        for kind in args.clusters:
            runs.append(e2e_run(kind, round_no, rate, args))
            on_run(runs)
    return runs


def main() -> int:
    args = parse_args()
    if args.report:
        render(json.loads(args.report.read_text()), args.report)
        return 0
    if "brook" in args.clusters and not args.brook_bin.is_file():
        print(f"brook binary not found at {args.brook_bin}: cargo build --release -p brook", file=sys.stderr)
        return 2
    # The harness reads both when it starts a node: the binary under test and each JVM's heap.
    os.environ["BROOK_BIN"] = str(args.brook_bin.resolve())
    os.environ["KAFKA_HEAP_OPTS"] = args.kafka_heap
    if not args.skip_e2e:
        driver.ensure_built()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    args.data_dir.mkdir(parents=True, exist_ok=True)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    json_path = args.results_dir / f"{stamp}-cluster.json"
    load_before = os.getloadavg()
    # Written after every cluster run: an interrupted run keeps what it measured (`--report`).
    runs = run_rounds(args, lambda rs: save(document(args, stamp, load_before, rs, complete=False), json_path))
    doc = document(args, stamp, load_before, runs, complete=True)
    save(doc, json_path)
    render(doc, json_path)
    notes = sorted({f"{r['cluster']} ({r['phase']}, round {r['round']}): {e}" for r in runs for e in r["errors"]})
    if notes:
        print("\nfailures (details in the json):")
        print("\n".join(f"  {n[:400]}" for n in notes))
    if not all(cluster_report.replication_ok(r) for r in runs if r["phase"] == "throughput"):
        print("\nREPLICATION CHECK FAILED: the affected runs are left out of the figures above", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
