"""Connection limits with Kafka's keys (issue #28 item 2), on raw sockets from chosen loopback
source addresses (the whole of 127.0.0.0/8 is local, so 127.0.0.2 and 127.0.0.3 are distinct
clients): `max.connections.per.ip` and its overrides (a connection past its address's limit is
closed as it is accepted; the others keep working; closing one lets a new one in), its dynamic
update with `kafka-configs --entity-default`, `connections.max.idle.ms` (a silent connection is
closed, a busy one stays), and `max.connections` (at the limit the broker stops accepting: the
next connection is answered only once another closes).

One broker for the per-address and idle tests (the broker's own connections come from
127.0.0.1, which keeps Kafka's unlimited default), a second one for `max.connections`. Every
wait has a deadline; nothing sleeps for a fixed time except the idle test's spacing of requests.
"""

import socket
import subprocess
import struct
import time

import pytest

from harness import kafka_cli, paths
from harness.wire import recv_exact
from harness.broker import Broker

LIMITED = "127.0.0.2"  # max 2 connections
REFUSED = "127.0.0.3"  # max 0 connections, raised by the dynamic test
IDLE_MS = 2000
API_VERSIONS = 18
IO_TIMEOUT_S = 5.0


@pytest.fixture(scope="module")
def limited_broker(tmp_path_factory):
    b = Broker(paths.target(), tmp_path_factory.mktemp("limits"), {
        "max.connections.per.ip.overrides": f"{LIMITED}:2,{REFUSED}:0",
        "connections.max.idle.ms": str(IDLE_MS),
    })
    b.start()
    yield b
    b.stop()


def connect(broker, source: str) -> socket.socket:
    host, port = broker.bootstrap.rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(IO_TIMEOUT_S)
    s.bind((source, 0))
    s.connect((host, int(port)))
    return s


def api_versions(s: socket.socket, correlation_id: int, timeout_s: float = IO_TIMEOUT_S) -> int:
    """One ApiVersions v0 round trip; returns the error code. Raises on a closed socket or no
    answer within `timeout_s`."""
    client_id = b"brook-limits-test"
    header = struct.pack(">hhih", API_VERSIONS, 0, correlation_id, len(client_id)) + client_id
    s.sendall(struct.pack(">i", len(header)) + header)
    s.settimeout(timeout_s)
    size = struct.unpack(">i", recv_exact(s, 4))[0]
    body = recv_exact(s, size)
    got_id, error = struct.unpack(">ih", body[:6])
    assert got_id == correlation_id
    return error


def closed_by_broker(s: socket.socket, within_s: float) -> bool:
    """Whether the broker closes `s` within `within_s` (EOF or reset on read)."""
    s.settimeout(within_s)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def served(broker, source: str, correlation_id: int):
    """A new connection from `source` answered, or None when the broker closes it."""
    s = connect(broker, source)
    try:
        assert api_versions(s, correlation_id) == 0
        return s
    except (ConnectionError, OSError):
        s.close()
        return None


def test_a_connection_past_its_address_limit_is_closed_and_the_others_keep_working(limited_broker):
    first, second = served(limited_broker, LIMITED, 1), served(limited_broker, LIMITED, 2)
    assert first is not None and second is not None
    third = connect(limited_broker, LIMITED)
    assert closed_by_broker(third, IO_TIMEOUT_S), "the third connection from 127.0.0.2 stays open"
    third.close()
    assert api_versions(first, 3) == 0 and api_versions(second, 4) == 0
    # Other addresses keep the default (unlimited).
    others = [served(limited_broker, "127.0.0.1", 10 + i) for i in range(5)]
    assert all(s is not None for s in others)
    # Closing one lets the next one in (the broker sees the close asynchronously: poll).
    first.close()
    deadline = time.monotonic() + 10
    again = None
    while again is None and time.monotonic() < deadline:
        again = served(limited_broker, LIMITED, 20)
    assert again is not None, "a place freed by a close was not given to a new connection"
    for s in [second, again, *others]:
        s.close()
    if paths.target() == "brook":
        assert limited_broker.metric("brook_connections_closed_total", reason="max_connections_per_ip") >= 1


def test_an_address_with_no_allowance_is_refused_until_a_dynamic_update_raises_it(limited_broker):
    refused = connect(limited_broker, REFUSED)
    assert closed_by_broker(refused, IO_TIMEOUT_S)
    refused.close()

    def alter(value):
        kafka_cli.run("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", limited_broker.bootstrap,
                      "--alter", "--entity-type", "brokers", "--entity-default",
                      "--add-config", f"max.connections.per.ip.overrides=[{value}]")
    alter(f"{LIMITED}:2,{REFUSED}:1")
    try:
        deadline = time.monotonic() + 20
        first = None
        while first is None and time.monotonic() < deadline:
            first = served(limited_broker, REFUSED, 30)
        assert first is not None, "the dynamic override never let 127.0.0.3 in"
        second = connect(limited_broker, REFUSED)
        assert closed_by_broker(second, IO_TIMEOUT_S), "127.0.0.3 got a second connection past its new limit of 1"
        second.close()
        first.close()
    finally:
        alter(f"{LIMITED}:2,{REFUSED}:0")


def test_a_silent_connection_is_closed_and_a_busy_one_stays(limited_broker):
    silent = served(limited_broker, "127.0.0.1", 40)
    busy = served(limited_broker, "127.0.0.1", 41)
    assert silent is not None and busy is not None
    started = time.monotonic()
    # The busy connection asks every 0.5 s for twice the idle time; each answer must come.
    for i in range(8):
        assert api_versions(busy, 42 + i) == 0
        time.sleep(0.5)
    assert closed_by_broker(silent, IO_TIMEOUT_S), "a connection silent past connections.max.idle.ms stayed open"
    closed_after = time.monotonic() - started
    assert closed_after >= IDLE_MS / 1000 - 0.5, closed_after
    assert api_versions(busy, 60) == 0, "the busy connection was closed"
    busy.close()
    silent.close()


def test_at_max_connections_the_next_one_waits_for_a_close(broker_factory):
    broker = broker_factory({"max.connections": "4"})
    held = []
    for i in range(4):
        s = served(broker, "127.0.0.4", 100 + i)
        assert s is not None, f"connection {i + 1} of 4 not served"
        held.append(s)
    # The fifth is connected by the kernel (listen queue) but not served by the broker.
    waiting = connect(broker, "127.0.0.4")
    client_id = b"brook-limits-test"
    header = struct.pack(">hhih", API_VERSIONS, 0, 200, len(client_id)) + client_id
    waiting.sendall(struct.pack(">i", len(header)) + header)
    waiting.settimeout(2.0)
    with pytest.raises(socket.timeout):
        waiting.recv(4)
    assert api_versions(held[0], 201) == 0, "the connections held are still served"
    held.pop().close()
    waiting.settimeout(IO_TIMEOUT_S)
    size = struct.unpack(">i", recv_exact(waiting, 4))[0]
    got_id, error = struct.unpack(">ih", recv_exact(waiting, size)[:6])
    assert (got_id, error) == (200, 0)
    for s in [waiting, *held]:
        s.close()


@pytest.mark.skipif(paths.target() == "kafka", reason="brook's own start-up refusals")
@pytest.mark.parametrize("override, key", [
    ("max.connections.per.ip=0", "max.connections.per.ip"),
    ("max.connections.per.ip.overrides=broker-host.example:3", "max.connections.per.ip.overrides"),
    ("max.connections.per.ip.overrides=127.0.0.1", "max.connections.per.ip.overrides"),
])
def test_a_bad_limit_stops_the_node_naming_the_key(tmp_path, override, key):
    result = subprocess.run(
        [str(paths.brook_bin()), "--override", override, "--override", f"log.dirs={tmp_path}"],
        capture_output=True, text=True, timeout=30,
    )
    assert result.returncode != 0
    assert key in result.stderr and override.split("=", 1)[1] in result.stderr, result.stderr[-2000:]
