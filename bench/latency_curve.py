"""The end-to-end latency curve of one broker: BenchDriver e2e (driver.py) at several fixed rates.

One fixed rate flatters whichever broker has headroom at it, so the curve runs 1 KB records at
each rate of --e2e-rates (5,000 to 40,000 msg/s) and at the broker's own maximum ("max": its
`1KB acks=<a> none` records/s from the perf-tool rows of the same server run), for each acks of
--e2e-acks, every point on a fresh topic, in ascending order of target (the overloaded points
last, so their backlog does not spill into a lighter one).

A point is *sustained* when, in that run, every measured record was acknowledged and received,
the achieved rate is at least MIN_ACHIEVED of the target, and the p50 end-to-end latency is under MAX_P50_MS (a broker that
falls behind sees latency grow with the run's length, so a p50 of a second means it did not keep
up, whatever the rate says). Points not sustained keep their figures (they are the curve's
knee); curve_report.py compares brokers only where both sustained.

The achieved rate is the driver's receive rate (measured records over the time from the first
to the last of them arriving) capped at the target: a broker falling behind stretches that window
and shows below the target, while one still draining a backlog from the warm-up (JIT, page cache,
a short --quick warm-up) delivers faster than records are offered for a while — that is catching
up, not a higher rate, and uncapped it read up to 50 % above the target in a quick run.

Entries are named `1KB acks=<a> @<token>` in the run's "e2e" section; each carries its target,
achieved rate, latencies, RSS peak and the broker's CPU-seconds per GB acknowledged (cpu_s_per_gb).
"""

import re
from typing import Dict, List, Optional, Tuple

import driver
from procs import GB, RssSampler, Server, cpu_figures
from workloads import Workload, create_topic, reason

SIZE = 1024
MAX = "max"
DEFAULT_RATES = "5000,10000,20000,40000,max"
QUICK_RATES = "5000,20000,max"
DEFAULT_ACKS = "1,all"
MIN_ACHIEVED = 0.95  # achieved / target: below it the broker (or the client it slowed) fell behind
MAX_P50_MS = 1000.0  # a p50 this high means a backlog that grows with the run, not a latency
ENTRY = re.compile(r"^1KB acks=(?P<acks>\S+) @(?P<token>\S+)$")


def parse_rates(text: str) -> List[str]:
    """'5000,20000,max' -> ['5000', '20000', 'max'] (numbers normalised, duplicates dropped)."""
    out: List[str] = []
    for raw in (t.strip().lower() for t in text.split(",")):
        if not raw:
            continue
        token = raw if raw == MAX else f"{float(raw):.0f}"  # ValueError for anything else
        if token != MAX and float(token) <= 0:
            raise ValueError(f"rate {raw} is not positive")
        if token not in out:
            out.append(token)
    if not out:
        raise ValueError("no rate given")
    return out


def parse_acks(text: str) -> List[str]:
    out = [a.strip() for a in text.split(",") if a.strip()]
    if not out or any(a not in ("1", "all") for a in out):
        raise ValueError("acks are 1 and/or all")
    return out


def entry(acks: str, token: str) -> str:
    return f"1KB acks={acks} @{token}"


def parse_entry(name: str) -> Optional[Tuple[str, str]]:
    """(acks, token) of a curve entry; None for anything else (a pre-curve fixed-rate entry)."""
    m = ENTRY.match(name)
    return (m["acks"], m["token"]) if m else None


def max_from(acks: str) -> str:
    """The perf-tool workload whose records/s is this broker's "max" target at `acks`."""
    return Workload(SIZE, acks, "none").name


def verdict(figures: Dict) -> Optional[str]:
    """None if the point was sustained, else why not."""
    if not driver.delivered_all(figures):
        return (f"{figures['measured_received']:,} of {figures['measured_sent']:,} measured records received, "
                f"{figures['errors']} send errors")  # fmt: skip
    achieved, p50 = figures.get("achieved_msg_per_s"), figures.get("e2e_p50_ms")
    if achieved is None or p50 is None:
        return "no achieved rate or p50"
    if achieved < MIN_ACHIEVED * figures["target_msg_per_s"]:
        return f"achieved {achieved:,.0f} < {MIN_ACHIEVED:.0%} of {figures['target_msg_per_s']:,.0f} msg/s"
    if p50 >= MAX_P50_MS:
        return f"p50 {p50:,.0f} ms >= {MAX_P50_MS:,.0f} ms"
    return None


def targets(result: Dict, rates: List[str], acks: str) -> Tuple[List[Tuple[str, float]], List[str]]:
    """[(token, msg/s)] in ascending order of target, and the reasons for points left out."""
    out, missing = [], []
    for token in rates:
        if token != MAX:
            out.append((token, float(token)))
            continue
        measured = (result["produce"].get(max_from(acks)) or {}).get("records_per_s")
        if measured:
            out.append((token, measured))
        else:
            missing.append(f"e2e {entry(acks, token)}: no {max_from(acks)} producer rate measured in this run")
    return sorted(out, key=lambda t: t[1]), missing


def run(server: Server, rss: RssSampler, result: Dict, rates: List[str], acks_list: List[str], partitions: int,
        warmup_s: float, duration_s: float, log) -> None:  # fmt: skip
    """Every point of the curve against a running `server`, into result["e2e"]."""
    for acks in acks_list:
        points, missing = targets(result, rates, acks)
        result["errors"].extend(missing)
        for token, rate in points:
            name, topic = entry(acks, token), f"e2e-acks-{acks}-{token}"
            err = create_topic(server.bootstrap, topic, partitions)
            if err:
                result["errors"].append(f"e2e {name}: {err}")
                result["e2e"][name] = None
                continue
            rss.phase = f"e2e {name}"
            cpu0 = server.cpu_s()
            figures, out = driver.e2e_point(server.bootstrap, topic, rate, warmup_s, duration_s, acks, SIZE)
            cpu1 = server.cpu_s()
            result["e2e"][name] = figures
            if figures is None:
                result["errors"].append(f"e2e {name}: {reason(out)}")
                log(f"{server.kind} e2e {name} at {rate:,.0f} msg/s: FAILED (see errors in the json)")
                continue
            figures["target_msg_per_s"] = rate
            received = figures.get("receive_rate_msg_per_s")
            figures["achieved_msg_per_s"] = None if received is None else min(rate, received)
            figures["rss_peak_mb"] = rss.peak_mb(rss.phase)
            figures.update(cpu_figures(cpu0, cpu1, figures["acked"] * SIZE / GB))  # per GB acknowledged
            why = verdict(figures)
            figures["sustained"] = why is None
            if why:
                figures["not_sustained"] = why
            log(f"{server.kind} e2e {name}: target {rate:,.0f}, achieved {_num(figures.get('achieved_msg_per_s'))} msg/s, "
                f"p50 {_num(figures.get('e2e_p50_ms'), 1)} ms, p99 {_num(figures.get('e2e_p99_ms'), 1)} ms"
                f" — {'sustained' if why is None else 'NOT sustained: ' + why}")  # fmt: skip


def _num(v: Optional[float], digits: int = 0) -> str:
    return "n/a" if v is None else f"{v:,.{digits}f}"
