"""Start-up against data size (issue #13): Brook vs Apache Kafka with 1, 10, 30 GB on disk.

    make bench-startup                         # 1, 10 and 30 GB, both brokers
    make bench-startup ARGS="--sizes 1,10"     # smaller

For each broker, on one fresh data dir (the same disk for both, removed afterwards): the
producer perf tool writes 1 KB records (acks=1, no compression, 3 partitions) until the
log holds the next size (cumulative: 1, then 9 more, then 20 more); then
- **clean**: SIGTERM, wait, start again: spawn to the first answered ApiVersions;
- **crash**: write `--tail-mb` more (the unflushed tail), `kill -9` at once, start again.
Prints one row per size with both restarts; a command for people, never a CI gate.
"""

import argparse
import os
import shutil
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from procs import ROOT, Server  # noqa: E402
from workloads import Workload, create_topic, produce  # noqa: E402

RECORD = 1024
WORKLOAD = Workload(record_size=RECORD, acks="1", compression="none")


def records_for(gb: float) -> int:
    return int(gb * 1e9 / RECORD)


def write(server: Server, records: int) -> None:
    # The perf tool in chunks: one run of tens of millions of records holds its stats in memory.
    chunk = 5_000_000
    while records > 0:
        n = min(chunk, records)
        figures, out = produce(server.bootstrap, WORKLOAD, n, timeout_s=3600)
        if figures is None:
            raise RuntimeError(f"producer failed: {out[-800:]}")
        records -= n


def restart(server: Server, how: str) -> float:
    if how == "clean":
        server.stop()
    else:
        os.killpg(server.pid, signal.SIGKILL)
        server.proc.wait(timeout=30)
    server.start()
    return server.startup_s


def run(kind: str, sizes, tail_mb: float, data_root: Path, brook_bin: Path) -> list:
    data = data_root / kind
    shutil.rmtree(data, ignore_errors=True)
    server = Server(kind, data, brook_bin=brook_bin)
    rows, written = [], 0.0
    try:
        server.start()
        err = create_topic(server.bootstrap, WORKLOAD.topic, 3)
        if err:
            raise RuntimeError(err)
        for gb in sizes:
            write(server, records_for(gb - written))
            written = gb
            clean = restart(server, "clean")
            write(server, records_for(tail_mb / 1000))
            crash = restart(server, "crash")
            written += tail_mb / 1000
            rows.append((gb, clean, crash))
            print(f"{kind:6} {gb:5g} GB  clean restart {clean:7.2f} s   after kill -9 {crash:7.2f} s", flush=True)
    finally:
        server.stop()
        shutil.rmtree(data, ignore_errors=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1,10,30", help="cumulative GB on disk at each measurement")
    ap.add_argument("--tail-mb", type=float, default=200.0, help="MB written just before each kill -9")
    ap.add_argument("--servers", default="brook,kafka")
    ap.add_argument("--brook-bin", type=Path, default=ROOT / "target" / "release" / "brook")
    ap.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parent / ".data-startup")
    args = ap.parse_args()
    sizes = [float(s) for s in args.sizes.split(",")]
    results = {kind: run(kind, sizes, args.tail_mb, args.data_dir, args.brook_bin) for kind in args.servers.split(",")}
    print("\nstart-up to first ApiVersions (s): size | " + " | ".join(f"{k} clean, {k} kill -9" for k in results))
    for i, gb in enumerate(sizes):
        cells = " | ".join(f"{rows[i][1]:.2f}, {rows[i][2]:.2f}" for rows in results.values() if i < len(rows))
        print(f"{gb:g} GB | {cells}")


if __name__ == "__main__":
    main()
