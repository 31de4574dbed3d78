"""The short fault-injection run (issue #11; scripts/chaos.py runs the long one, `make chaos`).

* The checker itself, on fabricated histories: a clean history passes; a lost acknowledged
  record, a duplicate, a reordered pair, a stale offset, a read that vanished, an offset holding
  two values, an unknown value, a tailing session skipping are each detected; the replica
  comparison flags a batch whose CRC differs and a replica short of the high watermark, and
  given the partitions' current replica sets it skips a moved-away copy and flags a missing one.
* The run: a 3-node cluster of the target (BROOK_TEST_TARGET), idempotent acks=all producers
  (Java and franz-go) and consumers, at least 30 faults one after another for about three minutes,
  every kind at least once (network isolation, partition reassignment and controller voter
  changes included: the quorum is formatted dynamic), then every acknowledged record must be
  in the final log at its offset and every rule hold (0 lost, 0 violations), the replicas
  identical below the high watermark, the voter set whole again.
* The secured run (issue #25): the same on a cluster secured on every listener, no PLAINTEXT one
  (harness.security.secure_cluster: the workload's producers and consumers log in with
  SCRAM-SHA-512 over SASL_SSL, brokers replicate over SASL_SSL with the credential every node was
  formatted with, the quorum talks mutual TLS, the harness's polls and tools log in through
  harness/door.py), shorter (15 faults: one round of every kind), with the same checks.
"""

import struct
import zlib

import pytest

from chaos import checker, replicas
from chaos.nemesis import KINDS
from chaos.run import Options, run_chaos, summary
from harness import paths

SHORT_FAULTS = 30
# The nemesis draws kinds from a bag of every kind by weight (15 faults): 15 runs each exactly once.
SECURED_FAULTS = 15


def _send(producer, seq, p, o, ok=True, t_send=None, t_ack=None):
    t_send = 1000 + seq * 10 if t_send is None else t_send
    return {"producer": producer, "value": f"{producer}-{seq:09d}", "seq": seq, "partition": p,
            "offset": o if ok else -1, "ok": ok, "t_send": t_send, "t_ack": t_send + 5 if t_ack is None else t_ack}


def _clean_history():
    sends = [_send("java1", i, 0, i) for i in range(5)] + [_send("franz1", i, 1, i) for i in range(3)]
    final = {0: [(i, f"java1-{i:09d}") for i in range(5)], 1: [(i, f"franz1-{i:09d}") for i in range(3)]}
    reads = [{"consumer": "tail", "session": 1, "kind": "tail", "partition": p, "offset": o, "value": v, "t_read": 0}
             for p, recs in final.items() for o, v in recs]
    return sends, reads, final


def _violations(result):
    return {k: n for k, n in result["counts"].items() if n}


def test_checker_passes_a_clean_history():
    sends, reads, final = _clean_history()
    result = checker.check(sends, reads, final)
    assert _violations(result) == {}, result
    assert result["acked"] == 8 and result["final_records"] == 8


def test_checker_detects_a_lost_acknowledged_record():
    sends, reads, final = _clean_history()
    final[0] = final[0][:4]  # offset 4 truncated away
    reads = [r for r in reads if (r["partition"], r["offset"]) != (0, 4)]
    assert _violations(checker.check(sends, reads, final)) == {"lost": 1, "unseen": 1}
    # the run's compact forms: Send objects, reads folded as they arrive
    compact = [checker.Send(**s) for s in sends]
    assert _violations(checker.check(compact, checker.ReadIndex.of(reads), final)) == {"lost": 1, "unseen": 1}


def test_checker_detects_a_lost_record_overwritten_by_another_value():
    sends, reads, final = _clean_history()
    final[1][2] = (2, "java1-000000099")
    sends.append(_send("java1", 99, 1, 3, ok=False))
    v = _violations(checker.check(sends, reads, final))
    assert v["lost"] == 1 and v["inconsistent_offsets"] == 1 and v["read_then_vanished"] == 1, v


def test_checker_detects_a_duplicate():
    sends, reads, final = _clean_history()
    final[0].append((5, "java1-000000002"))
    assert _violations(checker.check(sends, reads, final)) == {"duplicated": 1}


def test_checker_detects_reordered_acks():
    sends, reads, final = _clean_history()
    # java1's seq 3 and 4 acknowledged at swapped offsets (and the log agrees with the acks)
    sends[3]["offset"], sends[4]["offset"] = 4, 3
    final[0][3], final[0][4] = (3, "java1-000000004"), (4, "java1-000000003")
    reads = [r for r in reads if r["partition"] != 0] + [
        {"consumer": "tail", "session": 1, "kind": "tail", "partition": 0, "offset": o, "value": v, "t_read": 0}
        for o, v in final[0]]
    v = _violations(checker.check(sends, reads, final))
    assert v["reordered"] == 1, v
    assert v.get("stale_offsets", 0) >= 1, v  # seq 4 was sent after seq 3's ack yet got a lower offset
    assert "lost" not in v


def test_checker_detects_a_send_after_an_ack_getting_a_lower_offset_across_producers():
    sends = [_send("java1", 0, 0, 1, t_send=100, t_ack=110), _send("franz1", 0, 0, 0, t_send=120, t_ack=130)]
    final = {0: [(0, "franz1-000000000"), (1, "java1-000000000")]}
    v = _violations(checker.check(sends, [], final, check_unseen=False))
    assert v == {"stale_offsets": 1}, v


def test_checker_detects_a_read_that_vanished_and_an_unknown_value():
    sends, reads, final = _clean_history()
    reads.append({"consumer": "group", "session": 1, "kind": "group", "partition": 1, "offset": 3,
                  "value": "franz1-000000003", "t_read": 0})
    final[1].append((4, "ghost-1"))
    v = _violations(checker.check(sends, reads, final))
    assert v == {"read_then_vanished": 1, "unknown": 1}, v


def test_checker_detects_a_tailing_session_skipping_or_going_back():
    sends, reads, final = _clean_history()
    skipping = [r for r in reads if (r["partition"], r["offset"]) != (0, 2)]
    assert _violations(checker.check(sends, skipping, final, check_unseen=False)) == {"tail_skipped": 1}
    back = reads + [dict(reads[0])]
    assert _violations(checker.check(sends, back, final)) == {"tail_backwards": 1}


def test_unavailability_is_the_slowest_partition_first_ack_after_the_fault():
    sends = [_send("p", 0, 0, 0, t_send=0, t_ack=5), _send("p", 1, 1, 0, t_send=0, t_ack=5),
             _send("p", 2, 0, 1, t_send=1000, t_ack=1300), _send("p", 3, 1, 1, t_send=1010, t_ack=2500),
             _send("p", 4, 1, 2, t_send=1020, t_ack=2400)]
    faults = [{"start_ms": 1000}, {"start_ms": 3000}]
    assert checker.unavailability(sends, faults, [0, 1]) == [1400, None]


def _batch(base, count, epoch, payload=b"x"):
    body = struct.pack(">hiqqqhi", 0, count - 1, 0, 0, -1, -1, -1) + struct.pack(">i", 0) + payload
    crc = zlib.crc32(body)  # any checksum: the comparison only needs equal bytes to give equal values
    rest = struct.pack(">ibI", epoch, 2, crc) + body
    return struct.pack(">qi", base, len(rest)) + rest


def test_replica_comparison_flags_a_differing_batch_and_a_short_replica(tmp_path):
    topic = "t"
    good = _batch(0, 3, 1) + _batch(3, 2, 1) + _batch(5, 1, 2)
    bad = _batch(0, 3, 1) + _batch(3, 2, 1, payload=b"y") + _batch(5, 1, 2)
    for node, data in ((1, good), (2, good + _batch(6, 1, 2)), (3, bad)):
        d = tmp_path / f"n{node}" / f"{topic}-0"
        d.mkdir(parents=True)
        (d / "00000000000000000000.log").write_bytes(data)
    result = replicas.compare({n: tmp_path / f"n{n}" for n in (1, 2, 3)}, topic, {0: 6})
    assert [(m["node"], m["problem"]) for m in result["mismatches"]] == [(3, "batches differ")], result
    # a replica that lacks the last batch below the high watermark
    d = tmp_path / "n3" / f"{topic}-0" / "00000000000000000000.log"
    d.write_bytes(good[:len(good) - len(_batch(5, 1, 2))] + b"\0\0\0")
    result = replicas.compare({n: tmp_path / f"n{n}" for n in (1, 2, 3)}, topic, {0: 6})
    problems = sorted(m["problem"] for m in result["mismatches"] if m["node"] == 3)
    assert problems == ["does not reach the high watermark", "fewer batches below the high watermark"], result


def test_replica_comparison_follows_the_current_replica_sets(tmp_path):
    topic = "t"
    good = _batch(0, 3, 1) + _batch(3, 2, 1)
    stale = _batch(0, 3, 1)  # moved away after offset 2, deletion pending
    for node, data in ((1, stale), (2, good), (3, good), (4, good)):
        d = tmp_path / f"n{node}" / f"{topic}-0"
        d.mkdir(parents=True)
        (d / "00000000000000000000.log").write_bytes(data)
    dirs = {n: tmp_path / f"n{n}" for n in (1, 2, 3, 4)}
    result = replicas.compare(dirs, topic, {0: 5}, {0: [2, 3, 4]})
    assert result["mismatches"] == [] and result["replicas_compared"] == 3, result
    assert result["stale_copies"] == [{"partition": 0, "node": 1}]
    # without the replica sets the stale copy is a replica short of the high watermark
    assert {m["node"] for m in replicas.compare(dirs, topic, {0: 5})["mismatches"]} == {1}
    # a current replica without the partition's directory
    dirs[5] = tmp_path / "n5"
    result = replicas.compare(dirs, topic, {0: 5}, {0: [2, 3, 5]})
    assert [(m["node"], m["problem"]) for m in result["mismatches"]] == [(5, "replica directory missing")], result


def assert_short_run_passed(report: dict, faults: int) -> str:
    text = summary(report)
    print(text)
    assert report["faults_total"] >= faults, text
    # Every kind of fault ran, network isolation and reassignment included (nftables is installed
    # by install.sh):
    # a run that silently skipped one would pass without testing it.
    assert report["network_partitions"].startswith("on"), text
    assert sorted(k for k in KINDS if not report["faults"].get(k)) == [], text
    assert report["acked"] > 1000, text
    assert report["violations"] == {k: 0 for k in report["violations"]}, text
    assert report["isr_full_at_end"], text
    # the reassign faults moved something (not all refused or cancelled), and a voters fault
    # took a controller out and put it back (not all skipped or unsettled)
    assert report["reassignments"]["partitions_moved"] > 0, text
    assert report["voter_changes"]["outcomes"].get("completed", 0) > 0, text
    assert report["voters_at_end"]["voters_full"], text
    assert report["ok"], text
    return text


@pytest.mark.timeout(1800 if paths.target() == "kafka" else 600)  # JVM restarts take 10-30 s
def test_short_chaos_run_loses_no_acknowledged_record(tmp_path):
    opts = Options(target=paths.target(), faults=SHORT_FAULTS, seed=11, out=tmp_path / "chaos", warmup_s=3,
                   recovery_timeout_s=30)
    assert_short_run_passed(run_chaos(opts), SHORT_FAULTS)


@pytest.mark.timeout(1200 if paths.target() == "kafka" else 600)  # one voters fault: 4-5 JVM tool runs
def test_short_chaos_run_on_a_secured_cluster_loses_no_acknowledged_record(tmp_path):
    opts = Options(target=paths.target(), faults=SECURED_FAULTS, seed=25, out=tmp_path / "chaos", warmup_s=3,
                   recovery_timeout_s=30, secured=True)
    report = run_chaos(opts)
    assert report["secured"], summary(report)
    assert_short_run_passed(report, SECURED_FAULTS)
