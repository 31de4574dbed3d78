"""A transactional consume-transform-produce group as driver processes (test_cluster_txn_group.py).

`TxnCopier` is one group member: `<driver> txn-copy` (integration-tests/README.md) copying its
assigned partitions of an input topic to an output topic, one transaction per poll that also
commits the consumed offsets, under its own transactional id. It runs until stopped (SIGTERM:
it ends the transaction in progress and leaves the group) and its JSON lines are collected as
they arrive: `txns` (`{"txn","records","committed","want_commit","partitions"}`), `events`
(`assigned` / `revoked` / `lost`, with --events) and `final` (`{"copied","transactions","aborted"}`).

`InputStream` is franz-go's `produce-stream --keyed` (idempotent, acks=all): record i is
("K-<i>", "<prefix>-<i>") on partition i % N at a steady rate, each acknowledgement a line, so a
scenario keeps the copiers busy (transactions always open) while the group changes.

Invariant: a copier's `committed_records()` counts only records of transactions it reported
committed.
"""

import os
import re
from typing import Dict, List, Optional, Tuple

from .drivers import DRIVER_ARGV
from .members import MemberProcess
from .paths import TESTS_DIR

FOREVER = 2_000_000_000
# franz-go log lines worth showing: transaction ends, rebalances, retried produces, errors.
NOTABLE = re.compile(r"retrying@|FENCED|[A-Z_]{8,}: |ending transaction|end transaction response|on_revoke|on_lost|"
                     r"assigning partitions|leaving group|franz-driver")


class TxnCopier(MemberProcess):
    """One `txn-copy` group member in its own process, run until `stop()`."""

    def __init__(self, client: str, bootstrap: str, group: str, source: str, sink: str, transactional_id: str,
                 *extra, name: str = ""):
        self.client, self.transactional_id = client, transactional_id
        self.name = name or transactional_id
        self.argv = [*DRIVER_ARGV[client], "txn-copy", "--bootstrap", bootstrap, "--group", group, "--topic", source,
                     "--output-topic", sink, "--transactional-id", transactional_id, "--count", str(FOREVER),
                     "--timeout-ms", str(FOREVER), *(str(a) for a in extra)]
        self.records: List[dict] = []  # the transaction lines (MemberProcess.snapshot)
        self.events: List[dict] = []
        self.final: Optional[dict] = None
        self.lines: List[dict] = []  # every stdout line, in order (transactions and events interleaved)
        # franz-go's own log (debug, time-stamped) on stderr; its transaction, rebalance and
        # error lines are kept in `notable` for a failing scenario to show.
        self.notable: List[str] = []
        self._start(self.argv, cwd=TESTS_DIR, env={**os.environ, "BROOK_DRIVER_LOG": "debug"})

    def _on_stderr(self, line: str) -> None:
        if NOTABLE.search(line):
            self.notable.append(line.rstrip()[:400])
            del self.notable[:-5000]

    def notable_tail(self, lines: int = 15) -> str:
        with self._lock:
            return "\n".join(self.notable[-lines:])

    @property
    def txns(self) -> List[dict]:
        return self.snapshot()

    def _on_stdout(self, doc: dict, line: str) -> None:
        self.lines.append(doc)
        if "event" in doc:
            self.events.append(doc)
        elif "txn" in doc:
            self.records.append(doc)
        elif "copied" in doc:
            self.final = doc
        else:
            self._stderr.append(f"(unexpected stdout) {line}\n")

    def committed_txns(self) -> int:
        return sum(1 for t in self.txns if t["committed"])

    def committed_records(self) -> int:
        return sum(t["records"] for t in self.txns if t["committed"])

    def rebalance_aborts(self) -> List[dict]:
        """Transactions the member wanted to commit but its session aborted: a rebalance
        revoked partitions while they were open."""
        return [t for t in self.txns if t["want_commit"] and not t["committed"]]

    def stop(self, timeout: float = 60) -> Optional[int]:
        """SIGTERM (the open transaction is ended, then LeaveGroup) and wait: the exit code,
        or None if the member had to be killed."""
        return self._terminate(timeout)

    def failure(self) -> Optional[str]:
        """Why the member ended by itself (it runs until stopped), or None while it runs."""
        if self.alive:
            return None
        return f"{self.name} exited {self.proc.returncode}:\n{self.stderr_tail()}"

    def __repr__(self) -> str:
        txns = self.txns
        return (f"TxnCopier({self.name}: {self.committed_txns()} committed txns of {len(txns)}, "
                f"{self.committed_records()} records, last {txns[-1:]}, events {self.events[-2:]}, "
                f"alive={self.alive})")


class InputStream(MemberProcess):
    """franz-go's `produce-stream --keyed` at `rate` records/s until `stop()`."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, prefix: str, rate: float):
        self.name = f"produce-stream {prefix}"
        argv = [*DRIVER_ARGV["franz"], "produce-stream", "--bootstrap", bootstrap, "--topic", topic,
                "--partitions", str(partitions), "--prefix", prefix, "--rate", str(rate), "--acks", "all",
                "--idempotent", "--keyed"]
        self.records: List[dict] = []
        self.done: Optional[dict] = None
        self._start(argv, cwd=TESTS_DIR)

    def _on_stdout(self, doc: dict, line: str) -> None:
        if doc.get("done"):
            self.done = doc
        else:
            self.records.append(doc)

    def acked(self) -> int:
        return sum(1 for r in self.snapshot() if r["ok"])

    def stop(self, timeout: float = 60) -> Optional[int]:
        return self._terminate(timeout)

    def by_partition(self) -> Dict[int, List[Tuple[int, str, str]]]:
        """{partition: [(offset, key, value)]} of the acknowledged records, in offset order."""
        out: Dict[int, List[Tuple[int, str, str]]] = {}
        for r in sorted((r for r in self.snapshot() if r["ok"]), key=lambda r: (r["partition"], r["offset"])):
            out.setdefault(r["partition"], []).append((r["offset"], r["key"], r["value"]))
        return out
