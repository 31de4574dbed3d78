"""Kafka Streams exactly_once_v2 word count (issue #12).

The Java driver's `streams-wordcount` runs a Kafka Streams 4.4 application with
`processing.guarantee=exactly_once_v2` (flatMapValues split -> groupBy word -> count -> toStream
-> to(output), record cache off so every count update is produced) next to a read_committed
consumer of its output. The input is known: 2,000 lines over a 3-partition topic, five words
each from a fixed 20-word vocabulary (10,000 words), so every word's final count is known.

Exactly once means more than right final counts: with the cache off each input word produces one
update, so the committed updates of a word are exactly 1, 2, ..., N in order. A duplicate (a
re-processed record whose first output was committed too) would show a count twice or a count
above N; a lost one a gap. Both tests assert that, once on a clean run and once with the broker
killed (SIGKILL) and restarted on its data while the application is in the middle of the input.
Both brokers run transaction.version 2 (Streams then uses Transactions V2: an epoch bump per
commit, partitions added by their leaders), or both 0 with BROOK_TEST_TXN_VERSION=0, as
test_transactions.py does.
"""

import json
import subprocess
import threading
import time
import uuid
from collections import Counter

import pytest

from harness import paths
from harness.broker import Broker
from harness.drivers import DRIVER_ARGV
from harness.txn_shell import TxnShell
from test_transactions import BROKER_OVERRIDES, at_txn_version, start_at_txn_version

LINES = 2000
WORDS_PER_LINE = 5
VOCABULARY = [f"w{i:02d}" for i in range(20)]
PARTITIONS = 3
RUN_TIMEOUT_S = 60


def input_lines() -> list:
    """2,000 keyed lines, round-robin over the partitions; word j of line i is a fixed function of
    (i, j), uneven enough that the words' counts differ."""
    return [
        {"key": f"line-{i}", "partition": i % PARTITIONS,
         "value": " ".join(VOCABULARY[(i * 7 + j * j * 3 + j + i // 13) % len(VOCABULARY)]
                           for j in range(WORDS_PER_LINE))}
        for i in range(LINES)
    ]


def expected_counts(lines: list) -> dict:
    return dict(Counter(word for line in lines for word in line["value"].split()))


@pytest.fixture(scope="module")
def streams_broker(tmp_path_factory):
    b = start_at_txn_version(
        Broker(paths.target(), tmp_path_factory.mktemp("streams-broker"), at_txn_version(BROKER_OVERRIDES))
    )
    yield b
    b.stop()


@pytest.fixture
def broker(request, streams_broker):
    """The module's broker (started again if a test killed it), registered so that a failing
    test shows its log tail."""
    streams_broker.start()  # no-op while it runs
    setattr(request.node, "_brook_brokers", [streams_broker])
    return streams_broker


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def prepare(broker: Broker) -> tuple:
    """Input and output topics (3 partitions each), the input produced: (input, output, expected)."""
    source, sink = unique("wc-in"), unique("wc-out")
    lines = input_lines()
    with TxnShell(broker.bootstrap) as shell:
        shell.ok("create-topic", topic=source, partitions=PARTITIONS)
        shell.ok("create-topic", topic=sink, partitions=PARTITIONS)
        shell.ok("producer", name="plain", config={"linger.ms": "20"})
        shell.send("plain", source, lines, timeout=60)
    return source, sink, expected_counts(lines)


class WordCount:
    """A running `streams-wordcount` process; its JSON lines are collected as they arrive."""

    def __init__(self, broker: Broker, source: str, sink: str, app_id: str, state_dir, expect: int):
        argv = [*DRIVER_ARGV["java"], "streams-wordcount", "--bootstrap", broker.bootstrap,
                "--input", source, "--output", sink, "--app-id", app_id, "--state-dir", str(state_dir),
                "--expect-records", str(expect), "--timeout-ms", str(RUN_TIMEOUT_S * 1000),
                "--commit-interval-ms", "100", "--max-poll-records", "50"]
        argv.insert(1, "-Xmx256m")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     stdin=subprocess.DEVNULL, cwd=paths.TESTS_DIR)
        self.lines: list = []
        self.err: list = []
        threading.Thread(target=lambda: self.lines.extend(json.loads(x) for x in self.proc.stdout
                                                          if x.startswith("{")), daemon=True).start()
        threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True).start()

    def updates(self) -> list:
        return [x for x in list(self.lines) if "word" in x]

    def committed_total(self) -> int:
        latest = {}
        for u in self.updates():
            latest[u["word"]] = u["count"]
        return sum(latest.values())

    def wait(self) -> dict:
        code = self.proc.wait(timeout=RUN_TIMEOUT_S + 40)
        assert code == 0, f"streams-wordcount exited {code}\n{''.join(self.err)[-4000:]}"
        done = [x for x in self.lines if x.get("done")]
        assert done, f"no summary line\n{''.join(self.err)[-4000:]}"
        return done[-1]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def assert_exactly_once(updates: list, expected: dict) -> dict:
    """Every word's committed updates are exactly 1..N in order (N its count in the input): no
    duplicate, no count above N, no gap; returns figures for the report."""
    per_word: dict = {}
    for u in updates:
        per_word.setdefault(u["word"], []).append(u["count"])
    above = {w: max(c) for w, c in per_word.items() if max(c) > expected.get(w, 0)}
    assert not above, f"counts above the expected final: {above}"
    repeated = {w: [n for n, k in Counter(c).items() if k > 1] for w, c in per_word.items() if len(set(c)) < len(c)}
    assert not repeated, f"duplicate count updates: {repeated}"
    final = {w: c[-1] for w, c in per_word.items()}
    assert final == expected
    for w, counts in per_word.items():
        assert counts == list(range(1, expected[w] + 1)), f"{w}: updates are not 1..{expected[w]} in order"
    return {"input_lines": LINES, "input_words": sum(expected.values()), "words": len(final),
            "output_updates": len(updates), "duplicates": 0}


def test_streams_exactly_once_word_count_is_exact(broker, tmp_path):
    source, sink, expected = prepare(broker)
    app = WordCount(broker, source, sink, unique("wc-app"), tmp_path / "state", sum(expected.values()))
    try:
        summary = app.wait()
    finally:
        app.stop()
    assert summary["complete"], (summary, [x for x in app.lines if x.get("event", "").startswith("reader")])
    figures = assert_exactly_once(app.updates(), expected)
    print(f"streams word count: {figures}, thread replacements {summary['thread_replacements']}")


# Last in the module: it kills the module's broker.
def test_streams_exactly_once_word_count_survives_a_kill_9_of_the_broker(broker, tmp_path):
    """The application runs; as soon as its first output is committed (some output partitions
    still empty, most of the input still ahead) the broker is killed (SIGKILL: the open transaction, its pending markers and offsets are whatever reached
    the disk) and started again on its data. The application rides it out (a stream thread that
    dies is replaced; the process is run again on the same state directory if it died) and
    finishes with exact counts, its reader (a consumer that lived through the restart) reading
    them all. This caught brook answering an incremental fetch that switched from partition
    names (Fetch v12, the consumer right after its rebootstrap) to topic ids: the by-name
    partitions were answered under the nil topic id and never read again."""
    source, sink, expected = prepare(broker)
    total = sum(expected.values())
    app_id, state = unique("wc-app"), tmp_path / "state"
    app = WordCount(broker, source, sink, app_id, state, total)
    restarts = 0
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while app.committed_total() == 0:
            assert app.proc.poll() is None, f"exited {app.proc.returncode} early\n{''.join(app.err)[-4000:]}"
            assert time.monotonic() < deadline, "no committed output"
            time.sleep(0.02)
        at_kill = app.committed_total()
        broker.kill()
        broker.start()
        if app.proc.wait(timeout=RUN_TIMEOUT_S + 40) != 0:
            # The application died (its error is in its stderr): run it again on its state.
            restarts += 1
            app = WordCount(broker, source, sink, app_id, state, total)
        summary = app.wait()
        updates = app.updates()  # a restarted reader reads the output from the beginning again
    finally:
        app.stop()
    assert at_kill < total, f"the kill came after the end ({at_kill} of {total} words counted)"
    # Incomplete: the reader's positions and the read_committed end offsets say where it stopped.
    assert summary["complete"], (summary, [x for x in app.lines if x.get("event", "").startswith("reader")])
    figures = assert_exactly_once(updates, expected)
    print(f"streams word count across kill -9: {figures}, words counted at the kill {at_kill}, "
          f"app restarts {restarts}, thread replacements {summary['thread_replacements']}")
