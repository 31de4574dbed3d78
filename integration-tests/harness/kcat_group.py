"""`kcat -G` group members (librdkafka 2.0.2's balanced consumer as the kcat CLI), with the
shape of harness/members.py's `GroupMember`, so the group scenarios can drive kcat the same way.

kcat has no driver-protocol `group-consume` (its driver lacks it, see README.md): a member is
`kcat -b B -G GROUP -J -u [-c N] -X ... TOPIC` in its own process. Its stdout (`-J`: one JSON
envelope per record) is read while it runs and normalised to the driver protocol's record
lines `{"partition","offset","key","value"}`; its stderr carries the rebalance lines kcat logs
("% Group G rebalanced (memberid M): assigned: t [0], t [1]" / "... revoked: ..."), from which
`assigned()` reads its current assignment.

Offsets: kcat commits nothing itself; librdkafka stores the offset of each record it hands to
kcat (enable.auto.offset.store) and commits the stored offsets every `auto.commit.interval.ms`
(100 ms here, so a scenario can wait for "committed up to the end" before killing a member),
on a revoke and on close. SIGTERM makes kcat close the consumer (final commit, LeaveGroup);
SIGKILL leaves the group without LeaveGroup, so the coordinator must evict it when its session
times out.

Invariant: `records` holds the record lines in the order kcat printed them.
"""

import re
from typing import List, Optional

from .members import MemberProcess

DEFAULT_SETTINGS = {
    "heartbeat.interval.ms": "1000",
    "enable.auto.commit": "true",
    "auto.commit.interval.ms": "100",
    "auto.offset.reset": "earliest",
}
_REBALANCE = re.compile(r"rebalanced \(memberid [^)]*\): (assigned|revoked): ?(.*)")


class KcatGroupMember(MemberProcess):
    """One `kcat -G` member. `settings`: librdkafka properties (-X) over DEFAULT_SETTINGS;
    `count`: exit after that many records (kcat's -c; the consumer closes, committing them)."""

    def __init__(self, bootstrap: str, group: str, topic: str, settings: Optional[dict] = None,
                 count: Optional[int] = None, name: str = "kcat"):
        self.name, self.topic = name, topic
        merged = {**DEFAULT_SETTINGS, **(settings or {})}
        self.argv = ["kcat", "-b", bootstrap, "-G", group, "-J", "-u"]
        for key, value in merged.items():
            self.argv += ["-X", f"{key}={value}"]
        if count is not None:
            self.argv += ["-c", str(count)]
        self.argv.append(topic)
        self.records: List[dict] = []
        self.rebalances: List[tuple] = []  # ("assigned" | "revoked", frozenset of partitions)
        self._start(self.argv)

    def _on_stdout(self, doc: dict, line: str) -> None:
        self.records.append({"partition": doc["partition"], "offset": doc["offset"], "key": doc.get("key"),
                             "value": doc.get("payload")})

    def _on_stderr(self, line: str) -> None:
        match = _REBALANCE.search(line)
        if match:
            parts = re.findall(re.escape(self.topic) + r" ?\[(\d+)\]", match.group(2))
            self.rebalances.append((match.group(1), frozenset(int(p) for p in parts)))

    def assigned(self) -> Optional[set]:
        """The partitions of kcat's last rebalance line: a set after "assigned", None before
        any assignment or after a "revoked" (kcat unassigns everything on an eager revoke)."""
        with self._lock:
            if not self.rebalances or self.rebalances[-1][0] != "assigned":
                return None
            return set(self.rebalances[-1][1])

    def _mark_killed(self) -> None:
        if self.alive:
            self.killed = True

    def stop(self, timeout: float = 30) -> Optional[int]:
        """SIGTERM (kcat closes the consumer: final commit, LeaveGroup) and wait; returns kcat's
        exit code, or None if it did not exit in time and had to be killed."""
        return self._terminate(timeout)

    def wait(self, timeout: float) -> None:
        """Wait for kcat to exit by itself (-c): it must exit 0."""
        self._wait_exit(timeout)

    def __repr__(self) -> str:
        return (f"KcatGroupMember({self.name}, {len(self.records)} records, assigned={self.assigned()}, "
                f"alive={self.alive})")
