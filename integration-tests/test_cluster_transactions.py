"""Transaction coordinator failover in a 3-node cluster (issue #12).

A Java 4.4 transactional producer (`txn-shell`) commits transactions on an RF=3 topic
(min.insync.replicas 2); its transactional id's coordinator (the leader of the id's
`__transaction_state` partition; the module runs that topic with 2 replicas and min ISR 1, see
CLUSTER_OVERRIDES) is at first not the metadata quorum's leader. Twice, with a transaction open
(records sent, not committed), the node coordinating the id (FindCoordinator key type 1, every
node agreeing) is killed (SIGKILL); each time the survivors' FindCoordinator
names another, running node within a deadline (the time is printed):
- round 1: the same producer's commit of its open transaction, issued right after the kill,
  rides the failover (the client finds the new coordinator, which loaded the transaction as
  Ongoing, and retries); the producer goes on committing; then a second producer with the same
  id fences it while it has a transaction open: that transaction is aborted, the old producer's
  commit fails (fenced), the new producer commits;
- round 2 (the killed node restarted and back in the ISR of the topic and of the id's
  `__transaction_state` partition first): a new producer with the same id, started right after
  the kill, gets its producer id from the new coordinator, which first aborts the open
  transaction of the previous one (fenced when it tries to commit), and commits.
The kill-to-first-successful-commit time of each round is the failover time, printed and bounded.
The killed node restarts and rejoins, and a last transaction commits. A read_committed consumer
then reads exactly the committed transactions' records (keys, values, at the offsets the sends
returned, in partition order), none of the aborted ones: the transaction open at the first kill
wholly visible (it committed; had its commit failed it would have to be wholly absent), the one
open at the second kill wholly absent; read_uncommitted reads every record sent. Kafka's
`kafka-dump-log` reads the markers from the segments of a node never killed: one control batch
one past each transaction's last record on each partition, COMMIT or ABORT as it ended, and the
coordinator epoch they carry (the leader epoch of the id's `__transaction_state` partition) never
decreasing and higher after each failover (the new coordinator's markers outrank the old one's).

A kill between PrepareCommit and the markers: a data partition leader that replicates none of the
id's transaction log is paused (SIGSTOP), so the commit is answered (PrepareCommit written) while
the coordinator's markers cannot complete; the coordinator is killed and the paused node resumed.
The next coordinator loads the transaction as PrepareCommit and finishes it: every partition
stable within a deadline (time printed), read_committed reads the whole transaction, the producer
commits the next one; `kafka-dump-log` shows on each partition the COMMIT markers right after the
transaction, the last of them with the new coordinator's epoch (a marker the dead coordinator
got appended stays, with its lower epoch: Kafka appends a second marker for the same transaction).

One cluster for the module (every node is running again when the test ends). The shared brook
cluster runs its default transaction.version (2: the Java producer uses Transactions V2); Kafka's
is set to test_transactions.py's level. Also passes against Apache Kafka 4.4
(BROOK_TEST_TARGET=kafka).
"""

import itertools
import struct
import threading
import time
from typing import Optional

import pytest

from harness import wire
from harness.cluster import wait_for
from harness.cluster_scenarios import create_topic_via, partitions_view, unique
from harness.txn_shell import TxnShell
from test_transactions import (
    FENCED, TXN_VERSION, error_classes, set_kafka_transaction_version, wait_stable,
)
from test_transactions_dump_log import dump

PARTITIONS = 3
PER_PARTITION = 4
COORDINATOR_MOVE_BOUND_S = 30  # generous for a loaded CI machine; the times are printed
FAILOVER_BOUND_S = 45
REJOIN_S = 60
TXN_STATE = "__transaction_state"
# Two replicas of each __transaction_state partition, so that some node replicates none of an
# id's transaction log (the prepared-commit test pauses it); min ISR 1, so that the survivor of a
# killed coordinator can take over.
CLUSTER_OVERRIDES = {"transaction.state.log.replication.factor": "2", "transaction.state.log.min.isr": "1"}


def find_txn_coordinator(bootstrap: str, tid: str) -> dict:
    """FindCoordinator v2 with key type 1 (transaction) sent to one node: {"error", "node_id"}."""
    r = wire.call(bootstrap, 10, 2, [("key", "string"), ("key_type", "int8")], {"key": tid, "key_type": 1},
                  [("throttle_time_ms", "int32"), ("error_code", "int16"), ("error_message", "nstring"),
                   ("node_id", "int32"), ("host", "string"), ("port", "int32")])
    return {"error": r["error_code"], "node_id": r["node_id"]}


def agreed_coordinator(cluster, tid: str, node_ids) -> int:
    """The coordinator every node of `node_ids` names without error, or None."""
    answers = [find_txn_coordinator(cluster.bootstrap_of(i), tid) for i in node_ids]
    ids = {a["node_id"] for a in answers}
    return ids.pop() if len(ids) == 1 and all(a["error"] == 0 for a in answers) else None


def records(tag: str) -> list:
    return [{"key": f"{tag}-k{p}-{i}", "value": f"{tag}-v{p}-{i}", "partition": p}
            for i in range(PER_PARTITION) for p in range(PARTITIONS)]


def by_partition(rows: list) -> dict:
    """{partition: [(offset, key, value)]} in offset order."""
    out: dict = {}
    for r in sorted(rows, key=lambda r: (int(r["partition"]), int(r["offset"]))):
        out.setdefault(int(r["partition"]), []).append((int(r["offset"]), r["key"], r["value"]))
    return out


def txn_state_partition(tid: str, partitions: int = 50) -> int:
    """Kafka's partition of `tid` in __transaction_state: abs(String.hashCode) % partitions
    (transaction.state.log.num.partitions, 50 on both brokers here)."""
    h = 0
    units = tid.encode("utf-16-be")
    for unit in struct.unpack(f">{len(units) // 2}H", units):  # Java chars: UTF-16 code units
        h = (31 * h + unit) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class Kill:
    """SIGKILL the node coordinating `tid` (every node agreeing on it), then watch, in a thread,
    the survivors' FindCoordinator until they all name another node."""

    def __init__(self, cluster, tid: str, victim: Optional[int] = None, quorum_leader: Optional[int] = None):
        self.cluster, self.tid = cluster, tid
        self.victim = victim or wait_for(lambda: agreed_coordinator(cluster, tid, cluster.node_ids), 30,
                                         f"every node naming one coordinator of {tid}")
        self.survivors = [n for n in cluster.node_ids if n != self.victim]
        self.quorum_leader = quorum_leader or cluster.quorum_leader()
        self.moved_to, self.moved_after_s = None, None
        self.killed_at = time.monotonic()
        cluster.node(self.victim).kill()
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        deadline = self.killed_at + COORDINATOR_MOVE_BOUND_S
        while time.monotonic() < deadline:
            try:
                node = agreed_coordinator(self.cluster, self.tid, self.survivors)
            except (OSError, ValueError):
                node = None
            if node is not None and node != self.victim:
                self.moved_to, self.moved_after_s = node, time.monotonic() - self.killed_at
                return
            time.sleep(0.1)

    def since(self) -> float:
        return time.monotonic() - self.killed_at

    def wait_moved(self) -> int:
        self._watcher.join(COORDINATOR_MOVE_BOUND_S + 5)
        assert self.moved_to in self.survivors, f"the coordinator of {self.tid} never moved off node {self.victim}"
        return self.moved_to

    def restart_and_wait_rejoined(self, topic: str) -> None:
        """Restart the killed node; until it is registered everywhere and back in the ISR of
        every partition of `topic` and of the id's __transaction_state partition."""
        cluster, victim = self.cluster, self.victim
        cluster.node(victim).start()
        cluster.wait_registered(REJOIN_S)
        state_partition = txn_state_partition(self.tid)

        def rejoined():
            view = partitions_view(cluster, victim, topic)
            state = partitions_view(cluster, victim, TXN_STATE) or {}
            return (view and all(victim in p["isr"] and p["leader"] >= 0 for p in view.values())
                    and victim in state.get(state_partition, {}).get("isr", []))

        wait_for(rejoined, REJOIN_S, f"node {victim} back in the ISR of {topic} and {TXN_STATE}-{state_partition}")

    def report(self, what: str, failover_s: float, event: str = "first successful commit") -> str:
        return (f"{what}: coordinator node {self.victim} killed (quorum leader {self.quorum_leader}); survivors "
                f"named node {self.moved_to} after {self.moved_after_s or float('nan'):.1f} s; {event} "
                f"{failover_s:.1f} s after the kill")


@pytest.fixture(scope="module")
def txn_cluster(cluster):
    if cluster.kind == "kafka":
        set_kafka_transaction_version(cluster.node(1), TXN_VERSION)
    return cluster


@pytest.mark.timeout(400)
def test_killing_the_transaction_coordinator_moves_it_and_commits_exactly_the_committed_transactions(txn_cluster):
    cluster = txn_cluster
    topic = unique("t-txn-failover")
    create_topic_via(cluster, 1, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    quorum_leader = cluster.quorum_leader()

    # A transactional id whose coordinator is not the quorum leader (the first FindCoordinator
    # also creates __transaction_state, RF 3), so that the first kill fails over the transaction
    # coordinator alone.
    prefix = unique("tid-failover")
    candidates = (f"{prefix}-{i}" for i in itertools.count())

    def pick():
        tid = next(candidates)
        node = agreed_coordinator(cluster, tid, cluster.node_ids)
        return tid if node is not None and node != quorum_leader else None

    tid = wait_for(pick, 60, "a transactional id coordinated by a node other than the quorum leader")
    committed, aborted = [], []  # send results (with key and value) of committed / aborted transactions
    ended = []  # (marker expected, the transaction's records) of every transaction, in order
    epochs_change_after = []  # indexes into `ended` of the first transaction ended after each kill
    with TxnShell(cluster.bootstrap) as shell:
        def send(name: str, tag: str) -> list:
            recs = records(tag)
            return [{**r, **res} for r, res in zip(recs, shell.send(name, topic, recs))]

        shell.ok("producer", name="p1", transactional_id=tid, init=True)
        def commit(name: str, tag: str) -> None:
            shell.ok("begin", name=name)
            sent = send(name, tag)
            shell.ok("commit", name=name)
            committed.extend(sent)
            ended.append(("COMMIT", sent))

        for tag in ("before-0", "before-1"):
            commit("p1", tag)

        # Round 1: the same producer commits the transaction it had open at the kill.
        shell.ok("begin", name="p1")
        open_at_kill = send("p1", "open-at-kill")
        kill = Kill(cluster, tid)
        answer = shell.call("commit", name="p1")
        if not answer.get("ok") and "TimeoutException" in error_classes(answer):
            answer = shell.call("commit", name="p1")  # a timed-out commit may be retried
        failover_s = kill.since()
        kill.wait_moved()
        print(kill.report("same producer commits", failover_s) + ("" if answer.get("ok") else f" (failed: {answer})"))
        epochs_change_after.append(len(ended))
        if answer.get("ok"):
            committed += open_at_kill
            ended.append(("COMMIT", open_at_kill))
            assert failover_s <= FAILOVER_BOUND_S
        else:  # then it must be wholly absent
            shell.ok("abort", name="p1")
            aborted += open_at_kill
            ended.append(("ABORT", open_at_kill))

        commit("p1", "after-kill")
        # A new producer with the same id fences the old one and aborts its open transaction.
        shell.ok("begin", name="p1")
        fenced = send("p1", "fenced")
        shell.ok("producer", name="p2", transactional_id=tid, init=True)
        late = shell.call("commit", name="p1")
        assert not late.get("ok") and error_classes(late) & FENCED, late
        aborted += fenced
        ended.append(("ABORT", fenced))
        commit("p2", "new-producer")
        kill.restart_and_wait_rejoined(topic)
        killed = [kill.victim]

        # Round 2: the coordinator dies with p2's transaction open; a new producer with the same
        # id (InitProducerId at the new coordinator) fences p2 and aborts that transaction.
        shell.ok("begin", name="p2")
        open_at_kill = send("p2", "open-at-kill-2")
        kill = Kill(cluster, tid)
        shell.ok("producer", name="p3", transactional_id=tid, init=True)
        aborted += open_at_kill
        epochs_change_after.append(len(ended))
        ended.append(("ABORT", open_at_kill))
        commit("p3", "after-kill-2")
        failover_s = kill.since()
        kill.wait_moved()
        print(kill.report("new producer fences and commits", failover_s))
        assert failover_s <= FAILOVER_BOUND_S
        late = shell.call("commit", name="p2")
        assert not late.get("ok") and error_classes(late) & FENCED, late
        kill.restart_and_wait_rejoined(topic)
        killed.append(kill.victim)
        commit("p3", "after-rejoin")

        # Until the high watermark is past the last marker on every partition (so every ISR
        # member, the witness below included, has every marker).
        last_marker = {p: max(r["offset"] for r in ended[-1][1] if r["partition"] == p) + 1 for p in range(PARTITIONS)}
        wait_for(lambda: {int(p): o for p, o in shell.ok("end-offsets", topic=topic, isolation="read_uncommitted")
                          ["offsets"].items()} == {p: o + 1 for p, o in last_marker.items()},
                 30, "the high watermark one past the last marker on every partition")
        read = shell.ok("read", topic=topic, isolation="read_committed", timeout_ms=30000, timeout=60)
        assert read["complete"], read["end"]
        assert by_partition(read["records"]) == by_partition(committed)
        assert not {r["key"] for r in read["records"]} & {r["key"] for r in aborted}
        # read_uncommitted: every record sent, the aborted ones too, at the offsets their sends returned
        everything = shell.ok("read", topic=topic, isolation="read_uncommitted", timeout_ms=30000, timeout=60)
        assert everything["complete"], everything["end"]
        assert by_partition(everything["records"]) == by_partition(committed + aborted)

    # The markers as Kafka's kafka-dump-log reads them from the segment of a node never killed
    # (each partition: one control batch one past each transaction's last record there): COMMIT
    # or ABORT as the transaction ended, and the coordinator epoch they carry (the leader epoch of
    # the id's __transaction_state partition) higher after each failover.
    witness = next(n for n in cluster.node_ids if n not in killed)
    for p in range(PARTITIONS):
        files = sorted(str(f) for f in (cluster.node(witness).log_dirs / f"{topic}-{p}").glob("*.log"))
        batches = dump("--print-data-log", "--files", ",".join(files))
        markers = [(int(r["offset"]), r["endTxnMarker"], int(r["coordinatorEpoch"]))
                   for b in batches if b["batch"]["isControl"] == "true" for r in b["records"]]
        expected = [(max(r["offset"] for r in recs if r["partition"] == p) + 1, kind) for kind, recs in ended]
        assert [(o, kind) for o, kind, _e in markers] == expected, f"partition {p}"
        epochs = [e for _o, _k, e in markers]
        assert epochs == sorted(epochs), f"partition {p}: coordinator epochs {epochs}"
        for i in epochs_change_after:
            assert epochs[i] > epochs[i - 1], f"partition {p}: epochs {epochs}, failovers before {epochs_change_after}"


def markers_of(cluster, node_id: int, topic: str, partition: int) -> list:
    """[(offset, "COMMIT"|"ABORT", coordinator epoch)] of the partition's segments on `node_id`."""
    files = sorted(str(f) for f in (cluster.node(node_id).log_dirs / f"{topic}-{partition}").glob("*.log"))
    return [(int(r["offset"]), r["endTxnMarker"], int(r["coordinatorEpoch"]))
            for b in dump("--print-data-log", "--files", ",".join(files))
            if b["batch"]["isControl"] == "true" for r in b["records"]]


@pytest.mark.timeout(400)
def test_a_coordinator_killed_after_prepare_commit_before_its_markers_is_finished_by_the_next_one(txn_cluster):
    """The commit answered (PrepareCommit written on the id's 2 __transaction_state replicas) but
    its markers held back: the leader of a data partition, the one node not replicating the id's
    __transaction_state partition, is paused (SIGSTOP), so the coordinator's WriteTxnMarkers (and
    the replication of any marker its peers append) wait on it. The coordinator is then killed and
    the paused node resumed: only the next coordinator, loading the transaction as PrepareCommit,
    can finish it. Every partition gets its COMMIT marker (the first one right after the
    transaction's last record; a partition that had the dead coordinator's marker may get a second
    one from the new coordinator), read_committed reads the whole transaction, the producer
    commits the next one, and the killed node rejoins."""
    cluster = txn_cluster
    topic = unique("t-txn-prepared")
    view = create_topic_via(cluster, 1, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    data_leaders = {v["leader"] for v in view.values()}
    prefix = unique("tid-prepared")
    candidates = (f"{prefix}-{i}" for i in itertools.count())

    def pick():
        tid = next(candidates)
        coordinator = agreed_coordinator(cluster, tid, cluster.node_ids)
        if coordinator is None:
            return None
        state = (partitions_view(cluster, coordinator, TXN_STATE) or {}).get(txn_state_partition(tid))
        if state is None:
            return None
        assert state["leader"] == coordinator, (tid, state)  # Kafka's id -> partition mapping
        others = set(cluster.node_ids) - set(state["replicas"])
        return (tid, coordinator, others.pop()) if len(others) == 1 and others <= data_leaders else None

    tid, coordinator, paused = wait_for(pick, 60, "an id whose __transaction_state replicas exclude a data leader")
    quorum_leader = cluster.quorum_leader()
    with TxnShell(cluster.bootstrap) as shell:
        shell.ok("producer", name="p", transactional_id=tid, init=True)
        shell.ok("begin", name="p")
        prepared = [{**r, **res} for r, res in zip(records("prepared"), shell.send("p", topic, records("prepared")))]
        cluster.node(paused).pause()
        try:
            shell.ok("commit", name="p", timeout=30)  # answered once PrepareCommit is written
            kill = Kill(cluster, tid, victim=coordinator, quorum_leader=quorum_leader)
        finally:
            cluster.node(paused).resume()
        wait_stable(shell, topic, timeout_s=FAILOVER_BOUND_S)
        completed_s = kill.since()
        kill.wait_moved()
        print(kill.report(f"PrepareCommit finished by the next coordinator (node {paused} paused)", completed_s,
                          "every partition stable (all markers written)"))

        shell.ok("begin", name="p")
        after = [{**r, **res} for r, res in zip(records("after"), shell.send("p", topic, records("after")))]
        shell.ok("commit", name="p")
        kill.restart_and_wait_rejoined(topic)
        # the paused node, whose segments are read below, in every ISR, so that the high
        # watermark cannot pass a marker it lacks
        wait_for(lambda: all(paused in v["isr"]
                             for v in (partitions_view(cluster, paused, topic) or {0: {"isr": []}}).values()),
                 REJOIN_S, f"node {paused} in the ISR of every partition of {topic}")
        last_marker = {p: max(r["offset"] for r in after if r["partition"] == p) + 1 for p in range(PARTITIONS)}
        wait_for(lambda: {int(p): o for p, o in shell.ok("end-offsets", topic=topic, isolation="read_uncommitted")
                          ["offsets"].items()} == {p: o + 1 for p, o in last_marker.items()},
                 30, "the high watermark one past the last marker on every partition")
        read = shell.ok("read", topic=topic, isolation="read_committed", timeout_ms=30000, timeout=60)
        assert read["complete"], read["end"]
        assert by_partition(read["records"]) == by_partition(prepared + after)

    # Markers as kafka-dump-log reads them on the node that was paused (a replica of every
    # partition): the prepared transaction's COMMIT markers right after its last record, the last
    # of them the new coordinator's (it resends to every partition; a marker the dead one got
    # appended before is kept, with its lower coordinator epoch), then the next transaction's.
    duplicates = 0
    for p in range(PARTITIONS):
        markers = markers_of(cluster, paused, topic, p)
        assert [o for o, _k, _e in markers][0] == max(r["offset"] for r in prepared if r["partition"] == p) + 1
        assert markers[-1][0] == last_marker[p], markers
        assert all(kind == "COMMIT" for _o, kind, _e in markers), (p, markers)
        new_epoch = markers[-1][2]
        assert markers[-2][2] == new_epoch, (p, markers)
        assert all(e < new_epoch for _o, _k, e in markers[:-2]), (p, markers)
        duplicates += len(markers) - 2
    print(f"COMMIT markers of the prepared transaction left by the killed coordinator: {duplicates}")
