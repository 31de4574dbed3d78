"""The fault-injection run's checker: pure functions over the recorded history.

Inputs (plain dicts, as the workload writes them to the run's JSON-lines files):
  sends  {"producer", "value", "seq" (None for burst records), "partition", "offset" (-1 if
          failed), "ok", "t_send", "t_ack"}: one per record whose send completed
  reads  {"consumer", "session", "kind" ("tail"|"group"), "partition", "offset", "value", "t_read"},
         as a list or already folded into a ReadIndex
  final  {partition: [(offset, value), ...]}: the whole log read from the beginning after healing

Rules (../shared/research/replication.md section 4; counts, all must be 0):
  lost                 R1 an acknowledged (partition, offset, value) is not at that offset at the end
  duplicated           R2 a value more than once in the final log
  inconsistent_offsets R3 one (partition, offset) seen holding two values (acks, reads, final)
  reordered            R4 one producer's acked offsets in a partition do not rise in send order
  stale_offsets        R4 a send begun after another record's ack (same partition) got an offset
                          not above that record's offset
  read_then_vanished   R5 a record a consumer read is not at its offset in the final log
  tail_backwards / tail_skipped  R6 a tailing (assign) consumer session read a partition's
                          offsets out of order, or jumped over offsets the final log holds
  unknown              R7 a value in the final log that no producer reported sending
  unseen               R9 an acknowledged record the tailing consumer never read (it ran until
                          it reached every partition's end)
Also counted (not violations): failed sends whose value is in the log anyway (indeterminate).
"""

import bisect
from collections import defaultdict
from typing import Dict, Iterable, List, Optional, Tuple

VIOLATIONS = ("lost", "duplicated", "inconsistent_offsets", "reordered", "stale_offsets", "read_then_vanished",
              "tail_backwards", "tail_skipped", "unknown", "unseen")
EXAMPLES = 5


class Send:
    """One send's outcome (a dict's memory is too much for millions): read like a dict."""
    __slots__ = ("producer", "value", "seq", "partition", "offset", "ok", "t_send", "t_ack", "error")

    def __init__(self, producer, value, seq, partition, offset, ok, t_send, t_ack, error=None):
        self.producer, self.value, self.seq, self.partition, self.offset = producer, value, seq, partition, offset
        self.ok, self.t_send, self.t_ack, self.error = ok, t_send, t_ack, error

    def __getitem__(self, key):
        return getattr(self, key)

    def get(self, key, default=None):
        return getattr(self, key, default)


class ReadIndex:
    """What consumers read, folded as it arrives (a long run reads millions of records):
    `values` (partition, offset) -> the first value read there; `conflicts` (partition, offset) ->
    other values read there; `readers` -> consumer names; `tail_seen` the offsets a tailing
    consumer read; `tail_backwards` / `tail_gaps` the places where a tailing session went back or
    jumped (a jump is a skip only if the final log holds an offset inside it); `count` reads."""

    def __init__(self):
        self.values: Dict[Tuple[int, int], str] = {}
        self.conflicts: Dict[Tuple[int, int], set] = {}
        self.readers: Dict[Tuple[int, int], set] = {}
        self.tail_seen: set = set()
        self.tail_backwards: List[dict] = []
        self.tail_gaps: List[dict] = []
        self._last: Dict[Tuple[str, int, int], int] = {}
        self.count = 0

    @classmethod
    def of(cls, reads: Iterable[dict]) -> "ReadIndex":
        index = cls()
        for r in reads:
            index.add(r)
        return index

    def tail_max(self) -> Dict[int, int]:
        """The highest offset a tailing session reached, per partition."""
        out: Dict[int, int] = {}
        for (_c, _s, p), o in list(self._last.items()):
            out[p] = max(out.get(p, -1), o)
        return out

    def add(self, r: dict) -> None:
        self.count += 1
        key = (r["partition"], r["offset"])
        v = r["value"]
        first = self.values.setdefault(key, v)
        if first != v:
            self.conflicts.setdefault(key, set()).add(v)
            self.readers.setdefault(key, set()).add(r["consumer"])
        if r.get("kind") == "tail":
            self.tail_seen.add(key)
            sk = (r["consumer"], r.get("session", 0), r["partition"])
            last = self._last.get(sk)
            if last is not None:
                if r["offset"] <= last:
                    self.tail_backwards.append({"consumer": r["consumer"], "session": r.get("session", 0),
                                                "partition": r["partition"], "offsets": [last, r["offset"]]})
                elif r["offset"] > last + 1:
                    self.tail_gaps.append({"consumer": r["consumer"], "session": r.get("session", 0),
                                           "partition": r["partition"], "offsets": [last, r["offset"]]})
            self._last[sk] = r["offset"]


def final_index(final: Dict[int, List[Tuple[int, str]]]) -> Dict[Tuple[int, int], str]:
    return {(int(p), o): v for p, recs in final.items() for o, v in recs}


def check(sends: List[dict], reads, final: Dict[int, List[Tuple[int, str]]],
          check_unseen: bool = True) -> dict:
    """Every rule over one history: {"counts": {rule: n}, "examples": {rule: [...]},
    "acked", "failed", "failed_but_present", "final_records"}."""
    at = final_index(final)
    counts = {k: 0 for k in VIOLATIONS}
    examples: Dict[str, list] = defaultdict(list)

    def flag(rule: str, detail) -> None:
        counts[rule] += 1
        if len(examples[rule]) < EXAMPLES:
            examples[rule].append(detail)

    acked = [s for s in sends if s["ok"]]
    failed = [s for s in sends if not s["ok"]]
    final_values: Dict[str, List[Tuple[int, int]]] = defaultdict(list)
    for (p, o), v in at.items():
        final_values[v].append((p, o))

    # R1 lost
    for s in acked:
        got = at.get((s["partition"], s["offset"]))
        if got != s["value"]:
            flag("lost", {"value": s["value"], "partition": s["partition"], "offset": s["offset"], "found": got})

    # R2 duplicated
    for v, places in final_values.items():
        if len(places) > 1:
            flag("duplicated", {"value": v, "at": sorted(places)})

    # R3 inconsistent offsets: acks, reads and the final log must agree on each offset's value
    index = reads if isinstance(reads, ReadIndex) else ReadIndex.of(reads)
    conflicting: Dict[Tuple[int, int], set] = {}
    ack_at: Dict[Tuple[int, int], str] = {}
    for s in acked:
        key = (s["partition"], s["offset"])
        other = ack_at.setdefault(key, s["value"])
        if other != s["value"]:
            conflicting.setdefault(key, {other}).add(s["value"])
    for key, v in index.values.items():
        values = {v} | index.conflicts.get(key, set())
        for source in (at, ack_at):
            if key in source:
                values.add(source[key])
        if len(values) > 1:
            conflicting.setdefault(key, set()).update(values)
    for key, v in ack_at.items():
        if key in at and at[key] != v:
            conflicting.setdefault(key, set()).update({v, at[key]})
    for key, values in sorted(conflicting.items()):
        flag("inconsistent_offsets", {"partition": key[0], "offset": key[1], "values": sorted(values)})

    # R4 reordered: per producer and partition, acked offsets rise with the send sequence
    by_pp: Dict[Tuple[str, int], List[dict]] = defaultdict(list)
    for s in acked:
        if s.get("seq") is not None:
            by_pp[(s["producer"], s["partition"])].append(s)
    for (producer, p), group in by_pp.items():
        group.sort(key=lambda s: s["seq"])
        for a, b in zip(group, group[1:]):
            if b["offset"] <= a["offset"]:
                flag("reordered", {"producer": producer, "partition": p, "earlier": [a["value"], a["offset"]],
                                   "later": [b["value"], b["offset"]]})

    # R4b stale offsets: a send that began after an ack (same partition, any producer) must get a
    # higher offset. Sweep each partition's acks and sends by time (t_send strictly after t_ack).
    by_p: Dict[int, List[dict]] = defaultdict(list)
    for s in acked:
        if s.get("t_send") is not None and s.get("t_ack") is not None and s.get("seq") is not None:
            by_p[s["partition"]].append(s)
    for p, group in by_p.items():
        events = [(s["t_ack"], 1, s) for s in group] + [(s["t_send"], 0, s) for s in group]
        events.sort(key=lambda e: (e[0], e[1]))  # at equal ms a send is processed before an ack
        best = None
        for _t, kind, s in events:
            if kind == 1:
                if best is None or s["offset"] > best["offset"]:
                    best = s
            elif best is not None and s["offset"] <= best["offset"]:
                flag("stale_offsets", {"partition": p, "sent_after_ack_of": [best["value"], best["offset"], best["t_ack"]],
                                       "got": [s["value"], s["offset"], s["t_send"]]})

    # R5 read then vanished (per offset read, whichever consumer)
    for key, v in index.values.items():
        values = {v} | index.conflicts.get(key, set())
        got = at.get(key)
        for value in sorted(values):
            if got != value:
                flag("read_then_vanished", {"partition": key[0], "offset": key[1], "value": value, "final": got,
                                            "consumers": sorted(index.readers.get(key, ()))})

    # R6 a tailing session reads each partition in offset order without gaps
    offsets_of = {int(p): sorted(o for o, _ in recs) for p, recs in final.items()}
    for ev in index.tail_backwards:
        flag("tail_backwards", ev)
    for ev in index.tail_gaps:
        offs = offsets_of.get(ev["partition"], [])
        a, b = ev["offsets"]
        if bisect.bisect_right(offs, a) < bisect.bisect_left(offs, b):
            flag("tail_skipped", ev)

    # R7 unknown values
    sent_values = {s["value"] for s in sends}
    for v, places in final_values.items():
        if v not in sent_values:
            flag("unknown", {"value": v, "at": sorted(places)})

    # R9 unseen by the tailing consumers
    if check_unseen:
        for s in acked:
            key = (s["partition"], s["offset"])
            if key not in index.tail_seen or index.values.get(key) != s["value"]:
                flag("unseen", {"value": s["value"], "partition": s["partition"], "offset": s["offset"]})

    failed_present = sum(1 for s in failed if s["value"] in final_values)
    return {"counts": counts, "examples": dict(examples), "acked": len(acked), "failed": len(failed),
            "failed_but_present": failed_present, "final_records": len(at), "sent": len(sends)}


def unavailability(sends: Iterable[dict], faults: List[dict], partitions: Iterable[int]) -> List[Optional[float]]:
    """Per fault: ms from its start until every partition has acknowledged a record sent at or
    after that start (the slowest partition), None if some partition never did."""
    first_acks: Dict[int, List[Tuple[int, int]]] = defaultdict(list)  # partition -> [(t_send, t_ack)]
    for s in sends:
        if s["ok"] and s.get("seq") is not None and s.get("t_send") is not None:
            first_acks[s["partition"]].append((s["t_send"], s["t_ack"]))
    # For each partition: t_send sorted, and the suffix minimum of t_ack (first ack among sends at or after t).
    index = {}
    for p, pairs in first_acks.items():
        pairs.sort()
        suffix_min = [0] * len(pairs)
        m = float("inf")
        for i in range(len(pairs) - 1, -1, -1):
            m = min(m, pairs[i][1])
            suffix_min[i] = m
        index[p] = ([t for t, _ in pairs], suffix_min)
    out: List[Optional[float]] = []
    for f in faults:
        t0 = f["start_ms"]
        worst: Optional[float] = 0.0
        for p in partitions:
            if p not in index:
                worst = None
                break
            sends_t, suffix_min = index[p]
            i = bisect.bisect_left(sends_t, t0)
            if i >= len(sends_t):
                worst = None
                break
            worst = max(worst, suffix_min[i] - t0)
        out.append(worst)
    return out
