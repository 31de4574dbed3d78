"""`make bench`: Brook against Apache Kafka, side by side, on this machine.

    python3 bench/bench.py [--quick] [--rounds N] [--records N] [--partitions N]
                           [--brook-bin PATH] [--data-dir DIR] [--skip-sink] [--servers LIST]
                           [--consume-only]
                           [--e2e-rates LIST] [--e2e-acks LIST] [--e2e-duration S] [--e2e-warmup S] [--skip-e2e]
                           [--scale-rate R] [--scale-duration S] [--skip-scale]

Each round runs the null sink (the producer's ceiling; also the consumer's, serving what it was
sent from memory as a null source), then Apache Kafka, then Brook, one
server at a time, each started fresh on an empty data directory under the same --data-dir (the
same disk). Against each broker: time from spawn to the first ApiVersions answer; RSS at idle;
for every workload (record size x acks x compression) create the topic, run
kafka-producer-perf-test at --throughput -1; then kafka-consumer-perf-test over each acks=1
topic (the null sink too); the server's CPU-seconds (/proc/PID/stat) over each of those runs, per
GB of record values produced or fetched; RSS peak under load and steady once idle again.
--consume-only produces only the acks=1 workloads (the data to consume) and skips the e2e and
scale runs. Then, against the two brokers only: the end-to-end latency curve (latency_curve.py:
1 KB records at each --e2e-rates rate and at the broker's own producer maximum, acks=1 and
acks=all, each point sustained or not), and the scale runs (scale.py: 100 topics x 10
partitions under steady produce, 1,000 idle connections). Medians over rounds go to tables on
stdout (report.py, curve_report.py), bench/results/<UTC>.json (raw figures + machine + load) and
bench/results/<UTC>.png.

Invariants: every child process has a timeout, each server is stopped (process group SIGTERM,
then SIGKILL) before the next one starts, even on error or Ctrl-C; its data dir is then removed.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from itertools import product
from pathlib import Path
from typing import Dict, List, Optional

import curve_report
import driver
import latency_curve
import report
import scale
from procs import GB, ROOT, CpuMeter, RssSampler, Server, cpu_figures
from workloads import Workload, consume, create_topic, produce, reason

BENCH_DIR = Path(__file__).resolve().parent
IDLE_S = 3.0  # RSS sampling window at idle, before and after load
KINDS = ("sink", "kafka", "brook")
SCALE_TOPICS, SCALE_PARTITIONS, SCALE_RECORD_SIZE = 100, 10, 100


def workloads() -> List[Workload]:
    return [Workload(s, a, c) for s, a, c in product((100, 1024), ("1", "all"), ("none", "lz4"))]


def log(msg: str) -> None:
    print(f"[{datetime.now(timezone.utc):%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def run_server(kind: str, round_no: int, args: argparse.Namespace) -> Dict:
    """Start one server, run every workload against it, stop it; returns its raw figures."""
    data_dir = args.data_dir / f"{kind}-r{round_no}"
    shutil.rmtree(data_dir, ignore_errors=True)
    server = Server(kind, data_dir, brook_bin=args.brook_bin, partitions=args.partitions)
    result: Dict = {"server": kind, "round": round_no, "produce": {}, "consume": {}, "e2e": {}, "scale": {}, "errors": []}
    cpu = CpuMeter()
    timeout_s = 60 + args.records / 2000  # > 2,000 records/s or the run is a failure anyway
    try:
        server.start()
        result["first_start_s"] = server.startup_s
        if kind != "sink":
            # The first start of kafka-ref.sh also formats the KRaft metadata dir (two more JVMs),
            # so the startup figure is the second start on the same, still empty, data dir.
            server.stop()
            server.start()
        result["startup_s"] = server.startup_s
        log(f"{kind} round {round_no}: first start {result['first_start_s']:.2f} s, restart {server.startup_s:.2f} s")
        with RssSampler(server.pid or 0) as rss:
            time.sleep(IDLE_S)
            rss.phase = "load"
            for w in workloads():
                if args.consume_only and w.acks != "1":
                    continue
                if kind != "sink":
                    err = create_topic(server.bootstrap, w.topic, args.partitions)
                    if err:
                        result["errors"].append(f"{w.name}: {err}")
                        continue
                cpu0 = server.cpu_s()
                figures, out = produce(server.bootstrap, w, args.records, timeout_s)
                result["produce"][w.name] = with_cpu(figures, cpu0, server.cpu_s(), args.records * w.record_size)
                if figures is None:
                    result["errors"].append(f"produce {w.name}: {reason(out)}")
                log(f"{kind} produce {w.name}: {short(figures, 'mb_per_s', 'MB/s')}")
            for w in workloads():
                if w.acks != "1" or result["produce"].get(w.name) is None:
                    continue
                cpu0 = server.cpu_s()
                figures, out = consume(server.bootstrap, w.topic, args.records, timeout_s)
                result["consume"][w.name] = with_cpu(figures, cpu0, server.cpu_s(), args.records * w.record_size)
                if figures is None:
                    result["errors"].append(f"consume {w.name}: {reason(out)}")
                log(f"{kind} consume {w.name}: {short(figures, 'fetch_mb_per_s', 'fetch MB/s')}")
            rss.phase = "idle-after"
            time.sleep(IDLE_S)
            result["rss_idle_start_mb"] = rss.median_mb("idle-start")
            result["rss_peak_mb"] = rss.peak_mb("load")
            result["rss_steady_mb"] = rss.median_mb("idle-after")
            if kind != "sink":
                if not args.skip_e2e:
                    latency_curve.run(server, rss, result, args.e2e_rates, args.e2e_acks, args.partitions,
                                      args.e2e_warmup, args.e2e_duration, log)  # fmt: skip
                run_scale(server, rss, result, args)
    except RuntimeError as e:
        result["errors"].append(str(e))
        log(f"{kind} round {round_no}: {e}")
    finally:
        server.stop()
        if not args.keep_data:
            shutil.rmtree(data_dir, ignore_errors=True)
    result["other_load_cores"] = cpu.other_cores()
    return result


def with_cpu(figures: Optional[Dict], cpu0: Optional[float], cpu1: Optional[float], value_bytes: int) -> Optional[Dict]:
    """A perf-tool run's figures plus the server's CPU-seconds over it, per GB of record values it
    took in or served (every record, or the run failed and `figures` is None)."""
    if figures is not None:
        figures.update(cpu_figures(cpu0, cpu1, value_bytes / GB))
    return figures


def run_scale(server: Server, rss: RssSampler, result: Dict, args: argparse.Namespace) -> None:
    """(a) 100 topics x 10 partitions under steady produce, (b) 1,000 idle connections."""
    if args.skip_scale:
        return
    name = f"{SCALE_TOPICS}x{SCALE_PARTITIONS} partitions"

    def start() -> driver.ScaleRun:
        return driver.ScaleRun(server.bootstrap, "scale", SCALE_TOPICS, SCALE_PARTITIONS, args.scale_rate,
                               args.scale_duration, SCALE_RECORD_SIZE)  # fmt: skip

    try:
        result["scale"][name] = scale.topics_under_load(start, server.port, rss, IDLE_S)
    except (RuntimeError, OSError, ValueError) as e:
        result["scale"][name] = None
        result["errors"].append(f"scale {name}: {e}")
    log(f"{server.kind} scale {name}: {scale.summary(result['scale'][name])}")
    name = f"{scale.CONNECTIONS} idle connections"
    try:
        result["scale"][name] = scale.idle_connections(server.port, rss, IDLE_S)
    except (RuntimeError, OSError, ValueError) as e:
        result["scale"][name] = None
        result["errors"].append(f"scale {name}: {e}")
    log(f"{server.kind} scale {name}: {scale.summary(result['scale'][name])}")


def short(figures: Optional[Dict], key: str, unit: str) -> str:
    return "FAILED (see errors in the json)" if figures is None else f"{figures[key]:.2f} {unit}"


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="Brook vs Apache Kafka, side by side")
    ap.add_argument("--quick", action="store_true", help="1 round of 200,000 records: for trying it out")
    ap.add_argument("--rounds", type=int, help="rounds per server (default 3; 1 with --quick)")
    ap.add_argument("--records", type=int, help="records per workload (default 2,000,000; 200,000 with --quick)")
    ap.add_argument("--partitions", type=int, default=3, help="partitions per topic (default 3)")
    ap.add_argument("--brook-bin", type=Path, default=ROOT / "target" / "release" / "brook")
    ap.add_argument("--data-dir", type=Path, default=BENCH_DIR / ".data", help="both brokers' data (same disk)")
    ap.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    ap.add_argument("--skip-sink", action="store_true", help="do not run the null sink")
    ap.add_argument("--servers", default=",".join(KINDS), help=f"servers to run, in order (default {','.join(KINDS)})")
    ap.add_argument("--consume-only", action="store_true",
                    help="produce only the acks=1 workloads (the consumer's data), consume them; no e2e, no scale")
    ap.add_argument("--keep-data", action="store_true", help="keep each broker's data dir and log")
    ap.add_argument("--e2e-rates", help=f"e2e latency curve: target msg/s of 1 KB records, comma-separated; 'max' is "
                    f"each broker's own 1KB producer maximum from this run (default {latency_curve.DEFAULT_RATES}; "
                    f"{latency_curve.QUICK_RATES} with --quick)")  # fmt: skip
    ap.add_argument("--e2e-acks", default=latency_curve.DEFAULT_ACKS,
                    help=f"acks settings of the e2e curve (default {latency_curve.DEFAULT_ACKS})")
    ap.add_argument("--e2e-duration", type=float, help="e2e measured seconds per point (default 30; 5 with --quick)")
    ap.add_argument("--e2e-warmup", type=float, help="e2e warm-up seconds (default 5; 2 with --quick)")
    ap.add_argument("--scale-rate", type=float, default=5000.0, help="scale produce rate, msg/s (default 5,000)")
    ap.add_argument("--scale-duration", type=float, help="scale produce seconds (default 30; 10 with --quick)")
    ap.add_argument("--skip-e2e", action="store_true", help="do not run the end-to-end latency runs")
    ap.add_argument("--skip-scale", action="store_true", help="do not run the scale runs")
    ap.add_argument("--report", type=Path, help="only print the table and draw the chart of a saved results json")
    args = ap.parse_args()
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.records = args.records or (200_000 if args.quick else 2_000_000)
    args.e2e_duration = args.e2e_duration or (5.0 if args.quick else 30.0)
    try:
        args.e2e_rates = latency_curve.parse_rates(
            args.e2e_rates or (latency_curve.QUICK_RATES if args.quick else latency_curve.DEFAULT_RATES))
        args.e2e_acks = latency_curve.parse_acks(args.e2e_acks)
    except ValueError as e:
        ap.error(f"--e2e-rates takes msg/s numbers and 'max', --e2e-acks 1 and/or all: {e}")
    args.e2e_warmup = args.e2e_warmup if args.e2e_warmup is not None else (2.0 if args.quick else 5.0)
    args.scale_duration = args.scale_duration or (10.0 if args.quick else 30.0)
    if args.rounds < 1 or args.records < 1 or args.partitions < 1:
        ap.error("--rounds, --records and --partitions must be positive")
    args.servers = [k.strip() for k in args.servers.split(",") if k.strip()]
    if not args.servers or any(k not in KINDS for k in args.servers):
        ap.error(f"--servers takes a comma-separated subset of {','.join(KINDS)}")
    if args.consume_only:
        args.skip_e2e = args.skip_scale = True
    return args


def document(args: argparse.Namespace, stamp: str, kinds, fd_limit, load_before, runs, complete: bool) -> Dict:
    doc = {
        "started_utc": stamp,
        "complete": complete,
        "machine": report.machine(),
        "config": {
            "rounds": args.rounds,
            "records": args.records,
            "partitions": args.partitions,
            "workloads": [w.name for w in workloads()],
            "brook_bin": str(args.brook_bin),
            "servers": kinds,
            "consume_only": args.consume_only,
            "e2e_rates": args.e2e_rates,
            "e2e_acks": args.e2e_acks,
            "e2e_record_size": latency_curve.SIZE,
            "e2e_max_from": {a: latency_curve.max_from(a) for a in args.e2e_acks},
            "e2e_sustained_if": {"min_achieved_fraction": latency_curve.MIN_ACHIEVED,
                                 "max_p50_ms": latency_curve.MAX_P50_MS, "every_record_delivered": True},
            "e2e_warmup_s": args.e2e_warmup,
            "e2e_duration_s": args.e2e_duration,
            "scale": {"topics": SCALE_TOPICS, "partitions": SCALE_PARTITIONS, "record_size": SCALE_RECORD_SIZE,
                      "rate": args.scale_rate, "duration_s": args.scale_duration,
                      "connections": scale.CONNECTIONS, "fd_limit": fd_limit},
        },
        "load": report.load_note(load_before, os.getloadavg(), runs),
        "runs": runs,
    }
    doc["medians"] = report.medians(runs)
    return doc


def save(doc: Dict, json_path: Path) -> None:
    tmp = json_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2))
    tmp.replace(json_path)


def render(doc: Dict, json_path: Path) -> None:
    """The table on stdout and the chart next to the json."""
    if not doc.get("complete", True):
        print(f"PARTIAL RUN: {len(doc['runs'])} server runs of rounds x servers finished")
    print(report.table(doc))
    curve = curve_report.table(doc)
    if curve:
        print("\n" + curve)
    png_path = json_path.with_suffix(".png")
    report.chart(doc, png_path)
    print(f"\nraw figures: {json_path}\nchart:       {png_path}")


def main() -> int:
    args = parse_args()
    if args.report:
        render(json.loads(args.report.read_text()), args.report)
        return 0
    if "brook" in args.servers and not args.brook_bin.is_file():
        print(f"brook binary not found at {args.brook_bin}: cargo build --release -p brook", file=sys.stderr)
        return 2
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    args.data_dir.mkdir(parents=True, exist_ok=True)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    kinds = [k for k in args.servers if not (k == "sink" and args.skip_sink)]
    fd_limit = scale.raise_fd_limit()  # before any server starts, so they inherit it too
    build_error = None
    if not (args.skip_e2e and args.skip_scale):
        try:
            driver.ensure_built()
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:  # javac missing or failing
            build_error = f"BenchDriver not built, e2e and scale skipped: {e}"
            log(build_error)
            args.skip_e2e = args.skip_scale = True
    load_before = os.getloadavg()
    runs = []
    json_path = args.results_dir / f"{stamp}.json"
    for round_no in range(1, args.rounds + 1):
        for kind in kinds:
            runs.append(run_server(kind, round_no, args))
            if build_error:
                runs[-1]["errors"].append(build_error)
            # Written after every server run: a long run that is interrupted keeps what it
            # measured ("complete": false; `--report` renders it).
            save(document(args, stamp, kinds, fd_limit, load_before, runs, complete=False), json_path)
    doc = document(args, stamp, kinds, fd_limit, load_before, runs, complete=True)
    save(doc, json_path)
    render(doc, json_path)
    notes = sorted({f"{r['server']}: {e}" for r in runs for e in r["errors"]})
    if notes:
        print("\nn/a and failures (details in the json):")
        print("\n".join(f"  {n}" for n in notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
