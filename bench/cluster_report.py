"""The figures of `make bench-cluster`: medians over rounds, the table with ratios and goals, a chart.

Medians count only runs that produced a figure; a throughput run whose replication check failed is
left out entirely (its figures would not be RF=3 figures) and reported as a failure instead.
Ratios are Brook/Kafka. The goals are issue #11's: Brook's throughput >= 1.5x Kafka's at <= 0.3x
its end-to-end p99; CPU-seconds per GB has no goal (lower is better).
"""

from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from report import _fmt, _median, _ratio

THROUGHPUT_GOAL, P99_GOAL = 1.5, 0.3
PRODUCE_ROWS = (("records_per_s", "records/s", "tput"), ("mb_per_s", "MB/s", "tput"), ("avg_ms", "avg latency ms", None),
                ("p99_ms", "p99 latency ms (full speed: queueing)", None),
                ("node_cpu_s", "CPU-s of the 3 nodes", None), ("cpu_s_per_gb", "CPU-s per GB replicated", "cpu"))  # fmt: skip
E2E_ROWS = (("e2e_p50_ms", "p50 ms", None), ("e2e_p99_ms", "p99 ms", "p99"), ("e2e_p999_ms", "p99.9 ms", None),
            ("e2e_max_ms", "max ms", None), ("ack_p99_ms", "produce ack p99 ms", None),
            ("node_cpu_s_per_gb", "CPU-s per GB replicated at this rate", "cpu"))  # fmt: skip
GOALS: Dict[str, Tuple[str, Callable[[float], bool]]] = {
    "tput": (f">= {THROUGHPUT_GOAL:.2f}", lambda r: r >= THROUGHPUT_GOAL),
    "p99": (f"<= {P99_GOAL:.2f}", lambda r: r <= P99_GOAL),
    "cpu": ("no goal; lower is better", lambda r: True),
}


def replication_ok(run: Dict) -> bool:
    return all(check.get("ok") for check in (run.get("replication") or {}).values())


def _section_medians(runs: List[Dict], section: str) -> Dict:
    out: Dict = {}
    for name in sorted({w for r in runs for w in r.get(section) or {}}):
        figs = [(r.get(section) or {}).get(name) or {} for r in runs]
        keys = sorted({k for f in figs for k, v in f.items() if isinstance(v, (int, float)) and not isinstance(v, bool)})
        out[name] = {k: _median([f.get(k) for f in figs]) for k in keys}
    return out


def medians(runs: List[Dict]) -> Dict:
    """{cluster: {"produce": {workload: {metric: m}}, "e2e": {...}, "start_s", "e2e_rate", ...}}."""
    out: Dict = {}
    for kind in sorted({r["cluster"] for r in runs}):
        tput = [r for r in runs if r["cluster"] == kind and r["phase"] == "throughput" and replication_ok(r)]
        e2e = [r for r in runs if r["cluster"] == kind and r["phase"] == "e2e"]
        mine = [r for r in runs if r["cluster"] == kind]
        out[kind] = {
            "produce": _section_medians(tput, "produce"),
            "e2e": _section_medians(e2e, "e2e"),
            "start_s": _median([r.get("start_s") for r in mine]),
            "node_idle_cores": _median([r.get("node_idle_cores") for r in tput]),
            "e2e_rate": _median([r.get("e2e_rate") for r in e2e]),
        }
    return out


def rows(doc: Dict) -> List[Tuple[str, Optional[float], Optional[float], Optional[str]]]:
    """(figure, kafka, brook, goal key or None) for every row of the table."""
    m = doc["medians"]
    kafka, brook = m.get("kafka") or {}, m.get("brook") or {}

    def get(srv: Dict, section: str, name: str, key: str) -> Optional[float]:
        return ((srv.get(section) or {}).get(name) or {}).get(key)

    out: List[Tuple[str, Optional[float], Optional[float], Optional[str]]] = []
    for name in doc["config"]["workloads"]:
        for key, label, goal in PRODUCE_ROWS:
            out.append((f"produce {name}: {label}", get(kafka, "produce", name, key), get(brook, "produce", name, key), goal))
    out.append(("e2e fixed rate msg/s (1 KB, acks=all)", kafka.get("e2e_rate"), brook.get("e2e_rate"), None))
    for name in sorted({w for srv in (kafka, brook) for w in srv.get("e2e") or {}}):
        for key, label, goal in E2E_ROWS:
            out.append((f"e2e {name}: {label}", get(kafka, "e2e", name, key), get(brook, "e2e", name, key), goal))
    out.append(("cluster start to all registered s", kafka.get("start_s"), brook.get("start_s"), None))
    out.append(("idle CPU of the 3 nodes, cores", kafka.get("node_idle_cores"), brook.get("node_idle_cores"), None))
    return out


def _verdict(kafka: Optional[float], brook: Optional[float], goal: Optional[str]) -> str:
    if goal is None:
        return ""
    text, met = GOALS[goal]
    if goal == "cpu" or kafka is None or brook is None or kafka == 0:
        return text  # no target for CPU, and no verdict without both figures
    return f"{text}: {'met' if met(brook / kafka) else 'NOT met'}"


def headline(doc: Dict) -> str:
    """The three ratios the issue asks for, on one line each."""
    m = doc["medians"]
    kafka, brook = m.get("kafka") or {}, m.get("brook") or {}

    def ratio(section: str, name: str, key: str) -> Optional[float]:
        k = ((kafka.get(section) or {}).get(name) or {}).get(key)
        b = ((brook.get(section) or {}).get(name) or {}).get(key)
        return None if k is None or b is None or k == 0 else b / k

    lines = []
    for name in doc["config"]["workloads"]:
        t, c = ratio("produce", name, "mb_per_s"), ratio("produce", name, "cpu_s_per_gb")
        lines.append(f"  throughput {name}: Brook/Kafka {_num(t)} (goal >= {THROUGHPUT_GOAL}: {_met(t, lambda r: r >= THROUGHPUT_GOAL)});"
                     f" CPU-s per GB replicated Brook/Kafka {_num(c)}")  # fmt: skip
    p = ratio("e2e", "1KB acks=all", "e2e_p99_ms")
    rate = kafka.get("e2e_rate") or brook.get("e2e_rate")
    lines.append(f"  e2e p99 at {_fmt(rate)} msg/s: Brook/Kafka {_num(p)} (goal <= {P99_GOAL}: {_met(p, lambda r: r <= P99_GOAL)})")
    return "\n".join(lines)


def _num(v: Optional[float]) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def _met(v: Optional[float], ok: Callable[[float], bool]) -> str:
    return "n/a" if v is None else ("met" if ok(v) else "NOT met")


def table(doc: Dict) -> str:
    mc, cfg = doc["machine"], doc["config"]
    head = (f"3-node Brook vs 3-node Apache Kafka 4.4 — RF {cfg['replication_factor']}, min.insync.replicas "
            f"{cfg['min_insync_replicas']}, acks=all, {cfg['partitions']} partitions, {cfg['rounds']} round(s), "
            f"{cfg['records']:,} records/run; {mc['cpu_model']}, {mc['cores']} cores, kernel {mc['kernel']}")  # fmt: skip
    cols = ("figure (median)", "Kafka", "Brook", "Brook/Kafka", "goal")
    body = [(name, _fmt(k), _fmt(b), _ratio(b, k), _verdict(k, b, goal)) for name, k, b, goal in rows(doc)]
    widths = [max(len(r[i]) for r in [cols, *body]) for i in range(len(cols))]
    lines = [head, f"brook: {cfg['brook_bin']}; Kafka heap per node: {cfg['kafka_heap']}"]
    if doc.get("load"):
        lines.append(doc["load"]["note"])
    lines.append("")
    for r in [cols, tuple("-" * w for w in widths), *body]:
        lines.append("  ".join(c.ljust(widths[i]) if i in (0, 4) else c.rjust(widths[i]) for i, c in enumerate(r)).rstrip())
    lines += ["", "Ratios (issue #11):", headline(doc)]
    return "\n".join(lines)


def chart(doc: Dict, path: Path) -> None:
    """Three panels: producer MB/s, end-to-end latency at the fixed rate (log), CPU-s per GB."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    m, names = doc["medians"], doc["config"]["workloads"]
    kinds = (("kafka", "Apache Kafka (3 nodes)", "#1f77b4"), ("brook", "Brook (3 nodes)", "#d62728"))

    def fig_of(kind: str, section: str, name: str, key: str) -> Optional[float]:
        return (((m.get(kind) or {}).get(section) or {}).get(name) or {}).get(key)

    def bars(ax, groups: List[Tuple[str, str, str]], title: str, ylabel: str, log: bool = False) -> None:
        """groups: (label, section, (workload, key)); one bar per cluster in each."""
        width = 0.4
        for k, (kind, label, color) in enumerate(kinds):
            xs = [x + (k - 0.5) * width for x in range(len(groups))]
            ys = [fig_of(kind, sec, wk[0], wk[1]) for _, sec, wk in groups]
            ax.bar(xs, [y or 0.0 for y in ys], width, label=label, color=color)
            for x, y in zip(xs, ys):
                if y is None:
                    ax.text(x, 0.02, "n/a", ha="center", fontsize=7, rotation=90, transform=ax.get_xaxis_transform())
        if log:
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(ticker.NullFormatter())
        ax.margins(y=0.15)  # headroom so the legend does not cover the tallest bar
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([g[0] for g in groups], rotation=20, ha="right", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)

    fig, axes = plt.subplots(1, 3, figsize=(16, 5.5))
    bars(axes[0], [(n, "produce", (n, "mb_per_s")) for n in names],
         "Producer throughput, RF=3 acks=all, --throughput -1\n(higher is better)", "MB/s")  # fmt: skip
    e2e = "1KB acks=all"
    rate = (m.get("kafka") or {}).get("e2e_rate") or (m.get("brook") or {}).get("e2e_rate") or 0
    bars(axes[1], [(lb, "e2e", (e2e, key)) for key, lb in (("e2e_p50_ms", "p50"), ("e2e_p99_ms", "p99"),
                                                            ("e2e_max_ms", "max"), ("ack_p99_ms", "ack p99"))],
         f"End-to-end latency at a fixed {rate:,.0f} msg/s of 1 KB\n(lower is better)", "ms (log)", log=True)  # fmt: skip
    bars(axes[2], [(n, "produce", (n, "cpu_s_per_gb")) for n in names] + [("fixed rate", "e2e", (e2e, "node_cpu_s_per_gb"))],
         "CPU-seconds of the 3 nodes per GB acknowledged\n(lower is better)", "CPU-s / GB")  # fmt: skip
    cfg, mc = doc["config"], doc["machine"]
    title = (f"3 Brook nodes vs 3 Kafka 4.4 nodes — RF 3, min ISR 2, {cfg['partitions']} partitions, medians of "
             f"{cfg['rounds']} round(s) — {mc['cpu_model']}, {mc['cores']} cores ({doc['started_utc']})")  # fmt: skip
    if (doc.get("load") or {}).get("indicative"):
        title += "\n" + doc["load"]["note"]
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
