"""`make bench`: Brook against Apache Kafka, side by side, on this machine.

    python3 bench/bench.py [--quick] [--rounds N] [--records N] [--partitions N]
                           [--brook-bin PATH] [--data-dir DIR] [--skip-sink]

Each round runs the null sink (the producer's ceiling), then Apache Kafka, then Brook, one
server at a time, each started fresh on an empty data directory under the same --data-dir (the
same disk). Against each broker: time from spawn to the first ApiVersions answer; RSS at idle;
for every workload (record size x acks x compression) create the topic, run
kafka-producer-perf-test at --throughput -1; then kafka-consumer-perf-test over each acks=1
topic; RSS peak under load and steady once idle again. Medians over rounds go to a table on
stdout, bench/results/<UTC>.json (raw figures + machine) and bench/results/<UTC>.png.

Invariants: every child process has a timeout, each server is stopped (process group SIGTERM,
then SIGKILL) before the next one starts, even on error or Ctrl-C; its data dir is then removed.
"""

import argparse
import json
import shutil
import sys
import time
from datetime import datetime, timezone
from itertools import product
from pathlib import Path
from typing import Dict, List, Optional

import report
from procs import ROOT, RssSampler, Server
from workloads import Workload, consume, create_topic, produce

BENCH_DIR = Path(__file__).resolve().parent
IDLE_S = 3.0  # RSS sampling window at idle, before and after load
KINDS = ("sink", "kafka", "brook")


def workloads() -> List[Workload]:
    return [Workload(s, a, c) for s, a, c in product((100, 1024), ("1", "all"), ("none", "lz4"))]


def log(msg: str) -> None:
    print(f"[{datetime.now(timezone.utc):%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def run_server(kind: str, round_no: int, args: argparse.Namespace) -> Dict:
    """Start one server, run every workload against it, stop it; returns its raw figures."""
    data_dir = args.data_dir / f"{kind}-r{round_no}"
    shutil.rmtree(data_dir, ignore_errors=True)
    server = Server(kind, data_dir, brook_bin=args.brook_bin, partitions=args.partitions)
    result: Dict = {"server": kind, "round": round_no, "produce": {}, "consume": {}, "errors": []}
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
                if kind != "sink":
                    err = create_topic(server.bootstrap, w.topic, args.partitions)
                    if err:
                        result["errors"].append(f"{w.name}: {err}")
                        continue
                figures, out = produce(server.bootstrap, w, args.records, timeout_s)
                result["produce"][w.name] = figures
                if figures is None:
                    result["errors"].append(f"produce {w.name}: {reason(out)}")
                log(f"{kind} produce {w.name}: {short(figures, 'mb_per_s', 'MB/s')}")
            for w in workloads():
                if kind == "sink" or w.acks != "1" or result["produce"].get(w.name) is None:
                    continue
                figures, out = consume(server.bootstrap, w.topic, args.records, timeout_s)
                result["consume"][w.name] = figures
                if figures is None:
                    result["errors"].append(f"consume {w.name}: {reason(out)}")
                log(f"{kind} consume {w.name}: {short(figures, 'fetch_mb_per_s', 'fetch MB/s')}")
            rss.phase = "idle-after"
            time.sleep(IDLE_S)
        result["rss_idle_start_mb"] = rss.median_mb("idle-start")
        result["rss_peak_mb"] = rss.peak_mb("load")
        result["rss_steady_mb"] = rss.median_mb("idle-after")
    except RuntimeError as e:
        result["errors"].append(str(e))
        log(f"{kind} round {round_no}: {e}")
    finally:
        server.stop()
        if not args.keep_data:
            shutil.rmtree(data_dir, ignore_errors=True)
    return result


def reason(out: str) -> str:
    """The first line of a tool's output that says what went wrong, else its tail."""
    for line in out.splitlines():
        if "Exception" in line or "does not support" in line or "timed out" in line or "WARNING" in line:
            return line.strip()[:300]
    return out[-300:].strip()


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
    ap.add_argument("--keep-data", action="store_true", help="keep each broker's data dir and log")
    args = ap.parse_args()
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.records = args.records or (200_000 if args.quick else 2_000_000)
    if args.rounds < 1 or args.records < 1 or args.partitions < 1:
        ap.error("--rounds, --records and --partitions must be positive")
    return args


def main() -> int:
    args = parse_args()
    if not args.brook_bin.is_file():
        print(f"brook binary not found at {args.brook_bin}: cargo build --release -p brook", file=sys.stderr)
        return 2
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    args.data_dir.mkdir(parents=True, exist_ok=True)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    kinds = [k for k in KINDS if not (k == "sink" and args.skip_sink)]
    runs = []
    for round_no in range(1, args.rounds + 1):
        for kind in kinds:
            runs.append(run_server(kind, round_no, args))
    doc = {
        "started_utc": stamp,
        "machine": report.machine(),
        "config": {
            "rounds": args.rounds,
            "records": args.records,
            "partitions": args.partitions,
            "workloads": [w.name for w in workloads()],
            "brook_bin": str(args.brook_bin),
        },
        "runs": runs,
    }
    doc["medians"] = report.medians(runs)
    json_path = args.results_dir / f"{stamp}.json"
    json_path.write_text(json.dumps(doc, indent=2))
    print(report.table(doc))
    png_path = args.results_dir / f"{stamp}.png"
    report.chart(doc, png_path)
    print(f"\nraw figures: {json_path}\nchart:       {png_path}")
    notes = sorted({f"{r['server']}: {e}" for r in runs for e in r["errors"]})
    if notes:
        print("\nn/a and failures (details in the json):")
        print("\n".join(f"  {n}" for n in notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
