"""The scale figures: 100 topics x 10 partitions under steady produce, and 1,000 idle connections.

(a) `topics_under_load()`: BenchDriver creates the topics (Admin client, timed), then one
    producer sends small records round robin over all 1,000 partitions at a fixed rate; while it
    runs, a raw-socket probe times Metadata requests for all topics on its own connection. The
    broker's RSS is sampled throughout (peak) and for a few seconds once the producer is done
    ("steady").
(b) `idle_connections()`: opens CONNECTIONS sockets, each sends one ApiVersions v0 and reads the
    answer, then stays open and silent; RSS before and with them open, Metadata latency on
    another connection before and with them open. Kafka's defaults (max.connections unlimited,
    connections.max.idle.ms 10 min) and Brook's apply unchanged.

The Metadata probe is v4 (non-flexible; the oldest version Kafka 4 still serves that takes a
null topic list as "all topics" and an allow_auto_topic_creation flag): the latency is from the
first byte sent to the last byte of the response read; the answer is checked (correlation id,
topic count) so a fast error is not reported as a fast Metadata.

Invariants: every socket has a timeout and every loop a deadline; all sockets are closed on exit.
"""

import math
import resource
import socket
import statistics
import struct
import time
from typing import Callable, Dict, List, Optional

from procs import HOST

METADATA_PROBES = 100
CONNECTIONS = 1000
SOCKET_TIMEOUT_S = 10.0


def raise_fd_limit(wanted: int = CONNECTIONS + 1024) -> int:
    """Raise this process's soft RLIMIT_NOFILE (children, the brokers included, inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    return soft


def _recv_frame(s: socket.socket) -> bytes:
    head = _recv_exact(s, 4)
    (size,) = struct.unpack(">i", head)
    return _recv_exact(s, size)


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)


def _request(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    client_id = b"brook-bench"
    msg = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id + body
    return struct.pack(">i", len(msg)) + msg


def _metadata_topic_count(frame: bytes, correlation_id: int) -> int:
    """Parse a Metadata v4 response just far enough to count its topics (first one error 0)."""
    try:
        return _parse_metadata(frame, correlation_id)
    except struct.error as e:  # a truncated or malformed answer
        raise ValueError(f"metadata response does not parse: {e}") from e


def _parse_metadata(frame: bytes, correlation_id: int) -> int:
    pos = 0

    def take(fmt: str):
        nonlocal pos
        vals = struct.unpack_from(fmt, frame, pos)
        pos += struct.calcsize(fmt)
        return vals[0] if len(vals) == 1 else vals

    def string() -> None:
        nonlocal pos
        n = take(">h")
        pos += max(n, 0)

    if take(">i") != correlation_id:
        raise ValueError("metadata response for another correlation id")
    take(">i")  # throttle_time_ms
    for _ in range(take(">i")):  # brokers: node_id, host, port, rack
        take(">i")
        string()
        take(">i")
        string()
    string()  # cluster_id
    take(">i")  # controller_id
    topics = take(">i")
    if topics > 0 and take(">h") != 0:
        raise ValueError("metadata: first topic has an error")
    return max(topics, 0)


def metadata_latencies(port: int, count: int = METADATA_PROBES, gap_s: float = 0.02) -> Dict:
    """`count` Metadata v4 (all topics) round trips on one connection, `gap_s` apart."""
    body = struct.pack(">ib", -1, 0)  # topics = null (all), allow_auto_topic_creation = false
    samples: List[float] = []
    topics = 0
    with socket.create_connection((HOST, port), timeout=SOCKET_TIMEOUT_S) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(count):
            req = _request(3, 4, 1000 + i, body)
            t0 = time.perf_counter()
            s.sendall(req)
            frame = _recv_frame(s)
            samples.append((time.perf_counter() - t0) * 1000)
            topics = _metadata_topic_count(frame, 1000 + i)
            time.sleep(gap_s)
    samples.sort()
    return {
        "metadata_p50_ms": statistics.median(samples),
        "metadata_p99_ms": samples[max(0, math.ceil(0.99 * len(samples)) - 1)],  # nearest rank
        "metadata_topics": topics,
        "metadata_requests": len(samples),
    }


def open_idle(port: int, count: int, deadline_s: float = 120.0) -> List[socket.socket]:
    """`count` connections, each after one ApiVersions v0 round trip; raises past the deadline."""
    socks: List[socket.socket] = []
    deadline = time.monotonic() + deadline_s
    try:
        for i in range(count):
            if time.monotonic() > deadline:
                raise RuntimeError(f"opened only {i} of {count} connections in {deadline_s} s")
            s = socket.create_connection((HOST, port), timeout=SOCKET_TIMEOUT_S)
            socks.append(s)
            s.sendall(_request(18, 0, i, b""))
            frame = _recv_frame(s)
            if len(frame) < 6:
                raise RuntimeError(f"connection {i}: ApiVersions answer too short")
            corr, err = struct.unpack_from(">ih", frame)
            if corr != i or err != 0:
                raise RuntimeError(f"connection {i}: ApiVersions answered error {err}")
    except BaseException:
        for s in socks:
            s.close()
        raise
    return socks


def topics_under_load(start: Callable, port: int, rss, settle_s: float) -> Dict:
    """(a): `start()` returns a driver.ScaleRun; probes Metadata while it produces."""
    run = start()
    try:
        rss.phase = "scale-create"
        if not run.wait_producing():
            figures, out = run.finish()
            raise RuntimeError(f"scale producer ended before producing: {out[-500:]}")
        rss.phase = "scale-load"
        time.sleep(2.0)  # past the producer's first metadata round and JIT warm-up
        probe = metadata_latencies(port)
        figures, out = run.finish()
    finally:
        run.kill()
    if figures is None:
        raise RuntimeError(f"scale producer failed: {out[-500:]}")
    rss.phase = "scale-after"
    time.sleep(settle_s)
    figures.update(probe)
    figures["rss_peak_mb"] = rss.peak_mb("scale-load")
    figures["rss_steady_mb"] = rss.median_mb("scale-after")
    return figures


def idle_connections(port: int, rss, settle_s: float, count: int = CONNECTIONS) -> Dict:
    """(b): RSS and Metadata latency before and with `count` idle connections open."""
    rss.phase = "conns-before"
    before = metadata_latencies(port)
    time.sleep(settle_s)
    t0 = time.monotonic()
    socks = open_idle(port, count)
    try:
        open_s = time.monotonic() - t0
        rss.phase = "conns-open"
        time.sleep(settle_s)
        during = metadata_latencies(port)
    finally:
        for s in socks:
            s.close()
    return {
        "connections": count,
        "open_s": open_s,
        "rss_before_mb": rss.median_mb("conns-before"),
        "rss_open_mb": rss.median_mb("conns-open"),
        "metadata_before_p50_ms": before["metadata_p50_ms"],
        "metadata_before_p99_ms": before["metadata_p99_ms"],
        "metadata_p50_ms": during["metadata_p50_ms"],
        "metadata_p99_ms": during["metadata_p99_ms"],
        "metadata_topics": during["metadata_topics"],
    }


def summary(figures: Optional[Dict]) -> str:
    if figures is None:
        return "FAILED"
    return f"metadata p99 {figures['metadata_p99_ms']:.2f} ms, RSS {figures.get('rss_peak_mb') or figures.get('rss_open_mb') or 0:.1f} MB"
