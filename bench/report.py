"""Turn the raw runs of bench.py into medians, a text table and a PNG chart; describe the machine.

Medians are over rounds, counting only runs that produced a figure (a failed run is left out,
and a figure no run produced is n/a). Ratios are Brook/Kafka for every row, so for latency and
RSS below 1 is better for Brook, for throughput above 1 is. "Brook/sink" is Brook's producer
(consumer) throughput as a fraction of the null sink's (serving from memory as null source), the
ceiling of the producer (consumer) on this machine. "broker CPU-s per GB" is the server process's
CPU-seconds over one perf-tool run per GB (10^9 bytes) of record values produced or fetched
(bench.py, procs.process_cpu_s); the sink's is in the json, not in the table (it is Python and
keeps nothing, so Brook/sink of it means nothing). The end-to-end latency curve has its own
table and panels (curve_report.py).
"""

import os
import platform
import statistics
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import curve_report

PRODUCE_METRICS = (("records_per_s", "records/s"), ("mb_per_s", "MB/s"), ("avg_ms", "avg latency ms"), ("p99_ms", "p99 latency ms"),
                   ("cpu_s_per_gb", "broker CPU-s per GB produced"))  # fmt: skip
CONSUME_METRICS = (("fetch_mb_per_s", "fetch MB/s"), ("mb_per_s", "MB/s incl. group join"),
                   ("cpu_s_per_gb", "broker CPU-s per GB fetched"))  # fmt: skip
SCALARS = (("startup_s", "restart to 1st ApiVersions s"), ("first_start_s", "first start to ApiVersions s"),
           ("rss_idle_start_mb", "RSS idle MB"), ("rss_peak_mb", "RSS peak under load MB"), ("rss_steady_mb", "RSS steady after load MB"))  # fmt: skip
THROUGHPUT = {"records_per_s", "mb_per_s", "fetch_mb_per_s"}  # the rows with a null sink column
E2E_METRICS = (("e2e_p50_ms", "p50 ms"), ("e2e_p99_ms", "p99 ms"), ("e2e_p999_ms", "p99.9 ms"),
               ("e2e_max_ms", "max ms"), ("ack_p50_ms", "produce ack p50 ms"), ("ack_p99_ms", "produce ack p99 ms"),
               ("rss_peak_mb", "RSS peak MB"))  # fmt: skip
SCALE_METRICS = {
    "partitions": (("create_s", "create topics s"), ("writable_s", "create to all writable s"), ("achieved_msg_per_s", "produced msg/s"),
                   ("ack_p50_ms", "produce ack p50 ms"), ("ack_p99_ms", "produce ack p99 ms"),
                   ("metadata_p50_ms", "Metadata (all topics) p50 ms"), ("metadata_p99_ms", "Metadata (all topics) p99 ms"),
                   ("rss_peak_mb", "RSS peak MB"), ("rss_steady_mb", "RSS steady after MB")),
    "connections": (("open_s", "open all s"), ("rss_before_mb", "RSS before MB"), ("rss_open_mb", "RSS with them open MB"),
                    ("metadata_before_p99_ms", "Metadata p99 before ms"), ("metadata_p50_ms", "Metadata p50 ms"),
                    ("metadata_p99_ms", "Metadata p99 ms")),
}  # fmt: skip
LOAD_AVG_LIMIT = 1.0  # a 1-minute load average above this before the run: other work competed
OTHER_CORES_LIMIT = 0.5  # other processes' average CPU use during a server's run, in cores


def load_note(before: Tuple[float, ...], after: Tuple[float, ...], runs: List[Dict]) -> Dict:
    """How loaded the machine was by others; the run is flagged indicative when it was."""
    other = [r["other_load_cores"] for r in runs if r.get("other_load_cores") is not None]
    worst = max(other) if other else None
    indicative = before[0] > LOAD_AVG_LIMIT or (worst is not None and worst > OTHER_CORES_LIMIT)
    note = (f"load average {before[0]:.2f} before the run; other processes used up to "
            f"{worst if worst is not None else float('nan'):.2f} cores during a server's run")  # fmt: skip
    return {"loadavg_before": list(before), "loadavg_after": list(after), "other_load_cores_max": worst,
            "indicative": indicative, "note": ("INDICATIVE ONLY (machine shared): " if indicative else "") + note}  # fmt: skip


def machine() -> Dict:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    mem_kb = None
    try:
        with open("/proc/meminfo") as f:
            mem_kb = int(next(line.split()[1] for line in f if line.startswith("MemTotal")))
    except (OSError, StopIteration, ValueError):
        pass
    return {
        "cpu_model": cpu,
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "memory_mb": None if mem_kb is None else mem_kb // 1024,
        "python": platform.python_version(),
    }


def _median(values: List[Optional[float]]) -> Optional[float]:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def medians(runs: List[Dict]) -> Dict:
    """{server: {section: {entry: {metric: m}}, scalar: m}} for the sections produce, consume,
    e2e and scale; a metric is the median of the runs that produced it."""
    out: Dict = {}
    for kind in sorted({r["server"] for r in runs}):
        mine = [r for r in runs if r["server"] == kind]
        entry: Dict = {}
        for section in ("produce", "consume", "e2e", "scale"):
            entry[section] = {}
            for w in sorted({w for r in mine for w in r.get(section) or {}}):
                figs = [(r.get(section) or {}).get(w) or {} for r in mine]
                # bools (a curve point's "sustained") are not figures: curve_report reads them per run
                keys = sorted({k for f in figs for k, v in f.items()
                               if isinstance(v, (int, float)) and not isinstance(v, bool)})  # fmt: skip
                entry[section][w] = {k: _median([f.get(k) for f in figs]) for k in keys}
        for key in [k for k, _ in SCALARS] + ["e2e_rate", "other_load_cores"]:
            entry[key] = _median([r.get(key) for r in mine])
        out[kind] = entry
    return out


def rows(doc: Dict) -> List[Tuple[str, Optional[float], Optional[float], Optional[float]]]:
    """(figure, kafka, brook, sink) for every row of the table and the chart."""
    m = doc["medians"]
    kafka, brook, sink = m.get("kafka", {}), m.get("brook", {}), m.get("sink", {})

    def get(server: Dict, section: str, w: str, key: str) -> Optional[float]:
        return ((server.get(section) or {}).get(w) or {}).get(key)

    out = []
    for w in doc["config"]["workloads"]:
        if doc["config"].get("consume_only") and " acks=1 " not in f" {w} ":
            continue  # not run
        for key, label in PRODUCE_METRICS:
            out.append((f"produce {w} {label}", get(kafka, "produce", w, key), get(brook, "produce", w, key),
                        get(sink, "produce", w, key) if key in THROUGHPUT else None))  # fmt: skip
    for w in doc["config"]["workloads"]:
        if " acks=1 " in f" {w} ":
            for key, label in CONSUME_METRICS:
                out.append((f"consume {w} {label}", get(kafka, "consume", w, key), get(brook, "consume", w, key),
                            get(sink, "consume", w, key) if key in THROUGHPUT else None))  # fmt: skip
    for key, label in SCALARS:
        out.append((label, kafka.get(key), brook.get(key), None))
    # Results saved before the latency curve had one fixed-rate point per acks: still shown.
    legacy = sorted({w for srv in (kafka, brook) for w in srv.get("e2e") or {} if curve_report.parse_entry(w) is None})
    if legacy:
        out.append(("e2e fixed rate msg/s (1 KB)", kafka.get("e2e_rate"), brook.get("e2e_rate"), None))
    for w in legacy:
        for key, label in E2E_METRICS:
            out.append((f"e2e {w} {label}", get(kafka, "e2e", w, key), get(brook, "e2e", w, key), None))
    for w in sorted({w for srv in (kafka, brook) for w in srv.get("scale") or {}}, reverse=True):
        for key, label in SCALE_METRICS["connections" if "connections" in w else "partitions"]:
            if key == "achieved_msg_per_s" and (doc["config"].get("scale") or {}).get("rate"):
                label = f"{label} (target {doc['config']['scale']['rate']:,.0f})"
            out.append((f"scale {w}: {label}", get(kafka, "scale", w, key), get(brook, "scale", w, key), None))
    return out


def _fmt(v: Optional[float]) -> str:
    if v is None:
        return "n/a"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.2f}"


def _ratio(a: Optional[float], b: Optional[float]) -> str:
    return "n/a" if a is None or b is None or b == 0 else f"{a / b:.2f}"


def table(doc: Dict) -> str:
    mc, cfg = doc["machine"], doc["config"]
    head = (f"Brook vs Apache Kafka 4.4 — {cfg['rounds']} round(s), {cfg['records']:,} records/workload, "
            f"{cfg['partitions']} partitions; {mc['cpu_model']}, {mc['cores']} cores, kernel {mc['kernel']}")  # fmt: skip
    cols = ("figure (median)", "Kafka", "Brook", "Brook/Kafka", "null sink", "Brook/sink")
    body = [
        (name, _fmt(k), _fmt(b), _ratio(b, k), _fmt(s) if s is not None else "", _ratio(b, s) if s is not None else "")
        for name, k, b, s in rows(doc)
    ]
    widths = [max(len(r[i]) for r in [cols, *body]) for i in range(len(cols))]
    lines = [head]
    if doc.get("load"):
        lines.append(doc["load"]["note"])
    lines.append("")
    for r in [cols, tuple("-" * w for w in widths), *body]:
        lines.append("  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)))
    return "\n".join(lines)


def chart(doc: Dict, path: Path) -> None:
    """Eight panels: producer MB/s, producer p99, consumer MB/s, RSS + startup, the end-to-end
    latency curve at acks=1 and at acks=all, broker CPU-s per GB, and the scale runs' latencies
    (log scales where ranges are wide)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    m, workloads = doc["medians"], doc["config"]["workloads"]
    series = (("sink", "null sink", "#9e9e9e"), ("kafka", "Apache Kafka", "#1f77b4"), ("brook", "Brook", "#d62728"))
    brokers = [s for s in series if s[0] != "sink"]

    def fig_of(kind: str, section: str, entry: str, key: str) -> Optional[float]:
        return (((m.get(kind) or {}).get(section) or {}).get(entry) or {}).get(key)

    def grouped(ax, labels: List[str], kinds, get, title: str, ylabel: str, log: bool = False,
                legend_loc: str = "best") -> None:  # fmt: skip
        """One bar per kind in each group; `get(kind, i)` is group i's value (None: n/a)."""
        width = 0.8 / len(kinds)
        for k, (kind, label, color) in enumerate(kinds):
            xs = [x + (k - (len(kinds) - 1) / 2) * width for x in range(len(labels))]
            ys = [get(kind, i) for i in range(len(labels))]
            ax.bar(xs, [y if y is not None else 0.0 for y in ys], width, label=label, color=color)
            for x, y in zip(xs, ys):
                if y is None:  # no run produced this figure: say so instead of drawing a zero
                    ax.text(x, 0.01 if not log else 1e-3, "n/a", ha="center", va="bottom", fontsize=7, color=color,
                            rotation=90, transform=ax.get_xaxis_transform())  # fmt: skip
        ax.margins(y=0.15)  # headroom so the legend does not cover the tallest bar
        if log and any(get(kind, i) for kind, _, _ in kinds for i in range(len(labels))):  # log of nothing warns
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8, loc=legend_loc)
        ax.grid(axis="y", alpha=0.3)

    def per_workload(section: str, key: str, names: List[str]):
        return lambda kind, i: fig_of(kind, section, names[i], key)

    fig, axes = plt.subplots(4, 2, figsize=(15, 20))
    grouped(axes[0][0], workloads, series, per_workload("produce", "mb_per_s", workloads),
            "Producer throughput, --throughput -1 (higher is better)", "MB/s")  # fmt: skip
    grouped(axes[0][1], workloads, brokers, per_workload("produce", "p99_ms", workloads),
            "Producer p99 latency at full speed (queueing; lower is better)", "ms")  # fmt: skip
    consumed = [w for w in workloads if " acks=1 " in f" {w} "]
    grouped(axes[1][0], consumed, series, per_workload("consume", "fetch_mb_per_s", consumed),
            "Consumer fetch throughput (higher is better)", "MB/s")  # fmt: skip

    rss_groups = [("idle", None, "rss_idle_start_mb"), ("peak (perf tools)", None, "rss_peak_mb"),
                  ("steady (after)", None, "rss_steady_mb"), ("peak, 1,000 partitions", "100x10 partitions", "rss_peak_mb"),
                  ("1,000 idle conns", "1000 idle connections", "rss_open_mb")]  # fmt: skip

    def rss(kind: str, i: int) -> Optional[float]:
        _, entry, key = rss_groups[i]
        return (m.get(kind) or {}).get(key) if entry is None else fig_of(kind, "scale", entry, key)

    startup = {k: (m.get(k) or {}).get("startup_s") for k, _, _ in brokers}
    tagged = [(k, f"{label} (startup {startup[k]:.2f} s)" if startup[k] is not None else label, c) for k, label, c in brokers]
    grouped(axes[1][1], [g[0] for g in rss_groups], tagged, rss, "Broker RSS (lower is better)", "MB",
            legend_loc="upper left")  # idle, the first group, is the lowest

    curve_report.draw(axes[2][0], doc, "1")
    curve_report.draw(axes[2][1], doc, "all")

    produced = {w for k, _, _ in brokers for w in (m.get(k) or {}).get("produce") or {}}  # --consume-only: acks=1 only
    cpu_groups = [("produce", w) for w in workloads if w in produced] + [("consume", w) for w in consumed]
    grouped(axes[3][0], [f"{s} {w}" for s, w in cpu_groups], brokers,
            lambda kind, i: fig_of(kind, cpu_groups[i][0], cpu_groups[i][1], "cpu_s_per_gb"),
            "Broker CPU-seconds per GB of record values produced / fetched (lower is better)", "CPU-s per GB (log)",
            log=True)  # fmt: skip

    scale_groups = [("100x10 partitions", "metadata_p50_ms", "Metadata p50\n1,000 partitions, producing"),
                    ("100x10 partitions", "metadata_p99_ms", "Metadata p99\n1,000 partitions, producing"),
                    ("1000 idle connections", "metadata_p50_ms", "Metadata p50\n1,000 idle conns"),
                    ("1000 idle connections", "metadata_p99_ms", "Metadata p99\n1,000 idle conns"),
                    ("100x10 partitions", "ack_p99_ms", "produce ack p99\n1,000 partitions")]  # fmt: skip
    sc = doc["config"].get("scale") or {}
    achieved = ", ".join(f"{label} {v:,.0f}" if v is not None else f"{label} n/a" for label, v in
                         ((lb, fig_of(k, "scale", "100x10 partitions", "achieved_msg_per_s")) for k, lb, _ in brokers))  # fmt: skip
    grouped(axes[3][1], [g[2] for g in scale_groups], brokers,
            lambda kind, i: fig_of(kind, "scale", scale_groups[i][0], scale_groups[i][1]),
            f"Scale: 100 topics x 10 partitions at {sc.get('rate', 0):,.0f} msg/s (acked/s: {achieved});\n"
            "1,000 idle connections (lower is better)", "ms (log)", log=True)  # fmt: skip
    axes[3][1].title.set_fontsize(10)
    cfg, mc = doc["config"], doc["machine"]
    title = (f"Brook vs Apache Kafka — medians of {cfg['rounds']} round(s), {cfg['records']:,} records, "
             f"{cfg['partitions']} partitions — {mc['cpu_model']}, {mc['cores']} cores ({doc['started_utc']})")  # fmt: skip
    if (doc.get("load") or {}).get("indicative"):
        title += "\n" + doc["load"]["note"]
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.97))  # keep the (two-line) suptitle clear of the top panels
    fig.savefig(path, dpi=100)
    plt.close(fig)
