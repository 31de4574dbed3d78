"""`make bench-rebalance` (issue 26, "Measure"): how long a consumer group takes to rebalance,
Brook beside Apache Kafka 4.4, classic protocol against KIP-848's. A command for people, never a
CI gate.

    python3 bench/rebalance.py [--large] [--members N] [--partitions P] [--heartbeat-ms 5000,1000]
                               [--servers kafka,brook] [--protocols classic,consumer] [--rounds R]

For each heartbeat setting and broker, one fresh single-node server (procs.Server, as every bench
starts them: Kafka by kafka-ref.sh, Brook from target/release/brook) with the same group settings
on both: `group.coordinator.rebalance.protocols=classic,consumer` (Kafka's default; Brook's default
is classic only), `group.consumer.heartbeat.interval.ms` (5 s, Kafka's default; 1 s lowers
`group.consumer.min.heartbeat.interval.ms` with it) and `group.initial.rebalance.delay.ms=0`. One
topic of P partitions gets records round robin at --rate-per-partition per partition
(`produce-stream`), so every partition delivers records continuously. Then for each protocol, a
group of N Java 4.4 consumers in one JVM (`group-members`: classic with cooperative-sticky, the
classic assignor that keeps unmoved partitions in place as KIP-848's do; consumer with the
server-side `uniform`):
1. steady: all N start; wait until settled (rebalance_events.py) and then until no record has
   been read --late-ms after it was sent for --quiet-s (caught up with any backlog; that window's
   longest wait is the baseline);
2. join: one member more; from its start (subscribe) until every partition is owned by exactly
   one member again, shares balanced, and every partition that moved has delivered a record;
3. leave: member 0 closes gracefully (LeaveGroup / leave heartbeat); the same measure.
A phase counts as settled once nothing changed for --settle-s (2 heartbeat intervals) after it;
its time is that of the event that settled it. For partitions that did not move, the longest a
record waited to be read (poll time - CreateTime) overlapping the phase: the issue's target is no
pause longer than one heartbeat interval, and consumer-protocol rebalances at most 0.5x Kafka's.

Output: a table per size and heartbeat on stdout, every phase's figures in
bench/results/<UTC>-rebalance.json, each run's events and logs under --data-dir.
Invariants: every wait has a deadline; each server and client JVM is stopped (process group
SIGTERM, then SIGKILL) before the next server starts, even on error; data dirs are removed.
"""

import argparse
import json
import os
import re
import shutil
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, List, Optional

import report
import rebalance_report
from procs import CpuMeter, ROOT, Server
from rebalance_events import Group, Phase, quiet_max_wait
from rebalance_members import Members, Producer, ensure_driver
from workloads import create_topic

BENCH_DIR = Path(__file__).resolve().parent
PORTS_BELOW = 32768  # servers listen under the kernel's ephemeral range
TOPIC = "rebalance"
KAFKA_DEFAULT_HEARTBEAT_MS = 5000
CLASSIC_CLIENT_HEARTBEAT_MS = 3000  # the Java client's heartbeat.interval.ms default


def log(msg: str) -> None:
    print(f"[{datetime.now(timezone.utc):%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def broker_settings(heartbeat_ms: int) -> Dict[str, str]:
    """The same group settings for both brokers (Brook: --overrides; Kafka: server.properties)."""
    settings = {"group.coordinator.rebalance.protocols": "classic,consumer",
                "group.consumer.heartbeat.interval.ms": str(heartbeat_ms)}  # fmt: skip
    if heartbeat_ms < KAFKA_DEFAULT_HEARTBEAT_MS:
        # Kafka refuses to start with a heartbeat interval under the minimum (5 s by default).
        settings["group.consumer.min.heartbeat.interval.ms"] = str(heartbeat_ms)
    return settings  # group.initial.rebalance.delay.ms=0 is in both already (procs, kafka-ref.sh)


class Runner:
    """Feeds one group's events to phases and waits for them, each wait bounded."""

    def __init__(self, members: Members, group: Group, settle_s: float):
        self.members, self.group, self.settle_s = members, group, settle_s
        self.waits: List = []
        self.t_last = 0.0  # the driver's clock, from the latest event seen

    def feed(self, ev: Dict, phase: Phase) -> bool:
        if ev.get("event") == "exited":
            raise RuntimeError("group-members exited early; see its log")
        self.t_last = ev.get("t", self.t_last)
        if ev.get("event") == "late":
            self.waits.append((ev["partition"], ev["since"], ev["t"]))
        return phase.feed(ev)

    def wait(self, phase: Phase, running: int, deadline_s: float) -> None:
        """Until the phase settled with `running` members and nothing relevant for settle_s."""
        start = time.monotonic()
        quiet_since = start
        while time.monotonic() - start < deadline_s:
            ev = self.members.next_event(0.2)
            if ev is not None and self.feed(ev, phase):
                quiet_since = time.monotonic()
            settled = phase.done() and len(self.group.running) == running
            if settled and time.monotonic() - quiet_since >= self.settle_s:
                return

    def caught_up(self, phase: Phase, quiet_s: float, deadline_s: float) -> bool:
        """Until no record has been read late for quiet_s (the group reads in real time), or the
        deadline: a settled group may still be reading a backlog from its committed offsets."""
        start = time.monotonic()
        last_late = start
        while time.monotonic() - start < deadline_s:
            ev = self.members.next_event(0.2)
            if ev is not None:
                self.feed(ev, phase)
                if ev.get("event") == "late":
                    last_late = time.monotonic()
            if time.monotonic() - last_late >= quiet_s:
                return True
        return False

    def status(self, phase: Phase) -> List[Dict]:
        """Every running member's status line (last record per owned partition)."""
        self.members.send("status")
        lines: List[Dict] = []
        end = time.monotonic() + 10
        while len(lines) < len(self.group.running) and time.monotonic() < end:
            ev = self.members.next_event(0.2)
            if ev is None:
                continue
            if ev.get("event") == "status":
                lines.append(ev)
            self.feed(ev, phase)
        return lines

    def measure(self, phase: Phase, command: str, running: int, deadline_s: float) -> Dict:
        self.members.send(command)
        self.wait(phase, running, deadline_s)
        out = phase.result(self.status(phase), self.t_last)
        log(f"  {phase.name}: {rebalance_report.phase_line(out)}")
        return out


def scenario(server: Server, protocol: str, heartbeat_ms: int, args: argparse.Namespace, tag: str) -> Dict:
    """Steady group, one member joins, one leaves: the figures of each phase."""
    n = args.members
    group = Group(args.partitions)
    members = Members(server.bootstrap, TOPIC, f"{tag}-{protocol}", n, protocol, args.heap,
                      args.data_dir / f"{tag}-{protocol}-members.log", args.data_dir / f"{tag}-{protocol}-events.jsonl",
                      args.late_ms, min(heartbeat_ms, CLASSIC_CLIENT_HEARTBEAT_MS))  # fmt: skip
    runner = Runner(members, group, args.settle_s or 2 * heartbeat_ms / 1000)
    out: Dict = {"protocol": protocol}
    cpu0 = server.cpu_s()
    try:
        steady = Phase("steady", group, 0, "start")
        runner.wait(steady, n, args.steady_deadline_s)
        out["steady"] = steady.result([], runner.t_last)
        if not steady.done() or len(group.running) != n:
            out["error"] = f"the {n} members never settled: {group.unsettled()}"
            log(f"  {out['error']}")
            return out
        log(f"  steady: {n} members settled in {out['steady']['ms']:.0f} ms from the first start")
        runner.status(steady)  # the status lines carry the driver's clock
        t0, started = runner.t_last, time.monotonic()
        out["steady"]["caught_up"] = runner.caught_up(steady, args.quiet_s, args.steady_deadline_s)
        out["steady"]["catch_up_s"] = round(time.monotonic() - started - args.quiet_s, 1)
        runner.status(steady)
        # The longest wait of a record over the last quiet_s before the join: the baseline of the
        # pauses (under --late-ms unless the group never caught up).
        out["steady"]["baseline_max_late_ms"] = quiet_max_wait(runner.waits, runner.t_last - 1000 * args.quiet_s,
                                                               runner.t_last)  # fmt: skip
        out["steady"]["max_late_before_join_ms"] = quiet_max_wait(runner.waits, t0, runner.t_last)
        if not out["steady"]["caught_up"]:
            log(f"  records still read late {args.steady_deadline_s:.0f} s after settling; measuring anyway")
        out["join"] = runner.measure(Phase("join", group, n, "start"), "add", n + 1, args.phase_deadline_s)
        if not out["join"]["complete"]:
            out["error"] = "the join never settled, so the leave was not measured"
            return out
        out["leave"] = runner.measure(Phase("leave", group, 0, "closing"), "leave 0", n, args.phase_deadline_s)
    except RuntimeError as e:
        out["error"] = str(e)
        log(f"  {e}")
    finally:
        members.quit()
        cpu1 = server.cpu_s()
        out["broker_cpu_s"] = None if cpu0 is None or cpu1 is None else round(cpu1 - cpu0, 2)
        out["member_errors"] = group.errors
        out["lost_events"] = group.lost_events
        out["client_log_errors"] = client_log_errors(args.data_dir / f"{tag}-{protocol}-members.log")
    return out


def client_log_errors(path: Path) -> Dict:
    """ERROR lines in the members' client log (slf4j-simple, WARN and above): how many, and the
    first few kinds with member names and ids masked (e.g. an OffsetCommit the broker refused)."""
    kinds: Dict[str, int] = {}
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if " ERROR " in line]
    except OSError:
        return {"count": None, "kinds": {}}
    for line in lines:
        kind = re.sub(r"rebalance-member-\d+", "rebalance-member-N", line.split(" ", 1)[-1])
        kind = re.sub(r"member [A-Za-z0-9_-]{22}", "member ID", kind)
        kind = re.sub(r"\d+", "N", kind)[:300]
        kinds[kind] = kinds.get(kind, 0) + 1
    return {"count": len(lines), "kinds": dict(sorted(kinds.items(), key=lambda kv: -kv[1])[:5])}


def run_server(kind: str, heartbeat_ms: int, round_no: int, args: argparse.Namespace) -> Dict:
    tag = f"{kind}-hb{heartbeat_ms}-r{round_no}"
    data_dir = args.data_dir / tag
    shutil.rmtree(data_dir, ignore_errors=True)
    server = Server(kind, data_dir, brook_bin=args.brook_bin, settings=broker_settings(heartbeat_ms),
                    port_below=PORTS_BELOW)  # fmt: skip
    result: Dict = {"server": kind, "heartbeat_ms": heartbeat_ms, "round": round_no, "scenarios": {}, "errors": []}
    cpu = CpuMeter()
    producer: Optional[Producer] = None
    try:
        server.start()
        err = create_topic(server.bootstrap, TOPIC, args.partitions)
        if err:
            raise RuntimeError(err)
        producer = Producer(server.bootstrap, TOPIC, args.partitions, args.partitions * args.rate_per_partition,
                            args.data_dir / f"{tag}-producer.log")  # fmt: skip
        for protocol in args.protocols:
            log(f"{kind}, heartbeat {heartbeat_ms} ms, {protocol} protocol, {args.members} members / "
                f"{args.partitions} partitions (load average {os.getloadavg()[0]:.2f})")  # fmt: skip
            result["scenarios"][protocol] = scenario(server, protocol, heartbeat_ms, args, tag)
            if not producer.alive():
                raise RuntimeError(f"the producer exited; see {args.data_dir / (tag + '-producer.log')}")
    except RuntimeError as e:
        result["errors"].append(str(e))
        log(f"{kind}: {e}")
    finally:
        if producer is not None:
            producer.stop()
        server.stop()
        if not args.keep_data:
            shutil.rmtree(data_dir, ignore_errors=True)
    result["other_load_cores"] = cpu.other_cores()
    return result


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="Consumer-group rebalance time, Brook vs Apache Kafka 4.4")
    ap.add_argument("--large", action="store_true", help="100 members over 1,000 partitions (default 10 over 100)")
    ap.add_argument("--members", type=int, help="members of the steady group (default 10; 100 with --large)")
    ap.add_argument("--partitions", type=int, help="partitions of the topic (default 100; 1,000 with --large)")
    ap.add_argument("--heartbeat-ms", default=str(KAFKA_DEFAULT_HEARTBEAT_MS),
                    help="group.consumer.heartbeat.interval.ms settings to run, comma-separated (e.g. 5000,1000); "
                         "classic members get the client's 3 s or this if lower")  # fmt: skip
    ap.add_argument("--servers", default="kafka,brook", help="brokers, in order (default kafka,brook)")
    ap.add_argument("--protocols", default="classic,consumer", help="group protocols (default classic,consumer)")
    ap.add_argument("--rounds", type=int, default=1, help="rounds (default 1); the table shows medians")
    ap.add_argument("--rate-per-partition", type=float, help="records/s per partition (default 5; 2 with --large)")
    ap.add_argument("--late-ms", type=int, default=500,
                    help="records read at least this long after they were produced are reported (default 500)")
    ap.add_argument("--settle-s", type=float, help="quiet time that ends a phase (default 2 heartbeat intervals)")
    ap.add_argument("--quiet-s", type=float, default=5.0,
                    help="the join waits until no record was read late for this long (default 5 s)")
    ap.add_argument("--phase-deadline-s", type=float, help="give up on a phase after (default 120 s; 600 with --large)")
    ap.add_argument("--steady-deadline-s", type=float, help="give up on the first settle after (default 180; 900)")
    ap.add_argument("--heap", help="the members' JVM -Xmx (default 1g; 3g with --large)")
    ap.add_argument("--brook-bin", type=Path, default=ROOT / "target" / "release" / "brook")
    ap.add_argument("--data-dir", type=Path, default=BENCH_DIR / ".data-rebalance")
    ap.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    ap.add_argument("--keep-data", action="store_true", help="keep each broker's data dir")
    ap.add_argument("--report", type=Path, help="only print the table of a saved results json")
    args = ap.parse_args()
    large = args.large
    args.members = args.members or (100 if large else 10)
    args.partitions = args.partitions or (1000 if large else 100)
    args.rate_per_partition = args.rate_per_partition or (2.0 if large else 5.0)
    args.phase_deadline_s = args.phase_deadline_s or (600.0 if large else 120.0)
    args.steady_deadline_s = args.steady_deadline_s or (900.0 if large else 180.0)
    args.heap = args.heap or ("3g" if large else "1g")
    try:
        args.heartbeats = [int(h) for h in args.heartbeat_ms.split(",") if h.strip()]
    except ValueError:
        ap.error("--heartbeat-ms takes comma-separated milliseconds")
    args.servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    args.protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    if not set(args.servers) <= {"kafka", "brook"} or not set(args.protocols) <= {"classic", "consumer"}:
        ap.error("--servers takes kafka and/or brook, --protocols classic and/or consumer")
    if args.members < 1 or args.partitions < args.members or args.rounds < 1 or not args.heartbeats:
        ap.error("need members >= 1, partitions >= members, rounds >= 1 and a heartbeat setting")
    return args


def main() -> int:
    args = parse_args()
    if args.report:
        print(rebalance_report.table(json.loads(args.report.read_text())))
        return 0
    if "brook" in args.servers and not args.brook_bin.is_file():
        print(f"brook binary not found at {args.brook_bin}: cargo build --release -p brook", file=sys.stderr)
        return 2
    ensure_driver()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    load_before = os.getloadavg()
    runs: List[Dict] = []
    for round_no in range(1, args.rounds + 1):
        for heartbeat_ms in args.heartbeats:
            for kind in args.servers:
                runs.append(run_server(kind, heartbeat_ms, round_no, args))
    doc = {
        "started_utc": stamp,
        "machine": report.machine(),
        "config": {
            "members": args.members, "partitions": args.partitions, "heartbeat_ms": args.heartbeats,
            "servers": args.servers, "protocols": args.protocols, "rounds": args.rounds,
            "rate_per_partition": args.rate_per_partition, "late_ms": args.late_ms, "settle_s": args.settle_s,
            "quiet_s": args.quiet_s, "classic_assignor": "cooperative-sticky", "consumer_assignor": "uniform",
            "classic_client_heartbeat_ms": {h: min(h, CLASSIC_CLIENT_HEARTBEAT_MS) for h in args.heartbeats},
            "broker_settings": {h: broker_settings(h) for h in args.heartbeats}, "brook_bin": str(args.brook_bin),
        },  # fmt: skip
        "load": report.load_note(load_before, os.getloadavg(), runs),
        "runs": runs,
    }
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / f"{stamp}-rebalance.json"
    out.write_text(json.dumps(doc, indent=2))
    print(rebalance_report.table(doc))
    print(f"\nraw figures: {out}\nevents and logs: {args.data_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
