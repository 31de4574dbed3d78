"""Consumer-group members as driver processes whose output is read while they run.

`GroupMember` starts `<driver> group-consume ...` (integration-tests/README.md) and collects
its JSON lines as they arrive, so a scenario can wait for a condition ("this member has read
these records") with a deadline, then stop the member gracefully (SIGTERM: the driver closes
and sends LeaveGroup), or kill it (SIGKILL: no LeaveGroup, no commit of anything it had not
committed yet; the coordinator must evict it when its session times out).

Also the admin-side views the group scenarios poll: the group's members and assignments
(DescribeGroups) and its committed offsets (OffsetFetch), via confluent-kafka's AdminClient.

Invariant: `records` holds only record lines, in the order printed; `events` the driver's
`{"event": ...}` lines; `final` the closing `{"assigned": ...}` line once it has been printed.
"""

import json
import os
import signal
import subprocess
import threading
import time
from typing import Callable, List, Optional

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from .drivers import ALIASES, DRIVER_ARGV
from .paths import TESTS_DIR

POLL_S = 0.2


class MemberProcess:
    """A group member's process (its own process group) and the output threads reading it;
    subclasses start it with `_start` and parse stdout in `_read_out`."""

    name: str
    records: List[dict]

    def _start(self, argv: List[str], *, sigterm_blocked: bool = False, **popen) -> None:
        """`sigterm_blocked`: start the process with SIGTERM blocked (the mask is inherited
        through exec) for a driver that unblocks it once its handler is installed, so a stop
        that comes while the interpreter is still starting is delivered then, not lost to the
        default action."""
        self.killed = False
        self._stderr: List[str] = []
        self._lock = threading.Lock()
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM}) if sigterm_blocked else None
        try:
            self.proc = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                start_new_session=True, **popen,
            )
        finally:
            if previous is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, previous)
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
                self._on_stdout(doc, line)

    def _on_stdout(self, doc: dict, line: str) -> None:
        """One JSON line of stdout (called under the lock)."""
        raise NotImplementedError

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._lock:
                self._on_stderr(line)
                self._stderr.append(line)
                del self._stderr[:-200]

    def _on_stderr(self, line: str) -> None:
        """A stderr line, before it is kept for `stderr_tail` (called under the lock)."""

    def snapshot(self) -> List[dict]:
        with self._lock:
            return list(self.records)

    def stderr_tail(self, lines: int = 30) -> str:
        with self._lock:
            return "".join(self._stderr[-lines:])

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)  # the whole group: a JVM or node, not only a wrapper
        except ProcessLookupError:
            pass

    def _join_readers(self) -> None:
        for t in self._readers:
            t.join(5)

    def _mark_killed(self) -> None:
        self.killed = True

    def kill(self) -> None:
        """SIGKILL: the member vanishes without LeaveGroup or a last commit."""
        self._mark_killed()
        self._signal(signal.SIGKILL)
        self.proc.wait()
        self._join_readers()

    def _terminate(self, timeout: float) -> Optional[int]:
        """SIGTERM (graceful close, LeaveGroup) and wait: the exit code, or None if the member
        had to be killed."""
        if self.alive:
            self._signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        self._join_readers()
        return code

    def _wait_exit(self, timeout: float) -> None:
        """Wait for the member to end by itself; it must exit 0."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} did not finish in {timeout} s\n{self.stderr_tail()}")
        self._join_readers()
        assert self.proc.returncode == 0, f"{self.name} exited {self.proc.returncode}\n{self.stderr_tail()}"


class GroupMember(MemberProcess):
    """One group member in its own process (a driver's `group-consume`)."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: Optional[str], *extra, name: str = "",
                 env: Optional[dict] = None):
        """`env`: extra environment variables for the driver process (e.g. JAVA_TOOL_OPTIONS).
        `topic` None: the subscription is in `extra` (the Java driver's --pattern or
        --subscription-pattern)."""
        client = ALIASES.get(client, client)
        self.client, self.name = client, name or client
        subscription = ["--topic", topic] if topic is not None else []
        self.argv = [*DRIVER_ARGV[client], "group-consume", "--bootstrap", bootstrap, "--group", group,
                     *subscription, *(str(a) for a in extra)]
        self.records: List[dict] = []
        self.events: List[dict] = []
        self.final: Optional[dict] = None
        # The Python drivers unblock SIGTERM in harness/driver_cli.py, after installing the handler.
        self._start(self.argv, cwd=TESTS_DIR, env={**os.environ, **env} if env else None,
                    sigterm_blocked=client in ("confluent", "kafka_python"))

    def _on_stdout(self, doc: dict, line: str) -> None:
        if "event" in doc:
            self.events.append(doc)
        elif "assigned" in doc:
            self.final = doc
        elif "partition" in doc:
            self.records.append(doc)
        else:
            self._stderr.append(f"(unexpected stdout) {line}\n")

    def stop(self, timeout: float = 60) -> Optional[dict]:
        """SIGTERM (graceful close, LeaveGroup) and wait; returns the final line (None if the
        member had to be killed or never printed one)."""
        self._terminate(timeout)
        return self.final

    def wait(self, timeout: float) -> Optional[dict]:
        """Wait for the member to end by itself (--count, --idle-ms, --timeout-ms)."""
        self._wait_exit(timeout)
        return self.final

    def __repr__(self) -> str:
        return f"GroupMember({self.name}, {len(self.records)} records, alive={self.alive})"


def poll_until(condition: Callable[[], object], timeout: float, what: Callable[[], str]):
    """Poll `condition` until it returns something truthy (returned) or raise with `what()`."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what()}")
        time.sleep(POLL_S)


def describe(bootstrap: str, group: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(timeout=30)


def stable_assignment(bootstrap: str, group: str, members: int) -> Optional[dict]:
    """{member id: set of partitions} if the group is Stable with exactly `members` members,
    each owning at least one partition; else None (also while the coordinator is busy)."""
    try:
        d = describe(bootstrap, group)
    except (KafkaException, TimeoutError):  # coordinator loading/moving; a stalled machine
        return None
    owned = {m.member_id: {tp.partition for tp in m.assignment.topic_partitions} for m in d.members}
    if d.state == ConsumerGroupState.STABLE and len(owned) == members and all(owned.values()):
        return owned
    return None


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict:
    """{partition: committed offset} for the group (-1001 where nothing is committed)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    try:
        result = admin.list_consumer_group_offsets([request])[group].result(timeout=30)
    except (KafkaException, TimeoutError):
        return {}
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def assert_disjoint_and_complete(owned: dict, partitions: int) -> None:
    """Every partition owned by exactly one member."""
    flat = sorted(p for ps in owned.values() for p in ps)
    assert flat == list(range(partitions)), f"assignment not disjoint and complete: {owned}"
