"""The rebalance benchmark's table (bench/rebalance.py): per heartbeat setting, for each protocol,
Kafka's and Brook's join and leave times, the longest pause of a partition that did not move,
and Brook/Kafka with the issue's targets. Medians over rounds; a phase that never settled is
n/a, with the reason listed under the table. Pure: formats a results document, no I/O.
"""

import statistics
from typing import Dict, List, Optional

TARGET_RATIO = 0.5  # issue 26: consumer-protocol rebalance <= 0.5x Kafka's
NAMES = {"kafka": "Kafka", "brook": "Brook"}


def phase_line(p: Dict) -> str:
    """One phase for the progress log."""
    pause = p.get("max_unmoved_pause_ms")
    pause_s = "n/a" if pause is None else f"{pause:.0f} ms ({p.get('max_unmoved_pause_at')})"
    head = f"{p['ms']:.0f} ms" if p.get("complete") else f"DID NOT SETTLE: {p.get('why')}"
    return f"{head}; moved {p.get('moved_partitions')} partitions; longest pause of an unmoved one {pause_s}"


def _median(values: List[Optional[float]]) -> Optional[float]:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _fmt(v: Optional[float], unit: str = "") -> str:
    return "n/a" if v is None else f"{v:,.0f}{unit}"


def _pause(v: Optional[float], settled: Optional[float], late_ms: int) -> str:
    """A settled phase without any late record paused less than the lateness threshold."""
    return f"<{late_ms}" if v is None and settled is not None else _fmt(v)


def _ratio(b: Optional[float], k: Optional[float]) -> Optional[float]:
    return None if b is None or not k else b / k


def _figures(runs: List[Dict], kind: str, hb: int, protocol: str) -> Dict[str, Optional[float]]:
    scen = [r["scenarios"].get(protocol, {}) for r in runs if r["server"] == kind and r["heartbeat_ms"] == hb]

    def phase(name: str, key: str) -> Optional[float]:
        return _median([s.get(name, {}).get(key) if s.get(name, {}).get("complete") or key != "ms" else None
                        for s in scen])  # fmt: skip

    return {
        "join": phase("join", "ms"), "leave": phase("leave", "ms"),
        "join_pause": phase("join", "max_unmoved_pause_ms"), "leave_pause": phase("leave", "max_unmoved_pause_ms"),
        "join_moved": phase("join", "moved_partitions"), "leave_moved": phase("leave", "moved_partitions"),
        "steady": phase("steady", "ms"), "baseline": phase("steady", "baseline_max_late_ms"),
    }  # fmt: skip


def table(doc: Dict) -> str:
    cfg, runs = doc["config"], doc["runs"]
    lines = [doc["load"]["note"]]
    for hb in cfg["heartbeat_ms"]:
        classic_hb = cfg["classic_client_heartbeat_ms"].get(str(hb), cfg["classic_client_heartbeat_ms"].get(hb))
        lines += ["", f"Rebalance: {cfg['members']} members over {cfg['partitions']} partitions, "
                      f"group.consumer.heartbeat.interval.ms={hb} (classic members: cooperative-sticky, "
                      f"heartbeat.interval.ms={classic_hb}); consumer: uniform; medians of {cfg['rounds']} round(s)",
                  f"{'protocol':9} {'broker':12} {'join ms':>9} {'leave ms':>9} {'max pause unmoved ms':>22} "
                  f"{'baseline late':>12} {'moved j/l':>10} {'first settle':>12}"]  # fmt: skip
        for protocol in cfg["protocols"]:
            f = {k: _figures(runs, k, hb, protocol) for k in cfg["servers"]}
            for kind in cfg["servers"]:
                x = f[kind]
                pause = (f"{_pause(x['join_pause'], x['join'], cfg['late_ms'])} / "
                         f"{_pause(x['leave_pause'], x['leave'], cfg['late_ms'])}")
                moved = f"{_fmt(x['join_moved'])}/{_fmt(x['leave_moved'])}"
                lines.append(f"{protocol:9} {NAMES[kind]:12} {_fmt(x['join']):>9} {_fmt(x['leave']):>9} {pause:>22} "
                             f"{_pause(x['baseline'], x['steady'], cfg['late_ms']):>12} {moved:>10} {_fmt(x['steady']):>12}")  # fmt: skip
            if "kafka" in f and "brook" in f:
                rj = _ratio(f["brook"]["join"], f["kafka"]["join"])
                rl = _ratio(f["brook"]["leave"], f["kafka"]["leave"])
                row = f"{protocol:9} {'Brook/Kafka':12} {_r(rj):>9} {_r(rl):>9}"
                if protocol == "consumer":
                    row += f"   target <= {TARGET_RATIO}: join {_met(rj)}, leave {_met(rl)}"
                lines.append(row)
        if "consumer" in cfg["protocols"]:
            verdicts = []
            for kind in cfg["servers"]:
                x = _figures(runs, kind, hb, "consumer")
                worst = max((v for v in (x["join_pause"], x["leave_pause"]) if v is not None), default=None)
                if worst is None and x["join"] is not None and x["leave"] is not None:
                    verdicts.append(f"{NAMES[kind]} <{cfg['late_ms']} ms (met)")
                    continue
                ok = None if worst is None else worst <= hb
                verdicts.append(f"{NAMES[kind]} {_fmt(worst, ' ms')} ({'n/a' if ok is None else 'met' if ok else 'NOT met'})")
            lines.append(f"no pause of an unmoved partition over one heartbeat ({hb} ms), consumer protocol: "
                         + ", ".join(verdicts))
    notes = []
    for r in runs:
        where = f"{NAMES[r['server']]} hb={r['heartbeat_ms']} round {r['round']}"
        notes += [f"{where}: {e}" for e in r["errors"]]
        for protocol, s in r["scenarios"].items():
            if s.get("error"):
                notes.append(f"{where} {protocol}: {s['error']}")
            if s.get("steady", {}).get("caught_up") is False:
                notes.append(f"{where} {protocol}: records were still read late before the join (never caught up)")
            for name in ("join", "leave"):
                if name in s and not s[name].get("complete"):
                    notes.append(f"{where} {protocol} {name}: did not settle: {s[name].get('why')}")
            if s.get("member_errors"):
                notes.append(f"{where} {protocol}: member errors {s['member_errors'][:3]}")
            errors = (s.get("client_log_errors") or {}).get("count")
            if errors:
                kind = next(iter(s["client_log_errors"]["kinds"]), "")
                notes.append(f"{where} {protocol}: {errors} ERROR lines in the members' client log, e.g. {kind[:200]}")
            if s.get("lost_events"):
                notes.append(f"{where} {protocol}: {s['lost_events']} onPartitionsLost calls")
    if notes:
        lines += ["", "failures and notes:"] + [f"  {n}" for n in notes]
    return "\n".join(lines)


def _r(v: Optional[float]) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def _met(v: Optional[float]) -> str:
    return "n/a" if v is None else ("met" if v <= TARGET_RATIO else "NOT met")
