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

import json
import os
import re
import signal
import subprocess
import threading
from typing import List, Optional

DEFAULT_SETTINGS = {
    "heartbeat.interval.ms": "1000",
    "enable.auto.commit": "true",
    "auto.commit.interval.ms": "100",
    "auto.offset.reset": "earliest",
}
_REBALANCE = re.compile(r"rebalanced \(memberid [^)]*\): (assigned|revoked): ?(.*)")


class KcatGroupMember:
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
        self.killed = False
        self._stderr: List[str] = []
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(
            self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
            start_new_session=True,
        )
        self._readers = [threading.Thread(target=self._read_out, daemon=True),
                         threading.Thread(target=self._read_err, daemon=True)]
        for t in self._readers:
            t.start()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                doc = json.loads(line)
            except ValueError:
                self._stderr.append(f"(unparsable stdout) {line}\n")
                continue
            with self._lock:
                self.records.append({"partition": doc["partition"], "offset": doc["offset"], "key": doc.get("key"),
                                     "value": doc.get("payload")})

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            match = _REBALANCE.search(line)
            with self._lock:
                if match:
                    parts = re.findall(re.escape(self.topic) + r" ?\[(\d+)\]", match.group(2))
                    self.rebalances.append((match.group(1), frozenset(int(p) for p in parts)))
                self._stderr.append(line)
                del self._stderr[:-200]

    def snapshot(self) -> List[dict]:
        with self._lock:
            return list(self.records)

    def assigned(self) -> Optional[set]:
        """The partitions of kcat's last rebalance line: a set after "assigned", None before
        any assignment or after a "revoked" (kcat unassigns everything on an eager revoke)."""
        with self._lock:
            if not self.rebalances or self.rebalances[-1][0] != "assigned":
                return None
            return set(self.rebalances[-1][1])

    def stderr_tail(self, lines: int = 30) -> str:
        with self._lock:
            return "".join(self._stderr[-lines:])

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def _join_readers(self) -> None:
        for t in self._readers:
            t.join(5)

    def kill(self) -> None:
        """SIGKILL: the member vanishes without LeaveGroup or a last commit."""
        if self.alive:
            self.killed = True
        self._signal(signal.SIGKILL)
        self.proc.wait()
        self._join_readers()

    def stop(self, timeout: float = 30) -> Optional[int]:
        """SIGTERM (kcat closes the consumer: final commit, LeaveGroup) and wait; returns kcat's
        exit code, or None if it did not exit in time and had to be killed."""
        if self.alive:
            self._signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        self._join_readers()
        return code

    def wait(self, timeout: float) -> None:
        """Wait for kcat to exit by itself (-c): it must exit 0."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} did not finish in {timeout} s\n{self.stderr_tail()}")
        self._join_readers()
        assert self.proc.returncode == 0, f"{self.name} exited {self.proc.returncode}\n{self.stderr_tail()}"

    def __repr__(self) -> str:
        return (f"KcatGroupMember({self.name}, {len(self.records)} records, assigned={self.assigned()}, "
                f"alive={self.alive})")
