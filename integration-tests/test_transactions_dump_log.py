"""Brook's transactional segments as Apache Kafka's own `kafka-dump-log.sh` reads them
(`org.apache.kafka.tools.DumpLogSegments`, kafka-tools 4.4), issue #12: the on-disk formats of
`__transaction_state`, the data batches, the control batches (markers) and the aborted-transaction
index are Kafka's, so an operator's tool decodes them.

One broker per module (at the transaction.version of test_transactions.py). A Java 4.4
transactional producer (`txn-shell`) commits one transaction over 2 partitions and aborts a
second one on partition 0; the tool then reads the segment files straight from the broker's
`log.dirs` (what the broker has written; the tool opens the files itself, both brokers write
them through the page cache):
- `--transaction-log-decoder` on the `__transaction_state` segments: the transactional id's
  records, in log order, go Empty -> Ongoing (partition 0) -> Ongoing (partitions 0,1) ->
  PrepareCommit -> CompleteCommit -> Ongoing -> PrepareAbort -> CompleteAbort, all with one
  producer id (the data batches'), the producer epoch (one throughout under Transactions V1; under
  V2, the default, bumped by each transaction's end: its Prepare/Complete
  records and markers carry the bumped epoch), the partitions each state names (none once complete),
  each transaction's start timestamp kept through its states, and the partition's leader epoch
  stamped on the batches (the coordinator epoch the markers carry).
- `--print-data-log` on each data partition's segment: the records as batches of that producer
  with isTransactional true at the offsets the sends returned (keys and values as sent), each
  transaction's end a control batch (isControl true) one past its last record: endTxnMarker
  COMMIT / ABORT with that coordinator epoch.
- the data partition's `.txnindex` (Kafka's aborted-transaction index): exactly one entry, the
  aborted transaction's producer id, first offset (its first record), last offset (its marker)
  and the last stable offset once it completed (one past the marker).
The tool exits non-zero on a file it cannot parse, and prints any CRC failure as isvalid false,
which the test also rules out.

Every test also passes against Apache Kafka 4.4 (BROOK_TEST_TARGET=kafka).
"""

import json
import re
from pathlib import Path

import pytest

from harness import kafka_cli, paths
from harness.broker import Broker
from harness.txn_shell import TxnShell
from test_transactions import at_txn_version, served_txn_version, start_at_txn_version, unique, wait_stable

TOOL = "org.apache.kafka.tools.DumpLogSegments"
TXN_STATE = "__transaction_state"

# "baseOffset: 0 lastOffset: 0 count: 1 ... isTransactional: true isControl: false ..." and
# "| offset: 0 CreateTime: .. key: k payload: v" / "| offset: 1 ... endTxnMarker: COMMIT coordinatorEpoch: 0"
FIELD = re.compile(r"(\w+): (\S+)")
# the transaction log decoder's record: "| offset: 3 ... key: {json} payload: {json}"
DECODED = re.compile(r" key: (\{.*\}) payload: (\{.*\})$")


@pytest.fixture(scope="module")
def dump_broker(tmp_path_factory):
    b = start_at_txn_version(Broker(paths.target(), tmp_path_factory.mktemp("txn-dump"), at_txn_version()))
    yield b
    b.stop()


@pytest.fixture(scope="module")
def scenario(dump_broker):
    """Commit one transaction over partitions 0 and 1, abort one on partition 0; returns what the
    sends returned: {"topic", "tid", "committed": [{partition, offset, key, value}], "aborted": [..]}."""
    topic, tid = unique("t-dump"), unique("tid-dump")
    with TxnShell(dump_broker.bootstrap) as shell:
        shell.ok("create-topic", topic=topic, partitions=2)
        shell.ok("producer", name="p", transactional_id=tid, init=True)
        shell.ok("begin", name="p")
        committed = []
        for p in (0, 1):  # one send (flushed) per partition: two AddPartitionsToTxn, two Ongoing records
            records = [{"key": f"c-k{p}-{i}", "value": f"c-v{p}-{i}", "partition": p} for i in range(2)]
            committed += [{**r, **res} for r, res in zip(records, shell.send("p", topic, records))]
        shell.ok("commit", name="p")
        shell.ok("begin", name="p")
        aborted = [{"key": f"a-k0-{i}", "value": f"a-v0-{i}", "partition": 0} for i in range(3)]
        aborted = [{**r, **res} for r, res in zip(aborted, shell.send("p", topic, aborted))]
        shell.ok("abort", name="p")
        wait_stable(shell, topic)  # both markers written on both partitions
    return {"topic": topic, "tid": tid, "committed": committed, "aborted": aborted}


@pytest.fixture
def broker(request, dump_broker):
    dump_broker.start()  # no-op while it runs
    setattr(request.node, "_brook_brokers", [dump_broker])
    return dump_broker


def dump(*args) -> list:
    """Run the tool; its batches as [{"batch": {field: value}, "records": [{field: value}]}].
    Record lines are '| offset: ..' lines; the decoded key/payload of the transaction log decoder
    are JSON objects, parsed."""
    out = kafka_cli.run(TOOL, *args).stdout
    batches = []
    for line in out.splitlines():
        if line.startswith("baseOffset:"):
            batches.append({"batch": dict(FIELD.findall(line)), "records": []})
        elif line.startswith("| offset:"):
            fields = dict(FIELD.findall(line[2:]))
            decoded = DECODED.search(line)
            if decoded:
                fields["key"], fields["payload"] = json.loads(decoded.group(1)), json.loads(decoded.group(2))
            batches[-1]["records"].append(fields)
    assert all(b["batch"].get("isvalid") == "true" for b in batches), out[-3000:]
    return batches


def segments(broker: Broker, topic: str, partition: int, suffix: str = ".log") -> list:
    d = broker.log_dirs / f"{topic}-{partition}"
    return sorted(str(f) for f in d.glob(f"*{suffix}") if f.stat().st_size > 0)


def txn_log_records(broker: Broker, tid: str) -> list:
    """Every `__transaction_state` record of `tid`, decoded, in log order, each with its batch's
    partitionLeaderEpoch. Scans every non-empty partition (the id's is abs(hashCode) % 50)."""
    found = []
    for d in sorted(Path(broker.log_dirs).glob(f"{TXN_STATE}-*")):
        files = sorted(str(f) for f in d.glob("*.log") if f.stat().st_size > 0)
        if not files:
            continue
        for b in dump("--transaction-log-decoder", "--files", ",".join(files)):
            for r in b["records"]:
                if r["key"]["data"].get("transactionalId") == tid:
                    found.append({**r["payload"]["data"], "leader_epoch": int(b["batch"]["partitionLeaderEpoch"]),
                                  "partition": d.name})
    return found


def partitions_of(state: dict) -> dict:
    return {tp["topic"]: sorted(tp["partitionIds"]) for tp in state["transactionPartitions"] or []}


def test_transaction_log_decoder_reads_the_coordinator_records_of_a_commit_and_an_abort(broker, scenario):
    topic, tid = scenario["topic"], scenario["tid"]
    states = txn_log_records(broker, tid)
    assert len({s["partition"] for s in states}) == 1, states
    assert [s["transactionStatus"] for s in states] == [
        "Empty", "Ongoing", "Ongoing", "PrepareCommit", "CompleteCommit", "Ongoing", "PrepareAbort", "CompleteAbort",
    ], states
    assert [partitions_of(s) for s in states] == [
        {}, {topic: [0]}, {topic: [0, 1]}, {topic: [0, 1]}, {}, {topic: [0]}, {topic: [0]}, {},
    ]
    assert states[0]["transactionPartitions"] is None  # Kafka writes no partition list for Empty
    assert states[4]["transactionPartitions"] == [] and states[7]["transactionPartitions"] == []

    producer_ids = {s["producerId"] for s in states}
    assert len(producer_ids) == 1 and producer_ids.pop() >= 0, states
    # Empty and the first Ongoing at the epoch InitProducerId gave; a transaction's end (Prepare*,
    # Complete*) at that epoch + `bump` (V2 bumps it at every end), which the next one starts at.
    bump = 1 if served_txn_version() >= 2 else 0
    e = states[0]["producerEpoch"]
    assert [s["producerEpoch"] for s in states] == [e, e, e, e + bump, e + bump, e + bump, e + 2 * bump, e + 2 * bump]
    assert {s["transactionTimeoutMs"] for s in states} == {60000}  # the Java producer's default

    assert states[0]["transactionStartTimestampMs"] == -1
    first, second = states[1:5], states[5:8]
    for txn in (first, second):
        start = txn[0]["transactionStartTimestampMs"]
        assert start > 0 and all(s["transactionStartTimestampMs"] == start for s in txn), txn
        updates = [s["transactionLastUpdateTimestampMs"] for s in txn]
        assert updates == sorted(updates) and updates[0] >= start, txn
    assert second[0]["transactionStartTimestampMs"] >= first[-1]["transactionLastUpdateTimestampMs"]


def test_dump_log_reads_transactional_batches_and_commit_and_abort_markers(broker, scenario):
    topic, tid = scenario["topic"], scenario["tid"]
    states = txn_log_records(broker, tid)
    producer_id = states[0]["producerId"]
    # A transaction's records carry its Ongoing epoch, its marker its Prepare epoch.
    ongoing = [s for s in states if s["transactionStatus"] == "Ongoing"]
    data_epoch = {"committed": ongoing[0]["producerEpoch"], "aborted": ongoing[-1]["producerEpoch"]}
    # The coordinator epoch of a marker is the leader epoch of the coordinator's partition.
    prepare = {s["transactionStatus"]: s for s in states}
    coordinator_epoch = {"COMMIT": prepare["PrepareCommit"]["leader_epoch"],
                         "ABORT": prepare["PrepareAbort"]["leader_epoch"]}

    for p in (0, 1):
        files = segments(broker, topic, p)
        assert files, f"{topic}-{p}: no segment"
        batches = dump("--print-data-log", "--files", ",".join(files))
        data = [(b, r) for b in batches if b["batch"]["isControl"] == "false" for r in b["records"]]
        control = [(b, r) for b in batches if b["batch"]["isControl"] == "true" for r in b["records"]]

        committed = [r for r in scenario["committed"] if r["partition"] == p]
        aborted = [r for r in scenario["aborted"] if r["partition"] == p]
        assert [(int(r["offset"]), r["key"], r["payload"]) for _b, r in data] == [
            (r["offset"], r["key"], r["value"]) for r in committed + aborted
        ]
        epochs = {r["offset"]: data_epoch["committed"] for r in committed}
        epochs.update({r["offset"]: data_epoch["aborted"] for r in aborted})
        for b, r in data:
            assert b["batch"]["isTransactional"] == "true", b
            assert (int(b["batch"]["producerId"]), int(b["batch"]["producerEpoch"])) == \
                (producer_id, epochs[int(r["offset"])]), b
        for b, r in control:
            assert b["batch"]["isTransactional"] == "true", b
            ended = prepare["PrepareCommit" if r["endTxnMarker"] == "COMMIT" else "PrepareAbort"]
            assert (int(b["batch"]["producerId"]), int(b["batch"]["producerEpoch"])) == \
                (producer_id, ended["producerEpoch"]), b

        expected_markers = [(committed[-1]["offset"] + 1, "COMMIT")]
        if aborted:
            expected_markers.append((aborted[-1]["offset"] + 1, "ABORT"))
        assert [(int(r["offset"]), r["endTxnMarker"]) for _b, r in control] == expected_markers
        for b, r in control:
            assert int(r["coordinatorEpoch"]) == coordinator_epoch[r["endTxnMarker"]], r
            assert b["batch"]["count"] == "1" and b["batch"]["baseOffset"] == r["offset"], b
        if aborted:  # the aborted transaction starts right after the commit marker
            assert aborted[0]["offset"] == committed[-1]["offset"] + 2


def test_dump_log_reads_the_aborted_transaction_index(broker, scenario):
    topic, aborted = scenario["topic"], scenario["aborted"]
    producer_id = txn_log_records(broker, scenario["tid"])[0]["producerId"]
    abort_marker = aborted[-1]["offset"] + 1

    files = segments(broker, topic, 0, ".txnindex")
    assert len(files) == 1, files
    out = kafka_cli.run(TOOL, "--files", files[0]).stdout
    # "version: 0 producerId: 0 firstOffset: 5 lastOffset: 8 lastStableOffset: 9"
    entries = [dict(FIELD.findall(line)) for line in out.splitlines() if line.startswith("version:")]
    assert len(entries) == 1, out
    entry = {k: int(v) for k, v in entries[0].items()}
    assert entry["producerId"] == producer_id
    assert (entry["firstOffset"], entry["lastOffset"]) == (aborted[0]["offset"], abort_marker)
    # the partition's last stable offset once the abort completed: past the marker (nothing else open)
    assert entry["lastStableOffset"] == abort_marker + 1
    # partition 1 had no aborted transaction: no entry (Kafka creates the file lazily; an empty one
    # is skipped by `segments`)
    assert segments(broker, topic, 1, ".txnindex") == []
