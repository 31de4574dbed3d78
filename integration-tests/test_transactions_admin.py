"""Transaction admin (issue #12 item 5) with Apache Kafka's own `kafka-transactions.sh`
(`org.apache.kafka.tools.TransactionsCommand`, kafka-tools 4.4): what an operator sees of open,
committed and stuck transactions.

One broker per module, at the transaction.version of test_transactions.py (2 unless
BROOK_TEST_TXN_VERSION says). Transactions are driven by the Java 4.4 `txn-shell`; the tool's
tables are parsed by column name and asserted on field by field.
- an open transaction over 2 partitions: `list` shows its transactional id as Ongoing with the
  producer id `describe` reports; `describe --transactional-id` shows Ongoing with exactly its
  topic-partitions; `describe-producers` on each partition shows that producer id and epoch, the
  last sequence of the records sent (1 after 2 records) and the transaction's start offset (the
  first record's offset); `find-hanging --broker-id` with a zero maximum timeout (so the open
  transaction is checked against its coordinator rather than skipped as young) finds nothing.
  After commit, `describe` reaches CompleteCommit with no partitions and `describe-producers`
  shows no open transaction ("None", the wire's -1).
- `abort --topic --partition --start-offset` of an open transaction (as an operator ends a
  hanging one, with WriteTxnMarkers straight to the leader): the last stable offset (the
  read_committed end offset) moves from the transaction's first offset to the high watermark,
  one past the abort marker, and read_committed reads none of its records.
Not covered: a genuinely hanging transaction (data the coordinator does not know of): producing
one needs a transactional produce that bypasses the coordinator, which Kafka 4.4 refuses by
default (transaction.partition.verification.enable).

Every test also passes against Apache Kafka 4.4 (BROOK_TEST_TARGET=kafka).
"""

import time

import pytest

from harness import kafka_cli, paths
from harness.broker import Broker
from harness.txn_shell import TxnShell
from test_transactions import (
    DEADLINE_S,
    at_txn_version,
    end_offsets,
    per_partition,
    read,
    start_at_txn_version,
    unique,
    wait_stable,
    with_offsets,
)

TOOL = "org.apache.kafka.tools.TransactionsCommand"
BROKER_ID = "1"  # the harness's node.id
NO_TXN = "None"  # how the tool prints a producer's absent open transaction (wire -1)


@pytest.fixture(scope="module")
def admin_broker(tmp_path_factory):
    b = start_at_txn_version(Broker(paths.target(), tmp_path_factory.mktemp("txn-admin"), at_txn_version()))
    yield b
    b.stop()


@pytest.fixture
def broker(request, admin_broker):
    admin_broker.start()  # no-op while it runs
    setattr(request.node, "_brook_brokers", [admin_broker])
    return admin_broker


@pytest.fixture(scope="module")
def _module_shell(admin_broker):
    shells = [TxnShell(admin_broker.bootstrap)]
    yield shells
    shells[-1].close()


@pytest.fixture
def shell(broker, _module_shell):
    if not _module_shell[-1].alive:
        _module_shell.append(TxnShell(broker.bootstrap))
    return _module_shell[-1]


def transactions(broker: Broker, *args: str) -> list:
    """Run `kafka-transactions.sh <args>`; its table as one dict per row, keyed by the header's
    column names (a trailing empty column, e.g. no TopicPartitions, is "")."""
    out = kafka_cli.run(TOOL, "--bootstrap-server", broker.bootstrap, *args).stdout
    lines = [line for line in out.splitlines() if line.strip()]
    if not lines:  # `abort` prints nothing; its effect is asserted instead
        return []
    header = lines[0].split()
    rows = []
    for line in lines[1:]:
        values = line.split()
        rows.append(dict(zip(header, values + [""] * (len(header) - len(values)))))
    return rows


def describe(broker: Broker, tid: str) -> dict:
    rows = transactions(broker, "describe", "--transactional-id", tid)
    assert len(rows) == 1, rows
    return rows[0]


def producers(broker: Broker, topic: str, partition: int) -> dict:
    """describe-producers of one partition: {producer id: row}."""
    rows = transactions(broker, "describe-producers", "--topic", topic, "--partition", str(partition))
    return {row["ProducerId"]: row for row in rows}


def records(tag: str, partitions: int, per_partition_count: int) -> list:
    return [{"key": f"{tag}-{p}-{i}", "value": f"{tag}-v{p}-{i}", "partition": p}
            for i in range(per_partition_count) for p in range(partitions)]


def test_list_describe_and_describe_producers_show_an_open_transaction_until_it_commits(broker, shell):
    topic, tid = unique("t-adm"), unique("tid-adm")
    shell.ok("create-topic", topic=topic, partitions=2)
    shell.ok("producer", name="p", transactional_id=tid, init=True)
    shell.ok("begin", name="p")
    sent = with_offsets(records("a", 2, 2), shell.send("p", topic, records("a", 2, 2)))
    first = {p: recs[0][0] for p, recs in per_partition(sent).items()}

    open_txn = describe(broker, tid)
    assert open_txn["TransactionalId"] == tid
    assert open_txn["CoordinatorId"] == BROKER_ID
    assert open_txn["TransactionState"] == "Ongoing"
    assert set(open_txn["TopicPartitions"].split(",")) == {f"{topic}-0", f"{topic}-1"}
    producer_id, epoch = open_txn["ProducerId"], open_txn["ProducerEpoch"]
    assert int(producer_id) >= 0 and int(epoch) >= 0

    listed = {row["TransactionalId"]: row for row in transactions(broker, "list")}
    assert tid in listed, listed
    assert listed[tid]["ProducerId"] == producer_id
    assert listed[tid]["TransactionState"] == "Ongoing"
    assert listed[tid]["Coordinator"] == BROKER_ID

    for p in (0, 1):
        row = producers(broker, topic, p).get(producer_id)
        assert row is not None, f"partition {p}: producer {producer_id} not described"
        assert row["ProducerEpoch"] == epoch
        assert row["LastSequence"] == "1"  # two records: sequences 0 and 1
        assert row["CurrentTransactionStartOffset"] == str(first[p])

    # A zero maximum timeout makes every open transaction a candidate, checked against its
    # coordinator, which has this one Ongoing with these partitions: not hanging.
    hanging = transactions(broker, "find-hanging", "--broker-id", BROKER_ID, "--max-transaction-timeout", "0")
    assert [row for row in hanging if row.get("ProducerId") == producer_id] == [], hanging

    shell.ok("commit", name="p")
    deadline = time.monotonic() + DEADLINE_S
    while (done := describe(broker, tid))["TransactionState"] != "CompleteCommit":
        assert time.monotonic() < deadline, f"never CompleteCommit: {done}"
        time.sleep(0.2)
    assert done["ProducerId"] == producer_id
    assert done["TopicPartitions"] == ""
    wait_stable(shell, topic)
    for p in (0, 1):
        assert producers(broker, topic, p)[producer_id]["CurrentTransactionStartOffset"] == NO_TXN


def test_abort_by_start_offset_moves_the_last_stable_offset_to_the_high_watermark(broker, shell):
    topic, tid = unique("t-adm-abort"), unique("tid-adm-abort")
    shell.ok("create-topic", topic=topic, partitions=1)
    shell.ok("producer", name="stuck", transactional_id=tid, init=True)
    shell.ok("begin", name="stuck")
    sent = with_offsets(records("s", 1, 3), shell.send("stuck", topic, records("s", 1, 3)))
    start = sent[0]["offset"]
    lso, hw = end_offsets(shell, topic)
    assert (lso[0], hw[0]) == (start, sent[-1]["offset"] + 1)

    described = producers(broker, topic, 0)
    open_rows = [r for r in described.values() if r["CurrentTransactionStartOffset"] == str(start)]
    assert len(open_rows) == 1, described
    assert open_rows[0]["ProducerId"] == describe(broker, tid)["ProducerId"]

    assert transactions(broker, "abort", "--topic", topic, "--partition", "0", "--start-offset", str(start)) == []
    # The abort marker takes one offset; the LSO then equals the high watermark past it.
    assert wait_stable(shell, topic)[0] == hw[0] + 1
    assert read(shell, topic, "read_committed") == []
    assert producers(broker, topic, 0)[open_rows[0]["ProducerId"]]["CurrentTransactionStartOffset"] == NO_TXN
