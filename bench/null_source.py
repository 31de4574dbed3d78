"""The consumer's side of the null broker: serve back, from memory, what the producer sent.

`null_sink.py` imports this. Produce requests hand their record batches to `Store.keep`
(each partition keeps the producer's own batches, so record sizes and codecs are exactly the
workload's, CRCs valid: the base offset, stamped here, lies outside the batch CRC). Fetch then
serves them as fast as Python can: the response is a list of byte strings handed to the
transport in one write, the stored batches never copied nor parsed on the first pass.

Memory is bounded: a partition keeps at most `retain_bytes` of batches; beyond that its log
is the kept batches repeated, each copy with its base offset patched (the records inside
carry only deltas), so a consumer of any number of records still sees consecutive offsets up
to the high watermark = records produced.

The consumer group is a formality: every JoinGroup gets generation 1 with the caller as
leader and only member; SyncGroup hands back what the leader assigned it; nothing is ever
committed (OffsetFetch: none, so the consumer starts at ListOffsets' earliest = 0).

APIs, all non-flexible versions so no tagged-field codec is needed:
  Fetch v4-v11 (no sessions: session id 0 means full fetches), ListOffsets v1-v5,
  FindCoordinator v0-v2, JoinGroup v2-v5, SyncGroup v0-v3, Heartbeat v0-v3, LeaveGroup v0-v3,
  OffsetFetch v1-v5, OffsetCommit v2-v7.
"""

import bisect
import struct
from typing import Callable, Dict, List, Optional, Tuple

API_FETCH, API_LIST_OFFSETS, API_OFFSET_COMMIT, API_OFFSET_FETCH = 1, 2, 8, 9
API_FIND_COORDINATOR, API_JOIN_GROUP, API_HEARTBEAT, API_LEAVE_GROUP, API_SYNC_GROUP = 10, 11, 12, 13, 14
SUPPORTED = {
    API_FETCH: (4, 11), API_LIST_OFFSETS: (1, 5), API_OFFSET_COMMIT: (2, 7), API_OFFSET_FETCH: (1, 5),
    API_FIND_COORDINATOR: (0, 2), API_JOIN_GROUP: (2, 5), API_HEARTBEAT: (0, 3), API_LEAVE_GROUP: (0, 3),
    API_SYNC_GROUP: (0, 3),
}  # fmt: skip
EARLIEST, LATEST = -2, -1
I64 = struct.Struct(">q")


def string(s: Optional[str]) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def each_partition(r, answer: Callable[[str], List[bytes]]) -> List[bytes]:
    """A request's topics -> partitions array (non-flexible versions) answered in the same
    shape: `answer(topic)` reads one partition's fields from `r` and returns its response."""
    n_topics = r.int32()
    out = [struct.pack(">i", n_topics)]
    for _ in range(n_topics):
        topic = r.string() or ""
        n_parts = r.int32()
        out.append(string(topic) + struct.pack(">i", n_parts))
        for _ in range(n_parts):
            out.extend(answer(topic))
    return out


def nbytes(b: Optional[bytes]) -> bytes:
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + bytes(b)


class PartitionLog:
    """One partition: the kept batches (base offsets stamped), their record counts, and how
    many records were produced in all (the high watermark)."""

    def __init__(self) -> None:
        self.batches: List[bytes] = []
        self.starts: List[int] = []  # base offset of each kept batch on the first pass
        self.kept_records = 0
        self.kept_bytes = 0
        self.produced = 0

    def keep(self, records: memoryview, retain_bytes: int) -> int:
        """Takes a produce's record set; returns its record count (its base offset is the
        count before). Batches beyond the memory bound are counted, not kept."""
        first, pos = self.produced, 0
        while pos + 27 <= len(records):
            (batch_length,) = struct.unpack_from(">i", records, pos + 8)
            (last_offset_delta,) = struct.unpack_from(">i", records, pos + 23)
            end = pos + 12 + batch_length
            if self.kept_bytes + (end - pos) <= retain_bytes and self.produced == self.kept_records:
                batch = bytearray(records[pos:end])
                I64.pack_into(batch, 0, self.produced)
                self.batches.append(bytes(batch))
                self.starts.append(self.produced)
                self.kept_records += last_offset_delta + 1
                self.kept_bytes += end - pos
            self.produced += last_offset_delta + 1
            pos = end
        return first

    def read(self, offset: int, max_bytes: int, min_one: bool) -> Tuple[List[bytes], int]:
        """Whole batches from the one holding `offset`, up to `max_bytes` (one at least when
        `min_one`), never starting at or beyond the high watermark; (pieces, total bytes)."""
        if not self.batches or offset >= self.produced:
            return [], 0
        cycle, within = divmod(offset, self.kept_records)
        i = bisect.bisect_right(self.starts, within) - 1
        pieces: List[bytes] = []
        total = 0
        while True:
            batch = self.batches[i]
            base = cycle * self.kept_records + self.starts[i]
            if base >= self.produced or (total + len(batch) > max_bytes and (total or not min_one)):
                break
            if cycle == 0:
                pieces.append(batch)  # stored with this very base offset: no copy
            else:
                pieces.append(I64.pack(base))
                pieces.append(memoryview(batch)[8:])
            total += len(batch)
            i += 1
            if i == len(self.batches):
                i, cycle = 0, cycle + 1
        return pieces, total


class Store:
    def __init__(self, retain_bytes: int):
        self.retain_bytes = retain_bytes
        self.logs: Dict[Tuple[str, int], PartitionLog] = {}

    def log(self, topic: str, partition: int) -> PartitionLog:
        return self.logs.setdefault((topic, partition), PartitionLog())

    def keep(self, topic: str, partition: int, records: Optional[memoryview]) -> int:
        """Stores a produce's batches; returns the base offset they were given."""
        log = self.log(topic, partition)
        return log.produced if records is None else log.keep(records, self.retain_bytes)


class Source:
    """Request bodies in (a `Reader` past the request header), response bodies out."""

    def __init__(self, store: Store, host: str, port: int, node_id: int):
        self.store, self.host, self.port, self.node_id = store, host, port, node_id
        self.members = 0

    def handle(self, api_key: int, version: int, r) -> List[bytes]:
        handler = {
            API_FETCH: self.fetch, API_LIST_OFFSETS: self.list_offsets, API_OFFSET_COMMIT: self.offset_commit,
            API_OFFSET_FETCH: self.offset_fetch, API_FIND_COORDINATOR: self.find_coordinator,
            API_JOIN_GROUP: self.join_group, API_HEARTBEAT: self.heartbeat, API_LEAVE_GROUP: self.leave_group,
            API_SYNC_GROUP: self.sync_group,
        }[api_key]  # fmt: skip
        out = handler(version, r)
        return out if isinstance(out, list) else [out]

    def fetch(self, version: int, r) -> List[bytes]:
        r.int32(), r.int32(), r.int32()  # replica id, max wait, min bytes: data is always there
        budget = r.int32()
        r.int8()  # isolation level: no transactions here
        if version >= 7:
            r.int32(), r.int32()  # session id and epoch: sessionless answers (session id 0)
        out = [struct.pack(">ihi", 0, 0, 0) if version >= 7 else struct.pack(">i", 0)]
        any_data = False

        def answer(topic: str) -> List[bytes]:
            nonlocal budget, any_data
            index = r.int32()
            if version >= 9:
                r.int32()  # current leader epoch
            offset = r.int64()
            if version >= 5:
                r.int64()  # log start offset (followers only)
            partition_max = r.int32()
            log = self.store.log(topic, index)
            pieces, size = log.read(offset, min(partition_max, budget), not any_data)
            budget -= size
            any_data |= size > 0
            head = struct.pack(">ihqq", index, 0, log.produced, log.produced)  # hw, last stable
            if version >= 5:
                head += I64.pack(0)  # log start offset
            head += struct.pack(">i", -1)  # aborted transactions: null
            if version >= 11:
                head += struct.pack(">i", -1)  # preferred read replica: none
            return [head + struct.pack(">i", size), *pieces]

        out.extend(each_partition(r, answer))
        return out  # forgotten topics and rack id (v7+/v11) need no reading

    def list_offsets(self, version: int, r) -> bytes:
        r.int32()  # replica id
        if version >= 2:
            r.int8()  # isolation level
        out = [struct.pack(">i", 0)] if version >= 2 else []

        def answer(topic: str) -> List[bytes]:
            index = r.int32()
            if version >= 4:
                r.int32()  # current leader epoch
            timestamp = r.int64()
            offset = self.store.log(topic, index).produced if timestamp == LATEST else 0
            part = struct.pack(">ihqq", index, 0, -1, offset)
            if version >= 4:
                part += struct.pack(">i", 0)  # leader epoch
            return [part]

        out.extend(each_partition(r, answer))
        return b"".join(out)

    def find_coordinator(self, version: int, r) -> bytes:
        node = struct.pack(">i", self.node_id) + string(self.host) + struct.pack(">i", self.port)
        if version == 0:
            return struct.pack(">h", 0) + node
        return struct.pack(">ih", 0, 0) + string(None) + node

    def join_group(self, version: int, r) -> bytes:
        r.string(), r.int32(), r.int32()  # group id, session timeout, rebalance timeout
        member_id = r.string() or ""
        if version >= 5:
            r.string()  # group instance id
        r.string()  # protocol type
        n = r.int32()
        protocols = [(r.string() or "", r.bytes_view()) for _ in range(n)]
        if not member_id:
            self.members += 1
            member_id = f"null-member-{self.members}"
        name, metadata = protocols[0] if protocols else ("", None)
        out = struct.pack(">ihi", 0, 0, 1) + string(name) + string(member_id) + string(member_id)
        member = string(member_id) + (string(None) if version >= 5 else b"") + nbytes(metadata)
        return out + struct.pack(">i", 1) + member

    def sync_group(self, version: int, r) -> bytes:
        r.string(), r.int32()  # group id, generation
        member_id = r.string() or ""
        if version >= 3:
            r.string()  # group instance id
        mine = b""
        for _ in range(r.int32()):
            who, assignment = r.string(), r.bytes_view()
            if who == member_id and assignment is not None:
                mine = bytes(assignment)
        return (struct.pack(">i", 0) if version >= 1 else b"") + struct.pack(">h", 0) + nbytes(mine)

    def heartbeat(self, version: int, r) -> bytes:
        return (struct.pack(">i", 0) if version >= 1 else b"") + struct.pack(">h", 0)

    def leave_group(self, version: int, r) -> bytes:
        if version < 3:
            return (struct.pack(">i", 0) if version >= 1 else b"") + struct.pack(">h", 0)
        r.string()  # group id
        members = [(r.string(), r.string()) for _ in range(r.int32())]
        out = struct.pack(">ihi", 0, 0, len(members))
        return out + b"".join(string(m) + string(i) + struct.pack(">h", 0) for m, i in members)

    def offset_fetch(self, version: int, r) -> bytes:
        r.string()  # group id
        n_topics = r.int32()
        out = [struct.pack(">i", 0)] if version >= 3 else []
        out.append(struct.pack(">i", max(n_topics, 0)))
        for _ in range(max(n_topics, 0)):
            topic = r.string() or ""
            parts = [r.int32() for _ in range(r.int32())]
            out.append(string(topic) + struct.pack(">i", len(parts)))
            for p in parts:  # no committed offset: -1, empty metadata, no error
                out.append(struct.pack(">iq", p, -1) + (struct.pack(">i", -1) if version >= 5 else b"")
                           + string("") + struct.pack(">h", 0))  # fmt: skip
        if version >= 2:
            out.append(struct.pack(">h", 0))
        return b"".join(out)

    def offset_commit(self, version: int, r) -> bytes:
        r.string(), r.int32(), r.string()  # group id, generation, member id
        if version >= 7:
            r.string()  # group instance id
        if version <= 4:
            r.int64()  # retention time
        out = [struct.pack(">i", 0)] if version >= 3 else []

        def answer(_topic: str) -> List[bytes]:
            index = r.int32()
            r.int64()  # committed offset: not kept, nobody reads it back
            if version >= 6:
                r.int32()  # leader epoch
            r.string()  # metadata
            return [struct.pack(">ih", index, 0)]

        out.extend(each_partition(r, answer))
        return b"".join(out)
