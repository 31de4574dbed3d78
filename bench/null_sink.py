"""A Kafka "broker" that writes nothing to disk: the producer's and the consumer's ceiling here.

    python3 bench/null_sink.py --port PORT [--partitions N] [--retain-mb M]

It answers just enough of the wire protocol for Apache Kafka's producer
(ProducerPerformance) and consumer (ConsumerPerformance) to run at full speed. As a sink:
  ApiVersions    v0-v3 (a newer request gets Kafka's UNSUPPORTED_VERSION reply in the v0
                 body listing our ranges, exactly as a real broker does, so the client retries
                 with v3; KIP-511)
  Metadata       v1-v8  itself as broker 1 and controller; every requested topic exists with
                 N partitions, all led by broker 1 (a null topic list gets no topics)
  InitProducerId v0-v1  producer id 1000+k, epoch 0 (idempotence is on by default for acks=all)
  Produce        v3-v8  success for every partition; base offset = records accepted so far on
                 that partition, counted from each batch header's lastOffsetDelta
Only non-flexible versions (besides ApiVersions v3) are advertised, so the client picks them
and no tagged-field codec is needed; the client's per-record work is the same at any version.
acks=0 requests get no response (Kafka's rule). As a source (`null_source.py`), it keeps the
produced batches in memory (at most M MB per partition, default 128) and serves them to
consumers: Fetch, ListOffsets and a one-member group. Anything else closes the connection.

Invariants: records are never validated nor parsed beyond batch headers; offsets per partition
only grow. Single-threaded asyncio, so the counters need no lock.
"""

import argparse
import asyncio
import itertools
import struct
import sys
from typing import List, Optional, Tuple

import null_source

API_PRODUCE, API_METADATA, API_API_VERSIONS, API_INIT_PRODUCER_ID = 0, 3, 18, 22
SUPPORTED = {API_PRODUCE: (3, 8), API_METADATA: (1, 8), API_API_VERSIONS: (0, 3), API_INIT_PRODUCER_ID: (0, 1),
             **null_source.SUPPORTED}
UNSUPPORTED_VERSION = 35
NODE_ID = 1


class Reader:
    """Big-endian cursor over one request body (non-flexible encodings)."""

    def __init__(self, buf: memoryview, pos: int = 0):
        self.buf, self.pos = buf, pos

    def int8(self) -> int:
        (v,) = struct.unpack_from(">b", self.buf, self.pos)
        self.pos += 1
        return v

    def int16(self) -> int:
        (v,) = struct.unpack_from(">h", self.buf, self.pos)
        self.pos += 2
        return v

    def int32(self) -> int:
        (v,) = struct.unpack_from(">i", self.buf, self.pos)
        self.pos += 4
        return v

    def int64(self) -> int:
        (v,) = struct.unpack_from(">q", self.buf, self.pos)
        self.pos += 8
        return v

    def string(self) -> Optional[str]:
        n = self.int16()
        if n < 0:
            return None
        s = bytes(self.buf[self.pos : self.pos + n]).decode()
        self.pos += n
        return s

    def bytes_view(self) -> Optional[memoryview]:
        n = self.int32()
        if n < 0:
            return None
        v = self.buf[self.pos : self.pos + n]
        self.pos += n
        return v


string = null_source.string


class NullSink:
    def __init__(self, host: str, port: int, partitions: int, retain_bytes: int):
        self.host, self.port, self.partitions = host, port, partitions
        self.store = null_source.Store(retain_bytes)
        self.source = null_source.Source(self.store, host, port, NODE_ID)
        self.producer_ids = itertools.count(1000)

    def api_versions(self, version: int) -> bytes:
        entries = sorted(SUPPORTED.items())
        if version > SUPPORTED[API_API_VERSIONS][1]:
            version, error = 0, UNSUPPORTED_VERSION
        else:
            error = 0
        if version >= 3:  # flexible body: compact array (n+1 varint; n < 127 here) + tags
            body = struct.pack(">hB", error, len(entries) + 1)
            body += b"".join(struct.pack(">hhhB", k, lo, hi, 0) for k, (lo, hi) in entries)
            return body + struct.pack(">iB", 0, 0)
        body = struct.pack(">hi", error, len(entries))
        body += b"".join(struct.pack(">hhh", k, lo, hi) for k, (lo, hi) in entries)
        return body + (struct.pack(">i", 0) if version >= 1 else b"")

    def metadata(self, version: int, r: Reader) -> bytes:
        n = r.int32()
        topics: List[str] = [] if n < 0 else [r.string() or "" for _ in range(n)]
        out = [struct.pack(">i", 0)] if version >= 3 else []
        out.append(struct.pack(">i", 1) + struct.pack(">i", NODE_ID) + string(self.host) + struct.pack(">i", self.port))
        out.append(string(None))  # rack
        if version >= 2:
            out.append(string("brook-null-sink"))
        out.append(struct.pack(">ii", NODE_ID, len(topics)))
        for topic in topics:
            out.append(struct.pack(">h", 0) + string(topic) + b"\x00")  # error, name, is_internal
            out.append(struct.pack(">i", self.partitions))
            for p in range(self.partitions):
                part = struct.pack(">hii", 0, p, NODE_ID)
                if version >= 7:
                    part += struct.pack(">i", 0)  # leader epoch
                part += struct.pack(">ii", 1, NODE_ID) + struct.pack(">ii", 1, NODE_ID)  # replicas, isr
                if version >= 5:
                    part += struct.pack(">i", 0)  # offline replicas
                out.append(part)
            if version >= 8:
                out.append(struct.pack(">i", -2147483648))  # topic authorized operations: omitted
        if version >= 8:
            out.append(struct.pack(">i", -2147483648))
        return b"".join(out)

    def init_producer_id(self) -> bytes:
        return struct.pack(">ihqh", 0, 0, next(self.producer_ids), 0)

    def produce(self, version: int, r: Reader) -> Tuple[int, bytes]:
        r.string()  # transactional id
        acks = r.int16()
        r.int32()  # timeout

        def answer(topic: str) -> List[bytes]:
            index = r.int32()
            base = self.store.keep(topic, index, r.bytes_view())
            part = struct.pack(">ihqq", index, 0, base, -1)  # log append time: none
            if version >= 5:
                part += struct.pack(">q", 0)  # log start offset
            if version >= 8:
                part += struct.pack(">i", 0) + string(None)  # record errors, error message
            return [part]

        out = null_source.each_partition(r, answer)
        out.append(struct.pack(">i", 0))  # throttle time
        return acks, b"".join(out)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size_bytes = await reader.readexactly(4)
                (size,) = struct.unpack(">i", size_bytes)
                frame = memoryview(await reader.readexactly(size))
                api_key, version, correlation_id = struct.unpack_from(">hhi", frame, 0)
                r = Reader(frame, 8)
                r.string()  # client id (request header v1; v2 adds tags, only ApiVersions v3 sends it)
                body: bytes = b""
                if api_key == API_API_VERSIONS:
                    body = self.api_versions(version)
                elif api_key not in SUPPORTED or not SUPPORTED[api_key][0] <= version <= SUPPORTED[api_key][1]:
                    break  # a version we never advertised: a real broker would drop the connection too
                elif api_key in null_source.SUPPORTED:
                    pieces = self.source.handle(api_key, version, r)
                    size = sum(len(p) for p in pieces) + 4
                    # One write of the joined pieces: the stored batches are copied once, into
                    # the transport (Python 3.11's writelines joins anyway).
                    writer.writelines([struct.pack(">ii", size, correlation_id), *pieces])
                    if writer.transport.get_write_buffer_size() > 1 << 20:
                        await writer.drain()
                    continue
                elif api_key == API_METADATA:
                    body = self.metadata(version, r)
                elif api_key == API_INIT_PRODUCER_ID:
                    body = self.init_producer_id()
                else:
                    acks, body = self.produce(version, r)
                    if acks == 0:
                        continue
                writer.write(struct.pack(">ii", len(body) + 4, correlation_id) + body)
                if writer.transport.get_write_buffer_size() > 1 << 20:
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, struct.error):
            pass  # client gone or sent something we do not speak: just close
        finally:
            writer.close()

    async def run(self) -> None:
        server = await asyncio.start_server(self.serve, self.host, self.port)
        print(f"null sink listening on {self.host}:{self.port}", file=sys.stderr, flush=True)
        async with server:
            await server.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--retain-mb", type=int, default=128, help="produced batches kept per partition, to serve")
    args = ap.parse_args()
    try:
        asyncio.run(NullSink(args.host, args.port, args.partitions, args.retain_mb << 20).run())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
