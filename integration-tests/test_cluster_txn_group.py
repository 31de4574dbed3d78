"""Transactional group members rebalancing across brokers (issue 29 §1), 3-node cluster.

franz-go's `GroupTransactSession` (the franz driver's `txn-copy`): members of one consumer group,
each with its own transactional id, copy a 6-partition input topic to a 6-partition output topic
(same partition, key, value), one transaction per poll that also commits the consumed offsets.
An idempotent producer streams keyed input the whole time, so a member is nearly always inside a
transaction when the group changes (STEPS): A starts alone, B and C join, A leaves (SIGTERM: it
ends its transaction and leaves the group), D joins, B leaves, E joins, C leaves, A comes back
(same transactional id, a new process), D leaves, B comes back, and so on (19 changes); each
change once every running member commits again. A rebalance that revokes partitions from a member with a
transaction open makes the session abort it (a line with want_commit and not committed: asserted
to happen at least once) and the partitions' next owner resumes from the committed offsets. Then
the input stops, the members copy it to its end and stop, and a read_committed consumer
(librdkafka) reads the output: per partition exactly the input's keys and values in input order,
each once; the members' committed transactions carry exactly as many records as the input. On a
difference the message names the input offsets two committed transactions both copied.

The work is spread so that it cannot all run on one broker (each asserted): the transactional
ids of A, B, C are coordinated by three different nodes (FindCoordinator key type 1, every node
agreeing), A's, D's and E's not by the group's coordinator, and the leaders of both topics'
partitions are on all three nodes. Internal topics run at replication factor 1, as in the
TestTxnEtl run of the issue (scripts/franz-kgo-tests.py). Both targets at test_transactions.py's
transaction.version (2: franz-go uses Transactions V2, each EndTxn bumps the epoch). Once per
assignor: range (eager: every rebalance revokes everything) and cooperative-sticky.

A test that fails before the fix of issue 29 §1: on brook a transaction's input is committed
twice (the output holds duplicates) or a member fails with PRODUCER_FENCED. Passes against
Apache Kafka 4.4 (BROOK_TEST_TARGET=kafka).
"""


import json
import time
from typing import Dict, List

import pytest

from harness import drivers, wire
from harness.cluster import wait_for
from harness.cluster_scenarios import create_topic_via, unique
from harness.txn_group import InputStream, TxnCopier
from test_transactions import TXN_VERSION, set_kafka_transaction_version

PARTITIONS = 6
RATE = 200  # input records/s: a member's poll finds records at once, so it is nearly always in a transaction
STAGE_TXNS = 3  # committed transactions a new member shows before the group changes again
# The group's changes, each once every running member commits again after the previous one;
# X2, X3 are member X back with the same transactional id (a new process: InitProducerId again).
# Many changes: each rebalance is a chance for a commit to race it.
STEPS = [("join", "A"), ("join", "B"), ("join", "C"), ("leave", "A"), ("join", "D"), ("leave", "B"), ("join", "E"),
         ("leave", "C"), ("join", "A2"), ("leave", "D"), ("join", "B2"), ("leave", "E"), ("join", "C2"),
         ("leave", "A2"), ("join", "D2"), ("leave", "B2"), ("join", "E2"), ("leave", "C2"), ("join", "A3")]
STAGE_S = 60  # a stage's deadline (a join and its rebalance take a few seconds)
DRAIN_S = 90
# The whole scenario's deadline (Kafka: 20-35 s): a broker whose transactions stall fails in
# minutes, not after every stage's own deadline.
SCENARIO_S = 120
CLUSTER_OVERRIDES = {"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1"}


@pytest.fixture(scope="module")
def txn_cluster(cluster):
    if cluster.kind == "kafka":
        set_kafka_transaction_version(cluster.node(1), TXN_VERSION)
    return cluster


def agreed_coordinator(cluster, key: str, key_type: int):
    """The coordinator of `key` every node names without error, or None."""
    answers = [wire.find_coordinator(cluster.bootstrap_of(i), key, key_type) for i in cluster.node_ids]
    ids = {a["node_id"] for a in answers}
    return ids.pop() if len(ids) == 1 and all(a["error"] == 0 for a in answers) else None


def coordinator(cluster, key: str, key_type: int) -> int:
    """The node every node names as `key`'s coordinator (the first FindCoordinator also creates
    the internal topic: wait for the answers)."""
    return wait_for(lambda: agreed_coordinator(cluster, key, key_type), 60, f"every node naming {key}'s coordinator")


def spread_ids(cluster, tag: str):
    """A group and five transactional ids: A, B, C coordinated by three different nodes, A, D and
    E not by the group's coordinator. Returns (group, group coordinator, {name: (tid, node)})."""
    group = f"g-{tag}"
    g_node = coordinator(cluster, group, wire.GROUP_KEY)
    per_node: Dict[int, str] = {}
    for i in range(300):
        tid = f"tid-{tag}-{i}"
        per_node.setdefault(coordinator(cluster, tid, wire.TRANSACTION_KEY), tid)
        if len(per_node) == 3:
            break
    assert len(per_node) == 3, f"300 transactional ids coordinated by nodes {sorted(per_node)} only"
    others = [n for n in sorted(per_node) if n != g_node]
    order = [others[0], g_node, others[1]]  # A's coordinator is not the group's
    members = {name: (per_node[n], n) for name, n in zip("ABC", order)}
    later = (f"tid-{tag}-x{i}" for i in range(300))
    for name in "DE":
        members[name] = next((tid, node) for tid in later
                             if (node := coordinator(cluster, tid, wire.TRANSACTION_KEY)) != g_node)
    return group, g_node, members


def leaders(cluster, topic: str) -> Dict[int, int]:
    return wire.leaders(cluster.metadata(1, [topic]), topic)


class Scenario:
    """The running members and input; every wait fails at once, with the member's stderr, if a
    member that was not stopped has exited (a client error such as PRODUCER_FENCED)."""

    def __init__(self, cluster, assignor: str, source: str, sink: str, group: str, ids: dict):
        self.cluster, self.assignor, self.source, self.sink, self.group, self.ids = \
            cluster, assignor, source, sink, group, ids
        self.members: Dict[str, TxnCopier] = {}
        self.stopped: List[str] = []
        self.input = None
        self.deadline = time.monotonic() + SCENARIO_S

    def start(self, name: str) -> TxnCopier:
        tid, _ = self.ids[name[0]]
        m = TxnCopier("franz", self.cluster.bootstrap, self.group, self.source, self.sink, tid,
                      "--assignor", self.assignor, "--events", name=name)
        self.members[name] = m
        return m

    def stop(self, name: str) -> None:
        code = self.members[name].stop()
        self.stopped.append(name)
        assert code == 0, f"member {name} did not stop cleanly ({code}):\n{self.members[name].notable_tail(30)}"

    def check_alive(self) -> None:
        for name, m in self.members.items():
            if name not in self.stopped and not m.alive:
                raise AssertionError(f"member {name} ({m.transactional_id}) exited {m.proc.returncode} while "
                                     f"running; its last lines: {m.txns[-3:]}\n{m.notable_tail(30)}")
        if self.input is not None and not self.input.alive and self.input.done is None:
            raise AssertionError(f"the input producer exited:\n{self.input.stderr_tail()}")

    def wait(self, condition, timeout: float, what):
        """wait_for(condition) for `timeout` s but not past the scenario's deadline, failing at
        once if a member died; `what`: a string or a callable."""
        def checked():
            self.check_alive()
            return condition()
        timeout = max(1.0, min(timeout, self.deadline - time.monotonic()))
        return wait_for(checked, timeout, lambda: f"{what() if callable(what) else what} (scenario budget "
                        f"{SCENARIO_S} s); {self.describe()}", interval=0.2)

    def describe(self) -> str:
        """Every member's progress and the notable lines of its client log (franz-go's)."""
        return "\n".join(f"{m!r}\n  client log (notable lines):\n{m.notable_tail()}" for m in self.members.values())

    def wait_committed(self, name: str, more: int, timeout: float = STAGE_S) -> None:
        """Until member `name` has committed `more` transactions beyond its count now."""
        m = self.members[name]
        target = m.committed_txns() + more
        self.wait(lambda: m.committed_txns() >= target, timeout, f"member {name} committing {more} more transactions")

    def running(self) -> List[str]:
        return [name for name in self.members if name not in self.stopped]

    def copied_through(self) -> Dict[int, int]:
        """{partition: the highest input offset a committed transaction copied}."""
        out: Dict[int, int] = {}
        for m in self.members.values():
            for t in m.txns:
                if t["committed"]:
                    for p, (_, last) in t["offsets"].items():
                        out[int(p)] = max(out.get(int(p), -1), last)
        return out

    def dump(self, out_dir) -> None:
        """Each member's stdout lines (NAME.jsonl) and client log tail (NAME.log) under `out_dir`."""
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, m in self.members.items():
            (out_dir / f"{name}.jsonl").write_text("".join(json.dumps(d) + "\n" for d in m.lines))
            (out_dir / f"{name}.log").write_text("\n".join(m.notable) + "\n")

    def stop_all(self) -> None:
        for name, m in self.members.items():
            if m.alive:
                m.kill()
        if self.input is not None and self.input.alive:
            self.input.kill()


@pytest.mark.timeout(400)
@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_transactional_members_rebalancing_across_brokers_copy_every_record_exactly_once(txn_cluster, assignor,
                                                                                         tmp_path):
    cluster = txn_cluster
    tag = unique(assignor[:4])
    source, sink = f"t-txg-in-{tag}", f"t-txg-out-{tag}"
    create_topic_via(cluster, 1, source, PARTITIONS)
    create_topic_via(cluster, 2, sink, PARTITIONS)
    group, g_node, ids = spread_ids(cluster, tag)
    txn_nodes = {name: node for name, (_, node) in ids.items()}
    print(f"group {group} coordinated by node {g_node}; transaction coordinators {txn_nodes}; "
          f"leaders {source} {leaders(cluster, source)}, {sink} {leaders(cluster, sink)}")
    assert {txn_nodes["A"], txn_nodes["B"], txn_nodes["C"]} == {1, 2, 3}
    assert g_node not in (txn_nodes["A"], txn_nodes["D"], txn_nodes["E"])
    assert set(leaders(cluster, source).values()) == {1, 2, 3}
    assert set(leaders(cluster, sink).values()) == {1, 2, 3}

    s = Scenario(cluster, assignor, source, sink, group, ids)
    try:
        s.input = InputStream(cluster.bootstrap, source, PARTITIONS, f"v-{tag}", RATE)
        started = time.monotonic()
        for action, name in STEPS:
            if action == "join":
                s.start(name)
            else:
                s.stop(name)
            for other in s.running():  # the group settled: every member copies again
                s.wait_committed(other, STAGE_TXNS if other == name else 1)
        assert s.input.stop() == 0, s.input.stderr_tail()
        assert s.input.done and s.input.done["failed"] == 0, (s.input.done, s.input.stderr_tail())
        expected = s.input.by_partition()
        total = sum(len(v) for v in expected.values())
        assert total == s.input.done["acked"] and sorted(expected) == list(range(PARTITIONS))
        last = {p: recs[-1][0] for p, recs in expected.items()}
        s.wait(lambda: all(s.copied_through().get(p, -1) >= o for p, o in last.items()), DRAIN_S,
               lambda: f"the members committing every input record (last offsets {last}, committed through "
                       f"{s.copied_through()})")
        for name in s.running():
            s.stop(name)
        elapsed = time.monotonic() - started
    finally:
        s.stop_all()
        s.dump(tmp_path / "members")

    members = s.members
    summary = {n: (m.committed_txns(), len(m.rebalance_aborts()), m.final) for n, m in members.items()}
    print(f"{assignor}: {total} records in {elapsed:.1f} s; per member (committed txns, rebalance aborts, final): "
          f"{summary}")
    for name, m in members.items():
        assert any(e["event"] == "assigned" and e["partitions"] for e in m.events), f"{name} never got partitions"
    assert sum(len(m.rebalance_aborts()) for m in members.values()) >= 1, \
        "no rebalance hit an open transaction: the scenario did not test what it names"
    rows = drivers.run("confluent", "consume", cluster.bootstrap, "--topic", sink, "--count", total + 1,
                       "--from", "earliest", "--isolation", "read_committed", "--timeout-ms", 5000, timeout=60)
    got: Dict[int, List[tuple]] = {}
    for r in sorted(rows, key=lambda r: (r["partition"], r["offset"])):
        got.setdefault(r["partition"], []).append((r["key"], r["value"]))
    want = {p: [(k, v) for _, k, v in recs] for p, recs in expected.items()}
    differences = {p: difference(got.get(p, []), want[p]) for p in range(PARTITIONS) if got.get(p, []) != want[p]}
    assert not differences, (f"read_committed output differs from the input: {differences}; input offsets "
                             f"committed twice (member, txn): {committed_twice(members)}; members {summary}; "
                             f"every member's lines and client log: {tmp_path / 'members'}")
    assert len(rows) == total
    assert sum(m.committed_records() for m in members.values()) == total, summary


def committed_twice(members: Dict[str, TxnCopier]) -> dict:
    """{partition: [(offset range, [(member, txn), (member, txn)])]}: input ranges that two committed
    transactions both copied (empty when every input offset was committed once)."""
    committed = sorted((int(p), first, last, name, t["txn"]) for name, m in members.items() for t in m.txns
                       if t["committed"] for p, (first, last) in t["offsets"].items())
    out: Dict[int, list] = {}
    for a, b in zip(committed, committed[1:]):
        if a[0] == b[0] and b[1] <= a[2]:
            out.setdefault(a[0], []).append(((b[1], min(a[2], b[2])), [a[3:], b[3:]]))
    return out


def difference(got: List[tuple], want: List[tuple]) -> dict:
    """How one output partition differs from its input partition: counts, the records it holds
    more than once, the input records it lacks, the first position where they part."""
    seen: Dict[tuple, int] = {}
    for rec in got:
        seen[rec] = seen.get(rec, 0) + 1
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    return {"records": len(got), "input": len(want), "duplicated": [r for r, n in seen.items() if n > 1][:10],
            "missing": [r for r in want if r not in seen][:10], "first_difference_at": first,
            "got_there": got[first:first + 3], "input_there": want[first:first + 3]}
