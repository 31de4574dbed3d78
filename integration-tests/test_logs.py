"""The broker's log under bad input (issue #28 item 5): a flood of malformed frames is counted
per reason (`brook_connections_closed_total{reason}`) and summarised, not logged line by line;
client-supplied strings (here a topic name and a group id) reach the log
escaped, so they cannot forge a line, colour a terminal or hide text.

Brook-only: these are properties of Brook's log and metrics (Kafka logs one WARN with a stack
trace per bad frame, and client strings raw), so they are defined only for the brook target.
Every wait polls with a deadline.
"""

import os
import re
import socket
import struct
import time
from concurrent.futures import ThreadPoolExecutor

from harness import drivers, paths, wire
from harness.cluster import wait_for

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
        for raw in ("\r", "\x1b", "\x00", "\u202e"):
            assert raw not in text, f"{raw!r} reached the log raw"
        forged = [l for l in text.splitlines() if l.startswith(FORGED[:20])]
        assert forged == []
        strays = [l for l in text.splitlines() if l and not LINE_START.match(l) and not l.startswith((" ", "===="))]
        assert strays == [], f"lines not written by the broker's formatter: {strays[:3]}"
