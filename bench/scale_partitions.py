"""`make bench-scale`: one node, Brook beside Apache Kafka 4.4, at many partitions (issue 24).

For each size (topics of 1,000 partitions, replication factor 1) and each server, on a fresh
data directory: time to create the topics (until Metadata shows a leader for every partition),
the rate at which every partition gets its first record, produce throughput of 1 KB records
spread round robin over all partitions, RSS and open file descriptors (per partition), the
Metadata (all topics) round trip, then start-up after a clean stop and after kill -9 (spawn to
the first ApiVersions answer, then to a Metadata listing every partition with a leader).

Clients: confluent-kafka (librdkafka) for the admin and producer work, a raw socket for
Metadata. A server that fails at a size (exits, or a phase passes its deadline) is reported
with why, and the larger sizes are skipped for it. Never a CI gate.

    python3 bench/scale_partitions.py --sizes 1000,10000 --servers brook,kafka --out FILE
"""

import argparse
import os
import resource
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procs import ROOT, Server, read_rss_kb  # noqa: E402
from scale import metadata_latencies  # noqa: E402

PER_TOPIC = 1_000
RECORD = b"x" * 1024
PHASE_TIMEOUT_S = 900.0


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def all_led(admin: AdminClient, topics: List[str], partitions: int) -> bool:
    md = admin.list_topics(timeout=60)
    led = sum(1 for t in topics if t in md.topics for p in md.topics[t].partitions.values() if p.leader >= 0)
    return led == partitions


def wait_led(bootstrap: str, topics: List[str], partitions: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    t0 = time.monotonic()
    while not all_led(admin, topics, partitions):
        if time.monotonic() - t0 > PHASE_TIMEOUT_S:
            raise RuntimeError("partitions without a leader")
        time.sleep(0.2)
    return time.monotonic() - t0


def produce(bootstrap: str, topics: List[str], per_partition: int, value: bytes) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all",
                         "batch.size": 1 << 20, "queue.buffering.max.kbytes": 1 << 21,
                         "queue.buffering.max.messages": 2_000_000, "message.timeout.ms": int(PHASE_TIMEOUT_S * 1000)})
    failed = []

    def report(err, _msg):
        if err is not None:
            failed.append(err.str())

    t0 = time.monotonic()
    for _ in range(per_partition):
        for topic in topics:
            for p in range(PER_TOPIC):
                while True:
                    try:
                        producer.produce(topic, value=value, partition=p, on_delivery=report)
                        break
                    except BufferError:
                        producer.poll(0.05)
            producer.poll(0)
    left = producer.flush(PHASE_TIMEOUT_S)
    elapsed = time.monotonic() - t0
    if left or failed:
        raise RuntimeError(f"{left} unsent, {len(failed)} failed: {failed[:3]}")
    return elapsed


def restart(server: Server, topics: List[str], partitions: int, kill: bool) -> Dict[str, float]:
    if kill:
        server._signal(signal.SIGKILL)
        server.proc.wait(timeout=60)
    else:
        server.stop()
    server.start()
    serving = server.startup_s
    led = wait_led(server.bootstrap, topics, partitions)
    return {"api_s": serving, "all_led_s": serving + led}


def run_one(kind: str, size: int, work: Path, brook_bin: Optional[Path], records: int) -> Dict:
    data = work / f"{kind}-{size}"
    shutil.rmtree(data, ignore_errors=True)
    server = Server(kind, data, brook_bin=brook_bin)
    row: Dict = {"server": kind, "partitions": size}
    try:
        server.start()
        topics = [f"scale{i}" for i in range(size // PER_TOPIC)]
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        t0 = time.monotonic()
        # One topic per request: KRaft refuses a CreateTopics of more than
        # max.records.per.user.op (10,000) records with POLICY_VIOLATION.
        for topic in topics:
            admin.create_topics([NewTopic(topic, PER_TOPIC, 1)],
                                request_timeout=PHASE_TIMEOUT_S)[topic].result(timeout=PHASE_TIMEOUT_S)
        wait_led(server.bootstrap, topics, size)
        row["create_s"] = time.monotonic() - t0
        row["idle_rss_mb_before_data"] = (read_rss_kb(server.pid) or 0) / 1024
        first = produce(server.bootstrap, topics, 1, b"first")
        row["first_record_partitions_per_s"] = size / first
        per_partition = max(1, records // size)
        spread = produce(server.bootstrap, topics, per_partition, RECORD)
        row["spread_mb_per_s"] = per_partition * size * len(RECORD) / spread / 1e6
        row["rss_mb"] = (read_rss_kb(server.pid) or 0) / 1024
        row["rss_kb_per_partition"] = row["rss_mb"] * 1024 / size
        row["open_fds"] = open_fds(server.pid)
        row["fds_per_partition"] = row["open_fds"] / size
        row["metadata_p50_ms"] = metadata_latencies(server.port, count=10, gap_s=0.05)["metadata_p50_ms"]
        clean = restart(server, topics, size, kill=False)
        row["clean_start_s"], row["clean_all_led_s"] = clean["api_s"], clean["all_led_s"]
        crash = restart(server, topics, size, kill=True)
        row["kill9_start_s"], row["kill9_all_led_s"] = crash["api_s"], crash["all_led_s"]
    except Exception as e:  # the row says why and where the server stopped
        row["error"] = f"{type(e).__name__}: {e}"[:300]
        row["log_tail"] = tail(server.log_path)
    finally:
        server.stop()
        shutil.rmtree(data, ignore_errors=True)
    return row


def tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").splitlines()[-lines:])[-600:]
    except OSError:
        return ""


COLUMNS = [("partitions", "{:,}"), ("server", "{}"), ("create_s", "{:.1f}"),
           ("first_record_partitions_per_s", "{:,.0f}"), ("spread_mb_per_s", "{:.1f}"), ("rss_mb", "{:.0f}"),
           ("rss_kb_per_partition", "{:.1f}"), ("open_fds", "{}"), ("fds_per_partition", "{:.2f}"),
           ("metadata_p50_ms", "{:.1f}"), ("clean_start_s", "{:.2f}"), ("clean_all_led_s", "{:.2f}"),
           ("kill9_start_s", "{:.2f}"), ("kill9_all_led_s", "{:.2f}")]


def table(rows: List[Dict]) -> str:
    out = ["| " + " | ".join(c for c, _ in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        cells = [fmt.format(r[c]) if c in r else "—" for c, fmt in COLUMNS]
        out.append("| " + " | ".join(cells) + " |")
    errors = [f"- {r['server']} at {r['partitions']:,}: {r['error']} (log: {r.get('log_tail', '')})"
              for r in rows if "error" in r]
    return "\n".join(out + ([""] + errors if errors else []))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,50000,100000")
    ap.add_argument("--servers", default="brook,kafka")
    ap.add_argument("--brook-bin", type=Path, default=Path(os.environ.get("BROOK_BIN", ROOT / "target/release/brook")))
    ap.add_argument("--records", type=int, default=200_000, help="1 KB records of the spread produce (>= 1 each)")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # as an operator's ulimit -n would
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    rows = []
    for kind in args.servers.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            row = run_one(kind, size, work, args.brook_bin, args.records)
            rows.append(row)
            print(row, flush=True)
            if "error" in row:
                break  # a server that failed at a size is not tried larger
    text = table(rows)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
