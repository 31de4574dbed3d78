"""Crash safety: acknowledged records survive repeated `kill -9` of the broker.

The short version of scripts/kill-test.py (`make kill-test` runs the long one): 8 kills, each
one required, against a dedicated broker, then every acknowledged record must be read back
exactly once at its acknowledged offset, intact, with contiguous offsets and no CRC errors.
Some restarts are themselves killed during start-up, before the broker serves.
Both share one implementation, loaded from the script (its file name is not a module name).
A second test checks that the checker itself flags loss, duplication and corruption, so a
passing kill test means the data was right, not that the checks were blind.
"""

import importlib.util
import random

import pytest

from harness import paths

_SPEC = importlib.util.spec_from_file_location("kill_test", paths.TESTS_DIR / "scripts" / "kill-test.py")
kill_test = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(kill_test)

SHORT_KILLS = 8
# The time budget is a safety net, not the test's length: every one of the 8 kills must happen
# (a budget that cut the loop short would let a run with 1 kill pass). A Brook round takes
# 1-4 s (produce 0.2-2 s, kill, restart); an Apache Kafka restart takes ~10 s.
MAX_SECONDS = {"brook": 150.0, "kafka": 360.0}


@pytest.mark.timeout(480)
def test_acknowledged_records_survive_repeated_kill_9(broker_factory):
    broker = broker_factory({})
    seed = random.randrange(2**32)
    report = kill_test.run_kill_test(
        broker, kills=SHORT_KILLS, partitions=3, seed=seed, max_seconds=MAX_SECONDS[paths.target()], log=print
    )
    print(report.summary())
    assert report.kills == SHORT_KILLS, report.summary()
    assert report.acknowledged > 0, report.summary()
    assert report.lost == 0, report.summary()
    assert report.duplicates == 0, report.summary()
    assert report.corrupt_batches == 0, report.summary()
    assert report.bad_records == 0, report.summary()
    assert report.offset_gaps == 0, report.summary()
    assert report.consumer_errors == 0, report.summary()
    assert report.panics == 0, report.summary()
    assert report.unacked_present + report.unacked_absent == report.sent - report.acknowledged


def _row(key, offset):
    return (offset, key, kill_test.record_value(key))


def test_checker_flags_lost_duplicated_and_corrupt_records():
    ledger = kill_test.Ledger(
        acked={"a": (0, 0), "b": (0, 1), "c": (0, 2), "d": (1, 0)},
        failed={"x": "Local: Broker transport failure", "y": "Local: Broker transport failure"},
    )
    records = {
        0: [_row("a", 0), _row("b", 1), (2, "c", "c|tampered"), _row("x", 3), _row("a", 4)],
        1: [_row("b", 1)],  # "d" is lost; "b" shows up a second time on another partition
    }
    report = kill_test.Report(seed=0)
    kill_test.check(ledger, records, report)
    assert report.acknowledged == 4
    assert report.lost == 2  # "c" (value changed) and "d" (absent); "b" is still at (0, 1)
    assert report.duplicates == 2  # "a" twice, "b" twice
    assert report.bad_records == 1  # the tampered value of "c"
    assert (report.unacked_present, report.unacked_absent) == (1, 1)  # "x" present, "y" absent
    assert not report.ok

    clean = kill_test.Report(seed=0)
    kill_test.check(ledger, {0: [_row("a", 0), _row("b", 1), _row("c", 2)], 1: [_row("d", 0)]}, clean)
    assert (clean.lost, clean.duplicates, clean.bad_records, clean.unacked_present) == (0, 0, 0, 0)
    assert clean.ok
