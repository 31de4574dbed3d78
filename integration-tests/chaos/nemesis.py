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
"""

import random
import time
from typing import Callable, Dict, List, Optional

from harness import wire
from harness.broker import BrokerStartError

from .workload import now_ms

KINDS = {"kill-leader": 3, "kill-follower": 2, "kill-quorum-leader": 2, "pause": 1, "terminate": 2,
         "heavy-restart": 1, "isolate": 1}
RESTART_ATTEMPTS = 3


class Nemesis:
    def __init__(self, cluster, topic: str, partitions: int, rng: random.Random, net=None,
                 burst: Optional[Callable[[], object]] = None, session_s: float = 6.0,
                 recovery_timeout_s: float = 60.0, kinds: Optional[Dict[str, int]] = None,
                 log: Callable[[str], None] = print):
        self.cluster, self.topic, self.partitions = cluster, topic, partitions
        self.rng, self.net, self.burst, self.session_s = rng, net, burst, session_s
        self.recovery_timeout_s = recovery_timeout_s
        self.kinds = dict(kinds or KINDS)
        if net is None or not getattr(net, "ready", False):
            self.kinds.pop("isolate", None)
        if burst is None:
            self.kinds.pop("heavy-restart", None)
        self.log = log
        self.faults: List[dict] = []
        self.paused: set = set()
        self.restart_failures = 0
        self._bag: List[str] = []

    # -- views -------------------------------------------------------------------------------------
    def _reachable(self) -> List[int]:
        ids = [i for i in self.cluster.running_ids() if i not in self.paused
               and (self.net is None or self.net.isolated != i)]
        self.rng.shuffle(ids)
        return ids

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
        else:
            p, node_id = self._random_partition_leader(view)
        if kind == "kill-leader":
            # Whether this kill also takes the metadata quorum's leader (its election then
            # comes first): the report tells the two cases apart.
            fault["quorum_leader"] = self._quorum_leader()
        fault.update(partition=p, node=node_id)
        node = self.cluster.node(node_id)
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
        self.log(f"fault {fault['n']}: {kind} node {node_id}{where}: healed after "
                 f"{fault['heal_ms'] - fault['start_ms']} ms{detail}, all partitions led "
                 f"{fault['end_ms'] - fault['heal_ms']} ms later{' (SLOW: deadline passed)' if fault['slow_recovery'] else ''}")
        return fault

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
