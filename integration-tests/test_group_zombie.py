"""Issue 4's "a commit from an old generation is rejected", with every client, as it happens to
real applications: a member that stalls (GC pause, stopped container) with a commit pending
comes back after the group has moved on and tries to commit its old position.

The scenario, per client (each member a process: harness/members.py, harness/kcat_group.py):

1. member A (alone in the group) reads the first records of each partition and commits them
   (offset 5 per partition);
2. more records arrive; A reads some and, before it commits them, is frozen (SIGSTOP): no
   heartbeats, no commits, but its in-memory group state (member id, generation) intact. The
   drivers' `group-consume --commit-delay-ms` opens that window between printing and committing;
3. the coordinator evicts A once `session.timeout.ms` (6000, Kafka's minimum) passes; member B
   joins, takes over every partition at a new generation, reads from the committed offsets (5)
   on, reads further records produced meanwhile and commits up to the end (15 per partition);
4. A is resumed (SIGCONT) and commits its old position (<= 10) with its old member id and
   generation. The broker must reject it; accepted, it would move the committed offsets
   backwards (15 -> 10) and make B's successor re-read records.

Asserted on data: the client reports the failed commit (`{"event":"commit-failed","error":..}`
with the broker's error as that client names it), the group's committed offsets are B's (15 per
partition) after A's attempt and after A has rejoined, never A's, and B read exactly the
records after the last committed offsets. On brook, `/metrics` (`brook_requests_total` for
OffsetCommit) shows whether A's OffsetCommit actually reached the broker.

Resumed, a client's main thread usually commits before a heartbeat has told it that it was
evicted: it sends the stale commit and reports the broker's UNKNOWN_MEMBER_ID, each client in
its own words (`STALE_COMMIT` below; the error texts are the broker's answer, checked on brook
with /metrics). The Java and kafka-python clients also heartbeat from a thread of their own,
resumed at the same instant: when that thread's heartbeat is answered first (UNKNOWN_MEMBER_ID
again), the client forgets its generation and refuses the commit itself ("not part of an active
group", `LOCAL_REFUSAL`; seen in CI with kafka-python). Either way the broker told A it was
gone; the committed offsets are asserted to stay B's in both cases, and a commit that reached
the broker must have been refused by it. So that the broker's refusal is checked on every run,
whichever way that race goes, the test then sends A's stale commit itself (OffsetCommit with A's
member id and generation, harness.wire) and asserts UNKNOWN_MEMBER_ID for each partition.

kcat (`kcat -G`) has no commit of its own: librdkafka auto-commits what kcat was handed every
`auto.commit.interval.ms`. Frozen with a long interval (5 s) before its next auto-commit and
resumed after B has committed, librdkafka finds its session expired, unassigns the partitions
and commits their stored offsets on the way (join-state wait-unassign-to-complete) with its old
member id: the broker refuses (COMMITFAIL "Broker: Unknown member" on Kafka 4.4), and for two
auto-commit periods after the resume the committed offsets stay B's.

Every test also passes against Apache Kafka (BROOK_TEST_TARGET=kafka).
"""

import os
import re
import signal
import time

import pytest

from harness import paths, wire
from harness.group_scenarios import create_topic, new_group, produce
from harness.kcat_group import KcatGroupMember
from harness.members import GroupMember, committed, poll_until, stable_assignment

SESSION_MS = 6000  # Kafka's group.min.session.timeout.ms default: the fastest eviction allowed
COMMIT_DELAY_MS = 4000  # A's window between printing and committing, in which it is frozen
DEADLINE_S = 60
MEMBER_TIMEOUT_MS = 100000  # a safety net only: every member here is stopped or killed
PARTITIONS = 2
PER_PHASE = 5  # records per partition in each of the three phases
UNKNOWN_MEMBER_ID = 25

# Per client: the failed commit as the client reports it. A's member id is gone from the group
# (evicted; the group is Stable at B's generation), so Kafka answers UNKNOWN_MEMBER_ID: it checks
# the member before the generation.
STALE_COMMIT = {
    # CommitFailedException with this message is Java's answer to the broker's UNKNOWN_MEMBER_ID
    # or ILLEGAL_GENERATION; a commit it refused locally would say "not part of an active group".
    "java": r"CommitFailedException: Commit cannot be completed since the group has already rebalanced",
    "confluent": r"code=UNKNOWN_MEMBER_ID.*Commit failed: Broker: Unknown member",
    "franz": r"^UNKNOWN_MEMBER_ID",
    "kafka_python": r"CommitFailedError: .*\[Error 25\] UnknownMemberIdError",
    # kafkajs wraps the broker's error in a KafkaJSNonRetriableError; the driver adds its type.
    "kafkajs": r"not aware of this member \(UNKNOWN_MEMBER_ID\)",
}
# Per client with a heartbeat thread: the commit it refuses itself once a heartbeat answer
# (UNKNOWN_MEMBER_ID) has reset its generation (see the module's docstring).
LOCAL_REFUSAL = {
    "java": r"CommitFailedException: .*commit cannot be completed since the consumer is not part of an active group",
    "kafka_python": r"CommitFailedError: .*Offset commit cannot be completed since the consumer is not part of an "
                    r"active group",
}


def freeze(member) -> None:
    """SIGSTOP the member's whole process group (a JVM, node, not only a wrapper)."""
    os.killpg(member.proc.pid, signal.SIGSTOP)


def resume(member) -> None:
    try:
        os.killpg(member.proc.pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


def positions(records) -> dict:
    """{partition: offset after the last record read} (what a commit of them carries)."""
    out = {}
    for r in records:
        out[r["partition"]] = max(out.get(r["partition"], 0), r["offset"] + 1)
    return out


def committed_is(bootstrap, group, topic, expected):
    return lambda: committed(bootstrap, group, topic, PARTITIONS) == expected


def freeze_with_a_commit_pending(bootstrap, group, topic, a) -> tuple:
    """Phases 1-2: A reads and commits the first records, then reads later ones and is frozen
    before it commits them. Returns (A's uncommitted positions, the committed offsets)."""
    first = produce(bootstrap, topic, PARTITIONS, PER_PHASE, "first")
    poll_until(committed_is(bootstrap, group, topic, {p: PER_PHASE for p in range(PARTITIONS)}), DEADLINE_S,
               lambda: f"A committed the first records: {committed(bootstrap, group, topic, PARTITIONS)}; "
               f"{a}: {a.stderr_tail(10)}")
    assert sorted(r["value"] for r in a.snapshot()) == sorted(first)
    produce(bootstrap, topic, PARTITIONS, PER_PHASE, "second")
    poll_until(lambda: any(r["value"].startswith("second-") for r in a.snapshot()), DEADLINE_S,
               lambda: f"A reads the second records: {a}: {a.stderr_tail(10)}")
    freeze(a)
    at_freeze = committed(bootstrap, group, topic, PARTITIONS)
    pending = {p: pos for p, pos in positions(a.snapshot()).items() if pos > at_freeze.get(p, -1)}
    assert at_freeze == {p: PER_PHASE for p in range(PARTITIONS)}, f"A committed before it was frozen: {at_freeze}"
    assert pending, f"A holds no uncommitted position: {a.snapshot()}"
    return pending, at_freeze


def take_over(bootstrap, group, topic, b, a_generation) -> list:
    """Phase 3: B, alone after A's eviction, reads from the committed offsets on, reads the
    records produced meanwhile and commits up to the end. Returns the third records."""
    owned = poll_until(lambda: stable_assignment(bootstrap, group, 1), DEADLINE_S,
                       lambda: f"A evicted, B owns everything: {b}: {b.stderr_tail(10)}")
    assert sorted(p for ps in owned.values() for p in ps) == list(range(PARTITIONS))
    third = produce(bootstrap, topic, PARTITIONS, PER_PHASE, "third")
    end = {p: 3 * PER_PHASE for p in range(PARTITIONS)}
    poll_until(committed_is(bootstrap, group, topic, end), DEADLINE_S,
               lambda: f"B committed up to the end: {committed(bootstrap, group, topic, PARTITIONS)}; {b}: "
               f"{b.stderr_tail(10)}")
    generations = [e["generation"] for e in getattr(b, "events", []) if e.get("event") == "assigned"]
    if a_generation is not None and generations and generations[-1] is not None:
        assert generations[-1] > a_generation, f"B's generation {generations} after A's {a_generation}"
    return third


def assert_b_read_from_the_committed_offsets(b, at_freeze) -> None:
    for p in range(PARTITIONS):
        offsets = [r["offset"] for r in b.snapshot() if r["partition"] == p]
        assert offsets == list(range(at_freeze[p], 3 * PER_PHASE)), f"B on partition {p}: {offsets}"
        values = [r["value"] for r in b.snapshot() if r["partition"] == p]
        assert values == [f"second-{p}-{i}" for i in range(PER_PHASE)] + [f"third-{p}-{i}" for i in range(PER_PHASE)]


@pytest.mark.parametrize("client", list(STALE_COMMIT))
def test_a_frozen_members_commit_from_its_old_generation_is_rejected_and_the_offsets_stay_the_new_owners(
    broker, topic, client
):
    create_topic(broker.bootstrap, topic, PARTITIONS)
    group = new_group()
    bootstrap = broker.bootstrap
    args = ["--events", "--session-timeout-ms", SESSION_MS, "--timeout-ms", MEMBER_TIMEOUT_MS]
    a = GroupMember(client, bootstrap, group, topic, *args, "--commit-delay-ms", COMMIT_DELAY_MS, name="a")
    members = [a]
    try:
        (a_member_id,) = poll_until(lambda: stable_assignment(bootstrap, group, 1), DEADLINE_S,
                                    lambda: f"A joins: {a.stderr_tail(10)}")
        pending, at_freeze = freeze_with_a_commit_pending(bootstrap, group, topic, a)
        a_generations = [e["generation"] for e in a.events if e.get("event") == "assigned"]
        b = GroupMember(client, bootstrap, group, topic, *args, name="b")
        members.append(b)
        take_over(bootstrap, group, topic, b, a_generations[-1] if a_generations else None)
        end = {p: 3 * PER_PHASE for p in range(PARTITIONS)}

        commits_before = broker.requests_served("OffsetCommit")
        resume(a)
        failures = poll_until(lambda: [e for e in a.events if e.get("event") == "commit-failed"], DEADLINE_S,
                              lambda: f"A reports its failed commit: {a.events}; {a.stderr_tail(20)}")
        commits_sent = broker.requests_served("OffsetCommit") - commits_before
        after_attempt = committed(bootstrap, group, topic, PARTITIONS)
        # The same stale commit sent by us: whichever way the client's own attempt went (it may
        # refuse locally, LOCAL_REFUSAL), the broker's refusal is asserted every run. A was the
        # group's first member, so its generation is 1 where the client does not expose it.
        replayed = wire.offset_commit(bootstrap, group, a_generations[-1] if a_generations and a_generations[-1]
                                      is not None else 1, a_member_id, topic, pending)
        after_replay = committed(bootstrap, group, topic, PARTITIONS)
        # A carries on as a new member: once the group is Stable with both, nothing of A's
        # old state may have reached the offsets either.
        poll_until(lambda: stable_assignment(bootstrap, group, 2), DEADLINE_S,
                   lambda: f"A rejoins: {a.stderr_tail(10)}; {b.stderr_tail(5)}")
        after_rejoin = committed(bootstrap, group, topic, PARTITIONS)
        for m in members:
            m.stop()
    finally:
        resume(a)
        for m in members:
            m.kill()
    error_pattern = STALE_COMMIT[client]
    print(f"{client}: A's stale commit {pending} -> {failures[0]['error']!r}; OffsetCommit requests "
          f"meanwhile (brook /metrics): {commits_sent:.0f}")
    assert all(pending[p] < end[p] for p in pending), "accepted, A's commit would move the offsets back"
    assert after_attempt == end, f"committed after A's stale commit: {after_attempt}, B's were {end}"
    assert replayed == {p: UNKNOWN_MEMBER_ID for p in pending}, f"A's commit replayed on the wire: {replayed}"
    assert after_replay == end, f"committed after the replayed stale commit: {after_replay}"
    assert after_rejoin == end, f"committed once A rejoined: {after_rejoin}"
    # A zombie may try more than one stale commit (kafkajs handles the batch of its other
    # partition after the first refusal); each must be refused with the broker's error, or
    # by the client itself after a heartbeat was refused (LOCAL_REFUSAL).
    local_pattern = LOCAL_REFUSAL.get(client)
    by_broker = [f for f in failures if re.search(error_pattern, f["error"])]
    by_client = [f for f in failures if local_pattern and re.search(local_pattern, f["error"])]
    assert failures and len(by_broker) + len(by_client) == len(failures), failures
    if paths.target() == "brook" and by_broker:
        assert commits_sent >= 1, "A's OffsetCommit reached the broker (and was rejected)"
    assert_b_read_from_the_committed_offsets(b, at_freeze)


KCAT_COMMIT_INTERVAL_MS = 5000  # A's auto-commit period: it is frozen well before its next one
KCAT_COMMIT_FAILED = re.compile(r"COMMITFAIL.*failed for \d+/\d+ partition\(s\).*: Broker: Unknown member")


def test_a_frozen_kcat_member_does_not_move_the_new_owners_committed_offsets_back(broker, topic):
    create_topic(broker.bootstrap, topic, PARTITIONS)
    group = new_group()
    bootstrap = broker.bootstrap
    settings = {"session.timeout.ms": str(SESSION_MS)}
    a = KcatGroupMember(bootstrap, group, topic, {**settings, "auto.commit.interval.ms": KCAT_COMMIT_INTERVAL_MS},
                        name="a")
    members = [a]
    try:
        poll_until(lambda: stable_assignment(bootstrap, group, 1), DEADLINE_S, lambda: f"A joins: {a.stderr_tail(10)}")
        pending, at_freeze = freeze_with_a_commit_pending(bootstrap, group, topic, a)
        b = KcatGroupMember(bootstrap, group, topic, settings, name="b")
        members.append(b)
        take_over(bootstrap, group, topic, b, None)
        end = {p: 3 * PER_PHASE for p in range(PARTITIONS)}

        commits_before = broker.requests_served("OffsetCommit")
        resume(a)
        resumed_at = time.monotonic()
        # librdkafka commits the stored offsets when it unassigns the partitions it lost: the
        # broker refuses them (librdkafka logs COMMITFAIL with the broker's UNKNOWN_MEMBER_ID).
        failure = poll_until(lambda: KCAT_COMMIT_FAILED.search(a.stderr_tail(50)), DEADLINE_S,
                             lambda: f"A reports its failed commit: {a.stderr_tail(20)}")
        commits_sent = broker.requests_served("OffsetCommit") - commits_before  # before B commits on a rebalance
        poll_until(lambda: stable_assignment(bootstrap, group, 2), DEADLINE_S,
                   lambda: f"A rejoins: {a.stderr_tail(10)}; {b.stderr_tail(5)}")
        # A's stored offsets would go out with its next auto-commit: watch the committed offsets
        # for longer than that period after the resume (a bounded observation, not a sleep).
        seen = []
        while time.monotonic() < resumed_at + 2 * KCAT_COMMIT_INTERVAL_MS / 1000:
            now = committed(bootstrap, group, topic, PARTITIONS)
            if now:  # {} only when the admin request itself failed
                seen.append(now)
            time.sleep(0.2)
        for m in members:
            m.stop()
    finally:
        resume(a)
        for m in members:
            m.kill()
    print(f"kcat: A's uncommitted position {pending}; OffsetCommit requests after its resume (brook /metrics): "
          f"{commits_sent:.0f}; A's failed commit: {failure.group(0)}")
    assert all(pending[p] < end[p] for p in pending)
    if paths.target() == "brook":
        assert commits_sent >= 1, "A's OffsetCommit reached the broker (and was rejected)"
    assert seen and all(c == end for c in seen), f"committed offsets after A's resume: {seen}"
    assert_b_read_from_the_committed_offsets(b, at_freeze)
