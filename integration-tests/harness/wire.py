"""Single Kafka requests sent to ONE chosen broker, over a plain socket.

The cluster tests need what no client library offers: "ask broker 2 itself" (its own metadata
view, leader epochs, a group's coordinator) and "send this admin request to that broker, not to
the controller the client would pick". Each call opens a connection to `bootstrap` (HOST:PORT),
sends one request at a fixed version that Apache Kafka 4.x and Brook both accept (non-flexible,
or flexible where a test needs a newest version: compact strings and arrays, tagged fields,
request header v2, response header v1), and returns the decoded response as plain dicts.
Schemas follow Kafka's message JSON files (clients/src/main/resources/common/message/*.json);
field names are Kafka's, in snake_case.

A node whose client listener is secured (harness/door.py) is reached over TLS and logged in to
with the harness's SASL/PLAIN login first, transparently.

Invariant: a call never retries; a connection error raises OSError, and error codes are
returned for the caller to assert on (see ERRORS for the names used in messages).
"""

import socket
import struct
from typing import Dict, List, Optional

from . import door

CLIENT_ID = b"brook-cluster-tests"
TIMEOUT_S = 10.0

ERRORS = {
    0: "NONE", 3: "UNKNOWN_TOPIC_OR_PARTITION", 5: "LEADER_NOT_AVAILABLE", 6: "NOT_LEADER_OR_FOLLOWER",
    7: "REQUEST_TIMED_OUT", 14: "COORDINATOR_LOAD_IN_PROGRESS", 15: "COORDINATOR_NOT_AVAILABLE",
    19: "NOT_ENOUGH_REPLICAS", 20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND", 25: "UNKNOWN_MEMBER_ID",
    36: "TOPIC_ALREADY_EXISTS", 37: "INVALID_PARTITIONS", 38: "INVALID_REPLICATION_FACTOR",
    41: "NOT_CONTROLLER", 54: "SECURITY_DISABLED", 82: "FENCED_INSTANCE_ID",
    110: "FENCED_MEMBER_EPOCH", 111: "UNRELEASED_INSTANCE_ID", 113: "STALE_MEMBER_EPOCH",
}

# -- a minimal codec: a schema is a list of (name, type); type is a primitive name or
#    ("array", schema-or-primitive). Strings are "string" (non-null) or "nstring" (nullable);
#    "nbytes" is nullable bytes (int32 length). Flexible versions: "cstring" / "cnstring"
#    (compact), ("carray", element), and "tags" (a tagged-field section: sent empty, read
#    and skipped; its value in a request dict may be left out). "uuid" is 32 hex digits.
#    ("nstruct", schema): a flexible nullable struct (an int8 marker, -1 for null; responses only).
_FIXED = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q", "bool": ">?", "float64": ">d"}


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _encode(schema, value) -> bytes:
    if isinstance(schema, list):
        return b"".join(_encode(t, None if t == "tags" else value[name]) for name, t in schema)
    if isinstance(schema, tuple) and schema[0] == "carray":
        if value is None:
            return _uvarint(0)
        return _uvarint(len(value) + 1) + b"".join(_encode(schema[1], v) for v in value)
    if isinstance(schema, tuple):  # ("array", element)
        if value is None:
            return struct.pack(">i", -1)
        return struct.pack(">i", len(value)) + b"".join(_encode(schema[1], v) for v in value)
    if schema in _FIXED:
        return struct.pack(_FIXED[schema], value)
    if schema in ("string", "nstring"):
        if value is None:
            return struct.pack(">h", -1)
        raw = value.encode()
        return struct.pack(">h", len(raw)) + raw
    if schema in ("cstring", "cnstring"):
        if value is None:
            return _uvarint(0)
        raw = value.encode()
        return _uvarint(len(raw) + 1) + raw
    if schema == "nbytes":
        if value is None:
            return struct.pack(">i", -1)
        return struct.pack(">i", len(value)) + value
    if schema == "tags":
        return _uvarint(0)
    if schema == "uuid":
        return bytes.fromhex(value)
    raise ValueError(schema)


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        chunk = self.data[self.pos:self.pos + n]
        if len(chunk) != n:
            raise ValueError("response truncated")
        self.pos += n
        return chunk

    def uvarint(self) -> int:
        n, shift = 0, 0
        while True:
            (byte,) = self.take(1)
            n |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return n
            shift += 7

    def read(self, schema):
        if isinstance(schema, list):
            return {name: self.read(t) for name, t in schema}
        if isinstance(schema, tuple) and schema[0] == "nstruct":
            (marker,) = struct.unpack(">b", self.take(1))
            return None if marker < 0 else self.read(schema[1])
        if isinstance(schema, tuple) and schema[0] == "carray":
            n = self.uvarint() - 1
            return None if n < 0 else [self.read(schema[1]) for _ in range(n)]
        if isinstance(schema, tuple):
            (n,) = struct.unpack(">i", self.take(4))
            return None if n < 0 else [self.read(schema[1]) for _ in range(n)]
        if schema in _FIXED:
            fmt = _FIXED[schema]
            return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]
        if schema in ("string", "nstring"):
            (n,) = struct.unpack(">h", self.take(2))
            return None if n < 0 else self.take(n).decode()
        if schema == "nbytes":
            (n,) = struct.unpack(">i", self.take(4))
            return None if n < 0 else self.take(n)
        if schema == "uuid":
            return self.take(16).hex()
        if schema in ("cstring", "cnstring"):
            n = self.uvarint() - 1
            return None if n < 0 else self.take(n).decode()
        if schema == "tags":
            for _ in range(self.uvarint()):
                self.uvarint()  # tag
                self.take(self.uvarint())
            return None
        raise ValueError(schema)


def A(element) -> tuple:
    return ("array", element)


def call(bootstrap: str, api_key: int, version: int, request_schema, request: dict, response_schema,
         timeout: float = TIMEOUT_S, flexible: bool = False, sasl_plain: Optional[tuple] = None,
         client_id: bytes = CLIENT_ID) -> dict:
    """Send one request (header v1; v2 if `flexible`) to `bootstrap` and decode the response
    (header v0; v1 if `flexible`). `sasl_plain` (user, password): log in with SASL/PLAIN
    first (a SASL_PLAINTEXT listener), so the request is that principal's; `client_id` goes in
    the request header (client quotas apply by it)."""
    with door.connect(bootstrap, timeout) as s:
        s.settimeout(timeout)
        node_door = door.lookup(bootstrap)
        if sasl_plain is not None:
            _sasl_plain_login(s, *sasl_plain)
        elif node_door is not None and api_key != 18:  # ApiVersions needs no login
            _sasl_plain_login(s, node_door.user, node_door.password)
        return _exchange(s, api_key, version, request_schema, request, response_schema, flexible, client_id)


def _exchange(s: socket.socket, api_key: int, version: int, request_schema, request: dict, response_schema,
              flexible: bool = False, client_id: bytes = CLIENT_ID) -> dict:
    header = struct.pack(">hhih", api_key, version, 7, len(client_id)) + client_id
    if flexible:
        header += _encode("tags", None)
    body = header + _encode(request_schema, request)
    s.sendall(struct.pack(">i", len(body)) + body)
    (size,) = struct.unpack(">i", recv_exact(s, 4))
    reader = _Reader(recv_exact(s, size))
    (correlation_id,) = struct.unpack(">i", reader.take(4))
    if correlation_id != 7:
        raise ValueError(f"correlation id {correlation_id} != 7")
    if flexible:
        reader.read("tags")
    return reader.read(response_schema)


def _sasl_plain_login(s: socket.socket, user: str, password: str) -> None:
    """SaslHandshake v1 (PLAIN) then SaslAuthenticate v1 with `\0user\0password`; raises
    PermissionError when either is refused."""
    shake = _exchange(s, 17, 1, [("mechanism", "string")], {"mechanism": "PLAIN"},
                      [("error_code", "int16"), ("mechanisms", A("string"))])
    if shake["error_code"]:
        raise PermissionError(f"SaslHandshake refused: {shake}")
    token = b"\0" + user.encode() + b"\0" + password.encode()
    auth = _exchange(s, 36, 1, [("auth_bytes", "nbytes")], {"auth_bytes": token},
                     [("error_code", "int16"), ("error_message", "nstring"), ("auth_bytes", "nbytes"),
                      ("session_lifetime_ms", "int64")])
    if auth["error_code"]:
        raise PermissionError(f"SaslAuthenticate refused: {auth}")


def sasl_oauthbearer_login(bootstrap: str, token: str, timeout: float = TIMEOUT_S, authzid: str = "") -> dict:
    """SaslHandshake v1 (OAUTHBEARER) then SaslAuthenticate v1 with RFC 7628's initial response
    `n,[a=<authzid>],\x01auth=Bearer <token>\x01\x01`; when the broker answers with an error challenge, the
    `\x01` a client acknowledges it with (as Kafka's client does). Returns {"challenge": the
    challenge text or None, "error_code", "error_message", "session_lifetime_ms"} of the last
    SaslAuthenticate response."""
    auth_schema = [("error_code", "int16"), ("error_message", "nstring"), ("auth_bytes", "nbytes"),
                   ("session_lifetime_ms", "int64")]
    host, _, port = bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.settimeout(timeout)
        shake = _exchange(s, 17, 1, [("mechanism", "string")], {"mechanism": "OAUTHBEARER"},
                          [("error_code", "int16"), ("mechanisms", A("string"))])
        if shake["error_code"]:
            raise PermissionError(f"SaslHandshake refused: {shake}")
        gs2 = b"n," + (b"a=" + authzid.encode() if authzid else b"") + b","
        message = gs2 + b"\x01auth=Bearer " + token.encode() + b"\x01\x01"
        auth = _exchange(s, 36, 1, [("auth_bytes", "nbytes")], {"auth_bytes": message}, auth_schema)
        challenge = None
        if auth["error_code"] == 0 and auth["auth_bytes"]:
            challenge = auth["auth_bytes"].decode()
            auth = _exchange(s, 36, 1, [("auth_bytes", "nbytes")], {"auth_bytes": b"\x01"}, auth_schema)
        return {"challenge": challenge, "error_code": auth["error_code"], "error_message": auth["error_message"],
                "session_lifetime_ms": auth["session_lifetime_ms"]}


def recv_exact(s: socket.socket, n: int) -> bytes:
    """Exactly `n` bytes from `s`; ConnectionError when the peer closes first."""
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed mid-response")
        buf += chunk
    return buf


# -- Metadata v8 (api 3) -----------------------------------------------------------------------
_METADATA_REQ = [("topics", A([("name", "string")])), ("allow_auto_topic_creation", "bool"),
                 ("include_cluster_authorized_operations", "bool"), ("include_topic_authorized_operations", "bool")]
_METADATA_RESP = [
    ("throttle_time_ms", "int32"),
    ("brokers", A([("node_id", "int32"), ("host", "string"), ("port", "int32"), ("rack", "nstring")])),
    ("cluster_id", "nstring"),
    ("controller_id", "int32"),
    ("topics", A([
        ("error_code", "int16"), ("name", "string"), ("is_internal", "bool"),
        ("partitions", A([("error_code", "int16"), ("partition_index", "int32"), ("leader_id", "int32"),
                          ("leader_epoch", "int32"), ("replica_nodes", A("int32")), ("isr_nodes", A("int32")),
                          ("offline_replicas", A("int32"))])),
        ("topic_authorized_operations", "int32")])),
    ("cluster_authorized_operations", "int32"),
]


def metadata(bootstrap: str, topics: Optional[List[str]] = None) -> dict:
    """This broker's own metadata view (no auto-creation). `topics=None`: all topics.
    Returns {"controller_id", "cluster_id", "brokers": {id: "host:port"},
    "topics": {name: {"error": code, "partitions": {p: {"error", "leader", "epoch", "replicas", "isr",
    "offline"}}}}}."""
    request = {"topics": None if topics is None else [{"name": t} for t in topics],
               "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False,
               "include_topic_authorized_operations": False}
    r = call(bootstrap, 3, 8, _METADATA_REQ, request, _METADATA_RESP)
    return {
        "controller_id": r["controller_id"],
        "cluster_id": r["cluster_id"],
        "brokers": {b["node_id"]: f"{b['host']}:{b['port']}" for b in r["brokers"]},
        "topics": {
            t["name"]: {
                "error": t["error_code"],
                "partitions": {
                    p["partition_index"]: {"error": p["error_code"], "leader": p["leader_id"], "epoch": p["leader_epoch"],
                                           "replicas": p["replica_nodes"], "isr": p["isr_nodes"],
                                           "offline": p["offline_replicas"]}
                    for p in t["partitions"]
                },
            }
            for t in r["topics"]
        },
    }


# -- FindCoordinator v2 (api 10) ----------------------------------------------------------------
GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator key types


def find_coordinator(bootstrap: str, group: str, key_type: int = GROUP_KEY) -> dict:
    """{"error": code, "node_id": id} of `group`'s coordinator (key_type TRANSACTION_KEY: of the
    transactional id `group`), as `bootstrap` answers."""
    r = call(bootstrap, 10, 2, [("key", "string"), ("key_type", "int8")], {"key": group, "key_type": key_type},
             [("throttle_time_ms", "int32"), ("error_code", "int16"), ("error_message", "nstring"),
              ("node_id", "int32"), ("host", "string"), ("port", "int32")])
    return {"error": r["error_code"], "node_id": r["node_id"], "message": r["error_message"]}


# -- CreateTopics v4 (api 19) -------------------------------------------------------------------
def create_topics(bootstrap: str, topics: Dict[str, tuple], timeout_ms: int = 30000) -> Dict[str, int]:
    """`topics`: {name: (partitions, replication_factor, {config: value})} -> {name: error code}."""
    schema = [("topics", A([("name", "string"), ("num_partitions", "int32"), ("replication_factor", "int16"),
                           ("assignments", A([("partition_index", "int32"), ("broker_ids", A("int32"))])),
                           ("configs", A([("name", "string"), ("value", "nstring")]))])),
              ("timeout_ms", "int32"), ("validate_only", "bool")]
    request = {"topics": [{"name": n, "num_partitions": p, "replication_factor": rf, "assignments": [],
                           "configs": [{"name": k, "value": v} for k, v in (cfg or {}).items()]}
                          for n, (p, rf, cfg) in topics.items()],
               "timeout_ms": timeout_ms, "validate_only": False}
    r = call(bootstrap, 19, 4, schema, request,
             [("throttle_time_ms", "int32"),
              ("topics", A([("name", "string"), ("error_code", "int16"), ("error_message", "nstring")]))],
             timeout=timeout_ms / 1000 + 5)
    return {t["name"]: t["error_code"] for t in r["topics"]}


# -- DeleteTopics v3 (api 20) -------------------------------------------------------------------
def delete_topics(bootstrap: str, names: List[str], timeout_ms: int = 30000) -> Dict[str, int]:
    r = call(bootstrap, 20, 3, [("topic_names", A("string")), ("timeout_ms", "int32")],
             {"topic_names": names, "timeout_ms": timeout_ms},
             [("throttle_time_ms", "int32"), ("responses", A([("name", "string"), ("error_code", "int16")]))],
             timeout=timeout_ms / 1000 + 5)
    return {t["name"]: t["error_code"] for t in r["responses"]}


# -- CreatePartitions v1 (api 37) ---------------------------------------------------------------
def create_partitions(bootstrap: str, counts: Dict[str, int], timeout_ms: int = 30000) -> Dict[str, int]:
    """`counts`: {topic: new total partition count} -> {topic: error code}."""
    schema = [("topics", A([("name", "string"), ("count", "int32"), ("assignments", A([("broker_ids", A("int32"))]))])),
              ("timeout_ms", "int32"), ("validate_only", "bool")]
    request = {"topics": [{"name": n, "count": c, "assignments": None} for n, c in counts.items()],
               "timeout_ms": timeout_ms, "validate_only": False}
    r = call(bootstrap, 37, 1, schema, request,
             [("throttle_time_ms", "int32"),
              ("results", A([("name", "string"), ("error_code", "int16"), ("error_message", "nstring")]))],
             timeout=timeout_ms / 1000 + 5)
    return {t["name"]: t["error_code"] for t in r["results"]}


# -- IncrementalAlterConfigs v0 (api 44) --------------------------------------------------------
TOPIC_RESOURCE = 2
GROUP_RESOURCE = 32
OP_SET, OP_DELETE = 0, 1


def incremental_alter_configs(bootstrap: str, resource_type: int, name: str,
                              ops: Dict[str, Optional[str]]) -> dict:
    """`ops`: {name: value (SET) or None (DELETE)} on one resource -> {"error": code, "message": ..}."""
    schema = [("resources", A([("resource_type", "int8"), ("resource_name", "string"),
                               ("configs", A([("name", "string"), ("config_operation", "int8"), ("value", "nstring")]))])),
              ("validate_only", "bool")]
    request = {"resources": [{"resource_type": resource_type, "resource_name": name,
                              "configs": [{"name": k, "config_operation": OP_SET if v is not None else OP_DELETE,
                                           "value": v} for k, v in ops.items()]}],
               "validate_only": False}
    r = call(bootstrap, 44, 0, schema, request,
             [("throttle_time_ms", "int32"),
              ("responses", A([("error_code", "int16"), ("error_message", "nstring"), ("resource_type", "int8"),
                               ("resource_name", "string")]))])
    (only,) = r["responses"]
    return {"error": only["error_code"], "message": only["error_message"]}


def incremental_alter_topic_configs(bootstrap: str, topic: str, ops: Dict[str, Optional[str]]) -> int:
    """`ops`: {name: value (SET) or None (DELETE)} on one topic -> its error code."""
    return incremental_alter_configs(bootstrap, TOPIC_RESOURCE, topic, ops)["error"]


# -- DescribeConfigs v1 (api 32) ----------------------------------------------------------------
def describe_configs(bootstrap: str, resource_type: int, name: str, names: Optional[List[str]] = None) -> dict:
    """{"error": code, "message": .., "configs": {name: value}} for one resource, as `bootstrap` answers."""
    schema = [("resources", A([("resource_type", "int8"), ("resource_name", "string"), ("configuration_keys", A("string"))])),
              ("include_synonyms", "bool")]
    r = call(bootstrap, 32, 1, schema,
             {"resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": names}],
              "include_synonyms": False},
             [("throttle_time_ms", "int32"),
              ("results", A([("error_code", "int16"), ("error_message", "nstring"), ("resource_type", "int8"),
                             ("resource_name", "string"),
                             ("configs", A([("name", "string"), ("value", "nstring"), ("read_only", "bool"),
                                            ("config_source", "int8"), ("is_sensitive", "bool"),
                                            ("synonyms", A([("name", "string"), ("value", "nstring"),
                                                            ("source", "int8")]))]))]))])
    (only,) = r["results"]
    return {"error": only["error_code"], "message": only["error_message"],
            "configs": {c["name"]: c["value"] for c in only["configs"] or []}}


def describe_topic_configs(bootstrap: str, topic: str, names: Optional[List[str]] = None) -> dict:
    """{"error": code, "configs": {name: value}} for one topic, as `bootstrap` answers."""
    described = describe_configs(bootstrap, TOPIC_RESOURCE, topic, names)
    return {"error": described["error"], "configs": described["configs"]}


# -- DeleteRecords v1 (api 21) ------------------------------------------------------------------
def delete_records(bootstrap: str, topic: str, offsets: Dict[int, int], timeout_ms: int = 30000) -> Dict[int, dict]:
    """`offsets`: {partition: delete-before offset} -> {partition: {"error", "low_watermark"}}."""
    schema = [("topics", A([("name", "string"), ("partitions", A([("partition_index", "int32"), ("offset", "int64")]))])),
              ("timeout_ms", "int32")]
    request = {"topics": [{"name": topic, "partitions": [{"partition_index": p, "offset": o} for p, o in offsets.items()]}],
               "timeout_ms": timeout_ms}
    r = call(bootstrap, 21, 1, schema, request,
             [("throttle_time_ms", "int32"),
              ("topics", A([("name", "string"),
                            ("partitions", A([("partition_index", "int32"), ("low_watermark", "int64"),
                                              ("error_code", "int16")]))]))],
             timeout=timeout_ms / 1000 + 5)
    return {p["partition_index"]: {"error": p["error_code"], "low_watermark": p["low_watermark"]}
            for t in r["topics"] for p in t["partitions"]}


# -- ListOffsets v4 (api 2) ---------------------------------------------------------------------
EARLIEST, LATEST = -2, -1


def list_offsets(bootstrap: str, topic: str, partitions: List[int], timestamp: int = EARLIEST) -> Dict[int, dict]:
    """{partition: {"error", "offset", "leader_epoch"}} as `bootstrap` answers (only a leader answers)."""
    schema = [("replica_id", "int32"), ("isolation_level", "int8"),
              ("topics", A([("name", "string"), ("partitions", A([("partition_index", "int32"),
                                                                  ("current_leader_epoch", "int32"),
                                                                  ("timestamp", "int64")]))]))]
    request = {"replica_id": -1, "isolation_level": 0,
               "topics": [{"name": topic, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                                          "timestamp": timestamp} for p in partitions]}]}
    r = call(bootstrap, 2, 4, schema, request,
             [("throttle_time_ms", "int32"),
              ("topics", A([("name", "string"),
                            ("partitions", A([("partition_index", "int32"), ("error_code", "int16"),
                                              ("timestamp", "int64"), ("offset", "int64"),
                                              ("leader_epoch", "int32")]))]))])
    return {p["partition_index"]: {"error": p["error_code"], "offset": p["offset"], "leader_epoch": p["leader_epoch"]}
            for t in r["topics"] for p in t["partitions"]}


def offset_commit(bootstrap: str, group: str, generation: int, member_id: str, topic: str,
                  offsets: Dict[int, int]) -> Dict[int, int]:
    """OffsetCommit v2 (api 8) of `offsets` {partition: offset} as member `member_id` of
    `generation`; {partition: error code} as `bootstrap` (the group's coordinator) answers."""
    schema = [("group_id", "string"), ("generation_id", "int32"), ("member_id", "string"),
              ("retention_time_ms", "int64"),
              ("topics", A([("name", "string"), ("partitions", A([("partition_index", "int32"),
                                                                  ("committed_offset", "int64"),
                                                                  ("committed_metadata", "nstring")]))]))]
    request = {"group_id": group, "generation_id": generation, "member_id": member_id, "retention_time_ms": -1,
               "topics": [{"name": topic, "partitions": [{"partition_index": p, "committed_offset": o,
                                                          "committed_metadata": None}
                                                         for p, o in sorted(offsets.items())]}]}
    r = call(bootstrap, 8, 2, schema, request,
             [("topics", A([("name", "string"),
                            ("partitions", A([("partition_index", "int32"), ("error_code", "int16")]))]))])
    return {p["partition_index"]: p["error_code"] for t in r["topics"] for p in t["partitions"]}


# -- Produce v8 (api 0) --------------------------------------------------------------------------
def _crc32c_table() -> List[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1  # Castagnoli, reflected
        table.append(c)
    return table


_CRC32C_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC32C_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _varint(n: int) -> bytes:
    return _uvarint((n << 1) ^ (n >> 63))  # zigzag


def record_batch(records: List[tuple], timestamp_ms: int) -> bytes:
    """One uncompressed, non-idempotent record batch v2 of `records` [(key bytes, value bytes)],
    all stamped `timestamp_ms` (CreateTime)."""
    body = b""
    for delta, (key, value) in enumerate(records):
        record = (struct.pack(">b", 0) + _varint(0) + _varint(delta) + _varint(len(key)) + key
                  + _varint(len(value)) + value + _varint(0))  # attributes, timestamp/offset deltas, no headers
        body += _varint(len(record)) + record
    after_crc = struct.pack(">hiqqqhii", 0, len(records) - 1, timestamp_ms, timestamp_ms,
                            -1, -1, -1, len(records)) + body  # attributes .. record count; producer id -1
    tail = struct.pack(">ibI", -1, 2, crc32c(after_crc)) + after_crc  # partition leader epoch, magic, crc
    return struct.pack(">qi", 0, len(tail)) + tail  # base offset, batch length


_PRODUCE_REQ = [("transactional_id", "nstring"), ("acks", "int16"), ("timeout_ms", "int32"),
                ("topic_data", A([("name", "string"),
                                  ("partition_data", A([("index", "int32"), ("records", "nbytes")]))]))]
_PRODUCE_RESP = [
    ("responses", A([("name", "string"),
                     ("partition_responses", A([("index", "int32"), ("error_code", "int16"), ("base_offset", "int64"),
                                                ("log_append_time_ms", "int64"), ("log_start_offset", "int64"),
                                                ("record_errors", A([("batch_index", "int32"),
                                                                     ("batch_index_error_message", "nstring")])),
                                                ("error_message", "nstring")]))])),
    ("throttle_time_ms", "int32"),
]


def produce(bootstrap: str, topic: str, partition: int, records: List[tuple], acks: int = -1,
            timeout_ms: int = 30000, timestamp_ms: int = 0) -> dict:
    """One Produce of `records` [(key, value) as str or bytes] to one partition, sent to
    `bootstrap` (which must lead it); the connection waits `timeout_ms` plus 10 s for the
    answer. Returns that partition's {"error", "base_offset", "log_start_offset", "message"}."""
    return produce_partitions(bootstrap, topic, {partition: records}, acks, timeout_ms, timestamp_ms)[partition]


def produce_partitions(bootstrap: str, topic: str, records: Dict[int, List[tuple]], acks: int = -1,
                       timeout_ms: int = 30000, timestamp_ms: int = 0) -> Dict[int, dict]:
    """One Produce request carrying `records` {partition: [(key, value)]}, as `produce`;
    {partition: {"error", "base_offset", "log_start_offset", "message"}}."""
    def raw(v):
        return v if isinstance(v, bytes) else v.encode()
    data = [{"index": p, "records": record_batch([(raw(k), raw(v)) for k, v in rs], timestamp_ms)}
            for p, rs in sorted(records.items())]
    request = {"transactional_id": None, "acks": acks, "timeout_ms": timeout_ms,
               "topic_data": [{"name": topic, "partition_data": data}]}
    r = call(bootstrap, 0, 8, _PRODUCE_REQ, request, _PRODUCE_RESP, timeout=timeout_ms / 1000 + 10)
    return {p["index"]: {"error": p["error_code"], "base_offset": p["base_offset"],
                         "log_start_offset": p["log_start_offset"], "message": p["error_message"]}
            for t in r["responses"] for p in t["partition_responses"]}


# -- DescribeQuorum v0 (api 55, flexible) ---------------------------------------------------------
_DESCRIBE_QUORUM_REQ = [("topics", ("carray", [("topic_name", "cstring"),
                                               ("partitions", ("carray", [("partition_index", "int32"), ("tags", "tags")])),
                                               ("tags", "tags")])),
                        ("tags", "tags")]
_QUORUM_REPLICA = ("carray", [("replica_id", "int32"), ("log_end_offset", "int64"), ("tags", "tags")])
_DESCRIBE_QUORUM_RESP = [
    ("error_code", "int16"),
    ("topics", ("carray", [("topic_name", "cstring"),
                           ("partitions", ("carray", [("partition_index", "int32"), ("error_code", "int16"),
                                                      ("leader_id", "int32"), ("leader_epoch", "int32"),
                                                      ("high_watermark", "int64"), ("current_voters", _QUORUM_REPLICA),
                                                      ("observers", _QUORUM_REPLICA), ("tags", "tags")])),
                           ("tags", "tags")])),
    ("tags", "tags"),
]


def describe_quorum(bootstrap: str, timeout: float = TIMEOUT_S) -> dict:
    """The metadata quorum as `bootstrap` reports it (`kafka-metadata-quorum describe --status`
    asks the same, in a JVM). A Kafka broker forwards the request to the active controller; a
    Kafka controller listener answers only on the quorum's leader (elsewhere error 6,
    NOT_LEADER_OR_FOLLOWER). {"error", "leader_id", "leader_epoch", "high_watermark", "voters": [ids]}."""
    request = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
    r = call(bootstrap, 55, 0, _DESCRIBE_QUORUM_REQ, request, _DESCRIBE_QUORUM_RESP, timeout=timeout, flexible=True)
    if r["error_code"] or not r["topics"]:
        return {"error": r["error_code"], "leader_id": -1, "leader_epoch": -1, "high_watermark": -1, "voters": []}
    p = r["topics"][0]["partitions"][0]
    return {"error": p["error_code"], "leader_id": p["leader_id"], "leader_epoch": p["leader_epoch"],
            "high_watermark": p["high_watermark"], "voters": sorted(v["replica_id"] for v in p["current_voters"])}


# -- ApiVersions v0 (api 18) ----------------------------------------------------------------------
def api_versions(bootstrap: str) -> Dict[int, tuple]:
    """{api key: (min version, max version)} as `bootstrap` advertises them."""
    r = call(bootstrap, 18, 0, [], {},
             [("error_code", "int16"),
              ("api_keys", A([("api_key", "int16"), ("min_version", "int16"), ("max_version", "int16")]))])
    return {k["api_key"]: (k["min_version"], k["max_version"]) for k in r["api_keys"]}


# -- Fetch v11 (api 1) --------------------------------------------------------------------------
FINAL_EPOCH = -1  # a session epoch that closes the session (or asks for none)
_FETCH_REQ = [
    ("replica_id", "int32"), ("max_wait_ms", "int32"), ("min_bytes", "int32"), ("max_bytes", "int32"),
    ("isolation_level", "int8"), ("session_id", "int32"), ("session_epoch", "int32"),
    ("topics", A([("topic", "string"),
                  ("partitions", A([("partition", "int32"), ("current_leader_epoch", "int32"),
                                    ("fetch_offset", "int64"), ("log_start_offset", "int64"),
                                    ("partition_max_bytes", "int32")]))])),
    ("forgotten_topics_data", A([("topic", "string"), ("partitions", A("int32"))])),
    ("rack_id", "string"),
]
_FETCH_RESP = [
    ("throttle_time_ms", "int32"), ("error_code", "int16"), ("session_id", "int32"),
    ("responses", A([("topic", "string"),
                     ("partitions", A([("partition_index", "int32"), ("error_code", "int16"),
                                       ("high_watermark", "int64"), ("last_stable_offset", "int64"),
                                       ("log_start_offset", "int64"),
                                       ("aborted_transactions", A([("producer_id", "int64"), ("first_offset", "int64")])),
                                       ("preferred_read_replica", "int32"), ("records", "nbytes")]))])),
]


def fetch(bootstrap: str, partitions: Dict[str, Dict[int, int]], max_wait_ms: int, min_bytes: int = 1,
          session_id: int = 0, session_epoch: int = FINAL_EPOCH, max_bytes: int = 1 << 20,
          replica_id: int = -1, sasl_plain: Optional[tuple] = None, client_id: bytes = CLIENT_ID) -> dict:
    """One consumer Fetch (a follower's with `replica_id` >= 0); `partitions`: {topic: {partition:
    fetch offset}} (may be empty); `sasl_plain` and `client_id` as in `call`.
    Session (0, FINAL_EPOCH): sessionless; (0, 0): open a session; (id, n>0): incremental;
    (id, FINAL_EPOCH): close it. Returns {"error", "session_id", "throttle_time_ms",
    "partitions": {(topic, p): {"error", "high_watermark", "records": bytes}}}."""
    request = {"replica_id": replica_id, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
               "isolation_level": 0, "session_id": session_id, "session_epoch": session_epoch,
               "topics": [{"topic": t, "partitions": [{"partition": p, "current_leader_epoch": -1, "fetch_offset": o,
                                                       "log_start_offset": -1, "partition_max_bytes": max_bytes}
                                                      for p, o in ps.items()]}
                          for t, ps in partitions.items()],
               "forgotten_topics_data": [], "rack_id": ""}
    r = call(bootstrap, 1, 11, _FETCH_REQ, request, _FETCH_RESP, timeout=max_wait_ms / 1000 + TIMEOUT_S,
             sasl_plain=sasl_plain, client_id=client_id)
    return {
        "error": r["error_code"],
        "session_id": r["session_id"],
        "throttle_time_ms": r["throttle_time_ms"],
        "partitions": {(t["topic"], p["partition_index"]): {"error": p["error_code"], "high_watermark": p["high_watermark"],
                                                           "records": p["records"] or b""}
                       for t in r["responses"] for p in t["partitions"]},
    }


# -- AlterClientQuotas v0 (api 49) / DescribeClientQuotas v0 (api 48) --------------------------
_QUOTA_ENTITY = A([("entity_type", "string"), ("entity_name", "nstring")])
_ALTER_QUOTAS_REQ = [("entries", A([("entity", _QUOTA_ENTITY),
                                    ("ops", A([("key", "string"), ("value", "float64"), ("remove", "bool")]))])),
                     ("validate_only", "bool")]
_ALTER_QUOTAS_RESP = [("throttle_time_ms", "int32"),
                      ("entries", A([("error_code", "int16"), ("error_message", "nstring"), ("entity", _QUOTA_ENTITY)]))]
_DESCRIBE_QUOTAS_REQ = [("components", A([("entity_type", "string"), ("match_type", "int8"), ("match", "nstring")])),
                        ("strict", "bool")]
_DESCRIBE_QUOTAS_RESP = [("throttle_time_ms", "int32"), ("error_code", "int16"), ("error_message", "nstring"),
                         ("entries", A([("entity", _QUOTA_ENTITY), ("values", A([("key", "string"), ("value", "float64")]))]))]


def alter_client_quotas(bootstrap: str, entries: List[tuple], validate_only: bool = False) -> List[tuple]:
    """`entries`: [({entity_type: name or None for the default}, {key: value, or None to remove})].
    Returns [(error_code, error_message)] in entry order."""
    request = {"validate_only": validate_only, "entries": [
        {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
         "ops": [{"key": k, "value": 0.0 if v is None else float(v), "remove": v is None} for k, v in ops.items()]}
        for entity, ops in entries]}
    r = call(bootstrap, 49, 0, _ALTER_QUOTAS_REQ, request, _ALTER_QUOTAS_RESP)
    return [(e["error_code"], e["error_message"]) for e in r["entries"]]


def describe_client_quotas(bootstrap: str, components: List[tuple], strict: bool = False) -> dict:
    """`components`: [(entity_type, match_type, match)]. Returns {"error", "message", "entries": [(entity
    dict, values dict)] or None}."""
    request = {"strict": strict, "components": [{"entity_type": t, "match_type": m, "match": n}
                                                for t, m, n in components]}
    r = call(bootstrap, 48, 0, _DESCRIBE_QUOTAS_REQ, request, _DESCRIBE_QUOTAS_RESP)
    entries = None if r["entries"] is None else [
        ({e["entity_type"]: e["entity_name"] for e in entry["entity"]}, {v["key"]: v["value"] for v in entry["values"]})
        for entry in r["entries"]]
    return {"error": r["error_code"], "message": r["error_message"], "entries": entries}


# -- OffsetForLeaderEpoch v3 (api 23) ------------------------------------------------------------
_EPOCH_REQ = [("replica_id", "int32"),
              ("topics", A([("topic", "string"),
                            ("partitions", A([("partition", "int32"), ("current_leader_epoch", "int32"),
                                              ("leader_epoch", "int32")]))]))]
_EPOCH_RESP = [("throttle_time_ms", "int32"),
               ("topics", A([("topic", "string"),
                             ("partitions", A([("error_code", "int16"), ("partition", "int32"),
                                               ("leader_epoch", "int32"), ("end_offset", "int64")]))]))]


def offset_for_leader_epoch(bootstrap: str, topic: str, epochs: Dict[int, int], replica_id: int = -1,
                            sasl_plain: Optional[tuple] = None) -> Dict[int, dict]:
    """{partition: leader epoch asked} -> {partition: {"error", "leader_epoch", "end_offset"}}."""
    request = {"replica_id": replica_id,
               "topics": [{"topic": topic, "partitions": [{"partition": p, "current_leader_epoch": -1,
                                                           "leader_epoch": e} for p, e in epochs.items()]}]}
    r = call(bootstrap, 23, 3, _EPOCH_REQ, request, _EPOCH_RESP, sasl_plain=sasl_plain)
    return {p["partition"]: {"error": p["error_code"], "leader_epoch": p["leader_epoch"], "end_offset": p["end_offset"]}
            for t in r["topics"] for p in t["partitions"]}


# -- DescribeAcls / CreateAcls / DeleteAcls v3 (api 29, 30, 31; flexible) --------------------------
ACL_ANY, ACL_TOPIC, PATTERN_LITERAL, OP_READ, PERMISSION_ALLOW = 1, 2, 3, 3, 3
_ACL_FILTER = [("resource_type_filter", "int8"), ("resource_name_filter", "cnstring"), ("pattern_type_filter", "int8"),
               ("principal_filter", "cnstring"), ("host_filter", "cnstring"), ("operation", "int8"),
               ("permission_type", "int8")]
_ANY_FILTER = {"resource_type_filter": ACL_ANY, "resource_name_filter": None, "pattern_type_filter": ACL_ANY,
               "principal_filter": None, "host_filter": None, "operation": ACL_ANY, "permission_type": ACL_ANY}


def describe_acls(bootstrap: str) -> dict:
    """DescribeAcls v3 for every ACL -> {"error", "message", "resources"}."""
    r = call(bootstrap, 29, 3, _ACL_FILTER + [("_tags", "tags")], _ANY_FILTER,
             [("throttle_time_ms", "int32"), ("error_code", "int16"), ("error_message", "cnstring"),
              ("resources", ("carray", [("resource_type", "int8"), ("resource_name", "cstring"), ("pattern_type", "int8"),
                                        ("acls", ("carray", [("principal", "cstring"), ("host", "cstring"),
                                                             ("operation", "int8"), ("permission_type", "int8"),
                                                             ("_tags", "tags")])),
                                        ("_tags", "tags")])),
              ("_tags", "tags")], flexible=True)
    return {"error": r["error_code"], "message": r["error_message"], "resources": r["resources"]}


def create_acls(bootstrap: str, topics: List[str], principal: str = "User:alice") -> List[dict]:
    """CreateAcls v3: allow `principal` to READ each literal topic -> [{"error", "message"}] per creation."""
    creation = [("resource_type", "int8"), ("resource_name", "cstring"), ("resource_pattern_type", "int8"),
                ("principal", "cstring"), ("host", "cstring"), ("operation", "int8"), ("permission_type", "int8"),
                ("_tags", "tags")]
    request = {"creations": [{"resource_type": ACL_TOPIC, "resource_name": t, "resource_pattern_type": PATTERN_LITERAL,
                              "principal": principal, "host": "*", "operation": OP_READ,
                              "permission_type": PERMISSION_ALLOW} for t in topics]}
    r = call(bootstrap, 30, 3, [("creations", ("carray", creation)), ("_tags", "tags")], request,
             [("throttle_time_ms", "int32"),
              ("results", ("carray", [("error_code", "int16"), ("error_message", "cnstring"), ("_tags", "tags")])),
              ("_tags", "tags")], flexible=True)
    return [{"error": x["error_code"], "message": x["error_message"]} for x in r["results"]]


def delete_acls(bootstrap: str, filters: int = 1) -> List[dict]:
    """DeleteAcls v3 with `filters` match-everything filters -> [{"error", "message", "matching"}] per filter."""
    matching = [("error_code", "int16"), ("error_message", "cnstring"), ("resource_type", "int8"),
                ("resource_name", "cstring"), ("pattern_type", "int8"), ("principal", "cstring"), ("host", "cstring"),
                ("operation", "int8"), ("permission_type", "int8"), ("_tags", "tags")]
    r = call(bootstrap, 31, 3, [("filters", ("carray", _ACL_FILTER + [("_tags", "tags")])), ("_tags", "tags")],
             {"filters": [_ANY_FILTER] * filters},
             [("throttle_time_ms", "int32"),
              ("filter_results", ("carray", [("error_code", "int16"), ("error_message", "cnstring"),
                                             ("matching_acls", ("carray", matching)), ("_tags", "tags")])),
              ("_tags", "tags")], flexible=True)
    return [{"error": x["error_code"], "message": x["error_message"], "matching": x["matching_acls"]}
            for x in r["filter_results"]]


# -- ConsumerGroupDescribe v0 (api 69, KIP-848; flexible) --------------------------------------
_CG_ASSIGNMENT = [("topic_partitions", ("carray", [("topic_id", "uuid"), ("topic_name", "cstring"),
                                                   ("partitions", ("carray", "int32")), ("_tags", "tags")])),
                  ("_tags", "tags")]


def consumer_group_describe(bootstrap: str, group: str) -> dict:
    """The KIP-848 group as `bootstrap` (its coordinator) describes it: {"error", "message",
    "state", "group_epoch", "assignor", "members": {member id: {"client_id", "member_epoch",
    "instance_id", "subscribed_topic_names", "subscribed_topic_regex",
    "assignment": {topic: [partitions]}, "target": {topic: [..]}}}}."""
    member = [("member_id", "cstring"), ("instance_id", "cnstring"), ("rack_id", "cnstring"),
              ("member_epoch", "int32"), ("client_id", "cstring"), ("client_host", "cstring"),
              ("subscribed_topic_names", ("carray", "cstring")), ("subscribed_topic_regex", "cnstring"),
              ("assignment", _CG_ASSIGNMENT), ("target_assignment", _CG_ASSIGNMENT), ("_tags", "tags")]
    described = [("error_code", "int16"), ("error_message", "cnstring"), ("group_id", "cstring"),
                 ("group_state", "cstring"), ("group_epoch", "int32"), ("assignment_epoch", "int32"),
                 ("assignor_name", "cstring"), ("members", ("carray", member)),
                 ("authorized_operations", "int32"), ("_tags", "tags")]
    r = call(bootstrap, 69, 0, [("group_ids", ("carray", "cstring")), ("include_authorized_operations", "bool"),
                                ("_tags", "tags")],
             {"group_ids": [group], "include_authorized_operations": False},
             [("throttle_time_ms", "int32"), ("groups", ("carray", described)), ("_tags", "tags")], flexible=True)
    (g,) = r["groups"]

    def by_topic(a: dict) -> dict:
        return {tp["topic_name"]: sorted(tp["partitions"]) for tp in a["topic_partitions"]}

    return {
        "error": g["error_code"], "message": g["error_message"], "state": g["group_state"],
        "group_epoch": g["group_epoch"], "assignor": g["assignor_name"],
        "members": {m["member_id"]: {"client_id": m["client_id"], "member_epoch": m["member_epoch"],
                                     "instance_id": m["instance_id"],
                                     "subscribed_topic_names": m["subscribed_topic_names"],
                                     "subscribed_topic_regex": m["subscribed_topic_regex"],
                                     "assignment": by_topic(m["assignment"]),
                                     "target": by_topic(m["target_assignment"])}
                    for m in g["members"]},
    }


# -- ConsumerGroupHeartbeat v1 (api 68, KIP-848; flexible) --------------------------------------
_CG_TOPIC_PARTITIONS = ("carray", [("topic_id", "uuid"), ("partitions", ("carray", "int32")), ("_tags", "tags")])
_CG_HEARTBEAT_REQ = [("group_id", "cstring"), ("member_id", "cstring"), ("member_epoch", "int32"),
                     ("instance_id", "cnstring"), ("rack_id", "cnstring"), ("rebalance_timeout_ms", "int32"),
                     ("subscribed_topic_names", ("carray", "cstring")), ("subscribed_topic_regex", "cnstring"),
                     ("server_assignor", "cnstring"), ("topic_partitions", _CG_TOPIC_PARTITIONS), ("_tags", "tags")]
_CG_HEARTBEAT_RESP = [("throttle_time_ms", "int32"), ("error_code", "int16"), ("error_message", "cnstring"),
                      ("member_id", "cnstring"), ("member_epoch", "int32"), ("heartbeat_interval_ms", "int32"),
                      ("assignment", ("nstruct", [("topic_partitions", _CG_TOPIC_PARTITIONS), ("_tags", "tags")])),
                      ("_tags", "tags")]


def consumer_group_heartbeat(bootstrap: str, group: str, member_id: str, member_epoch: int,
                             instance_id: Optional[str] = None, rebalance_timeout_ms: int = -1,
                             topics: Optional[List[str]] = None,
                             owned: Optional[Dict[str, List[int]]] = None) -> dict:
    """One ConsumerGroupHeartbeat v1 to `bootstrap` (the group's coordinator) as `member_id`
    at `member_epoch` (0 joins, -1 leaves, -2 leaves temporarily); None for `topics` (the
    subscribed names), `owned` ({topic id hex: partitions}) and -1 for `rebalance_timeout_ms`
    mean "unchanged", as Kafka's client sends them. Returns {"error", "message",
    "member_id", "member_epoch", "heartbeat_interval_ms", "assignment": {topic id hex: sorted
    partitions} or None when the response carries none}."""
    request = {"group_id": group, "member_id": member_id, "member_epoch": member_epoch,
               "instance_id": instance_id, "rack_id": None, "rebalance_timeout_ms": rebalance_timeout_ms,
               "subscribed_topic_names": topics, "subscribed_topic_regex": None, "server_assignor": None,
               "topic_partitions": None if owned is None else [{"topic_id": t, "partitions": sorted(ps)}
                                                              for t, ps in owned.items()]}
    r = call(bootstrap, 68, 1, _CG_HEARTBEAT_REQ, request, _CG_HEARTBEAT_RESP, flexible=True)
    assignment = r["assignment"]
    return {"error": r["error_code"], "message": r["error_message"], "member_id": r["member_id"],
            "member_epoch": r["member_epoch"], "heartbeat_interval_ms": r["heartbeat_interval_ms"],
            "assignment": None if assignment is None else
            {tp["topic_id"]: sorted(tp["partitions"]) for tp in assignment["topic_partitions"]}}


# -- OffsetCommit v9 (api 8; flexible): the first version a KIP-848 member commits with --------
def offset_commit_member(bootstrap: str, group: str, member_id: str, member_epoch: int, topic: str,
                         offsets: Dict[int, int], instance_id: Optional[str] = None) -> Dict[int, int]:
    """OffsetCommit v9 of `offsets` {partition: offset} as consumer-group member `member_id` at
    `member_epoch`; {partition: error code} as `bootstrap` (the group's coordinator) answers."""
    partition = [("partition_index", "int32"), ("committed_offset", "int64"), ("committed_leader_epoch", "int32"),
                 ("committed_metadata", "cnstring"), ("_tags", "tags")]
    schema = [("group_id", "cstring"), ("generation_id_or_member_epoch", "int32"), ("member_id", "cstring"),
              ("group_instance_id", "cnstring"),
              ("topics", ("carray", [("name", "cstring"), ("partitions", ("carray", partition)), ("_tags", "tags")])),
              ("_tags", "tags")]
    request = {"group_id": group, "generation_id_or_member_epoch": member_epoch, "member_id": member_id,
               "group_instance_id": instance_id,
               "topics": [{"name": topic, "partitions": [{"partition_index": p, "committed_offset": o,
                                                          "committed_leader_epoch": -1, "committed_metadata": None}
                                                         for p, o in sorted(offsets.items())]}]}
    r = call(bootstrap, 8, 9, schema, request,
             [("throttle_time_ms", "int32"),
              ("topics", ("carray", [("name", "cstring"),
                                     ("partitions", ("carray", [("partition_index", "int32"), ("error_code", "int16"),
                                                                ("_tags", "tags")])),
                                     ("_tags", "tags")])),
              ("_tags", "tags")], flexible=True)
    return {p["partition_index"]: p["error_code"] for t in r["topics"] for p in t["partitions"]}


def error_name(code: int) -> str:
    return ERRORS.get(code, str(code))


def leaders(md: dict, topic: str) -> Dict[int, int]:
    """{partition: leader id} of `topic` in a `metadata()` answer."""
    return {p: info["leader"] for p, info in md["topics"][topic]["partitions"].items()}
