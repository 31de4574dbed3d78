#!/usr/bin/env python3
"""Consumer-group soak: 5 groups of 4 members each consume one topic while members join, leave
gracefully and are killed, under a steady idempotent producer; at the end every group must have
read every acknowledged record.

    python3 integration-tests/soak/run.py [--duration 600] [--bootstrap HOST:PORT] [--json FILE]
        [--clients franz,java,...] [--max-java 5] [--seed N]

Without --bootstrap it starts its own broker (brook, or Apache Kafka with
BROOK_TEST_TARGET=kafka) in a temp dir. test_soak.py runs a short version; `make soak` the long one.

* Producer: confluent-kafka, acks=all, enable.idempotence, keyed (`k<seq % 97>`), value
  `seq-<n>`, at --rate records/s into a topic of --partitions partitions; a record counts as
  produced once acknowledged, with the (partition, offset) the broker gave it.
* Members: `group-consume --events` driver processes of mixed clients, groups alternating the
  range and cooperative-sticky assignors, session timeout 6 s. A range group draws its members
  from franz-go, Java, confluent-kafka (librdkafka), kafkajs (through its driver's range
  assigner: kafkajs' own round-robin protocol is one no other client speaks) and kafka-python;
  a cooperative-sticky group from franz-go, Java and confluent-kafka (kafka-python and kafkajs
  have no cooperative protocol). The first members of each group rotate through its clients;
  later ones are drawn at random, with at most --max-java JVMs alive at once (~100 MB and a
  JIT's CPU each, on 2 cores). Every --churn-s seconds one group changes: a member leaves
  (SIGTERM: commit, LeaveGroup) or is killed (SIGKILL: nothing more committed, evicted by the
  session timeout) and a new one joins, or an extra member joins / the extra one leaves
  (4 <-> 5 members).
* Checks per group, by (partition, offset): lost = acknowledged but never read; duplicates =
  reads beyond the first (expected only where a reader was killed or a commit failed: those
  are "explained"); mismatched = a read whose value is not what was acknowledged there.
  Rebalances = distinct generations seen in the members' assignment events, minus one (the
  members that report a generation: franz-go, Java, kafka-python; librdkafka and kafkajs hide
  it); on brook also the group's generation from /metrics (`brook_group_generation`) at the end.
  Every figure is also broken down by client (a client's duplicates: reads beyond the first of
  records a member of that client read, so one re-read record counts for both clients involved).
"""

import argparse
import json
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.request
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
# The clients a group's members come from: within a group every member must speak the group's
# protocol name ("range" / "cooperative-sticky").
CLIENTS = {
    "range": ("franz", "java", "confluent", "kafkajs", "kafka_python"),
    "cooperative-sticky": ("franz", "java", "confluent"),
}
ALL_CLIENTS = CLIENTS["range"]
# A small heap, the C1 compiler only and the serial collector: a JVM member costs less memory
# and CPU; the consumer needs no more.
JAVA_ENV = {"JAVA_TOOL_OPTIONS": "-Xmx128m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
# A JVM stopped by SIGTERM exits 128 + 15 even when its shutdown hook closed the consumer cleanly.
JVM_SIGTERM_EXIT = 143


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

    def __init__(self, index: int, bootstrap: str, topic: str, duration_s: float, clients=None):
        self.name = f"soak-{index}-{uuid.uuid4().hex[:6]}"
        self.assignor = ASSIGNORS[index % len(ASSIGNORS)]
        self.clients = tuple(c for c in CLIENTS[self.assignor] if clients is None or c in clients)
        if not self.clients:
            raise ValueError(f"none of {clients} speaks {self.assignor}")
        self.bootstrap, self.topic = bootstrap, topic
        self.timeout_ms = int((duration_s + 600) * 1000)
        self.live, self.all = [], []
        self.joined = self.left = self.killed = 0
        self.left_by, self.killed_by = Counter(), Counter()

    def join(self, client: str = "franz"):
        m = GroupMember(client, self.bootstrap, self.name, self.topic, "--events", "--assignor", self.assignor,
                        "--session-timeout-ms", SESSION_MS, "--timeout-ms", self.timeout_ms,
                        name=f"{self.name}/{len(self.all)}-{client}", env=JAVA_ENV if client == "java" else None)
        self.live.append(m)
        self.all.append(m)
        self.joined += 1

    def leave(self, rng):
        m = self.live.pop(rng.randrange(len(self.live)))
        m.stop()
        self.left += 1
        self.left_by[m.client] += 1

    def kill(self, rng):
        m = self.live.pop(rng.randrange(len(self.live)))
        m.kill()
        self.killed += 1
        self.killed_by[m.client] += 1

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
        generations = {e["generation"] for m in self.all for e in m.events
                       if e.get("event") == "assigned" and e.get("generation") is not None}
        by_client = {}
        for c in sorted({m.client for m in self.all}):
            mine = [m for m in self.all if m.client == c]
            by_client[c] = {
                "joined": len(mine), "left": self.left_by[c], "killed": self.killed_by[c],
                "consumed": sum(len(m.records) for m in mine),
                "duplicates": sum(n - 1 for k, n in counts.items() if n > 1 and any(m.client == c for m in readers[k])),
                "commit_failures": sum(1 for m in mine for e in m.events if e.get("event") == "commit-failed"),
            }
        return {
            "group": self.name, "assignor": self.assignor, "by_client": by_client,
            "consumed": sum(counts.values()), "unique": len(counts),
            "lost": len(set(acked) - set(counts)), "duplicates": sum(counts.values()) - len(counts),
            "unexplained_duplicates": len(unexplained), "mismatched": mismatched,
            "unexpected_reads": len(set(counts) - set(acked)),
            "joined": self.joined, "left": self.left, "killed": self.killed,
            "rebalances": max(len(generations) - 1, 0),
            "commit_failures": sum(1 for m in self.all for e in m.events if e.get("event") == "commit-failed"),
            "failed_members": [f"{m.name} (exit {m.proc.returncode}): {m.stderr_tail(5)[-600:]}"
                               for m in self.all if failed(m)],
        }


def failed(m) -> bool:
    """A member that ended badly: not killed on purpose, a non-zero exit, and not one of
    the two ends a SIGTERM causes on its own: the JVM's exit through its shutdown hooks, or
    the signal's default action on a member stopped before its driver installed a handler
    (a JVM or node still starting on a loaded machine), which had printed nothing yet."""
    code = m.proc.returncode
    if m.killed or code in (0, None):
        return False
    if m.client == "java" and code == JVM_SIGTERM_EXIT:
        return False
    stopped_while_starting = code in (-signal.SIGTERM, 128 + signal.SIGTERM) and not m.events and not m.records
    return not stopped_while_starting


def pick_client(groups, g, rng, max_java: int) -> str:
    """A client for a new member of `g`: at random among its clients, no JVM beyond `max_java`."""
    java_live = sum(1 for h in groups for m in h.live if m.client == "java")
    allowed = [c for c in g.clients if c != "java" or java_live < max_java]
    return rng.choice(allowed or [c for c in g.clients if c != "java"] or ["franz"])


def churn(groups, rng, members: int, max_java: int) -> str:
    """One membership change in a random group; the group keeps >= members - 1 live members."""
    g = rng.choice(groups)
    roll = rng.random()
    if len(g.live) > members:  # an extra member: it leaves again
        g.leave(rng)
        return f"{g.name}: extra member left"
    if roll < 0.4:
        g.leave(rng)
        client = pick_client(groups, g, rng, max_java)
        g.join(client)
        return f"{g.name}: member left, new {client} member joined"
    if roll < 0.75:
        g.kill(rng)
        client = pick_client(groups, g, rng, max_java)
        g.join(client)
        return f"{g.name}: member killed, new {client} member joined"
    client = pick_client(groups, g, rng, max_java)
    g.join(client)
    return f"{g.name}: extra {client} member joined"


def broker_generations(metrics_url) -> dict:
    """{group: generation} from brook's /metrics (`brook_group_generation`); {} without it."""
    if not metrics_url:
        return {}
    try:
        with urllib.request.urlopen(metrics_url, timeout=10) as response:
            text = response.read().decode()
    except OSError:
        return {}
    return {m.group(1): int(float(m.group(2)))
            for m in re.finditer(r'^brook_group_generation\{group="([^"]+)"\} (\S+)$', text, re.M)}


def stop_all(members) -> None:
    """Stop members concurrently (each closes gracefully: commit, LeaveGroup)."""
    threads = [threading.Thread(target=m.stop, daemon=True) for m in members]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)


def soak(bootstrap: str, duration_s: float, groups_n=5, members=4, partitions=8, rate=200.0, churn_s=3.0,
         drain_s=120.0, seed=None, log=print, clients=None, max_java=5, metrics_url=None) -> dict:
    """`clients`: restrict the members to these clients (default: all of CLIENTS)."""
    seed = seed if seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    topic = f"soak-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)
    groups = [Group(i, bootstrap, topic, duration_s, clients) for i in range(groups_n)]
    try:
        # The first members rotate through each group's clients (so every client is in from the
        # start), shifted per group, within the JVM budget.
        for i, g in enumerate(groups):
            for j in range(members):
                client = g.clients[(i + j) % len(g.clients)]
                java_live = sum(1 for h in groups for m in h.live if m.client == "java")
                if client == "java" and java_live >= max_java:
                    client = pick_client(groups, g, rng, max_java)
                g.join(client)
        log("members: " + "; ".join(f"{g.name} ({g.assignor}): {', '.join(m.client for m in g.live)}"
                                    for g in groups))
        producer = SteadyProducer(bootstrap, topic, rate)
        end = time.monotonic() + duration_s
        next_churn = time.monotonic() + churn_s
        while time.monotonic() < end:
            time.sleep(min(0.5, max(0.0, end - time.monotonic())))
            if time.monotonic() >= next_churn:
                log(f"[{duration_s - (end - time.monotonic()):5.0f} s] {churn(groups, rng, members, max_java)}")
                next_churn += churn_s
        producer.stop()
        acked = dict(producer.acked)
        log(f"producer stopped: {len(acked)} records acknowledged, {len(producer.errors)} errors")
        drain_end = time.monotonic() + drain_s
        while time.monotonic() < drain_end and not all(set(acked) <= g.read_keys() for g in groups):
            time.sleep(0.5)
        stop_all([m for g in groups for m in g.live])
        for g in groups:
            g.live.clear()
        reports = [g.report(acked) for g in groups]
        generations = broker_generations(metrics_url)
        for r in reports:
            r["broker_generation"] = generations.get(r["group"])
    finally:
        for g in groups:
            for m in g.all:
                if m.alive:
                    m.kill()
    by_client = {}
    for r in reports:
        for c, figures in r["by_client"].items():
            total = by_client.setdefault(c, Counter())
            total.update(figures)
    return {"seed": seed, "topic": topic, "duration_s": duration_s, "partitions": partitions,
            "produced": len(acked), "produce_errors": producer.errors[:10], "groups": reports,
            "by_client": {c: dict(v) for c, v in sorted(by_client.items())}}


def print_summary(result: dict, out=sys.stdout) -> None:
    print(f"soak: {result['duration_s']:.0f} s, seed {result['seed']}, records produced (acked) "
          f"{result['produced']}, produce errors {len(result['produce_errors'])}", file=out)
    cols = ("group", "assignor", "consumed", "unique", "duplicates", "unexplained_duplicates", "lost", "mismatched",
            "joined", "left", "killed", "rebalances", "broker_generation", "commit_failures")
    print(" ".join(f"{c:>12}" for c in cols), file=out)
    for r in result["groups"]:
        print(" ".join(f"{str(r.get(c))[:12]:>12}" for c in cols), file=out)
    for r in result["groups"]:
        print(f"  {r['group']}: " + "; ".join(f"{c} {f}" for c, f in r["by_client"].items()), file=out)
    cols = ("client", "joined", "left", "killed", "consumed", "duplicates", "commit_failures")
    print("by client:", file=out)
    print(" ".join(f"{c:>12}" for c in cols), file=out)
    for c, f in result.get("by_client", {}).items():
        print(" ".join(f"{str(v)[:12]:>12}" for v in [c] + [f.get(k, 0) for k in cols[1:]]), file=out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=600)
    p.add_argument("--bootstrap", help="an already running broker (default: start one)")
    p.add_argument("--rate", type=float, default=200.0, help="records per second")
    p.add_argument("--churn-s", type=float, default=3.0, help="seconds between membership changes")
    p.add_argument("--seed", type=int)
    p.add_argument("--clients", help="comma list of clients the members come from (default: all)")
    p.add_argument("--max-java", type=int, default=5, help="at most this many Java members alive at once")
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
        result = soak(bootstrap, args.duration, rate=args.rate, churn_s=args.churn_s, seed=args.seed,
                      clients=args.clients.split(",") if args.clients else None, max_java=args.max_java,
                      metrics_url=broker.metrics_url if broker is not None else None)
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
