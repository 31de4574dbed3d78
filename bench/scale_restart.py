"""`make bench-scale-restart`: stop and start one node holding many partitions (issue 24's
"< 2 s start at 100,000 partitions").

On a fresh data directory: create the topics (1,000 partitions each, replication factor 1),
give every partition of the first `--written-topics` topics one record, then
1. a clean stop (SIGTERM to exit) right after those writes, and a start: spawn to the first
   ApiVersions answer, and to a Metadata (v4, all topics, raw socket) whose every partition has
   error 0 and a leader; RSS and open files once all are led;
2. a clean stop with nothing written since the start, and a start;
3. kill -9 and a start.
With `--stop-after-create`, first a clean stop issued as soon as the last CreateTopics returns
(the broker may still be creating logs) and a start, before the writes.
The machine's load average is printed beside each figure: it is shared with other builds.
Never a CI gate.

With `--reuse N` and a `--work` directory holding a data directory of a clean stop (a
`--keep` run), nothing is created: N more clean stop / clean start rounds only, each with
the broker log's milestones since spawn (quorum ready, logs loaded, registered, started),
so one data directory serves before/after comparisons of start-up changes.

    python3 bench/scale_restart.py --partitions 100000 --written-topics 10 --brook-bin target/debug/brook
    python3 bench/scale_restart.py --partitions 100000 --work /tmp/w --keep --brook-bin B
    python3 bench/scale_restart.py --partitions 100000 --work /tmp/w --reuse 3 --brook-bin B
"""

import argparse
import datetime
import os
import resource
import shutil
import signal
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Tuple

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procs import HOST, ROOT, Server, process_cpu_s, read_rss_kb  # noqa: E402
from scale import _recv_frame, _request  # noqa: E402

PER_TOPIC = 1_000
DEADLINE_S = 900.0


def led_partitions(port: int) -> Tuple[int, int]:
    """(partitions, partitions with error 0 and a leader) in a Metadata v4 of all topics."""
    with socket.create_connection((HOST, port), timeout=60) as s:
        s.sendall(_request(3, 4, 7, struct.pack(">ib", -1, 0)))
        frame = _recv_frame(s)
    pos = 0

    def take(fmt: str):
        nonlocal pos
        vals = struct.unpack_from(fmt, frame, pos)
        pos += struct.calcsize(fmt)
        return vals[0] if len(vals) == 1 else vals

    def skip(count: int) -> None:  # not `pos += take(...)`: that reads pos before take moves it
        nonlocal pos
        pos += count

    def string() -> None:
        skip(max(take(">h"), 0))

    take(">i")  # correlation id
    take(">i")  # throttle
    for _ in range(take(">i")):
        take(">i")
        string()
        take(">i")
        string()
    string()  # cluster id
    take(">i")  # controller
    total = led = 0
    for _ in range(take(">i")):
        take(">h")
        string()
        take(">b")
        for _ in range(take(">i")):
            error, _index, leader = take(">hii")
            for _ in range(2):  # replicas, isr
                skip(4 * take(">i"))
            total += 1
            led += error == 0 and leader >= 0
    return total, led


def wait_all_led(port: int, partitions: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        try:
            total, led = led_partitions(port)
            if total >= partitions and led == total:
                return
        except (OSError, struct.error):
            pass
        time.sleep(0.05)
    raise RuntimeError("partitions without a leader")


def load() -> float:
    return os.getloadavg()[0]


# Broker log lines that mark start-up phases, by the name printed for them.
MILESTONES = {
    "quorum_ready_s": "metadata quorum ready",
    "logs_loaded_s": "partition logs loaded",
    "registered_s": "broker registered",
    "started_s": "broker started",
}


def milestones(log_path: Path, since_offset: int, spawned_wall: float) -> Dict[str, float]:
    """Seconds from spawn to each milestone line the broker logged after `since_offset`
    (its log's size at spawn), from the lines' UTC timestamps."""
    found: Dict[str, float] = {}
    with open(log_path, "rb") as f:
        f.seek(since_offset)
        for raw in f:
            line = raw.decode(errors="replace")
            for name, text in MILESTONES.items():
                if name not in found and text in line:
                    stamp = line.split(" ", 1)[0].strip()
                    try:
                        at = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
                    except ValueError:
                        continue
                    found[name] = round(at - spawned_wall, 3)
    return found


def start(server: Server, partitions: int) -> Dict[str, float]:
    log_offset = server.log_path.stat().st_size if server.log_path.exists() else 0
    spawned_wall = time.time()
    t0 = time.monotonic()
    server.start()
    api = time.monotonic() - t0
    # CPU the broker spent to get there: on a machine shared with other builds the wall
    # clock varies 10x with the load, this much less.
    api_cpu = process_cpu_s(server.pid or 0)
    wait_all_led(server.port, partitions)
    led = time.monotonic() - t0
    return {"api_s": api, "api_cpu_s": api_cpu, "all_led_s": led, "rss_mb": (read_rss_kb(server.pid) or 0) / 1024,
            "open_fds": len(os.listdir(f"/proc/{server.pid}/fd")), "load": load(),
            **milestones(server.log_path, log_offset, spawned_wall)}  # fmt: skip


def stop(server: Server) -> Dict[str, float]:
    t0 = time.monotonic()
    server.stop()
    return {"stop_s": time.monotonic() - t0, "exit": server.proc.returncode, "load": load()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--written-topics", type=int, default=10)
    ap.add_argument("--brook-bin", type=Path, default=Path(os.environ.get("BROOK_BIN", ROOT / "target/release/brook")))
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--stop-after-create", action="store_true",
                    help="a clean stop and start right after the last CreateTopics returns")  # fmt: skip
    ap.add_argument("--keep", action="store_true", help="keep the data directory and log (in --work)")
    ap.add_argument("--reuse", type=int, default=0, metavar="N",
                    help="on --work's data directory (a kept run's): N clean stop/start rounds only")  # fmt: skip
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-restart-"))
    data = work / "brook"
    if args.reuse:
        reuse(Server("brook", data, brook_bin=args.brook_bin), args.partitions, args.reuse)
        return
    shutil.rmtree(data, ignore_errors=True)
    server = Server("brook", data, brook_bin=args.brook_bin)
    try:
        server.start()
        topics = [f"scale{i}" for i in range(args.partitions // PER_TOPIC)]
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        t0 = time.monotonic()
        for topic in topics:
            admin.create_topics([NewTopic(topic, PER_TOPIC, 1)], request_timeout=DEADLINE_S)[topic].result()
        del admin
        if args.stop_after_create:
            print(f"topics created in {time.monotonic() - t0:.1f} s", flush=True)
            print("stop right after creation:", stop(server), flush=True)
            print("clean start:", start(server, args.partitions), flush=True)
        wait_all_led(server.port, args.partitions)
        print(f"created {args.partitions:,} partitions in {time.monotonic() - t0:.1f} s", flush=True)
        written = topics[: args.written_topics]
        producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 20, "acks": "all",
                             "message.timeout.ms": int(DEADLINE_S * 1000)})  # fmt: skip
        t0 = time.monotonic()
        for topic in written:
            for p in range(PER_TOPIC):
                producer.produce(topic, value=b"first", partition=p)
            producer.poll(0)
        assert producer.flush(DEADLINE_S) == 0
        del producer  # no reconnect attempts while the node is down
        print(f"one record to each of {len(written) * PER_TOPIC:,} partitions in {time.monotonic() - t0:.1f} s",
              flush=True)  # fmt: skip
        print(f"before restarts: RSS {(read_rss_kb(server.pid) or 0) / 1024:.0f} MB, load {load():.1f}")
        print("stop after writes:", stop(server), flush=True)
        print("clean start:", start(server, args.partitions), flush=True)
        print("stop, nothing written:", stop(server), flush=True)
        print("clean start:", start(server, args.partitions), flush=True)
        server._signal(signal.SIGKILL)
        server.proc.wait(timeout=60)
        print("start after kill -9:", start(server, args.partitions), flush=True)
        print("stop:", stop(server), flush=True)
    finally:
        server.stop()
        if args.keep:
            print(f"kept {data} (clean stop); --reuse N --work {work} restarts it", flush=True)
        for line in server.log_path.read_text(errors="replace").splitlines():
            if "partition logs loaded" in line or "shutdown" in line.lower():
                print(line[:400])
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def reuse(server: Server, partitions: int, rounds: int) -> None:
    """`--reuse`: the data directory is a clean stop's; start it, then stop/start `rounds` times
    more (the first start may differ: another build stopped it, or the page cache is cold)."""
    if not server.data_dir.is_dir():
        raise SystemExit(f"--reuse: no data directory at {server.data_dir}")
    try:
        print("clean start (warm-up):", start(server, partitions), flush=True)
        for _ in range(rounds):
            print("stop, nothing written:", stop(server), flush=True)
            print("clean start:", start(server, partitions), flush=True)
    finally:
        server.stop()  # a clean stop: the directory stays reusable


if __name__ == "__main__":
    main()
