#!/usr/bin/env python3
"""Consumer-group soak: 5 groups of 4 members each consume one topic while members join, leave
gracefully and are killed, under a steady idempotent producer; at the end every group must have
read every acknowledged record.

    python3 integration-tests/soak/run.py [--duration 600] [--bootstrap HOST:PORT] [--json FILE]

Without --bootstrap it starts its own broker (brook, or Apache Kafka with
BROOK_TEST_TARGET=kafka) in a temp dir. test_soak.py runs a short version; `make soak` the long one.

* Producer: confluent-kafka, acks=all, enable.idempotence, keyed (`k<seq % 97>`), value
  `seq-<n>`, at --rate records/s into a topic of --partitions partitions; a record counts as
  produced once acknowledged, with the (partition, offset) the broker gave it.
* Members: franz-go `group-consume --events` processes (franz-driver: one small process each,
  cheap on 2 cores), groups alternating the range and cooperative-sticky assignors, session
  timeout 6 s. Every --churn-s seconds one group changes: a member leaves (SIGTERM: commit,
  LeaveGroup) or is killed (SIGKILL: nothing more committed, evicted by the session timeout)
  and a new one joins, or an extra member joins / the extra one leaves (4 <-> 5 members).
* Checks per group, by (partition, offset): lost = acknowledged but never read; duplicates =
  reads beyond the first (expected only where a reader was killed or a commit failed: those
  are "explained"); mismatched = a read whose value is not what was acknowledged there.
  Rebalances = distinct generations seen in the members' assignment events, minus one.
"""

import argparse
import json
import random
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # integration-tests/, for harness

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from harness import paths  # noqa: E402
from harness.broker import Broker  # noqa: E402
from harness.members import GroupMember  # noqa: E402

SESSION_MS = 6000
ASSIGNORS = ("range", "cooperative-sticky")


class SteadyProducer:
    """Produces `seq-<n>` at a fixed rate until stopped; keeps what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, rate: float):
        self.topic, self.rate = topic, rate
        self.acked = {}  # (partition, offset) -> value
        self.errors = []
        self._stop = threading.Event()
        self._producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
        })
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _delivered(self, err, msg):
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked[(msg.partition(), msg.offset())] = msg.value().decode()

    def _run(self):
        start, seq = time.monotonic(), 0
        while not self._stop.is_set():
            due = int((time.monotonic() - start) * self.rate)
            while seq < due:
                self._producer.produce(self.topic, key=f"k{seq % 97}".encode(), value=f"seq-{seq}".encode(),
                                       on_delivery=self._delivered)
                seq += 1
            self._producer.poll(0.05)
        remaining = self._producer.flush(60)
        if remaining:
            self.errors.append(f"{remaining} records not acknowledged at the end")

    def stop(self):
        self._stop.set()
        self._thread.join(90)


class Group:
    """One consumer group: its live members and every member it ever had."""

    def __init__(self, index: int, bootstrap: str, topic: str, duration_s: float):
        self.name = f"soak-{index}-{uuid.uuid4().hex[:6]}"
        self.assignor = ASSIGNORS[index % len(ASSIGNORS)]
        self.bootstrap, self.topic = bootstrap, topic
        self.timeout_ms = int((duration_s + 600) * 1000)
        self.live, self.all = [], []
        self.joined = self.left = self.killed = 0

    def join(self):
        m = GroupMember("franz", self.bootstrap, self.name, self.topic, "--events", "--assignor", self.assignor,
                        "--session-timeout-ms", SESSION_MS, "--timeout-ms", self.timeout_ms,
                        name=f"{self.name}/{len(self.all)}")
        self.live.append(m)
        self.all.append(m)
        self.joined += 1

    def leave(self, rng):
        m = self.live.pop(rng.randrange(len(self.live)))
        m.stop()
        self.left += 1

    def kill(self, rng):
        m = self.live.pop(rng.randrange(len(self.live)))
        m.kill()
        self.killed += 1

    def read_keys(self) -> set:
        return {(r["partition"], r["offset"]) for m in self.all for r in m.snapshot()}

    def report(self, acked: dict) -> dict:
        readers = {}  # (partition, offset) -> members that read it
        mismatched = 0
        for m in self.all:
            for r in m.records:
                key = (r["partition"], r["offset"])
                readers.setdefault(key, []).append(m)
                if key in acked and acked[key] != r["value"]:
                    mismatched += 1
        counts = Counter({k: len(v) for k, v in readers.items()})
        duplicated = [k for k, n in counts.items() if n > 1]

        def explains(m):
            return m.killed or any(e.get("event") == "commit-failed" for e in m.events)

        unexplained = [k for k in duplicated if not any(explains(m) for m in readers[k])]
        generations = {e["generation"] for m in self.all for e in m.events if e.get("event") == "assigned"}
        return {
            "group": self.name, "assignor": self.assignor,
            "consumed": sum(counts.values()), "unique": len(counts),
            "lost": len(set(acked) - set(counts)), "duplicates": sum(counts.values()) - len(counts),
            "unexplained_duplicates": len(unexplained), "mismatched": mismatched,
            "unexpected_reads": len(set(counts) - set(acked)),
            "joined": self.joined, "left": self.left, "killed": self.killed,
            "rebalances": max(len(generations) - 1, 0),
            "commit_failures": sum(1 for m in self.all for e in m.events if e.get("event") == "commit-failed"),
            "failed_members": [m.name for m in self.all if not m.killed and m.proc.returncode not in (0, None)],
        }


def churn(groups, rng, members: int) -> str:
    """One membership change in a random group; the group keeps >= members - 1 live members."""
    g = rng.choice(groups)
    roll = rng.random()
    if len(g.live) > members:  # an extra member: it leaves again
        g.leave(rng)
        return f"{g.name}: extra member left"
    if roll < 0.4:
        g.leave(rng)
        g.join()
        return f"{g.name}: member left, new one joined"
    if roll < 0.75:
        g.kill(rng)
        g.join()
        return f"{g.name}: member killed, new one joined"
    g.join()
    return f"{g.name}: extra member joined"


def soak(bootstrap: str, duration_s: float, groups_n=5, members=4, partitions=8, rate=200.0, churn_s=3.0,
         drain_s=120.0, seed=None, log=print) -> dict:
    seed = seed if seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    topic = f"soak-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)
    groups = [Group(i, bootstrap, topic, duration_s) for i in range(groups_n)]
    try:
        for g in groups:
            for _ in range(members):
                g.join()
        producer = SteadyProducer(bootstrap, topic, rate)
        end = time.monotonic() + duration_s
        next_churn = time.monotonic() + churn_s
        while time.monotonic() < end:
            time.sleep(min(0.5, max(0.0, end - time.monotonic())))
            if time.monotonic() >= next_churn:
                log(f"[{duration_s - (end - time.monotonic()):5.0f} s] {churn(groups, rng, members)}")
                next_churn += churn_s
        producer.stop()
        acked = dict(producer.acked)
        log(f"producer stopped: {len(acked)} records acknowledged, {len(producer.errors)} errors")
        drain_end = time.monotonic() + drain_s
        while time.monotonic() < drain_end and not all(set(acked) <= g.read_keys() for g in groups):
            time.sleep(0.5)
        for g in groups:
            for m in list(g.live):
                m.stop()
            g.live.clear()
        reports = [g.report(acked) for g in groups]
    finally:
        for g in groups:
            for m in g.all:
                if m.alive:
                    m.kill()
    return {"seed": seed, "topic": topic, "duration_s": duration_s, "partitions": partitions,
            "produced": len(acked), "produce_errors": producer.errors[:10], "groups": reports}


def print_summary(result: dict, out=sys.stdout) -> None:
    print(f"soak: {result['duration_s']:.0f} s, seed {result['seed']}, records produced (acked) "
          f"{result['produced']}, produce errors {len(result['produce_errors'])}", file=out)
    cols = ("group", "assignor", "consumed", "unique", "duplicates", "unexplained_duplicates", "lost", "mismatched",
            "joined", "left", "killed", "rebalances", "commit_failures")
    print(" ".join(f"{c:>12}" for c in cols), file=out)
    for r in result["groups"]:
        print(" ".join(f"{str(r[c])[:12]:>12}" for c in cols), file=out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=600)
    p.add_argument("--bootstrap", help="an already running broker (default: start one)")
    p.add_argument("--rate", type=float, default=200.0, help="records per second")
    p.add_argument("--churn-s", type=float, default=3.0, help="seconds between membership changes")
    p.add_argument("--seed", type=int)
    p.add_argument("--json", help="also write the result here")
    args = p.parse_args()
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        broker = Broker(paths.target(), Path(tempfile.mkdtemp(prefix="brook-soak-")))
        broker.start()
        bootstrap = broker.bootstrap
        print(f"{paths.target()} on {bootstrap}, data in {broker.data_dir}")
    try:
        result = soak(bootstrap, args.duration, rate=args.rate, churn_s=args.churn_s, seed=args.seed)
    finally:
        if broker is not None:
            broker.stop()
    print_summary(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    bad = [r["group"] for r in result["groups"]
           if r["lost"] or r["unexplained_duplicates"] or r["mismatched"] or r["failed_members"]]
    if bad or result["produce_errors"]:
        if broker is not None:
            print(f"failed: {bad}; the broker's data and log are kept in {broker.data_dir}")
        return 1
    if broker is not None:
        shutil.rmtree(broker.data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
