"""The broker's log under bad input (issue #28 item 5): a flood of malformed frames is counted
per reason (`brook_connections_closed_total{reason}`) and summarised, not logged line by line;
client-supplied strings reach the log escaped, so they cannot forge a line, colour a terminal or
hide text. Each is sent with a new line, a carriage return, ESC, NUL and U+202E, and found
escaped in the line that logs it: a topic name (refused auto-creation), a group id (its
rebalance), a client id (the request span, at debug), a member id (a KIP-848 member fenced), a
transactional id (expired) and a SASL principal (an OAUTHBEARER login refused for naming
another authorization id). The username of a refused PLAIN login is not logged at all, as in
Kafka; the ApiVersions v3 client software name is never logged.

Brook-only: these are properties of Brook's log and metrics (Kafka logs one WARN with a stack
trace per bad frame, and client strings raw), so they are defined only for the brook target.
Every wait polls with a deadline.
"""

import base64
import json
import os
import re
import socket
import struct
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness import drivers, paths, wire
from harness.broker import Broker, free_port, serving
from harness.cluster import wait_for
from harness.security import sasl_broker_settings

# Enough frames to pass the per-interval allowance thousands of times (`make log-flood` sends
# 1,000,000: BROOK_LOG_FLOOD_FRAMES).
FLOOD_FRAMES = int(os.environ.get("BROOK_LOG_FLOOD_FRAMES", "20000"))
FLOOD_WORKERS = 4
# 5 full lines and one summary per 10 s interval, ~200 bytes each; one line per frame would be
# ~3 MB for 20,000 frames. The long flood's bound is the issue's: < 100 KB for 1,000,000 frames.
MAX_FLOOD_LOG_BYTES = 20 * 1024 if FLOOD_FRAMES <= 20_000 else 100 * 1024
# The limiter's summary interval (logging::limit::INTERVAL) plus slack.
SUMMARY_DEADLINE_S = 25
IO_TIMEOUT_S = 10.0

# A line a client would like the log to show as the broker's own.
FORGED = "2026-12-04T00:00:00.000000Z  INFO brook: admin logged in"
EVIL = f"x\n{FORGED}\r\x1b[31m\x00\u202e"
# The same for a group id, which reaches the client through its command line: no NUL.
EVIL_GROUP = f"g\n{FORGED}\r\x1b[31m\u202e"
LINE_START = re.compile(r"^\S+Z\s+(TRACE|DEBUG|INFO|WARN|ERROR) ")
RAW_CONTROLS = ("\r", "\x1b", "\x00", "\u202e")
OAUTH_LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
SASL_AUTHENTICATION_FAILED = 58


def evil(kind: str, nul: bool = True) -> str:
    """A client string of `kind` that would forge a line, colour the terminal and hide text."""
    return f"{kind}\n{FORGED}\r\x1b[31m" + ("\x00" if nul else "") + "\u202e"


def escaped(kind: str, nul: bool = True) -> str:
    """evil(kind) as the log writes it."""
    return f"{kind}\\n{FORGED}\\r\\u{{1b}}[31m" + ("\\0" if nul else "") + "\\u{202e}"


def assert_nothing_raw(text: str) -> None:
    """No control character but the line ends, and no line the broker's formatter did not write."""
    for raw in RAW_CONTROLS:
        assert raw not in text, f"{raw!r} reached the log raw"
    forged = [l for l in text.splitlines() if l.startswith(FORGED[:20])]
    assert forged == []
    strays = [l for l in text.splitlines() if l and not LINE_START.match(l) and not l.startswith((" ", "===="))]
    assert strays == [], f"lines not written by the broker's formatter: {strays[:3]}"


def line_with(broker, *parts: str) -> str:
    """The first line of the broker's log holding every one of `parts`, waited for."""
    def find():
        return next((l for l in broker.log_text().splitlines() if all(p in l for p in parts)), None)
    return wait_for(find, timeout=SUMMARY_DEADLINE_S, what=lambda: f"a log line with {parts}")


def _bad_frames(host: str, port: int, count: int) -> int:
    """`count` connections that each send a negative frame size and wait for the broker to
    close them; returns how many the broker closed."""
    closed = 0
    for _ in range(count):
        with socket.create_connection((host, port), timeout=IO_TIMEOUT_S) as s:
            s.sendall(struct.pack(">i", -7))
            s.settimeout(IO_TIMEOUT_S)
            try:
                if s.recv(1) == b"":
                    closed += 1
            except ConnectionResetError:
                closed += 1
    return closed


def _flood_lines(text: str) -> tuple:
    """(full lines, suppressed count summed over summary lines) for malformed frames."""
    full = [l for l in text.splitlines() if "closing connection" in l and 'reason="malformed_frame"' in l]
    suppressed = sum(int(m.group(1)) for m in re.finditer(
        r"connections closed for a malformed frame: \d+ more .* suppressed=(\d+)", text))
    return full, suppressed


if paths.target() != "kafka":

    def test_a_flood_of_malformed_frames_is_counted_and_summarised_not_logged_per_frame(broker):
        before = broker.log_path.stat().st_size
        per_worker = FLOOD_FRAMES // FLOOD_WORKERS
        started = time.monotonic()
        with ThreadPoolExecutor(FLOOD_WORKERS) as pool:
            closed = sum(pool.map(lambda _: _bad_frames(broker.host, broker.port, per_worker), range(FLOOD_WORKERS)))
        flood_s = time.monotonic() - started
        assert closed == FLOOD_FRAMES, f"the broker closed {closed} of {FLOOD_FRAMES} bad connections"

        # Every bad frame is counted, under its reason.
        wait_for(lambda: broker.metric("brook_connections_closed_total", reason="malformed_frame") == FLOOD_FRAMES,
                 timeout=IO_TIMEOUT_S, what="every malformed frame counted")
        assert broker.metric("brook_connections_closed_total", reason="bad_request") == 0

        # Each one is in the log once: a full line or a summary's count.
        def accounted():
            full, suppressed = _flood_lines(broker.log_path.read_text(errors="replace")[before:])
            return len(full) + suppressed == FLOOD_FRAMES

        wait_for(accounted, timeout=SUMMARY_DEADLINE_S, what="the flood's summary lines")
        text = broker.log_path.read_text(errors="replace")[before:]
        full, suppressed = _flood_lines(text)
        intervals = int(flood_s // 10) + 2
        assert 1 <= len(full) <= 5 * intervals, f"{len(full)} full lines over ~{intervals} intervals"
        assert suppressed == FLOOD_FRAMES - len(full)
        grown = broker.log_path.stat().st_size - before
        print(f"{FLOOD_FRAMES} malformed frames in {flood_s:.1f} s: {len(full)} full lines, {suppressed} in "
              f"summaries, {grown} bytes of log")
        assert grown < MAX_FLOOD_LOG_BYTES, f"{FLOOD_FRAMES} bad frames wrote {grown} bytes of log"

        # The broker still serves.
        assert 18 in wire.api_versions(broker.bootstrap)

    def test_client_supplied_strings_reach_the_log_escaped(broker, topic):
        # A topic name: auto-creation refuses it and logs the name.
        md = wire.call(broker.bootstrap, 3, 8, wire._METADATA_REQ,
                       {"topics": [{"name": EVIL}], "allow_auto_topic_creation": True,
                        "include_cluster_authorized_operations": False,
                        "include_topic_authorized_operations": False}, wire._METADATA_RESP)
        assert [(t["name"], t["error_code"]) for t in md["topics"]] == [(EVIL, 17)]  # INVALID_TOPIC_EXCEPTION

        # A group id: the group's rebalance line names it.
        drivers.run("confluent", "create-topic", broker.bootstrap, "--topic", topic, "--partitions", "1")
        records = [{"key": f"k{i}", "value": f"v{i}"} for i in range(3)]
        drivers.run("confluent", "produce", broker.bootstrap, "--topic", topic, records=records)
        lines = drivers.run("confluent", "group-consume", broker.bootstrap, "--topic", topic, "--group", EVIL_GROUP,
                            "--count", "3", "--timeout-ms", "30000")
        got = [(r["offset"], r["key"], r["value"]) for r in lines if "offset" in r]
        assert got == [(i, f"k{i}", f"v{i}") for i in range(3)]

        text = wait_for(lambda: (t := broker.log_path.read_text(errors="replace")).count("g\\n2026-12-04") >= 1 and t,
                        timeout=IO_TIMEOUT_S, what="the group's line")
        # Escaped: each control character as an escape, the forged text on the same line.
        assert "auto-creation failed" in text and "group rebalanced" in text
        assert "topic=x\\n" + FORGED + "\\r\\u{1b}[31m\\0\\u{202e} " in text
        assert "group=g\\n" + FORGED + "\\r\\u{1b}[31m\\u{202e} " in text
        # Raw: nowhere. No control character but the line ends, no line the broker did not write.
        assert_nothing_raw(text)

    def test_client_ids_member_ids_and_transactional_ids_reach_the_log_escaped(broker_factory, topic, monkeypatch):
        # The client id is a field of every request's span, logged with the request's lines at
        # debug; short timeouts let a member be fenced and a transactional id expire in seconds.
        monkeypatch.setenv("BROOK_LOG", "info,openraft=off,brook::server::dispatch=debug")
        broker = broker_factory({
            "group.consumer.min.session.timeout.ms": "1000", "group.consumer.session.timeout.ms": "1000",
            "group.consumer.min.heartbeat.interval.ms": "500", "group.consumer.heartbeat.interval.ms": "500",
            "transactional.id.expiration.ms": "1000",
            "transaction.remove.expired.transaction.cleanup.interval.ms": "500",
        })

        # A client id: a Metadata request whose refused auto-creation logs inside its span.
        md = wire.call(broker.bootstrap, 3, 8, wire._METADATA_REQ,
                       {"topics": [{"name": "no!such-topic"}], "allow_auto_topic_creation": True,
                        "include_cluster_authorized_operations": False,
                        "include_topic_authorized_operations": False}, wire._METADATA_RESP,
                       client_id=evil("client").encode())
        assert [(t["name"], t["error_code"]) for t in md["topics"]] == [("no!such-topic", 17)]
        line = line_with(broker, "auto-creation failed", "topic=no!such-topic")
        assert f'client_id="{escaped("client")}"' in line, line

        # A member id: KIP-848 members choose their own; one that stops heartbeating is fenced.
        drivers.run("confluent", "create-topic", broker.bootstrap, "--topic", topic, "--partitions", "1")
        group = f"g-{topic}"
        joined = consumer_group_join(broker.bootstrap, group, evil("member"), topic)
        assert (joined["error_code"], joined["member_id"]) == (0, evil("member")), joined
        assert joined["member_epoch"] >= 1, joined
        line = line_with(broker, "consumer group member fenced", f"group={group} ")
        assert f"member={escaped('member')}" in line, line

        # A transactional id: one left Empty past transactional.id.expiration.ms expires.
        producer = init_transactional_producer(broker.bootstrap, evil("txn"))
        assert producer["error_code"] == 0 and producer["producer_id"] >= 0, producer
        line = line_with(broker, "transactional id expired")
        assert f"transactional_id={escaped('txn')}" in line, line

        assert_nothing_raw(broker.log_text())

    def test_sasl_principals_reach_the_log_escaped_and_refused_plain_usernames_not_at_all(request, tmp_path):
        """A SASL_PLAINTEXT listener with PLAIN and OAUTHBEARER (Kafka's default unsecured tokens)."""
        port = free_port(2)
        settings = sasl_broker_settings("brook", port, ["PLAIN", "OAUTHBEARER"], {}, {
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
                f'{OAUTH_LOGIN} required unsecuredLoginStringClaim_sub="admin";',
        })
        broker = serving(request, Broker("brook", tmp_path / "sasl-broker", settings, port=port))
        try:
            # A principal: the token's subject. Asking for another authorization id is refused
            # with a message naming both, which the failed-authentication line carries.
            token = unsecured_token(evil("principal"))
            answer = wire.sasl_oauthbearer_login(broker.bootstrap, token, authzid="admin")
            message = ("Authentication failed: Client requested an authorization id (admin) that is different from "
                       f"the token's principal name ({evil('principal')})")
            assert (answer["error_code"], answer["error_message"]) == (SASL_AUTHENTICATION_FAILED, message), answer
            line = line_with(broker, "failed authentication", "authorization id (admin)")
            assert f"principal name ({escaped('principal')})" in line, line

            # A username: a refused PLAIN login is logged without it (Kafka's message names no
            # user). PLAIN separates its fields with NUL, so the username cannot carry one.
            with socket.create_connection((broker.host, broker.port), timeout=IO_TIMEOUT_S) as s:
                s.settimeout(IO_TIMEOUT_S)
                with pytest.raises(PermissionError, match="Invalid username or password"):
                    wire._sasl_plain_login(s, evil("user", nul=False), "not-the-password")
            line_with(broker, "failed authentication", "Invalid username or password")
            text = broker.log_text()
            assert escaped("user", nul=False) not in text and "user\\n" not in text
            assert_nothing_raw(text)
        finally:
            broker.stop()
        assert broker.teardown_faults() == []


def consumer_group_join(bootstrap: str, group: str, member_id: str, topic: str) -> dict:
    """ConsumerGroupHeartbeat v0 (api 68) joining `group` as `member_id` (epoch 0) subscribed to
    `topic`: {"error_code", "error_message", "member_id", "member_epoch"}."""
    request = {"group_id": group, "member_id": member_id, "member_epoch": 0, "instance_id": None, "rack_id": None,
               "rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic], "server_assignor": None,
               "topic_partitions": []}
    schema = [("group_id", "cstring"), ("member_id", "cstring"), ("member_epoch", "int32"),
              ("instance_id", "cnstring"), ("rack_id", "cnstring"), ("rebalance_timeout_ms", "int32"),
              ("subscribed_topic_names", ("carray", "cstring")), ("server_assignor", "cnstring"),
              ("topic_partitions", ("carray", "int32")),  # sent empty: its element type is unused
              ("tags", "tags")]
    # The response's first fields (its assignment follows).
    answer = [("throttle_time_ms", "int32"), ("error_code", "int16"), ("error_message", "cnstring"),
              ("member_id", "cnstring"), ("member_epoch", "int32")]
    return wire.call(bootstrap, 68, 0, schema, request, answer, flexible=True)


def init_transactional_producer(bootstrap: str, transactional_id: str) -> dict:
    """FindCoordinator, then InitProducerId v2 (api 22) for `transactional_id` until the new
    transaction coordinator answers: {"error_code", "producer_id", "producer_epoch"}."""
    # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS
    retriable = {14, 15, 16, 51}
    schema = [("transactional_id", "cnstring"), ("transaction_timeout_ms", "int32"), ("tags", "tags")]
    answer = [("throttle_time_ms", "int32"), ("error_code", "int16"), ("producer_id", "int64"),
              ("producer_epoch", "int16"), ("tags", "tags")]

    def attempt():
        if wire.find_coordinator(bootstrap, transactional_id, wire.TRANSACTION_KEY)["error"] != 0:
            return None
        got = wire.call(bootstrap, 22, 2, schema, {"transactional_id": transactional_id,
                                                   "transaction_timeout_ms": 60000}, answer, flexible=True)
        return None if got["error_code"] in retriable else got

    return wait_for(attempt, timeout=60, what="the transaction coordinator", interval=0.3)


def unsecured_token(subject: str) -> str:
    """An unsecured JWS (KIP-255: `alg` none, no signature) for `subject`, valid ten minutes."""
    def b64url(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()
    return f"{b64url({'alg': 'none'})}.{b64url({'sub': subject, 'exp': int(time.time()) + 600})}."
