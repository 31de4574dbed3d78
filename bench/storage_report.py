#!/usr/bin/env python3
"""The storage micro-benchmarks' table (`make bench-storage`).

Reads criterion's results (`target/criterion/<group>/<bench>/new/{estimates,benchmark}.json`,
written by `cargo bench -p brook-storage`), measures the disk's raw sequential write speed
with `dd` in the same run (1 GiB of zeros, once with `conv=fdatasync`, once with
`oflag=direct`, into the directory the benchmarks wrote their logs to, so the same file
system), and prints one table plus the ratio append MB/s / dd MB/s.

MB is 10^6 bytes, as dd prints it. The append benchmarks do not fsync per append (Kafka's
default), so their ratio to an fsynced dd can exceed 1: the page cache absorbs them.
"""

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DD_COPIED = re.compile(r"(\d+) bytes .* copied, ([\d.]+) s")


def load_results(criterion_dir: Path) -> list:
    rows = []
    for estimates in sorted(criterion_dir.glob("*/*/new/estimates.json")):
        bench_dir = estimates.parent
        est = json.loads(estimates.read_text())
        meta_path = bench_dir / "benchmark.json"
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        # Criterion's headline figure: the slope of time over iterations when it sampled
        # linearly (it then prints that), else the mean.
        point = est.get("slope") or est["mean"]
        mean_ns = point["point_estimate"]
        low_ns = point["confidence_interval"]["lower_bound"]
        high_ns = point["confidence_interval"]["upper_bound"]
        throughput = (meta.get("throughput") or {}).get("Bytes")
        rows.append({
            "name": meta.get("full_id") or f"{bench_dir.parent.parent.name}/{bench_dir.parent.name}",
            "mean_ns": mean_ns,
            "low_ns": low_ns,
            "high_ns": high_ns,
            "bytes": throughput,
            "mb_s": throughput / mean_ns * 1e3 if throughput else None,
        })
    return rows


def dd(directory: Path, flag: str) -> float:
    """MB/s of writing 1 GiB of zeros into `directory` with dd's `flag`."""
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=directory, prefix="dd-", delete=True) as target:
        proc = subprocess.run(
            ["dd", "if=/dev/zero", f"of={target.name}", "bs=1M", "count=1024", flag],
            capture_output=True, text=True, check=True,
        )
    match = DD_COPIED.search(proc.stderr)
    if not match:
        raise RuntimeError(f"unexpected dd output: {proc.stderr}")
    return int(match.group(1)) / float(match.group(2)) / 1e6


def human_time(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.2f} {unit}"
    return f"{ns:.1f} ns"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--criterion-dir", type=Path, default=ROOT / "target/criterion")
    parser.add_argument("--dd-dir", type=Path, default=ROOT / "target/bench-tmp")
    parser.add_argument("--no-dd", action="store_true", help="only the criterion table")
    args = parser.parse_args()

    rows = load_results(args.criterion_dir)
    if not rows:
        print(f"no criterion results under {args.criterion_dir}: run `cargo bench -p brook-storage`", file=sys.stderr)
        return 1
    print(f"{'benchmark':<24} {'time':>12} {'95% CI':>24} {'bytes/iter':>11} {'MB/s':>9}")
    for r in rows:
        ci = f"{human_time(r['low_ns'])} .. {human_time(r['high_ns'])}"
        mb_s = f"{r['mb_s']:.1f}" if r["mb_s"] is not None else "-"
        size = str(r["bytes"]) if r["bytes"] else "-"
        print(f"{r['name']:<24} {human_time(r['mean_ns']):>12} {ci:>24} {size:>11} {mb_s:>9}")
    if args.no_dd:
        return 0

    print(f"\nraw sequential write, dd 1 GiB (bs=1M) into {args.dd_dir}:")
    speeds = {}
    for flag in ("conv=fdatasync", "oflag=direct"):
        speeds[flag] = dd(args.dd_dir, flag)
        print(f"  dd {flag:<15} {speeds[flag]:9.1f} MB/s")
    print("\nratio append MB/s / dd MB/s:")
    for r in rows:
        if r["name"].startswith("append") and r["mb_s"]:
            ratios = "  ".join(f"{r['mb_s'] / s:.2f} (vs {flag})" for flag, s in speeds.items())
            print(f"  {r['name']:<22} {ratios}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
