"""What the rebalance benchmark concludes from the `group-members` driver's event lines (pure: no I/O).

`Group` replays the lines (integration-tests/drivers/java GroupMembersCommand.java: start,
assigned/revoked/lost with the partitions that changed, first-record, late, closing/closed) into
who owns which partition. The group is *settled* when every partition is owned by exactly one
running member, the running members' shares differ by at most one (what the uniform and
cooperative-sticky assignors give a single topic) and every partition handed to a member since
has delivered a record to it: owned again and consuming.

`Phase` measures one change (a member joining, or one leaving) from its trigger (the newcomer's
`start`, just before subscribe; the leaver's `closing`, just before close) to the event that
last made the group settled: the rebalance time. Partitions that no member gained or lost in
that window did not move; the pause the issue bounds by one heartbeat is the longest any of their
records waited to be read (poll time - CreateTime, from the `late` events) where that wait
overlaps the window, or a partition's silence still open when the phase ended (status lines).
Lateness rather than the gap between arrivals, so a stalled producer is not counted (a starved
consumer or a slow broker is).

All times are the driver's: milliseconds on one monotonic clock shared by every member.
"""

from collections import defaultdict
from typing import Dict, List, Optional, Set, Tuple

OWNERSHIP = ("assigned", "revoked", "lost")


class Group:
    """Who owns what, from the members' events in the order they were printed."""

    def __init__(self, partitions: int):
        self.partitions = partitions
        self.owners: Dict[int, Set[int]] = defaultdict(set)
        self.running: Set[int] = set()
        self.awaiting_first: Set[Tuple[int, int]] = set()  # (member, partition): assigned, no record yet
        self.errors: List[str] = []
        self.lost_events = 0

    def apply(self, ev: Dict) -> bool:
        """Applies one event; True if it can change whether the group is settled."""
        kind, member = ev.get("event"), ev.get("member")
        parts = ev.get("partitions") or []
        if kind == "start":
            self.running.add(member)
        elif kind == "closing":
            self.running.discard(member)
        elif kind == "closed":
            # A closed consumer owns nothing, whether or not its listener said so.
            for owners in self.owners.values():
                owners.discard(member)
            self.awaiting_first = {(m, p) for m, p in self.awaiting_first if m != member}
        elif kind == "assigned" and parts:
            for p in parts:
                self.owners[p].add(member)
                self.awaiting_first.add((member, p))
        elif kind in ("revoked", "lost") and parts:
            self.lost_events += kind == "lost"
            for p in parts:
                self.owners[p].discard(member)
                self.awaiting_first.discard((member, p))
        elif kind == "first-record":
            self.awaiting_first.discard((member, ev["partition"]))
        elif kind == "error":
            self.errors.append(f"member {member}: {ev.get('error')}: {ev.get('message')}")
            return False
        else:
            return False
        return True

    def shares(self) -> Dict[int, int]:
        counts = {m: 0 for m in self.running}
        for owners in self.owners.values():
            for m in owners:
                counts[m] = counts.get(m, 0) + 1
        return counts

    def unsettled(self) -> Optional[str]:
        """None when settled, else what is still missing (for a phase that never completes)."""
        if not self.running:
            return "no running member"
        reasons = []
        unowned = [p for p in range(self.partitions) if not self.owners.get(p)]
        shared = [p for p in range(self.partitions) if len(self.owners.get(p, ())) > 1]
        foreign = sorted({m for owners in self.owners.values() for m in owners} - self.running)
        if unowned:
            reasons.append(f"{len(unowned)} partitions unowned (e.g. {unowned[:5]})")
        if shared:
            reasons.append(f"{len(shared)} partitions with two owners (e.g. {shared[:5]})")
        if foreign:
            reasons.append(f"closing members {foreign[:5]} still own partitions")
        shares = self.shares()
        if max(shares.values()) - min(shares.values()) > 1:
            spread = sorted(shares.items(), key=lambda kv: kv[1])
            reasons.append(f"unbalanced: fewest {spread[:3]}, most {spread[-3:]} (member, partitions)")
        if self.awaiting_first:
            waiting = sorted(self.awaiting_first)
            reasons.append(f"{len(waiting)} assigned partitions without a record yet (e.g. {waiting[:5]})")
        return "; ".join(reasons) or None


class Phase:
    """One change of the group, measured from its trigger event to settled again."""

    def __init__(self, name: str, group: Group, trigger_member: int, trigger_event: str):
        self.name, self.group = name, group
        self.trigger_member, self.trigger_event = trigger_member, trigger_event
        self.t_trigger: Optional[float] = None
        self.t_settled: Optional[float] = None
        self.moved: Set[int] = set()
        self.waits: List[Tuple[int, float, float]] = []  # (partition, produced, read) of late records
        self.ownership_events = 0

    def feed(self, ev: Dict) -> bool:
        """Applies one event; True if it was relevant to settling (the caller's quiet timer)."""
        kind = ev.get("event")
        if kind == self.trigger_event and ev.get("member") == self.trigger_member and self.t_trigger is None:
            self.t_trigger = ev["t"]
        if kind == "late":
            self.waits.append((ev["partition"], ev["since"], ev["t"]))
        relevant = self.group.apply(ev)
        if self.t_trigger is None:
            return relevant
        if kind in OWNERSHIP and ev.get("partitions"):
            self.moved.update(ev["partitions"])
            self.ownership_events += 1
        if relevant:
            self.t_settled = ev["t"] if self.group.unsettled() is None else None
        return relevant

    def done(self) -> bool:
        return self.t_trigger is not None and self.t_settled is not None

    def result(self, status: List[Dict], t_now: Optional[float]) -> Dict:
        """The phase's figures. `status`: the members' status lines taken at its end (open silences)."""
        out: Dict = {"complete": self.done(), "moved_partitions": len(self.moved),
                     "ownership_events": self.ownership_events}  # fmt: skip
        if self.t_trigger is None:
            out["why"] = f"trigger ({self.trigger_event} of member {self.trigger_member}) never seen"
            return out
        end = self.t_settled if self.t_settled is not None else t_now
        if self.done():
            out["ms"] = round(self.t_settled - self.t_trigger, 1)
        else:
            out["why"] = self.group.unsettled()
        pause, where = self.max_unmoved_pause(status, end)
        out["max_unmoved_pause_ms"] = None if pause is None else round(pause, 1)
        out["max_unmoved_pause_at"] = where
        out["unmoved_partitions"] = self.group.partitions - len(self.moved)
        return out

    def max_unmoved_pause(self, status: List[Dict], end: Optional[float]) -> Tuple[Optional[float], Optional[str]]:
        """Longest wait of a record of a partition that did not move, among waits overlapping
        [trigger, end] (`late` events), or the longest silence still open at a status line."""
        assert self.t_trigger is not None
        end = end if end is not None else self.t_trigger
        best: Tuple[Optional[float], Optional[str]] = (None, None)
        for p, since, until in self.waits:
            if p not in self.moved and until >= self.t_trigger and since <= end:
                if best[0] is None or until - since > best[0]:
                    best = (until - since, f"partition {p}: produced {since:.0f}, read {until:.0f} ms")
        for st in status:
            for p, last in (st.get("last_record") or {}).items():
                if int(p) not in self.moved and last <= end and (best[0] is None or st["t"] - last > best[0]):
                    best = (st["t"] - last, f"partition {p}: no record since {last:.0f} ms (open at {st['t']:.0f})")
        return best


def quiet_max_wait(waits: List[Tuple[int, float, float]], t0: float, t1: float) -> Optional[float]:
    """The longest wait of a record read in [t0, t1]: the steady-state baseline of the pauses."""
    inside = [until - since for _, since, until in waits if t0 <= until <= t1]
    return round(max(inside), 1) if inside else None
