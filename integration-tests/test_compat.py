"""The compatibility matrix: every scenario against every client that can express it.

Each test drives one real client (harness.drivers) against the `broker` fixture and asserts on
the data read back. A client appears in a scenario's parameters only if its capability row in
harness/drivers.py has what the scenario needs, so every listed cell is a real cell: nothing
is skipped for missing tooling. Topics are created by the client itself, or by confluent for
clients without an admin API (kcat); that helper is never the thing under test.

Every client's answer is checked exactly: each driver reports the controller id in `metadata`
(the one node, node.id 1, on both targets) and each record's real offset from `produce` with
acks=all, so no cell accepts a missing value.

Idempotence is proved under a fault: the broker is reached only through harness/fault_proxy.py
(it advertises the proxy), which withholds the first Produce responses and drops those
connections after the broker has written the batches, so the client retries batches the log
already holds; each record must still be written once, in order, at its reported offset. A
control (Java with enable.idempotence=false) shows the same fault writes retried batches twice.
"""

import random
import string
import time
from collections import Counter

import pytest

from harness import client_config, drivers, paths, wire
from harness.broker import Broker, serving
from harness.drivers import CLIENTS, clients_with, run
from harness.fault_proxy import FaultProxy, proxied_broker_overrides

CODECS = ["gzip", "snappy", "lz4", "zstd"]
LARGE_VALUE_BYTES = 900 * 1024
BIG_REQUEST_BYTES = 2 * 1024 * 1024
DEADLINE_S = 30.0
NODE_ID = 1  # the single node's node.id on both targets (harness/broker.py, scripts/kafka-ref.sh)
# The idempotence fault: this many Produce responses withheld in a row (the first to a batch's
# first send, the next to its retry), so the broker sees a written batch come back twice. Each
# costs franz-go a 5 s metadata refresh (its MetadataMinAge) before it retries.
WITHHELD_PRODUCE_RESPONSES = 2
FAULT_RECORDS = 100
# Small requests (1 KB values, at most 16 KB a request) make most clients send several batches
# with several in flight, so a dropped connection takes written batches after the first with it.
FAULT_MAX_REQUEST_BYTES = 16384


def wait_for(what: str, probe, deadline_s: float = DEADLINE_S, interval_s: float = 0.3):
    """Poll `probe()` until it returns a truthy value; fail naming `what` and the last value."""
    deadline = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval_s)
    pytest.fail(f"timed out after {deadline_s} s waiting for {what}; last value: {last!r}")


def create_topic(client: str, broker, topic: str, partitions: int) -> None:
    """Create `topic` with the client's admin (or confluent's) and wait until it is visible."""
    admin = drivers.admin_client_for(client)
    assert run(admin, "create-topic", broker.bootstrap, "--topic", topic, "--partitions", partitions) == {"ok": True}

    def visible():
        md = run(admin, "metadata", broker.bootstrap)
        return md["topics"].get(topic, {}).get("partitions") == partitions

    wait_for(f"{topic} with {partitions} partitions in metadata", visible)


def consume(client: str, broker, topic: str, count: int, *extra, timeout_ms: int = 60000) -> list:
    return run(client, "consume", broker.bootstrap, "--topic", topic, "--count", count, "--from", "earliest", "--timeout-ms", timeout_ms, *extra, timeout=timeout_ms / 1000 + 60)


def now_ms() -> int:
    return int(time.time() * 1000)


def as_tuple(r: dict):
    return (r["key"], r["value"], tuple(tuple(h) for h in r["headers"]))


@pytest.mark.parametrize("client", CLIENTS)
def test_metadata_lists_the_one_broker_and_a_created_topic(client, broker, topic):
    create_topic(client, broker, topic, 3)
    md = run(client, "metadata", broker.bootstrap)
    assert [(b["id"], b["host"], b["port"]) for b in md["brokers"]] == [(NODE_ID, broker.host, broker.port)]
    # KRaft answers Metadata's controller_id with a live broker: the one node. Every driver
    # reports it (none answers null or -1 here).
    assert md["controller_id"] == NODE_ID
    assert md["topics"][topic] == {"partitions": 3}


@pytest.mark.parametrize("client", clients_with("admin"))
def test_topic_admin_create_describe_list_grow_delete(client, broker, topic):
    b = broker.bootstrap
    broker_id = run(client, "metadata", b)["brokers"][0]["id"]
    assert run(client, "create-topic", b, "--topic", topic, "--partitions", 3) == {"ok": True}

    def described(n):
        desc = run(client, "describe-topic", b, "--topic", topic)
        return desc if len(desc["partitions"]) == n else None

    desc = wait_for(f"{topic} described with 3 partitions", lambda: described(3))
    assert desc["name"] == topic
    assert [p["partition"] for p in desc["partitions"]] == [0, 1, 2]
    for p in desc["partitions"]:
        assert (p["leader"], p["replicas"], p["isr"]) == (broker_id, [broker_id], [broker_id])
    assert topic in run(client, "list-topics", b)["topics"]

    assert run(client, "create-partitions", b, "--topic", topic, "--total", 5) == {"ok": True}
    desc = wait_for(f"{topic} described with 5 partitions", lambda: described(5))
    assert [p["partition"] for p in desc["partitions"]] == [0, 1, 2, 3, 4]
    assert all(p["leader"] == broker_id for p in desc["partitions"])

    assert run(client, "delete-topic", b, "--topic", topic) == {"ok": True}
    wait_for(f"{topic} gone from list-topics", lambda: topic not in run(client, "list-topics", b)["topics"])


@pytest.mark.parametrize("client", CLIENTS)
def test_keyed_roundtrip_keeps_every_record_once_in_partition_order(client, broker, topic):
    create_topic(client, broker, topic, 3)
    explicit_ts = "timestamps" in drivers.CAPABILITIES[client]
    t0 = now_ms() - 3_600_000
    records = []
    for i in range(1000):
        r = {"key": f"key-{i % 50:02d}", "value": f"value-{i:04d}-{client}", "headers": [["seq", str(i)], ["origin", client]]}
        if explicit_ts:
            r["timestamp"] = t0 + i
        records.append(r)
    before = now_ms()
    produced = run(client, "produce", broker.bootstrap, "--topic", topic, "--acks", "all", records=records)
    after = now_ms()
    assert len(produced) == 1000

    consumed = consume(client, broker, topic, 1000)
    assert len(consumed) == 1000
    assert sorted(as_tuple(r) for r in consumed) == sorted(as_tuple(r) for r in records)
    by_value = {r["value"]: r for r in consumed}
    assert len(by_value) == 1000
    for i, r in enumerate(records):
        got = by_value[r["value"]]
        if explicit_ts:
            assert got["timestamp"] == r["timestamp"]
        else:  # the client stamps CreateTime itself
            assert before - 1000 <= got["timestamp"] <= after + 1000
        # acks=all: every client learns each record's offset (none reports -1 here).
        assert (produced[i]["partition"], produced[i]["offset"]) == (got["partition"], got["offset"])

    partitions_of_key = {}
    for r in consumed:
        partitions_of_key.setdefault(r["key"], set()).add(r["partition"])
    assert all(len(ps) == 1 for ps in partitions_of_key.values()), partitions_of_key

    for p in {r["partition"] for r in consumed}:
        in_p = [r for r in consumed if r["partition"] == p]
        assert [r["offset"] for r in in_p] == list(range(len(in_p)))
        seqs = [int(r["value"].split("-")[1]) for r in in_p]
        assert seqs == sorted(seqs), f"partition {p} out of produce order"


CODEC_CELLS = [
    pytest.param(client, codec, id=f"{codec}-{client}") for codec in CODECS for client in clients_with(f"codec:{codec}")
]


@pytest.mark.parametrize("client,codec", CODEC_CELLS)
def test_codec_roundtrip(client, codec, broker, topic):
    create_topic(client, broker, topic, 1)
    records = [
        {"key": f"k{i % 7}", "value": f"{codec}-{i:04d}-" + "compressible " * 20, "headers": [["codec", codec]]} for i in range(200)
    ]
    produced = run(client, "produce", broker.bootstrap, "--topic", topic, "--codec", codec, records=records)
    assert [p["offset"] for p in produced] == list(range(200))
    consumed = consume(client, broker, topic, 200)
    assert [as_tuple(r) for r in consumed] == [as_tuple(r) for r in records]
    assert [r["offset"] for r in consumed] == list(range(200))


@pytest.mark.parametrize("client", CLIENTS)
def test_large_message_comes_back_byte_identical(client, broker, topic):
    create_topic(client, broker, topic, 1)
    rng = random.Random(7)
    value = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(LARGE_VALUE_BYTES))
    produced = run(client, "produce", broker.bootstrap, "--topic", topic, "--max-request-size", BIG_REQUEST_BYTES, records=[{"key": "big", "value": value}])
    assert produced == [{"partition": 0, "offset": 0}]
    consumed = consume(client, broker, topic, 1, "--max-bytes", BIG_REQUEST_BYTES)
    assert len(consumed) == 1
    got = consumed[0]["value"]
    assert len(got) == len(value) and got == value, "900 KB value differs"  # no 900 KB diff in the report
    assert consumed[0]["key"] == "big"


def _produce_ten_timestamped(client, broker, topic) -> int:
    """10 records at t0+0s .. t0+9s on a 1-partition topic; returns t0."""
    create_topic(client, broker, topic, 1)
    t0 = (now_ms() - 3_600_000) // 1000 * 1000
    records = [{"key": f"k{i}", "value": f"v{i}", "timestamp": t0 + i * 1000} for i in range(10)]
    # kcat cannot stamp timestamps, so confluent writes the data it then queries.
    producer = client if "timestamps" in drivers.CAPABILITIES[client] else "confluent"
    produced = run(producer, "produce", broker.bootstrap, "--topic", topic, records=records)
    assert [p["offset"] for p in produced] == list(range(10))
    return t0


def _offset(client, broker, topic, spec) -> int:
    result = run(client, "offsets", broker.bootstrap, "--topic", topic, "--spec", spec)
    assert list(result) == ["0"]
    return result["0"]["offset"]


@pytest.mark.parametrize("client", CLIENTS)
def test_offsets_by_earliest_latest_and_timestamp(client, broker, topic):
    t0 = _produce_ten_timestamped(client, broker, topic)
    assert _offset(client, broker, topic, "earliest") == 0
    assert _offset(client, broker, topic, "latest") == 10
    assert _offset(client, broker, topic, t0 + 5000) == 5
    assert _offset(client, broker, topic, t0 + 4500) == 5  # first record at or after the time
    assert _offset(client, broker, topic, t0) == 0
    # After the last record Kafka answers offset -1 (no such record); kafkajs and franz-go
    # substitute the log end offset (harness.drivers.PAST_TIMESTAMP_GIVES_LATEST).
    expected = 10 if client in drivers.PAST_TIMESTAMP_GIVES_LATEST else -1
    assert _offset(client, broker, topic, t0 + 60_000) == expected


@pytest.mark.parametrize("client", clients_with("max-timestamp"))
def test_offsets_max_timestamp_finds_the_newest_record(client, broker, topic):
    t0 = _produce_ten_timestamped(client, broker, topic)
    result = run(client, "offsets", broker.bootstrap, "--topic", topic, "--spec", "max-timestamp")
    assert result["0"]["offset"] == 9
    assert result["0"]["timestamp"] == t0 + 9000


@pytest.fixture(scope="module")
def proxied_node(tmp_path_factory):
    """A broker of the target kind that advertises a FaultProxy in front of it, so every client
    connection (bootstrap and leader) goes through the proxy: (broker, proxy)."""
    b = Broker(paths.target(), tmp_path_factory.mktemp("proxied"))
    proxy = FaultProxy(b.bootstrap)
    b.overrides.update(proxied_broker_overrides(proxy.port))
    b.start()
    yield b, proxy
    proxy.close()
    b.stop()
    faults = b.teardown_faults()
    assert not faults, f"unclean broker teardown: {faults}"


@pytest.fixture
def proxied(request, proxied_node):
    """The proxied broker for one test, its fault disarmed before and after."""
    b, proxy = proxied_node
    serving(request, b)
    proxy.withhold_produce_responses(0)
    yield b, proxy
    proxy.withhold_produce_responses(0)


def produce_through_withheld_responses(client, broker, proxy, topic, *options) -> tuple:
    """Produce FAULT_RECORDS records to 1-partition `topic` through the proxy while it withholds
    the first WITHHELD_PRODUCE_RESPONSES Produce responses; (records, produced, log end offset
    read from the broker itself)."""
    create_topic(client, proxy, topic, 1)
    records = [{"key": f"k{i % 10}", "value": f"idem-{i:03d}-" + "x" * 1000} for i in range(FAULT_RECORDS)]
    proxy.withhold_produce_responses(WITHHELD_PRODUCE_RESPONSES)
    produced = run(client, "produce", proxy.bootstrap, "--topic", topic, "--acks", "all",
                   "--max-request-size", FAULT_MAX_REQUEST_BYTES, *options, records=records)
    # The fault happened: each withheld response answered a batch the broker had written.
    assert proxy.withheld == WITHHELD_PRODUCE_RESPONSES, f"forwarded: {proxy.produce_responses_forwarded}"
    end = wire.list_offsets(broker.bootstrap, topic, [0], wire.LATEST)[0]
    assert end["error"] == 0, end
    return records, produced, end["offset"]


@pytest.mark.parametrize("client", clients_with("idempotent"))
def test_idempotent_producer_retrying_written_batches_writes_each_record_once_in_order(client, proxied, topic):
    broker, proxy = proxied
    records, produced, end = produce_through_withheld_responses(client, broker, proxy, topic, "--idempotent")
    assert end == FAULT_RECORDS, "the broker wrote a retried batch again"
    # A retry the broker recognises is answered with the offsets of the first write.
    assert [(p["partition"], p["offset"]) for p in produced] == [(0, i) for i in range(FAULT_RECORDS)]
    consumed = consume(client, proxy, topic, FAULT_RECORDS, timeout_ms=30000)
    assert [r["value"] for r in consumed] == [r["value"] for r in records]
    assert [r["offset"] for r in consumed] == list(range(FAULT_RECORDS))


def test_without_idempotence_the_same_fault_writes_retried_batches_twice(proxied, topic, tmp_path):
    """The control: the proxy's fault alone duplicates records when the producer has no id and
    sequence (Java, enable.idempotence=false, its default retries), so the test above cannot
    pass on a broker that ignores them."""
    broker, proxy = proxied
    config = client_config.write(tmp_path / "no-idempotence.properties", {"enable.idempotence": "false"})
    records, _, end = produce_through_withheld_responses("java", broker, proxy, topic, "--client-config", config)
    assert end > FAULT_RECORDS
    consumed = consume("java", proxy, topic, end)
    assert [r["offset"] for r in consumed] == list(range(end))
    copies = Counter(r["value"] for r in consumed)
    assert set(copies) == {r["value"] for r in records}
    assert max(copies.values()) > 1


@pytest.mark.parametrize("client", CLIENTS)
def test_acknowledged_records_survive_a_restart(client, broker, topic):
    create_topic(client, broker, topic, 3)
    records = [{"key": f"k{i % 30}", "value": f"durable-{i:03d}", "headers": [["i", str(i)]]} for i in range(300)]
    produced = run(client, "produce", broker.bootstrap, "--topic", topic, "--acks", "all", records=records)
    assert len(produced) == 300
    broker.restart()
    consumed = consume(client, broker, topic, 300)
    assert sorted(as_tuple(r) for r in consumed) == sorted(as_tuple(r) for r in records)
    where = {r["value"]: (r["partition"], r["offset"]) for r in consumed}
    assert [where[r["value"]] for r in records] == [(p["partition"], p["offset"]) for p in produced]
