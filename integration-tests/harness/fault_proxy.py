"""A TCP proxy between Kafka clients and one broker that loses Produce responses on purpose.

`FaultProxy(upstream)` listens on a free loopback port and relays every connection to
`upstream` (the broker's real HOST:PORT) byte for byte. A broker whose `advertised.listeners`
names the proxy (`proxied_broker_overrides`) sends clients there in its metadata, so every
connection a client opens (bootstrap, then the partition leader) goes through the proxy.

The fault: `withhold_produce_responses(k)` makes the proxy swallow the next `k` Produce (api
key 0) responses that the broker sends and close that client connection (and its upstream
one) instead of forwarding the response. The broker has written the batch before it answered
(acks=all), so the client, seeing only a dropped connection, retries a batch the log already
holds: an idempotent producer's retry must then be recognised by its producer id and sequence
and not be written again. `withheld` counts the responses swallowed, so a test can assert the
fault happened.

Invariant: frames are relayed unchanged and in order; a response is either forwarded whole or
never, and a withheld response always ends its connection (a client never sees a gap in its
correlation ids on a live connection).
"""

import socket
import struct
import threading
from typing import Dict, List, Optional

from .broker import HOST, free_port

PRODUCE = 0


def proxied_broker_overrides(proxy_port: int) -> dict:
    """Broker settings (Kafka keys) that advertise the proxy instead of the broker's own port."""
    return {"advertised.listeners": f"PLAINTEXT://{HOST}:{proxy_port}"}


def _recv_exact(s: socket.socket, n: int) -> Optional[bytes]:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _read_frame(s: socket.socket) -> Optional[bytes]:
    """One size-prefixed Kafka frame (size included), or None at end of stream."""
    head = _recv_exact(s, 4)
    if head is None:
        return None
    body = _recv_exact(s, struct.unpack(">i", head)[0])
    return None if body is None else head + body


class FaultProxy:
    """The proxy: `bootstrap` is its address, `withhold_produce_responses(k)` arms the fault,
    `withheld` / `produce_responses_forwarded` count Produce responses since it was armed."""

    def __init__(self, upstream: str):
        host, _, port = upstream.rpartition(":")
        self.upstream = (host, int(port))
        self.port = free_port()
        self._lock = threading.Lock()
        self._to_withhold = 0
        self.withheld = 0
        self.produce_responses_forwarded = 0
        self._links: List["_Link"] = []
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((HOST, self.port))
        self._listener.listen(64)
        self._closed = False
        threading.Thread(target=self._accept_loop, name="fault-proxy-accept", daemon=True).start()

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def withhold_produce_responses(self, count: int) -> None:
        """Swallow the next `count` Produce responses (each closing its connection); resets
        the counters."""
        with self._lock:
            self._to_withhold = count
            self.withheld = 0
            self.produce_responses_forwarded = 0

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            links = list(self._links)
        for link in links:
            link.shut()  # its threads then end and close it

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                broker = socket.create_connection(self.upstream, timeout=10)
                broker.settimeout(None)
            except OSError:
                _shut(client)  # the broker is down: the client sees a refused connection
                client.close()
                continue
            link = _Link(client, broker)
            with self._lock:
                self._links.append(link)
            threading.Thread(target=self._requests, args=(link,), daemon=True).start()
            threading.Thread(target=self._responses, args=(link,), daemon=True).start()

    def _requests(self, link: "_Link") -> None:
        """Client -> broker: note each request's api key by its correlation id, then relay it
        (noted first, so its response always finds it)."""
        try:
            while True:
                frame = _read_frame(link.client)
                if frame is None:
                    break
                api_key, _version, correlation = struct.unpack(">hhi", frame[4:12])
                link.api_of[correlation] = api_key
                link.broker.sendall(frame)
        except OSError:
            pass
        self._end(link)

    def _responses(self, link: "_Link") -> None:
        """Broker -> client: relay each response, unless it answers a Produce request the fault
        is armed for: then drop it and end the connection."""
        try:
            while True:
                frame = _read_frame(link.broker)
                if frame is None:
                    break
                correlation = struct.unpack(">i", frame[4:8])[0]
                if link.api_of.pop(correlation, None) == PRODUCE and self._take_fault():
                    break
                link.client.sendall(frame)
        except OSError:
            pass
        self._end(link)

    def _take_fault(self) -> bool:
        """Whether this Produce response is one to withhold (counted either way)."""
        with self._lock:
            if self._to_withhold > 0:
                self._to_withhold -= 1
                self.withheld += 1
                return True
            self.produce_responses_forwarded += 1
            return False

    def _end(self, link: "_Link") -> None:
        """Called by each of a link's two threads as it stops: the first shuts both sockets down
        (waking the other thread), the last closes them (never while the other may use them)."""
        if link.finish():
            with self._lock:
                if link in self._links:
                    self._links.remove(link)


class _Link:
    """One client connection and its upstream connection, relayed by two threads."""

    def __init__(self, client: socket.socket, broker: socket.socket):
        self.client, self.broker = client, broker
        for s in (client, broker):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.api_of: Dict[int, int] = {}  # correlation id -> api key, of requests in flight
        self._lock = threading.Lock()
        self._running = 2

    def shut(self) -> None:
        for s in (self.client, self.broker):
            _shut(s)

    def finish(self) -> bool:
        """Shut both sockets down; close them once both threads have finished (returns True then)."""
        self.shut()
        with self._lock:
            self._running -= 1
            last = self._running == 0
        if last:
            self.client.close()
            self.broker.close()
        return last


def _shut(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
