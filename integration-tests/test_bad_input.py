"""Malformed input on raw TCP sockets: the broker must drop (or answer) the bad connection and
go on serving everyone else, with every topic's data intact.

Each test creates a one-partition topic and produces 20 known records with confluent, sends
one kind of bad input with hand-built bytes (`socket` + `struct`, no client library), then
checks on a NEW connection that (a) a hand-built ApiVersions v0 round trip still works and
(b) confluent reads back exactly the 20 records and the log end offset is still 20 (so the bad
input wrote nothing), plus whatever the case itself asserts about the bad connection.

Wire formats (Kafka protocol guide): a request is `int32 size` + header + body. Request header
v1 = api_key int16, api_version int16, correlation_id int32, client_id nullable string (int16
length); v2 (flexible versions) adds an empty tagged-field section. Response header v0 =
correlation_id; v1 adds tagged fields. ApiVersions responses always use header v0 (KIP-511).
Every wait has a deadline (socket timeouts); nothing sleeps.
"""

import random
import socket
import struct
import time
from typing import List, Optional, Tuple

import pytest

from harness import paths
from harness.wire import crc32c
from harness.drivers import run

RECORD_COUNT = 20
IO_TIMEOUT_S = 10.0
CLOSE_DEADLINE_S = 5.0
CLIENT_ID = b"brook-bad-input-test"

API_PRODUCE = 0
API_GET_TELEMETRY_SUBSCRIPTIONS = 71
API_VERSIONS = 18
NONE = 0
CORRUPT_MESSAGE = 2
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
# A broker that reads on into a 2 GiB frame would grow by far more than this.
MAX_RSS_GROWTH_KB = 128 * 1024


def target() -> str:
    """The broker the suite runs against ("brook" or "kafka"); see harness/paths.py."""
    return paths.target()


# ---------------------------------------------------------------- encoding helpers


def nullable_string(value: Optional[bytes]) -> bytes:
    """Classic (non-compact) nullable string: int16 length, -1 for null."""
    if value is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(value)) + value


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def varint(n: int) -> bytes:
    """Zigzag varint, as record fields use (record batch v2)."""
    return uvarint((n << 1) ^ (n >> 63))


def compact_string(value: Optional[bytes]) -> bytes:
    """Compact nullable string (flexible versions): uvarint length+1, 0 for null."""
    if value is None:
        return uvarint(0)
    return uvarint(len(value) + 1) + value


def header_v1(api_key: int, api_version: int, correlation_id: int) -> bytes:
    return struct.pack(">hhi", api_key, api_version, correlation_id) + nullable_string(CLIENT_ID)


def header_v2(api_key: int, api_version: int, correlation_id: int) -> bytes:
    return header_v1(api_key, api_version, correlation_id) + uvarint(0)  # no tagged fields


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def record_batch_v2(key: bytes, value: bytes, timestamp_ms: int, flip_crc_bit: bool = False) -> bytes:
    """One uncompressed, non-idempotent record batch v2 holding one record.

    The CRC covers attributes..end (not base offset, length, leader epoch, magic, crc), so the
    broker can stamp base offset and leader epoch without recomputing it."""
    body = (
        struct.pack(">b", 0)  # record attributes (unused)
        + varint(0)  # timestampDelta
        + varint(0)  # offsetDelta
        + varint(len(key))
        + key
        + varint(len(value))
        + value
        + varint(0)  # no headers
    )
    records = varint(len(body)) + body
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            0,  # attributes: no compression, CreateTime, not transactional, not control
            0,  # lastOffsetDelta
            timestamp_ms,  # baseTimestamp
            timestamp_ms,  # maxTimestamp
            -1,  # producerId: not idempotent
            -1,  # producerEpoch
            -1,  # baseSequence
            1,  # recordCount
        )
        + records
    )
    crc = crc32c(after_crc)
    if flip_crc_bit:
        crc ^= 0x00000100
    tail = struct.pack(">ibI", -1, 2, crc) + after_crc  # partitionLeaderEpoch, magic, crc
    return struct.pack(">qi", 0, len(tail)) + tail  # baseOffset, batchLength


# ---------------------------------------------------------------- decoding helpers


class Reader:
    """Sequential big-endian reader over one response; `done()` asserts nothing is left."""

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        assert n >= 0 and self.pos + n <= len(self.data), (
            f"response truncated: need {n} bytes at {self.pos} of {len(self.data)}: {self.data.hex()}"
        )
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str):
        values = struct.unpack(">" + fmt, self.take(struct.calcsize(">" + fmt)))
        return values[0] if len(values) == 1 else values

    def nullable_string(self) -> Optional[bytes]:
        n = self.unpack("h")
        return None if n == -1 else self.take(n)

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            assert shift < 35, "uvarint too long"

    def empty_tagged_fields(self) -> None:
        assert self.uvarint() == 0, "unexpected tagged fields"

    def done(self) -> None:
        assert self.pos == len(self.data), f"{len(self.data) - self.pos} trailing bytes: {self.data[self.pos:].hex()}"


# ---------------------------------------------------------------- socket helpers


def connect(broker) -> socket.socket:
    s = socket.create_connection((broker.host, broker.port), timeout=IO_TIMEOUT_S)
    s.settimeout(IO_TIMEOUT_S)
    return s


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, f"connection closed after {len(buf)} of {n} bytes"
        buf += chunk
    return buf


def read_response(s: socket.socket) -> bytes:
    """One response frame's payload (header + body), within IO_TIMEOUT_S."""
    (size,) = struct.unpack(">i", recv_exact(s, 4))
    assert 4 <= size <= 16 * 1024 * 1024, f"implausible response size {size}"
    return recv_exact(s, size)


def wait_closed(s: socket.socket, deadline_s: float = CLOSE_DEADLINE_S) -> Tuple[bool, bytes]:
    """Read until the peer closes (EOF or reset) or the deadline passes: (closed, bytes read)."""
    received = b""
    deadline = time.monotonic() + deadline_s
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False, received
        s.settimeout(remaining)
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return True, received
        except socket.timeout:
            return False, received
        if not chunk:
            return True, received
        received += chunk


def send_ignoring_reset(s: socket.socket, data: bytes) -> None:
    """Send, tolerating a broker that already hung up (what these tests expect it to do)."""
    try:
        s.sendall(data)
    except (ConnectionResetError, BrokenPipeError):
        pass


def assert_closed_without_reply(s: socket.socket, what: str) -> None:
    closed, received = wait_closed(s)
    assert closed, f"broker kept the connection open {CLOSE_DEADLINE_S} s after {what}"
    assert received == b"", f"broker answered {what} with {received.hex()}"


# ---------------------------------------------------------------- protocol round trips


def parse_api_versions_v0(payload: bytes, correlation_id: int) -> Tuple[int, dict]:
    """ApiVersions v0 response: header v0, error_code, [api_key, min, max]. -> (error, {key: (min, max)})"""
    r = Reader(payload)
    assert r.unpack("i") == correlation_id
    error_code = r.unpack("h")
    count = r.unpack("i")
    assert 0 <= count <= 1000, f"implausible api count {count}"
    apis = {}
    for _ in range(count):
        key, lo, hi = r.unpack("hhh")
        assert key not in apis, f"api {key} listed twice"
        assert 0 <= lo <= hi, f"api {key} has range {lo}..{hi}"
        apis[key] = (lo, hi)
    r.done()
    return error_code, apis


def api_versions_round_trip(s: socket.socket, correlation_id: int) -> dict:
    s.sendall(frame(header_v1(API_VERSIONS, 0, correlation_id)))  # v0 has an empty body
    error_code, apis = parse_api_versions_v0(read_response(s), correlation_id)
    assert error_code == NONE
    return apis


def assert_new_connection_serves_api_versions(broker) -> None:
    correlation_id = random.randrange(1, 2**31)
    with connect(broker) as s:
        apis = api_versions_round_trip(s, correlation_id)
    assert apis[API_VERSIONS][0] == 0, apis
    assert API_PRODUCE in apis, apis


def produce_v8(s: socket.socket, correlation_id: int, topic: str, batch: bytes) -> Tuple[int, int]:
    """Send Produce v8 (acks=-1) with one partition's batch; -> (error_code, base_offset)."""
    body = (
        nullable_string(None)  # transactional_id
        + struct.pack(">hi", -1, int(IO_TIMEOUT_S * 1000))  # acks=all, timeout_ms
        + struct.pack(">i", 1)  # one topic
        + nullable_string(topic.encode())
        + struct.pack(">i", 1)  # one partition
        + struct.pack(">i", 0)  # partition index
        + struct.pack(">i", len(batch))
        + batch
    )
    s.sendall(frame(header_v1(API_PRODUCE, 8, correlation_id) + body))
    r = Reader(read_response(s))
    assert r.unpack("i") == correlation_id
    assert r.unpack("i") == 1, "expected one topic in the produce response"
    assert r.nullable_string() == topic.encode()
    assert r.unpack("i") == 1, "expected one partition in the produce response"
    index, error_code, base_offset, _log_append_time, _log_start = r.unpack("ihqqq")
    assert index == 0
    for _ in range(r.unpack("i")):  # record_errors (v8+)
        r.unpack("i")
        r.nullable_string()
    r.nullable_string()  # error_message (v8+)
    r.unpack("i")  # throttle_time_ms
    r.done()
    return error_code, base_offset


# ---------------------------------------------------------------- topic data (confluent)


def known_records() -> List[dict]:
    return [{"key": f"k-{i:02d}", "value": f"value-{i:02d}-{'x' * i}"} for i in range(RECORD_COUNT)]


def setup_topic(broker, topic: str) -> None:
    """Create a 1-partition topic and produce the 20 known records at offsets 0..19."""
    assert run("confluent", "create-topic", broker.bootstrap, "--topic", topic, "--partitions", 1) == {"ok": True}
    acks = run("confluent", "produce", broker.bootstrap, "--topic", topic, records=known_records())
    assert [(a["partition"], a["offset"]) for a in acks] == [(0, i) for i in range(RECORD_COUNT)]


def log_end_offset(broker, topic: str) -> int:
    return run("confluent", "offsets", broker.bootstrap, "--topic", topic, "--spec", "latest")["0"]["offset"]


def consume(broker, topic: str, count: int) -> List[dict]:
    return run(
        "confluent", "consume", broker.bootstrap, "--topic", topic, "--count", count,
        "--from", "earliest", "--timeout-ms", 30000, timeout=90,
    )


def assert_topic_intact(broker, topic: str, extra: int = 0) -> List[dict]:
    """Exactly the 20 known records at offsets 0..19, then `extra` more; nothing beyond."""
    total = RECORD_COUNT + extra
    got = consume(broker, topic, total)
    assert [(r["offset"], r["key"], r["value"]) for r in got[:RECORD_COUNT]] == [
        (i, rec["key"], rec["value"]) for i, rec in enumerate(known_records())
    ]
    assert len(got) == total, f"expected {total} records, got {len(got)}"
    assert log_end_offset(broker, topic) == total
    return got


def assert_still_serving(broker, topic: str, extra: int = 0) -> List[dict]:
    assert_new_connection_serves_api_versions(broker)
    return assert_topic_intact(broker, topic, extra)


def broker_pid(broker) -> Optional[int]:
    """The broker's OS pid: `broker.pid` if the harness exposes it, else its Popen's pid
    (kafka-ref.sh execs java, so that pid is the JVM's)."""
    pid = getattr(broker, "pid", None)
    if pid is None:
        proc = getattr(broker, "_proc", None)
        pid = getattr(proc, "pid", None)
    return pid


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


# ---------------------------------------------------------------- the cases


def test_crc32c_matches_the_castagnoli_check_value():
    # The standard check value for CRC-32C over "123456789" (RFC 3720 appendix B.4).
    assert crc32c(b"123456789") == 0xE3069283


def test_garbage_bytes_are_dropped_and_the_broker_keeps_serving(broker, topic):
    setup_topic(broker, topic)
    garbage = random.Random(0xB200C).randbytes(64)  # fixed seed: the same garbage every run
    with connect(broker) as s:
        send_ignoring_reset(s, garbage)
        try:
            s.shutdown(socket.SHUT_WR)  # "then close": we send nothing more
        except OSError:
            pass  # already reset by the broker
        assert_closed_without_reply(s, "64 garbage bytes")
    assert_still_serving(broker, topic)


def test_a_2_gib_size_prefix_is_refused_without_buffering(broker, topic):
    setup_topic(broker, topic)
    pid = broker_pid(broker)
    rss_before = rss_kb(pid) if pid is not None else None
    with connect(broker) as s:
        # 0x7fffffff is far over socket.request.max.bytes (100 MiB by default): the broker must
        # refuse it from the prefix alone, without waiting for (or allocating) 2 GiB.
        send_ignoring_reset(s, struct.pack(">i", 0x7FFFFFFF) + header_v1(API_VERSIONS, 0, 7))
        assert_closed_without_reply(s, "a 2 GiB size prefix")
    if pid is not None:
        growth = rss_kb(pid) - rss_before
        assert growth < MAX_RSS_GROWTH_KB, f"broker RSS grew by {growth} kB after a 2 GiB size prefix"
    assert_still_serving(broker, topic)


def test_a_truncated_frame_then_close_leaves_the_broker_serving(broker, topic):
    setup_topic(broker, topic)
    with connect(broker) as s:
        # Size says 100 but only 10 bytes follow (the start of a valid ApiVersions header).
        s.sendall(struct.pack(">i", 100) + header_v1(API_VERSIONS, 0, 8)[:10])
        s.shutdown(socket.SHUT_WR)
        # The broker must notice the EOF mid-frame, answer nothing, and close its side.
        assert_closed_without_reply(s, "a frame truncated at 10 of 100 bytes")
    assert_still_serving(broker, topic)


def test_an_unknown_api_key_closes_the_connection(broker, topic):
    setup_topic(broker, topic)
    with connect(broker) as s:
        # Well-formed header v1 for api key 0x7fff, which no Kafka version defines: the broker
        # cannot know the response format, so Kafka closes the connection.
        send_ignoring_reset(s, frame(header_v1(0x7FFF, 0, 9) + b"\x00" * 8))
        assert_closed_without_reply(s, "an unknown api key")
    assert_still_serving(broker, topic)


@pytest.mark.parametrize("count", [0x7FFFFFFF, 0x10000000])
def test_an_absurd_array_count_closes_the_connection_and_costs_no_memory(broker, topic, count):
    """A Metadata v1 request of a few bytes claiming billions of topics: a decoder that
    reserves room for the claimed count before reading would ask for ~150 GB. The broker
    must close this connection (the body is truncated) and keep serving, without its
    memory growing."""
    setup_topic(broker, topic)
    pid = broker_pid(broker)
    rss_before = rss_kb(pid) if pid else None
    with connect(broker) as s:
        send_ignoring_reset(s, frame(header_v1(3, 1, 77) + struct.pack(">i", count)))
        assert_closed_without_reply(s, "an absurd array count")
    if rss_before is not None:
        assert rss_kb(pid) - rss_before < MAX_RSS_GROWTH_KB
    assert_still_serving(broker, topic)


def test_a_batch_with_a_wrong_crc_is_refused_and_a_correct_one_appended(broker, topic):
    setup_topic(broker, topic)
    key, value = b"key-21", b"value-21-hand-built"
    timestamp_ms = int(time.time() * 1000)
    with connect(broker) as s:
        error_code, _ = produce_v8(s, 101, topic, record_batch_v2(key, value, timestamp_ms, flip_crc_bit=True))
        assert error_code == CORRUPT_MESSAGE
    assert_still_serving(broker, topic)

    # Positive control: the same batch with the right CRC is accepted as offset 20, which shows
    # the refusal above was for the CRC alone and not for some other flaw in the hand encoding.
    with connect(broker) as s:
        error_code, base_offset = produce_v8(s, 102, topic, record_batch_v2(key, value, timestamp_ms))
        assert (error_code, base_offset) == (NONE, RECORD_COUNT)
    got = assert_still_serving(broker, topic, extra=1)
    last = got[RECORD_COUNT]
    assert (last["partition"], last["offset"], last["key"], last["value"]) == (0, RECORD_COUNT, "key-21", "value-21-hand-built")
    assert last["timestamp"] == timestamp_ms
    assert last["headers"] == []


def test_api_versions_at_an_unknown_version_gets_a_v0_error_response_listing_the_apis(broker, topic):
    setup_topic(broker, topic)
    with connect(broker) as s:
        # ApiVersions v99 in the flexible layout a newer client would use (header v2, v3+ body).
        # KIP-511: the broker answers in v0 format with UNSUPPORTED_VERSION and its api list,
        # so the client can retry at a version both sides know.
        body = compact_string(b"brook-tests") + compact_string(b"0.0.1") + uvarint(0)
        s.sendall(frame(header_v2(API_VERSIONS, 99, 4242) + body))
        error_code, apis = parse_api_versions_v0(read_response(s), 4242)
        assert error_code == UNSUPPORTED_VERSION
        assert apis, "the UNSUPPORTED_VERSION response must list the supported apis"
        assert apis[API_VERSIONS][0] == 0 and apis[API_VERSIONS][1] < 99, apis
        # The same connection stays usable.
        again = api_versions_round_trip(s, 4243)
        assert again[API_VERSIONS] == apis[API_VERSIONS]
    assert_still_serving(broker, topic)


@pytest.mark.parametrize("name,version", [
    (b"bad\nname\x1b", b"1.0"), (b"-starts-with-dash", b"1.0"), (b"brook-tests", b"1.0 beta"), (b"", b"1.0"),
], ids=["control-chars", "leading-dash", "space-in-version", "empty-name"])
def test_api_versions_v3_with_an_invalid_client_software_name_gets_invalid_request(broker, topic, name, version):
    setup_topic(broker, topic)
    with connect(broker) as s:
        # KIP-511: the name and version must match [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
        # (they become metric and log labels); Kafka answers INVALID_REQUEST and no api list.
        body = compact_string(name) + compact_string(version) + uvarint(0)
        s.sendall(frame(header_v2(API_VERSIONS, 3, 4300) + body))
        r = Reader(read_response(s))  # ApiVersions answers with header v0 at every version
        assert r.unpack("i") == 4300
        error_code = r.unpack("h")
        api_count = r.uvarint() - 1
        assert (error_code, api_count) == (INVALID_REQUEST, 0)
        # The connection stays usable, and a valid name is served.
        assert API_PRODUCE in api_versions_round_trip(s, 4301)
    assert_still_serving(broker, topic)


# Apache Kafka serves GetTelemetrySubscriptions (KIP-714), so "a known API the broker does not
# serve" exists only on brook (client telemetry is not implemented): the test is defined only
# for that target (not skipped on kafka, simply absent).
if target() != "kafka":

    def test_a_known_api_the_broker_does_not_serve_gets_unsupported_version_in_its_format(broker, topic):
        setup_topic(broker, topic)
        with connect(broker) as s:
            advertised = api_versions_round_trip(s, 500)
            assert API_GET_TELEMETRY_SUBSCRIPTIONS not in advertised, (
                "brook now serves GetTelemetrySubscriptions: point this test at another API it does not serve"
            )
            # GetTelemetrySubscriptions v0 (flexible): client_instance_id (a zero uuid),
            # tagged fields.
            body = bytes(16) + uvarint(0)
            s.sendall(frame(header_v2(API_GET_TELEMETRY_SUBSCRIPTIONS, 0, 501) + body))
            # Response: header v1 (correlation id, tagged fields), throttle_time_ms,
            # error_code, then the subscription's fields.
            r = Reader(read_response(s))
            assert r.unpack("i") == 501
            r.empty_tagged_fields()
            throttle_time_ms, error_code = r.unpack("ih")
            assert error_code == UNSUPPORTED_VERSION
            assert throttle_time_ms >= 0
            # And the connection is still usable afterwards.
            assert api_versions_round_trip(s, 502) == advertised
        assert_still_serving(broker, topic)
