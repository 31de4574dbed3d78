"""The end-to-end latency curve for people: a table and a chart panel per acks setting.

For each point (acks, target rate) and broker: the medians over rounds of the achieved rate and
p50/p99/p99.9 (report.medians), and whether the broker sustained the point — in *every* round
that ran it (latency_curve.verdict), so one bad round is not hidden by a median. Brook/Kafka
latency ratios are given only at a fixed rate both sustained: at a rate one broker could not
keep up with its latency is a backlog, not a latency, and the "max" points are each broker's own
rate, so they are never compared with each other. Saved results from before the curve (one
fixed-rate point) have no curve entries: the table skips it and the panels say so.
"""

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from latency_curve import MAX, MAX_P50_MS, MIN_ACHIEVED, entry, parse_entry

BROKERS = (("kafka", "Kafka", "#1f77b4"), ("brook", "Brook", "#d62728"))
LATENCIES = (("e2e_p50_ms", "p50", "-", "o"), ("e2e_p99_ms", "p99", "--", "s"), ("e2e_p999_ms", "p99.9", ":", "^"))
# The producer's acknowledgement p99 (callback - scheduled send): the "produce p99" at a fixed
# rate, in the table beside the end-to-end figures (not charted).
ACK_P99 = "ack_p99_ms"


@dataclass
class Cell:
    """One broker at one point of the curve."""

    figures: Dict  # medians over the rounds that produced figures ({} if none did)
    sustained: bool  # in every round that ran the point
    why_not: List[str]  # each round's reason, when not sustained

    def get(self, key: str) -> Optional[float]:
        return self.figures.get(key)


def points(doc: Dict) -> List[Tuple[str, str]]:
    """(acks, token) of every point any broker ran: acks in run order, rates ascending, max last."""
    found = {parse_entry(name) for kind, _, _ in BROKERS
             for name in ((doc["medians"].get(kind) or {}).get("e2e") or {})} - {None}  # fmt: skip
    acks_order = doc["config"].get("e2e_acks") or ["1", "all"]
    return sorted(found, key=lambda p: (acks_order.index(p[0]) if p[0] in acks_order else 9,
                                        p[1] == MAX, float(p[1]) if p[1] != MAX else 0.0))  # fmt: skip


def cell(doc: Dict, kind: str, acks: str, token: str) -> Optional[Cell]:
    """None if `kind` never ran this point."""
    name = entry(acks, token)
    runs = [r for r in doc["runs"] if r["server"] == kind and name in (r.get("e2e") or {})]
    if not runs:
        return None
    figs = [r["e2e"][name] for r in runs]
    why = [f.get("not_sustained", "not sustained") if f else "run failed"
           for f in figs if not (f and f.get("sustained"))]  # fmt: skip
    medians = ((doc["medians"].get(kind) or {}).get("e2e") or {}).get(name) or {}
    return Cell(medians, not why, why)


def criterion() -> str:
    return (f"sustained = in every round, every measured record delivered, achieved rate >= {MIN_ACHIEVED:.0%} "
            f"of the target and p50 < {MAX_P50_MS:,.0f} ms")  # fmt: skip


def _fmt(v: Optional[float]) -> str:
    if v is None:
        return "n/a"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.2f}"


def table(doc: Dict) -> str:
    """The curve as text ('' when the results hold no curve)."""
    pts = points(doc)
    if not pts:
        return ""
    cols = ["acks", "target msg/s"]
    for _, label, _ in BROKERS:
        cols += [f"{label} msg/s", "p50 ms", "p99 ms", "p99.9 ms", "ack p99"]
    cols += ["Brook/Kafka p50", "p99", "p99.9", "ack p99"]
    body, notes = [], []
    best: Dict[Tuple[str, str], float] = {}
    for acks, token in pts:
        cells = {kind: cell(doc, kind, acks, token) for kind, _, _ in BROKERS}
        if token == MAX:
            target = "max: " + ", ".join(f"{label[0]} {_fmt(c.get('target_msg_per_s'))}"
                                         for kind, label, _ in BROKERS if (c := cells[kind]))  # fmt: skip
        else:
            target = f"{float(token):,.0f}"
        row = [acks, target]
        for kind, label, _ in BROKERS:
            c = cells[kind]
            if c is None:
                row += ["not run", "", "", "", ""]
                continue
            row.append(_fmt(c.get("achieved_msg_per_s")) + ("" if c.sustained else "*"))
            row += [_fmt(c.get(key)) for key, _, _, _ in LATENCIES] + [_fmt(c.get(ACK_P99))]
            if c.sustained:
                best[(acks, kind)] = max(best.get((acks, kind), 0.0), c.get("target_msg_per_s") or 0.0)
            for why in dict.fromkeys(c.why_not):
                notes.append(f"  {label} acks={acks} @{token}: {why}")
        k, b = cells["kafka"], cells["brook"]
        keys = [key for key, _, _, _ in LATENCIES] + [ACK_P99]
        if token != MAX and k and b and k.sustained and b.sustained:
            row += [_ratio(b.get(key), k.get(key)) for key in keys]
        else:
            row += ["n/a"] * len(keys)
        body.append(row)
    widths = [max(len(r[i]) for r in [cols, *body]) for i in range(len(cols))]
    lines = ["End-to-end latency curve, 1 KB records: medians over rounds (achieved msg/s, receive - scheduled send;",
             "ack p99 = the producer's acknowledgement p99, callback - scheduled send: the produce p99 at that rate).",
             f"{criterion()}; * = not sustained.",
             "Brook/Kafka only at a fixed rate both sustained (\"max\" is each broker's own producer maximum).", ""]  # fmt: skip
    for r in [cols, ["-" * w for w in widths], *body]:
        lines.append("  ".join(c.ljust(widths[i]) if i < 2 else c.rjust(widths[i]) for i, c in enumerate(r)))
    for acks in dict.fromkeys(a for a, _ in pts):
        ran = {kind for kind, _, _ in BROKERS for a, t in pts if a == acks and cell(doc, kind, a, t)}
        got = ", ".join(f"{label} {_fmt(best[(acks, kind)])}" if (acks, kind) in best else
                        f"{label} {'none' if kind in ran else 'not run'}" for kind, label, _ in BROKERS)  # fmt: skip
        lines.append(f"highest target sustained, acks={acks} (msg/s): {got}")
    if notes:
        lines += ["* not sustained:", *notes]
    return "\n".join(lines)


def _ratio(a: Optional[float], b: Optional[float]) -> str:
    return "n/a" if a is None or b is None or b == 0 else f"{a / b:.2f}"


def draw(ax, doc: Dict, acks: str) -> None:
    """Latency against achieved rate for both brokers at `acks` (log-log; hollow: not sustained)."""
    from matplotlib import ticker

    pts = [t for a, t in points(doc) if a == acks]
    ax.set_title(f"End-to-end latency vs achieved rate, 1 KB, acks={acks}\n"
                 "(lower and further right is better; hollow: not sustained)", fontsize=10)  # fmt: skip
    if not pts:
        ax.text(0.5, 0.5, f"no acks={acks} latency curve in these results", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
        return
    for kind, label, color in BROKERS:
        cells = [(t, c) for t in pts if (c := cell(doc, kind, acks, t)) and c.get("achieved_msg_per_s")]
        cells.sort(key=lambda tc: tc[1].get("target_msg_per_s") or 0.0)
        for key, name, style, marker in LATENCIES:
            xy = [(c.get("achieved_msg_per_s"), c.get(key), c.sustained) for _, c in cells if c.get(key)]
            if not xy:
                continue
            ax.plot([x for x, _, _ in xy], [y for _, y, _ in xy], linestyle=style, color=color, alpha=0.7,
                    label=f"{label} {name}")  # fmt: skip
            for x, y, ok in xy:
                ax.plot([x], [y], marker=marker, color=color, markerfacecolor=color if ok else "white", linestyle="")
        for t, c in cells:
            if t == MAX and c.get("e2e_p50_ms"):
                xy = (c.get("achieved_msg_per_s"), c.get("e2e_p50_ms"))
                ax.annotate(f"{label} max\n(target {c.get('target_msg_per_s') or 0:,.0f})", xy, textcoords="offset points",
                            xytext=(4, -18), fontsize=7, color=color)  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):  # 1-2-5 ticks: a few decades at most, each labelled
        axis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
        axis.set_minor_formatter(ticker.NullFormatter())
    ax.axhline(MAX_P50_MS, color="#777777", linewidth=0.8, linestyle="-.")
    ax.text(0.99, MAX_P50_MS, f"p50 limit of 'sustained' ({MAX_P50_MS:,.0f} ms)", fontsize=7, color="#555555",
            ha="right", va="bottom", transform=ax.get_yaxis_transform())  # fmt: skip
    ax.set_xlabel("achieved msg/s (log)")
    ax.set_ylabel("ms (log)")
    ax.legend(fontsize=7, ncol=2, loc="upper left")  # low rate, high latency: empty on a sane curve
    ax.grid(alpha=0.3, which="both")
