"""Partition reassignment as a nemesis fault (issue #27): Kafka's own `kafka-reassign-partitions`
moves the replicas of one or two partitions of the workload's topic while it runs.

The target keeps the replication factor:
  * the cluster has brokers outside the partition's replica set: one replica (any position, the
    leader's included) is swapped for such a broker, so the move copies the partition to it and
    deletes the old copy (a data move);
  * every broker already holds the partition (3 nodes, RF 3): the list is rotated, so another
    broker becomes the preferred leader (a metadata-only move).
Either way, once the move completed and the new first replica is not leading, a PREFERRED
`kafka-leader-election` moves leadership to it, as an operator finishes a rebalance.

A companion fault may strike while the move is in progress (one fault at a time is the
nemesis's rule; this one is a fault *during* another): kill -9 of a broker the move targets
(the added one, or the new preferred leader) or of the partition's current leader, restarted
after 0.5-2.5 s. A move that cannot complete by the deadline (e.g. its target stayed down) is
cancelled with `--cancel`, and the cancel confirmed by the replicas returning to the original
set; a move whose cancel could not be confirmed stays "unsettled": `settle()` (the run's final
heal) waits for it to end either way, and the expected final replica set of its partition is
then either of the two.

The tool is a JVM (2-4 s per call on a shared machine): one `--execute`, completion polled
through Metadata (the replica list equals the target: the controller drops the removed replicas
only when every target replica is in the ISR), at most one `--cancel` and one election per fault.
A fault's move_ms runs from --execute's exit to the Metadata showing the target; with a
companion kill the polling starts only after the restart, so it is an upper bound there. The
tool's own run (execute_ms, a JVM) often covers a small partition's whole copy: a companion may
then strike just after the move rather than during it.

The tool is pointed only at nodes that run and are reachable (a paused node would hang Kafka's
admin client, which routes controller calls to any broker).
"""

import json
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

from harness import kafka_cli

REASSIGN_TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
ELECTION_TOOL = "org.apache.kafka.tools.LeaderElectionCommand"
TOOL_TIMEOUT_S = 90


def plan_of(topic: str, replicas: Dict[int, List[int]]) -> dict:
    return {"version": 1, "partitions": [{"topic": topic, "partition": p, "replicas": list(r)}
                                         for p, r in sorted(replicas.items())]}


def target_of(replicas: List[int], brokers: List[int], rng) -> List[int]:
    """A new replica list of the same length: one replica swapped for a broker outside the set
    when there is one, else the list rotated (another preferred leader)."""
    spare = [b for b in brokers if b not in replicas]
    if spare:
        out = list(replicas)
        out[rng.randrange(len(out))] = rng.choice(spare)
        return out
    if len(replicas) < 2:
        return list(replicas)
    k = rng.randrange(1, len(replicas))
    return replicas[k:] + replicas[:k]


def _first_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


class Reassigner:
    """Runs the tools for the nemesis; `bootstrap()` is given by it (reachable nodes only)."""

    def __init__(self, topic: str, bootstrap: Callable[[], str], log: Callable[[str], None]):
        self.topic, self.bootstrap, self.log = topic, bootstrap, log
        self.dir = Path(tempfile.mkdtemp(prefix="brook-chaos-reassign-"))
        self._n = 0

    def _file(self, doc: dict) -> Path:
        self._n += 1
        path = self.dir / f"{self._n}.json"
        path.write_text(json.dumps(doc))
        return path

    def _tool(self, main_class: str, *args) -> (bool, str, int):
        """(exit 0, its output, ms); a timeout or a failure to launch is a failure, not a raise."""
        t0 = time.monotonic()
        try:
            proc = kafka_cli.run(main_class, "--bootstrap-server", self.bootstrap(), *args,
                                 timeout=TOOL_TIMEOUT_S, check=False)
            ok, text = proc.returncode == 0, proc.stdout + proc.stderr
        except kafka_cli.CliError as e:
            ok, text = False, e.stdout + e.stderr
        return ok, text, round((time.monotonic() - t0) * 1000)

    def execute(self, target: Dict[int, List[int]]) -> (bool, str, int):
        ok, text, ms = self._tool(REASSIGN_TOOL, "--execute", "--reassignment-json-file",
                                  self._file(plan_of(self.topic, target)))
        return ok and "Successfully started partition reassignment" in text, text, ms

    def cancel(self, target: Dict[int, List[int]]) -> (bool, str, int):
        ok, text, ms = self._tool(REASSIGN_TOOL, "--cancel", "--reassignment-json-file",
                                  self._file(plan_of(self.topic, target)))
        # "None of the specified partition reassignments are active": it completed meanwhile.
        return ok or "None of the specified partition reassignments are active" in text, text, ms

    def elect_preferred(self, partitions: List[int]) -> (bool, str, int):
        doc = {"partitions": [{"topic": self.topic, "partition": p} for p in partitions]}
        return self._tool(ELECTION_TOOL, "--election-type", "PREFERRED", "--path-to-json-file", self._file(doc))

    def in_progress(self) -> Optional[str]:
        """`--list`'s lines for this topic (None if the tool failed)."""
        ok, text, _ = self._tool(REASSIGN_TOOL, "--list")
        if not ok:
            return None
        return "\n".join(ln for ln in text.splitlines() if ln.startswith(f"{self.topic}-"))


def moved(view: Optional[dict], target: Dict[int, List[int]]) -> bool:
    """Every partition's replica list is the target, in its order (Metadata lists the adding and
    removing replicas too while a move is in progress; the controller writes the target list as
    given once every target replica is in the ISR)."""
    return view is not None and all(p in view and list(view[p]["replicas"]) == list(r) for p, r in target.items())


def reverted(view: Optional[dict], before: Dict[int, List[int]]) -> bool:
    """Every partition is back on its original replica set (a cancelled move)."""
    return view is not None and all(p in view and sorted(view[p]["replicas"]) == sorted(r)
                                    for p, r in before.items())


__all__ = ["Reassigner", "plan_of", "target_of", "moved", "reverted", "_first_line"]
