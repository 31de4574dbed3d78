"""Turn the raw runs of bench.py into medians, a text table and a PNG chart; describe the machine.

Medians are over rounds, counting only runs that produced a figure (a failed run is left out,
and a figure no run produced is n/a). Ratios are Brook/Kafka for every row, so for latency and
RSS below 1 is better for Brook, for throughput above 1 is. "Brook/sink" is Brook's producer
throughput as a fraction of the null sink's, the ceiling of the producer on this machine.
"""

import os
import platform
import statistics
from pathlib import Path
from typing import Dict, List, Optional, Tuple

PRODUCE_METRICS = (("records_per_s", "records/s"), ("mb_per_s", "MB/s"), ("avg_ms", "avg latency ms"), ("p99_ms", "p99 latency ms"))
CONSUME_METRICS = (("fetch_mb_per_s", "fetch MB/s"), ("mb_per_s", "MB/s incl. group join"))
SCALARS = (("startup_s", "restart to 1st ApiVersions s"), ("first_start_s", "first start to ApiVersions s"),
           ("rss_idle_start_mb", "RSS idle MB"), ("rss_peak_mb", "RSS peak under load MB"), ("rss_steady_mb", "RSS steady after load MB"))  # fmt: skip
THROUGHPUT = {"records_per_s", "mb_per_s"}


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
    """{server: {"produce": {workload: {metric: m}}, "consume": {...}, scalar: m}}."""
    out: Dict = {}
    for kind in sorted({r["server"] for r in runs}):
        mine = [r for r in runs if r["server"] == kind]
        entry: Dict = {"produce": {}, "consume": {}}
        for section, metrics in (("produce", PRODUCE_METRICS), ("consume", CONSUME_METRICS)):
            names = {w for r in mine for w in r[section]}
            for w in sorted(names):
                entry[section][w] = {
                    key: _median([(r[section].get(w) or {}).get(key) for r in mine]) for key, _ in metrics
                }
        for key, _ in SCALARS:
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
        for key, label in PRODUCE_METRICS:
            out.append((f"produce {w} {label}", get(kafka, "produce", w, key), get(brook, "produce", w, key),
                        get(sink, "produce", w, key) if key in THROUGHPUT else None))  # fmt: skip
    for w in doc["config"]["workloads"]:
        if " acks=1 " in f" {w} ":
            for key, label in CONSUME_METRICS:
                out.append((f"consume {w} {label}", get(kafka, "consume", w, key), get(brook, "consume", w, key), None))
    for key, label in SCALARS:
        out.append((label, kafka.get(key), brook.get(key), None))
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
    lines = [head, ""]
    for r in [cols, tuple("-" * w for w in widths), *body]:
        lines.append("  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)))
    return "\n".join(lines)


def chart(doc: Dict, path: Path) -> None:
    """Four panels: producer MB/s, producer p99 latency, consumer MB/s, RSS + startup."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m, workloads = doc["medians"], doc["config"]["workloads"]
    series = (("sink", "null sink", "#9e9e9e"), ("kafka", "Apache Kafka", "#1f77b4"), ("brook", "Brook", "#d62728"))

    def values(kind: str, section: str, names: List[str], key: str) -> List[Optional[float]]:
        return [(((m.get(kind) or {}).get(section) or {}).get(w) or {}).get(key) for w in names]

    def bars(ax, names: List[str], section: str, key: str, kinds, title: str, ylabel: str) -> None:
        width = 0.8 / len(kinds)
        for i, (kind, label, color) in enumerate(kinds):
            xs = [x + (i - (len(kinds) - 1) / 2) * width for x in range(len(names))]
            ys = values(kind, section, names, key)
            ax.bar(xs, [y or 0.0 for y in ys], width, label=label, color=color)
            for x, y in zip(xs, ys):
                if y is None:  # no run produced this figure: say so instead of drawing a zero
                    ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=7, color=color, rotation=90)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)

    fig, axes = plt.subplots(2, 2, figsize=(15, 10))
    brokers = [s for s in series if s[0] != "sink"]
    bars(axes[0][0], workloads, "produce", "mb_per_s", series, "Producer throughput (higher is better)", "MB/s")
    bars(axes[0][1], workloads, "produce", "p99_ms", brokers, "Producer p99 latency (lower is better)", "ms")
    consumed = [w for w in workloads if " acks=1 " in f" {w} "]
    bars(axes[1][0], consumed, "consume", "fetch_mb_per_s", brokers, "Consumer fetch throughput", "MB/s")
    ax = axes[1][1]
    labels = ["idle", "peak (load)", "steady (after)"]
    keys = ["rss_idle_start_mb", "rss_peak_mb", "rss_steady_mb"]
    for i, (kind, label, color) in enumerate(brokers):
        startup = (m.get(kind) or {}).get("startup_s")
        tag = f"{label} (startup {startup:.2f} s)" if startup is not None else label
        ax.bar([x + (i - 0.5) * 0.4 for x in range(3)], [(m.get(kind) or {}).get(k) or 0.0 for k in keys], 0.4,
               label=tag, color=color)  # fmt: skip
    ax.set_xticks(range(3))
    ax.set_xticklabels(labels)
    ax.set_title("Broker RSS (lower is better)")
    ax.set_ylabel("MB")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    cfg, mc = doc["config"], doc["machine"]
    fig.suptitle(
        f"Brook vs Apache Kafka — medians of {cfg['rounds']} round(s), {cfg['records']:,} records, "
        f"{cfg['partitions']} partitions — {mc['cpu_model']}, {mc['cores']} cores ({doc['started_utc']})",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
