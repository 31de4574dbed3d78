"""Transactions (issue #12) with real clients: what an application sees of commits, aborts,
fencing, timeouts and transactional offset commits.

One broker per module (`txn_broker`), shared by its tests, each test on its own topics, group
and transactional ids. It runs with `transaction.abort.timed.out.transaction.cleanup.interval.ms`
= 1000 (the coordinator's sweep for expired transactions; Kafka's default 10 s) so that a
timed-out transaction is aborted within seconds, and `transaction.max.timeout.ms` = 120000 so
that the limit a producer's `transaction.timeout.ms` is checked against is the configured one.

The Java 4.4 scenarios run in the module's `txn-shell` JVM (harness/txn_shell.py): named
producers and consumers driven step by step, every client error an answer asserted on.
- commit/abort: three transactions (commit, abort, commit) over 3 partitions with keys, values
  and headers. read_committed reads exactly the committed records, in partition order, at the
  offsets their sends returned; read_uncommitted reads all of them; while a transaction is open
  the read_committed end offset (the last stable offset) stops at its first record while the
  read_uncommitted one (the high watermark) is past its last, and once it has ended both agree;
  every transaction's end takes one offset per partition (the marker), so the next transaction
  starts 2 after the previous one's last record.
- fencing: a second producer with the same transactional.id (InitProducerId) fences the first:
  its next send/commit fails with InvalidProducerEpochException (the partition's answer to the
  old epoch, what Kafka 4.4 gives) or ProducerFencedException (the coordinator's), and its open
  transaction is aborted: never visible to read_committed, the LSO back at the high watermark;
  the new producer's transaction starts after the abort marker and commits normally.
- timeout: a transaction left open past its `transaction.timeout.ms` (3000) is aborted by the
  coordinator (the LSO reaches the high watermark, polled with a deadline), its records never
  become visible, and the producer's late commit is fenced (ProducerFencedException under
  Transactions V1, InvalidTxnStateException under V2); a timeout above
  `transaction.max.timeout.ms` is refused by initTransactions (INVALID_TRANSACTION_TIMEOUT).
- consume-transform-produce with `sendOffsetsToTransaction(offsets, groupMetadata)`: the group's
  committed offsets stay unchanged while the transaction is open and after it aborts, and equal
  the consumer's positions once the retried transaction commits; the output holds each
  transformed record once.
Kafka's own `TransactionalMessageCopier` (kafka-tools 4.4, as Kafka's system tests run it) copies
10,000 records from 2 partitions with random aborts in group mode: read_committed output equals
the input partition by partition, the group's offsets are at the input's end, and aborted copies
are in the log. The last test runs it again (4,000 records) and kills the broker (SIGKILL) once
1,500 are committed: restarted on its data, the copy still equals the input.
confluent-kafka (librdkafka), franz-go and kafkajs each produce three transactions (commit,
abort, commit) over 3 partitions with their driver's `txn-produce`: the markers take offsets, the
client's own read_committed consumer and the Java one read exactly the committed records, its
read_uncommitted consumer all of them. confluent-kafka, franz-go (GroupTransactSession) and
kafkajs (whose sendOffsets sends TxnOffsetCommit with the group id only, the pre-KIP-447 form) run
their own consume-transform-produce loop (`txn-copy`, every third transaction aborted) with the
same exactness check as the copier. Every other client's consumer (`consume --isolation`:
confluent, kafka-python, kcat, franz-go, kafkajs) reads Java transactions (commit, abort, commit,
one left open): read_committed exactly the committed records, read_uncommitted all of them.

Every test also passes against Apache Kafka 4.4 (BROOK_TEST_TARGET=kafka).
"""

import json
import os
import re
import subprocess
import threading
import time
import uuid

import pytest

from harness import drivers, kafka_cli, paths
from harness.broker import Broker
from harness.txn_shell import TxnShell

TXN_MAX_TIMEOUT_MS = 120000
BROKER_OVERRIDES = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "transaction.max.timeout.ms": str(TXN_MAX_TIMEOUT_MS),
}
DEADLINE_S = 30
FENCED = {"ProducerFencedException", "InvalidProducerEpochException"}


# Both targets run the same transaction.version: 2 (Transactions V2, KIP-890: an epoch bump per
# transaction, partitions added by their leaders) by default, as Apache Kafka 4.4 finalizes on a
# new cluster. BROOK_TEST_TXN_VERSION=0 runs both at Transactions V1: brook through
# brook.transaction.version, Kafka downgraded with kafka-features. librdkafka, kafkajs and
# kafka-python speak V1 whatever the level.
TXN_VERSION = os.environ.get("BROOK_TEST_TXN_VERSION", "2")


def served_txn_version() -> int:
    """The transaction.version clients see."""
    return int(TXN_VERSION)


def at_txn_version(overrides: dict | None = None) -> dict:
    """Broker overrides with brook's transaction.version level (Kafka's is set once started)."""
    out = dict(overrides or {})
    if paths.target() == "brook":
        out["brook.transaction.version"] = TXN_VERSION
    return out


def start_at_txn_version(b: Broker) -> Broker:
    """Starts `b` (built with `at_txn_version`) and brings Kafka's feature to the same level."""
    b.start()
    if b.kind == "kafka":
        set_kafka_transaction_version(b, TXN_VERSION)
    return b


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory):
    b = start_at_txn_version(Broker(paths.target(), tmp_path_factory.mktemp("txn-broker"), at_txn_version(BROKER_OVERRIDES)))
    yield b
    b.stop()


def set_kafka_transaction_version(b: Broker, level: str) -> None:
    """Finalize Kafka's transaction.version feature at `level` (kafka-features), and wait until
    the broker's own metadata (what ApiVersions tells clients) shows it."""
    tool = "org.apache.kafka.tools.FeatureCommand"
    pattern = re.compile(r"Feature: transaction\.version\s.*FinalizedVersionLevel: (\d+)")
    current = pattern.search(kafka_cli.run(tool, "--bootstrap-server", b.bootstrap, "describe").stdout)
    if current and current.group(1) == level:
        return
    command = "upgrade" if current and int(current.group(1)) < int(level) else "downgrade"
    kafka_cli.run(tool, "--bootstrap-server", b.bootstrap, command, "--feature", f"transaction.version={level}")
    deadline = time.monotonic() + DEADLINE_S
    while True:
        current = pattern.search(kafka_cli.run(tool, "--bootstrap-server", b.bootstrap, "describe").stdout)
        if current and current.group(1) == level:
            return
        assert time.monotonic() < deadline, f"transaction.version still {current and current.group(1)}"
        time.sleep(0.2)


@pytest.fixture
def broker(request, txn_broker):
    """The module's broker, registered so that a failing test shows its log tail."""
    txn_broker.start()  # no-op while it runs
    setattr(request.node, "_brook_brokers", [txn_broker])
    return txn_broker


@pytest.fixture(scope="module")
def _module_shell(txn_broker):
    shells = [TxnShell(txn_broker.bootstrap)]
    yield shells
    shells[-1].close()


@pytest.fixture
def shell(broker, _module_shell):
    """The module's txn-shell (one JVM for every test: each test names its own topics, groups
    and transactional ids), replaced if a previous test ended it."""
    if not _module_shell[-1].alive:
        _module_shell.append(TxnShell(broker.bootstrap))
    return _module_shell[-1]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def txn_records(tag: str, partitions: int, per_partition: int) -> list:
    """Keyed records with headers, `per_partition` to each partition, interleaved."""
    return [
        {"key": f"{tag}-k{p}-{i}", "value": f"{tag}-v{p}-{i}", "partition": p,
         "headers": [["txn", tag], ["seq", str(i)]]}
        for i in range(per_partition) for p in range(partitions)
    ]


def with_offsets(records: list, results: list) -> list:
    return [{**r, "partition": res["partition"], "offset": res["offset"]} for r, res in zip(records, results)]


def per_partition(records: list) -> dict:
    """{partition: [(offset, key, value, headers)]} in the order read (or sent)."""
    out: dict = {}
    for r in records:
        out.setdefault(int(r["partition"]), []).append(
            (r.get("offset"), r["key"], r["value"], [list(h) for h in r.get("headers", [])]))
    return out


def keys_values(records: list) -> dict:
    """{partition: [(key, value)]} in the order read (or sent)."""
    return {p: [(k, v) for _o, k, v, _h in recs] for p, recs in per_partition(records).items()}


def end_offsets(shell: TxnShell, topic: str) -> tuple:
    """(last stable offsets, high watermarks) per partition, as a Java consumer's endOffsets
    reports them under read_committed and read_uncommitted."""
    lso = shell.ok("end-offsets", topic=topic, isolation="read_committed")["offsets"]
    hw = shell.ok("end-offsets", topic=topic, isolation="read_uncommitted")["offsets"]
    return {int(p): o for p, o in lso.items()}, {int(p): o for p, o in hw.items()}


def wait_stable(shell: TxnShell, topic: str, timeout_s: float = DEADLINE_S) -> dict:
    """Poll until every partition's last stable offset equals its high watermark (the markers
    are written after EndTxn is answered); returns the high watermarks."""
    deadline = time.monotonic() + timeout_s
    while True:
        lso, hw = end_offsets(shell, topic)
        if lso == hw:
            return hw
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic}: LSO {lso} never reached the high watermark {hw} in {timeout_s} s")
        time.sleep(0.1)


def read(shell: TxnShell, topic: str, isolation: str) -> list:
    """Every record of `topic` up to its end offsets under `isolation` (read to the end)."""
    answer = shell.ok("read", topic=topic, isolation=isolation, timeout_ms=DEADLINE_S * 1000, timeout=DEADLINE_S + 30)
    assert answer["complete"], f"{isolation} read of {topic} did not reach {answer['end']}"
    return answer["records"]


def error_classes(answer: dict) -> set:
    return set(answer.get("causes", [])) | {answer.get("error")}


def test_read_committed_sees_exactly_the_committed_transactions_and_lso_trails_an_open_one(shell):
    topic, tid = unique("t-txn"), unique("tid")
    shell.ok("create-topic", topic=topic, partitions=3)
    shell.ok("producer", name="p", transactional_id=tid, init=True)

    batches = {}
    for tag, end in (("a", "commit"), ("b", "abort"), ("c", "commit")):
        records = txn_records(tag, 3, 2)
        shell.ok("begin", name="p")
        sent = with_offsets(records, shell.send("p", topic, records))
        first = {p: recs[0][0] for p, recs in per_partition(sent).items()}
        last = {p: recs[-1][0] for p, recs in per_partition(sent).items()}
        # Open: read_committed ends at the transaction's first record, read_uncommitted after its last.
        lso, hw = end_offsets(shell, topic)
        assert lso == first, f"txn {tag} open: LSO {lso}, first offsets {first}"
        assert hw == {p: o + 1 for p, o in last.items()}, f"txn {tag} open: HW {hw}, last offsets {last}"
        assert all(lso[p] < hw[p] for p in range(3))
        shell.ok(end, name="p")
        # Ended: both agree, one offset past the last record: the marker's.
        hw = wait_stable(shell, topic)
        assert hw == {p: o + 2 for p, o in last.items()}, f"txn {tag} {end}ed: end offsets {hw}, last {last}"
        batches[tag] = sent

    # Markers take offsets: on every partition a is at 0-1 (its marker at 2), b at 3-4, c at 6-7.
    for tag, offsets in (("a", [0, 1]), ("b", [3, 4]), ("c", [6, 7])):
        assert {p: [r[0] for r in recs] for p, recs in per_partition(batches[tag]).items()} == \
            {p: offsets for p in range(3)}, f"txn {tag}"

    committed = read(shell, topic, "read_committed")
    assert per_partition(committed) == per_partition(batches["a"] + batches["c"])
    everything = read(shell, topic, "read_uncommitted")
    assert per_partition(everything) == per_partition(batches["a"] + batches["b"] + batches["c"])


def test_second_producer_with_the_same_transactional_id_fences_the_first_and_aborts_its_transaction(shell):
    topic, tid = unique("t-fence"), unique("tid")
    shell.ok("create-topic", topic=topic, partitions=3)
    shell.ok("producer", name="old", transactional_id=tid, init=True)
    shell.ok("begin", name="old")
    zombie = txn_records("zombie", 3, 2)
    shell.send("old", topic, zombie)
    lso, hw = end_offsets(shell, topic)
    assert all(lso[p] < hw[p] for p in range(3)), f"open transaction: LSO {lso}, HW {hw}"

    # The new instance's initTransactions fences the old one and aborts its open transaction.
    shell.ok("producer", name="new", transactional_id=tid, init=True)
    hw = wait_stable(shell, topic)

    late = shell.ok("send", name="old", topic=topic, records=txn_records("late", 3, 1))["results"]
    commit = shell.call("commit", name="old")
    assert not commit["ok"], "the fenced producer's commit succeeded"
    seen = set().union(*(error_classes(r) for r in late if "error" in r), error_classes(commit))
    assert seen & FENCED, f"fenced producer saw {seen}, expected one of {FENCED}"

    shell.ok("begin", name="new")
    fresh = txn_records("new", 3, 2)
    sent = with_offsets(fresh, shell.send("new", topic, fresh))
    # The new transaction starts after the aborted one and its abort marker.
    assert {p: recs[0][0] for p, recs in per_partition(sent).items()} == {p: hw[p] for p in range(3)}
    shell.ok("commit", name="new")
    wait_stable(shell, topic)
    assert per_partition(read(shell, topic, "read_committed")) == per_partition(sent)
    # The zombie's records are in the log, aborted.
    assert {r["value"] for r in zombie} <= {r["value"] for r in read(shell, topic, "read_uncommitted")}


def test_transaction_left_open_past_its_timeout_is_aborted_by_the_coordinator(shell):
    topic, tid = unique("t-timeout"), unique("tid")
    shell.ok("create-topic", topic=topic, partitions=3)
    shell.ok("producer", name="p", transactional_id=tid, init=True, config={"transaction.timeout.ms": "3000"})
    shell.ok("begin", name="p")
    records = txn_records("expired", 3, 2)
    shell.send("p", topic, records)
    opened = time.monotonic()
    lso, hw = end_offsets(shell, topic)
    assert all(lso[p] < hw[p] for p in range(3)), f"open transaction: LSO {lso}, HW {hw}"

    # Left alone, the coordinator aborts it once 3 s have passed (its sweep runs every second).
    wait_stable(shell, topic, timeout_s=25)
    assert time.monotonic() - opened < 25
    assert read(shell, topic, "read_committed") == []
    assert len(read(shell, topic, "read_uncommitted")) == len(records)

    late = shell.call("commit", name="p")
    assert not late["ok"], "the late commit of a timed-out transaction succeeded"
    # The coordinator aborted with an epoch bump: Transactions V1 answers the old epoch's EndTxn
    # with PRODUCER_FENCED; V2 (whose EndTxn carries the epoch bump itself) with INVALID_TXN_STATE.
    expected = "ProducerFencedException" if served_txn_version() < 2 else "InvalidTxnStateException"
    assert expected in error_classes(late), late
    assert read(shell, topic, "read_committed") == []


def test_transaction_timeout_above_the_broker_maximum_is_refused(shell):
    answer = shell.call("producer", name="p", transactional_id=unique("tid"), init=True,
                        config={"transaction.timeout.ms": str(TXN_MAX_TIMEOUT_MS + 1)})
    assert not answer["ok"]
    # The broker's INVALID_TRANSACTION_TIMEOUT: the Java client 4.4 raises it as a KafkaException
    # ("Unexpected error in InitProducerIdResponse") carrying the error's message.
    assert "InvalidTxnTimeoutException" in error_classes(answer) or \
        "larger than the maximum value allowed by the broker" in answer["message"], answer


def test_consume_transform_produce_commits_offsets_only_with_its_transaction(shell):
    source, sink, group, tid = unique("t-ctp-in"), unique("t-ctp-out"), unique("g"), unique("tid")
    shell.ok("create-topic", topic=source, partitions=2)
    shell.ok("create-topic", topic=sink, partitions=2)
    shell.ok("producer", name="plain")
    shell.ok("consumer", name="c", group=group, topic=source, isolation="read_committed")
    shell.ok("producer", name="p", transactional_id=tid, init=True)

    def group_offsets(**fields) -> dict:
        return shell.ok("group-offsets", group=group, **fields)["offsets"]

    def transform(inputs: list, end: str, before: dict) -> dict:
        """Poll `inputs`, write them upper-cased in one transaction with the consumer's
        positions, end it with `end`; the group's offsets stay `before` until then."""
        polled = shell.ok("poll", name="c", count=len(inputs), timeout_ms=DEADLINE_S * 1000, timeout=DEADLINE_S + 30)
        assert sorted(r["value"] for r in polled["records"]) == sorted(r["value"] for r in inputs)
        shell.ok("begin", name="p")
        shell.send("p", sink, [{"key": r["key"], "value": r["value"].upper(), "partition": r["partition"]}
                               for r in polled["records"]])
        sent = shell.ok("send-offsets", name="p", consumer="c")["offsets"]
        # Pending in the open transaction: not the group's committed offsets.
        assert group_offsets() == before
        shell.ok(end, name="p")
        wait_stable(shell, sink)
        return {source: sent}

    def wait_group_offsets(want: dict) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while (offsets := group_offsets()) != want:
            assert time.monotonic() < deadline, f"group offsets {offsets}, committed in the transaction: {want}"
            time.sleep(0.1)
        # Stable too: no transactional commit pending for the group (KIP-447 require_stable).
        assert group_offsets(require_stable=True) == want

    first = [{"key": f"k{i}", "value": f"v{i}", "partition": i % 2} for i in range(10)]
    shell.send("plain", source, first)
    committed = transform(first, "commit", {})
    assert committed == {source: {"0": 5, "1": 5}}
    wait_group_offsets(committed)

    second = [{"key": f"k{i}", "value": f"v{i}", "partition": i % 2} for i in range(10, 20)]
    shell.send("plain", source, second)
    aborted = transform(second, "abort", committed)
    assert aborted == {source: {"0": 10, "1": 10}}
    assert group_offsets() == committed, "an aborted transaction's offsets were committed"
    assert group_offsets(require_stable=True) == committed

    # As an application does after an abort: back to the committed positions, process again.
    shell.ok("rewind", name="c")
    assert transform(second, "commit", committed) == aborted
    wait_group_offsets(aborted)
    # The output: each input once, upper-cased, in its partition's order (the aborted copy never).
    out = read(shell, sink, "read_committed")
    assert keys_values(out) == keys_values([{**r, "value": r["value"].upper()} for r in first + second])
    shell.ok("close", name="c")


COPY_RECORDS = 10000


def copier_input(shell: TxnShell, count: int = COPY_RECORDS) -> tuple:
    """A 2-partition input topic holding `count` records (half per partition), an empty
    2-partition output topic: (source, sink, inputs)."""
    source, sink = unique("t-copy-in"), unique("t-copy-out")
    shell.ok("create-topic", topic=source, partitions=2)
    shell.ok("create-topic", topic=sink, partitions=2)
    inputs = [{"key": f"k{i}", "value": f"v{i % 2}-{i:05d}", "partition": i % 2} for i in range(count)]
    shell.ok("producer", name="plain", config={"linger.ms": "20"})
    shell.send("plain", source, inputs, timeout=120)
    return source, sink, inputs


def copier_argv(broker: Broker, source: str, sink: str, group: str) -> list:
    """Kafka's TransactionalMessageCopier as Kafka's own system tests run it: group mode with the
    group-metadata sendOffsetsToTransaction, 200 records per transaction, random aborts (one in
    three). It copies each record to the same partition of the output until its assigned
    partitions have no lag left, then exits 0."""
    return [*paths.KAFKA_JAVA, "-Xmx512m", "org.apache.kafka.tools.TransactionalMessageCopier",
            "--broker-list", broker.bootstrap, "--input-topic", source, "--input-partition", "0",
            "--output-topic", sink, "--consumer-group", group, "--transactional-id", unique("tid"),
            "--transaction-size", "200", "--enable-random-aborts", "--group-mode", "--use-group-metadata"]


def assert_copied_exactly_once(shell: TxnShell, source: str, sink: str, group: str, inputs: list) -> None:
    wait_stable(shell, sink)
    assert keys_values(read(shell, sink, "read_committed")) == keys_values(inputs)
    # Aborted copies are in the log (read_uncommitted), never read_committed.
    assert len(read(shell, sink, "read_uncommitted")) > len(inputs)
    half = str(len(inputs) // 2)
    assert shell.ok("group-offsets", group=group)["offsets"] == {source: {"0": int(half), "1": int(half)}}


def test_kafka_transactional_message_copier_copies_exactly_once_with_random_aborts(shell, broker):
    source, sink, inputs = copier_input(shell)
    group = unique("g")
    proc = subprocess.run(copier_argv(broker, source, sink, group), capture_output=True, text=True,
                          timeout=240, stdin=subprocess.DEVNULL)
    status = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0, f"copier exited {proc.returncode}\n{proc.stderr[-3000:]}\n{proc.stdout[-2000:]}"
    done = [s for s in status if s.get("stage") == "ShutdownComplete"]
    assert done and done[-1]["totalProcessed"] == len(inputs), status[-3:]
    assert_copied_exactly_once(shell, source, sink, group, inputs)


TXN_PRODUCE_CLIENTS = ["confluent", "franz", "kafkajs"]


@pytest.mark.parametrize("client", TXN_PRODUCE_CLIENTS)
def test_client_transactions_commit_and_abort_and_its_read_committed_consumer_skips_the_aborted(shell, broker, client):
    topic, tid = unique(f"t-{client}"), unique("tid")
    shell.ok("create-topic", topic=topic, partitions=3)
    plan = [("a", "commit"), ("b", "abort"), ("c", "commit")]
    records = [{**r, "txn": i} for i, (tag, _) in enumerate(plan) for r in txn_records(tag, 3, 3)]
    results = drivers.run(client, "txn-produce", broker.bootstrap, "--topic", topic,
                          "--transactional-id", tid, "--abort", "1", records=records)
    assert len(results) == len(records) and all("offset" in r for r in results), results
    sent = with_offsets(records, results)
    committed = [r for r in sent if r["txn"] != 1]
    # Each transaction's marker takes an offset: 3 records, marker, 3 records, marker, ...
    for p in range(3):
        assert [r["offset"] for r in sent if r["partition"] == p] == [0, 1, 2, 4, 5, 6, 8, 9, 10]
    wait_stable(shell, topic)

    def consume(isolation: str, count: int) -> list:
        return drivers.run(client, "consume", broker.bootstrap, "--topic", topic, "--count", count,
                           "--isolation", isolation, "--timeout-ms", DEADLINE_S * 1000)

    # The last transaction is committed on every partition: a leaked aborted record would be
    # read before it, within the count.
    assert per_partition(consume("read_committed", len(committed))) == per_partition(committed)
    assert per_partition(consume("read_uncommitted", len(sent))) == per_partition(sent)
    assert per_partition(read(shell, topic, "read_committed")) == per_partition(committed)


# The Java consumer reads through txn-shell's `read` in every test above.
@pytest.mark.parametrize("client", [c for c in drivers.CLIENTS if c != "java"])
def test_every_clients_read_committed_consumer_skips_aborted_and_open_transactions(shell, broker, client):
    """Java transactions committed, aborted, committed, and one left open at the end of every
    partition: each client's consumer (`consume --isolation`, the aborted records filtered by
    the client from the fetch's aborted-transaction list) reads under read_committed exactly the
    committed records, under read_uncommitted all of them, the open transaction's too; the Java
    consumer's read_committed read ends at the last stable offset, before the open one."""
    topic = unique(f"t-rc-{client}")
    shell.ok("create-topic", topic=topic, partitions=3)
    shell.ok("producer", name="rc", transactional_id=unique("tid"), init=True)
    sent = {}
    for tag, end in (("a", "commit"), ("b", "abort"), ("c", "commit"), ("d", None)):
        records = txn_records(tag, 3, 2)
        shell.ok("begin", name="rc")
        sent[tag] = with_offsets(records, shell.send("rc", topic, records))
        if end is not None:
            shell.ok(end, name="rc")
    try:
        def consume(isolation: str, count: int) -> list:
            return drivers.run(client, "consume", broker.bootstrap, "--topic", topic, "--count", count,
                               "--isolation", isolation, "--timeout-ms", DEADLINE_S * 1000)

        # c is committed on every partition after b: an aborted record that leaked would be read
        # before c's last records, within the count.
        committed = sent["a"] + sent["c"]
        assert per_partition(consume("read_committed", len(committed))) == per_partition(committed)
        everything = sent["a"] + sent["b"] + sent["c"] + sent["d"]
        assert per_partition(consume("read_uncommitted", len(everything))) == per_partition(everything)
        assert per_partition(read(shell, topic, "read_committed")) == per_partition(committed)
    finally:
        shell.call("abort", name="rc")


CTP_CLIENTS = ["confluent", "franz", "kafkajs"]
CTP_RECORDS = 1000


@pytest.mark.parametrize("client", CTP_CLIENTS)
def test_client_consume_transform_produce_copies_exactly_once_with_aborts(shell, broker, client):
    """The client's own consume-transform-produce loop (its driver's txn-copy: librdkafka's
    send_offsets_to_transaction with the consumer's group metadata, franz-go's
    GroupTransactSession, kafkajs' sendOffsets with the group id) copies 1,000 records in transactions of at most 100, every third
    aborted: the output equals the input, the group's offsets are at the input's end."""
    source, sink, inputs = copier_input(shell, CTP_RECORDS)
    group = unique("g")
    lines = drivers.run(client, "txn-copy", broker.bootstrap, "--topic", source, "--output-topic", sink,
                        "--group", group, "--transactional-id", unique("tid"), "--count", len(inputs),
                        "--abort-every", 3, "--timeout-ms", 90000, timeout=150)
    summary = lines[-1]
    assert summary["copied"] == len(inputs) and summary["aborted"] >= 1, lines[-5:]
    assert_copied_exactly_once(shell, source, sink, group, inputs)


KILL_COPY_RECORDS = 4000
KILL_AFTER_RECORDS = 1500


# Last in the module: it kills the module's broker (the next test's `broker` fixture would
# start it again).
def test_transactional_message_copier_survives_a_kill_9_of_the_broker(shell, broker):
    """The copier runs (4,000 records); once it has committed 1,500 the broker is killed (SIGKILL: open
    and prepared transactions, pending markers and transactional offset commits are whatever
    reached the disk) and started again on the same data. The copier rides it out on its
    clients' retries and finishes; the output is still exactly the input."""
    source, sink, inputs = copier_input(shell, KILL_COPY_RECORDS)
    group = unique("g")
    copier = subprocess.Popen(copier_argv(broker, source, sink, group), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    lines: list = []
    err: list = []
    threading.Thread(target=lambda: lines.extend(copier.stdout), daemon=True).start()
    threading.Thread(target=lambda: err.extend(copier.stderr), daemon=True).start()
    try:
        def processed() -> int:
            status = [json.loads(line) for line in list(lines) if line.startswith("{")]
            return max((s.get("totalProcessed", 0) for s in status), default=0)

        deadline = time.monotonic() + 120
        while processed() < KILL_AFTER_RECORDS:
            assert copier.poll() is None, f"copier exited {copier.returncode} early\n{''.join(err)[-3000:]}"
            assert time.monotonic() < deadline, f"copier at {processed()} records after 120 s"
            time.sleep(0.05)
        broker.kill()
        broker.start()
        code = copier.wait(timeout=240)
        assert code == 0, f"copier exited {code}\n{''.join(err)[-3000:]}\n{''.join(lines)[-2000:]}"
    finally:
        if copier.poll() is None:
            copier.kill()
            copier.wait()
    # A fresh shell: the old one's clients knew the broker before its restart.
    with TxnShell(broker.bootstrap) as after:
        assert_copied_exactly_once(after, source, sink, group, inputs)
