"""The nemesis: one fault at a time on one node, chosen by a seeded RNG, each logged with its
kind, target node, start (fault injected), heal (node restarted / resumed / reconnected) and
end (the cluster recovered: every node running and every partition led, or the deadline).

Kinds (weights in KINDS):
  kill-leader         kill -9 the leader of a random partition, restart it after 0.5-2.5 s
  kill-follower       kill -9 a non-leader replica of a random partition, restart likewise
  kill-quorum-leader  kill -9 the metadata quorum's leader (harness quorum_leader()), restart likewise
  pause               SIGSTOP a random partition's leader for session timeout + 1-2.5 s, SIGCONT
  terminate           SIGTERM a random partition's leader (controlled shutdown), start it again
  heavy-restart       a burst of large records, then kill -9 a random partition's leader while it
                      writes them, restart after 0.5-2.5 s (an unflushed tail must be recovered)
  isolate             cut a random partition's leader off from the other brokers (netfault.py;
                      clients still reach it) for session timeout + 1-2.5 s, then heal
  reassign            move the replicas of 1-2 random partitions with kafka-reassign-partitions
                      (reassign.py: one replica swapped for a broker outside the set, or the list
                      rotated when every broker holds it), maybe kill -9 a broker of the move
                      while it runs; wait for the move (cancel it at the deadline), then a
                      PREFERRED election for the new first replica
  voters              take a controller out of the metadata quorum with kafka-metadata-quorum
                      remove-controller and add it back with add-controller (voters.py: the quorum
                      leader a third of the time, maybe a kill -9 of that node while a change
                      runs); needs a dynamic quorum (cluster.quorum == "dynamic")
"""

import random
import time
from typing import Callable, Dict, List, Optional

from harness import wire
from harness.broker import BrokerStartError

from . import reassign
from .reassign import Reassigner
from .voters import VoterChanger
from .workload import now_ms

KINDS = {"kill-leader": 3, "kill-follower": 2, "kill-quorum-leader": 2, "pause": 1, "terminate": 2,
         "heavy-restart": 1, "isolate": 1, "reassign": 2, "voters": 1}
# A reassign fault's companion, drawn uniformly: none half the time.
COMPANIONS = ("none", "none", "kill-target", "kill-leader")
RESTART_ATTEMPTS = 3


class Nemesis:
    def __init__(self, cluster, topic: str, partitions: int, rng: random.Random, net=None,
                 burst: Optional[Callable[[], object]] = None, session_s: float = 6.0,
                 recovery_timeout_s: float = 60.0, kinds: Optional[Dict[str, int]] = None,
                 log: Callable[[str], None] = print, voters_remove_leader: bool = True):
        self.cluster, self.topic, self.partitions = cluster, topic, partitions
        self.rng, self.net, self.burst, self.session_s = rng, net, burst, session_s
        self.recovery_timeout_s = recovery_timeout_s
        self.kinds = dict(kinds or KINDS)
        if net is None or not getattr(net, "ready", False):
            self.kinds.pop("isolate", None)
        if burst is None:
            self.kinds.pop("heavy-restart", None)
        if getattr(cluster, "quorum", "static") != "dynamic":  # static voters cannot change
            self.kinds.pop("voters", None)
        if not self.kinds:
            raise ValueError("no fault kind left to inject (isolate needs nftables, voters a dynamic quorum)")
        self.log = log
        self.faults: List[dict] = []
        self.paused: set = set()
        self.restart_failures = 0
        self._bag: List[str] = []
        self.reassigner = Reassigner(topic, self._tool_bootstrap, self.log)
        self.voter_changer = VoterChanger(self, self.log, voters_remove_leader) \
            if getattr(cluster, "quorum", "static") == "dynamic" else None
        # Per moved partition, the replica sets (sorted) it may end with: the last move's target
        # once it completed, its original set once a cancel was confirmed, either while unsettled.
        self.expected_replicas: Dict[int, List[List[int]]] = {}
        self.unsettled: Dict[int, tuple] = {}  # partition -> (before, target) of a move not known to be over

    # -- views -------------------------------------------------------------------------------------
    def _reachable(self) -> List[int]:
        ids = [i for i in self.cluster.running_ids() if i not in self.paused
               and (self.net is None or self.net.isolated != i)]
        self.rng.shuffle(ids)
        return ids

    def _tool_bootstrap(self) -> str:
        ids = sorted(self._reachable()) or self.cluster.node_ids
        return ",".join(self.cluster.bootstrap_of(i) for i in ids)

    def partition_view(self) -> Optional[Dict[int, dict]]:
        """{partition: {"leader", "replicas", "isr", ...}} from the first running node that answers."""
        for node_id in sorted(self._reachable()):
            try:
                t = wire.metadata(self.cluster.bootstrap_of(node_id), [self.topic])["topics"].get(self.topic)
            except (OSError, ValueError):
                continue
            if t is not None and t["error"] == 0 and len(t["partitions"]) == self.partitions:
                return t["partitions"]
        return None

    def all_led(self) -> bool:
        view = self.partition_view()
        running = set(self.cluster.running_ids())
        return view is not None and all(v["leader"] in running for v in view.values())

    def isr_full(self) -> bool:
        view = self.partition_view()
        return view is not None and all(sorted(v["isr"]) == sorted(v["replicas"]) and v["leader"] >= 0
                                        for v in view.values())

    # -- targets -----------------------------------------------------------------------------------
    def _random_partition_leader(self, view) -> (Optional[int], int):
        p = self.rng.randrange(self.partitions)
        leader = view[p]["leader"] if view and p in view else -1
        if leader not in self.cluster.node_ids:
            leader = self.rng.choice(self.cluster.node_ids)
        return p, leader

    def _follower(self, view) -> (Optional[int], int):
        p = self.rng.randrange(self.partitions)
        if view and p in view:
            others = [r for r in view[p]["replicas"] if r != view[p]["leader"]]
            if others:
                return p, self.rng.choice(others)
        return p, self.rng.choice(self.cluster.node_ids)

    def _quorum_leader(self) -> int:
        for node_id in self._reachable():
            try:
                return self.cluster.quorum_leader(node_id)
            except Exception:  # the tool or the node failed: ask another
                continue
        return self.rng.choice(self.cluster.node_ids)

    # -- node actions ------------------------------------------------------------------------------
    def _start(self, node_id: int, fault: Optional[dict] = None) -> None:
        node = self.cluster.node(node_id)
        t0 = time.monotonic()
        try:
            self._start_attempts(node, node_id)
        finally:
            if fault is not None:
                fault["start_node_ms"] = round((time.monotonic() - t0) * 1000)

    def _start_attempts(self, node, node_id: int) -> None:
        for attempt in range(1, RESTART_ATTEMPTS + 1):
            try:
                node.start()
                return
            except BrokerStartError as e:
                self.restart_failures += 1
                self.log(f"  node {node_id} did not start (attempt {attempt}): {str(e).splitlines()[0]}")
                node.kill()
                time.sleep(2)
        raise RuntimeError(f"node {node_id} did not restart after {RESTART_ATTEMPTS} attempts")

    def _down_time(self) -> float:
        return self.rng.uniform(0.5, 2.5)

    def _long_time(self) -> float:
        return self.session_s + self.rng.uniform(1.0, 2.5)

    # -- one fault ---------------------------------------------------------------------------------
    def choose(self) -> str:
        """Draw from a shuffled bag holding each kind `weight` times, refilled when empty: every
        kind comes up in proportion within each round of sum(weights) faults."""
        if not self._bag:
            self._bag = [k for k in sorted(self.kinds) for _ in range(self.kinds[k])]
            self.rng.shuffle(self._bag)
        return self._bag.pop()

    def inject(self, kind: Optional[str] = None) -> dict:
        kind = kind or self.choose()
        view = self.partition_view()
        leaders = {p: v["leader"] for p, v in (view or {}).items()}
        fault = {"n": len(self.faults) + 1, "kind": kind, "leaders_before": leaders}
        if kind == "kill-follower":
            p, node_id = self._follower(view)
        elif kind == "kill-quorum-leader":
            p, node_id = None, self._quorum_leader()
        elif kind in ("reassign", "voters"):
            p, node_id = None, None  # set by _reassign (its companion's node) / the voter changer
        else:
            p, node_id = self._random_partition_leader(view)
        if kind == "kill-leader":
            # Whether this kill also takes the metadata quorum's leader (its election then
            # comes first): the report tells the two cases apart.
            fault["quorum_leader"] = self._quorum_leader()
        fault.update(partition=p, node=node_id)
        node = self.cluster.node(node_id) if node_id is not None else None
        if kind == "heavy-restart":
            fault["burst"] = self.burst()
            time.sleep(self.rng.uniform(0.3, 1.0))
        fault["start_ms"] = now_ms()
        if kind in ("kill-leader", "kill-follower", "kill-quorum-leader", "heavy-restart"):
            node.kill()
            time.sleep(self._down_time())
            self._start(node_id, fault)
        elif kind == "pause":
            node.pause()
            self.paused.add(node_id)
            time.sleep(self._long_time())
            node.resume()
            self.paused.discard(node_id)
        elif kind == "terminate":
            t_stop = time.monotonic()
            node.stop()
            fault["stop_ms"] = round((time.monotonic() - t_stop) * 1000)
            fault["exit_code"] = node.returncode
            time.sleep(self.rng.uniform(0.0, 1.0))
            self._start(node_id, fault)
        elif kind == "isolate":
            self.net.isolate(node_id)
            time.sleep(self._long_time())
            self.net.heal()
        elif kind == "reassign":
            self._reassign(fault, view)
            node_id = fault["node"]
        elif kind == "voters":
            self.voter_changer.run(fault, self.recovery_timeout_s)
            node_id = fault["node"]
        else:
            raise ValueError(f"unknown fault kind {kind!r}")
        fault["heal_ms"] = now_ms()
        deadline = time.monotonic() + self.recovery_timeout_s
        while not self.all_led() and time.monotonic() < deadline:
            time.sleep(0.2)
        fault["end_ms"] = now_ms()
        fault["slow_recovery"] = time.monotonic() >= deadline
        self.faults.append(fault)
        where = f" (partition {p})" if p is not None else ""
        detail = "".join(f", {k.replace('_ms', '')} {fault[k]} ms" for k in ("stop_ms", "start_node_ms") if k in fault)
        if kind == "reassign":
            where = f" (partitions {fault.get('partitions')} {fault.get('replicas_before')} -> {fault.get('replicas_target')}" \
                    f", companion {fault.get('companion')})"
            detail += "".join(f", {k.replace('_ms', '')} {fault[k]} ms" for k in ("execute_ms", "move_ms", "cancel_ms")
                              if k in fault) + f", {fault.get('outcome')}"
            if "election" in fault:
                detail += f", election {fault['election']}"
        if kind == "voters":
            where = f" ({fault.get('action', '-')}{', the quorum leader' if fault.get('was_leader') else ''}" \
                    f", voters {fault.get('voters_before')} -> {fault.get('voters_while_out', '-')} -> " \
                    f"{fault.get('voters_after', '-')}, companion {fault.get('companion')}" \
                    + (f" after {fault['kill_after_ms']} ms of the {fault['kill_step']} tool" if "kill_step" in fault else "") + ")"
            detail += "".join(f", {k.replace('_ms', '')} {fault[k]} ms" for k in
                              ("remove_tool_ms", "gone_ms", "topic_ms", "add_tool_ms", "back_ms") if k in fault) \
                + "".join(f", {fault[f'{step}_attempts']} {step} attempts" for step in ("remove", "add")
                          if fault.get(f"{step}_attempts", 1) > 1) \
                + f", {fault.get('outcome')}" + (f": {fault['describe_error']}" if "describe_error" in fault else "")
        self.log(f"fault {fault['n']}: {kind} node {node_id}{where}: healed after "
                 f"{fault['heal_ms'] - fault['start_ms']} ms{detail}, all partitions led "
                 f"{fault['end_ms'] - fault['heal_ms']} ms later{' (SLOW: deadline passed)' if fault['slow_recovery'] else ''}")
        return fault

    # -- reassignment --------------------------------------------------------------------------------
    def _wait_view(self, done, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if done(self.partition_view()):
                return True
            time.sleep(0.2)
        return bool(done(self.partition_view()))

    def _reassign(self, fault: dict, view) -> None:
        """One reassign fault (reassign.py): --execute, maybe a companion kill during the move,
        completion through Metadata or --cancel at the deadline, then a PREFERRED election."""
        if view is None:
            fault["outcome"] = "skipped (no node answered Metadata)"
            return
        parts = sorted(self.rng.sample(range(self.partitions), min(self.partitions, self.rng.choice((1, 1, 2)))))
        before = {p: list(view[p]["replicas"]) for p in parts}
        target = {p: reassign.target_of(before[p], self.cluster.node_ids, self.rng) for p in parts}
        companion = self.rng.choice(COMPANIONS)
        fault.update(partition=parts[0], partitions=parts, replicas_before=before, replicas_target=target,
                     companion=companion, data_move=any(sorted(before[p]) != sorted(target[p]) for p in parts))
        for p in parts:  # until the outcome is known (a tool that timed out may have started it)
            self.unsettled[p] = (before[p], target[p])
            self.expected_replicas[p] = [sorted(before[p]), sorted(target[p])]
        ok, text, fault["execute_ms"] = self.reassigner.execute(target)
        if not ok:
            # The controller refused or the tool failed: settle_reassignments() sees which it was.
            fault.update(outcome="not started", error=reassign._first_line(text))
            return
        t_move = time.monotonic()
        if companion != "none":
            p = parts[0]
            added = [b for b in target[p] if b not in before[p]]
            if companion == "kill-target":
                victim = added[0] if added else target[p][0]
            else:
                victim = view[p]["leader"] if view[p]["leader"] in self.cluster.node_ids else before[p][0]
            fault["node"] = victim
            self.cluster.node(victim).kill()
            time.sleep(self._down_time())
            self._start(victim, fault)
        done = self._wait_view(lambda v: reassign.moved(v, target), self.recovery_timeout_s)
        fault["move_ms"] = round((time.monotonic() - t_move) * 1000)
        if done:
            fault["outcome"] = "completed"
        else:
            ok, text, fault["cancel_ms"] = self.reassigner.cancel(target)
            if not ok:
                fault["cancel_error"] = reassign._first_line(text)
            ended = self._wait_view(lambda v: reassign.reverted(v, before) or reassign.moved(v, target), 30)
            view_now = self.partition_view()
            if ended and reassign.moved(view_now, target):
                fault["outcome"] = "completed after the cancel was sent"
                done = True
            elif ended:
                fault["outcome"] = "cancelled"
                for p in parts:
                    self.unsettled.pop(p, None)
                    self.expected_replicas[p] = [sorted(before[p])]
            else:
                fault["outcome"] = "unsettled (neither moved nor reverted)"
        if done:
            for p in parts:
                self.unsettled.pop(p, None)
                self.expected_replicas[p] = [sorted(target[p])]
            self._elect_preferred(fault, target)
        fault["replicas_after"] = {p: (self.partition_view() or {}).get(p, {}).get("replicas") for p in parts}

    def _elect_preferred(self, fault: dict, target: Dict[int, List[int]]) -> None:
        """A PREFERRED election where the new first replica does not lead, once it is in the ISR
        (a companion kill may have just restarted it; 15 s at most)."""
        def ready(v):
            return v is not None and all(target[p][0] in v[p]["isr"] for p in target)
        self._wait_view(ready, 15)
        view = self.partition_view() or {}
        wanted = [p for p in target if p in view and view[p]["leader"] != target[p][0]
                  and target[p][0] in view[p]["isr"]]
        if not wanted:
            fault["election"] = "not needed" if view else "skipped (no Metadata)"
            return
        ok, text, fault["election_ms"] = self.reassigner.elect_preferred(wanted)
        fault["election"] = f"{'ok' if ok else 'failed'}: {reassign._first_line(text)}"

    def settle_reassignments(self, timeout_s: float) -> None:
        """The final heal's part for moves not known to be over: wait for each to complete or
        revert; cancel again any still in between (every node runs by now)."""
        for p, (before, target) in list(self.unsettled.items()):
            def ended(v):
                return reassign.reverted(v, {p: before}) or reassign.moved(v, {p: target})
            if not self._wait_view(ended, timeout_s):
                self.log(f"  partition {p}: move {before} -> {target} still in progress; cancelling again")
                self.reassigner.cancel({p: target})
                self._wait_view(ended, 30)
            self.unsettled.pop(p, None)

    def unexpected_replica_sets(self) -> List[dict]:
        """Moved partitions whose replica set now is none of those their moves' outcomes allow."""
        view = self.partition_view() or {}
        out = []
        for p, allowed in sorted(self.expected_replicas.items()):
            now = sorted(view[p]["replicas"]) if p in view else None
            if now not in allowed:
                out.append({"partition": p, "replicas": now, "expected_one_of": allowed})
        return out

    def heal_all(self) -> None:
        """Undo everything: reconnect, resume, start every stopped node."""
        if self.net is not None:
            self.net.heal()
        for node_id in list(self.paused):
            self.cluster.node(node_id).resume()
        self.paused.clear()
        for node in self.cluster.nodes:
            if not node.running:
                self._start(node.node_id)
        if self.unsettled:
            self.settle_reassignments(self.recovery_timeout_s)
        if self.voter_changer is not None:
            self.voter_changer.settle(self.recovery_timeout_s)
