"""The workloads: Apache Kafka's own perf tools (kafka-producer-perf-test, kafka-consumer-perf-test)
run by main class from the Kafka 4.4 jars, and the parsers for what they print.

Every tool runs with a wall-clock timeout; a run that fails, times out or prints no summary
yields `None` plus the reason, and the report shows that cell as n/a rather than a number.
"""

import re
import subprocess
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from procs import KAFKA_LIBS, ROOT

PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
CLIENT_HEAP = "-Xmx512m"

# "200000 records sent, 81699.3 records/sec (7.79 MB/sec), 20.95 ms avg latency, 1281.00 ms max
#  latency, 6 ms 50th, 92 ms 95th, 109 ms 99th, 130 ms 99.9th."
PRODUCER_SUMMARY = re.compile(
    r"(?P<records>\d+) records sent, (?P<records_per_s>[\d.]+) records/sec \((?P<mb_per_s>[\d.]+) MB/sec\), "
    r"(?P<avg_ms>[\d.]+) ms avg latency, (?P<max_ms>[\d.]+) ms max latency, (?P<p50_ms>\d+) ms 50th, "
    r"(?P<p95_ms>\d+) ms 95th, (?P<p99_ms>\d+) ms 99th, (?P<p999_ms>\d+) ms 99.9th"
)
CONSUMER_FIELDS = (
    "start.time", "end.time", "data.consumed.in.MB", "MB.sec", "data.consumed.in.nMsg", "nMsg.sec",
    "rebalance.time.ms", "fetch.time.ms", "fetch.MB.sec", "fetch.nMsg.sec",
)  # fmt: skip


@dataclass(frozen=True)
class Workload:
    record_size: int
    acks: str
    compression: str

    @property
    def name(self) -> str:
        size = "1KB" if self.record_size == 1024 else f"{self.record_size}B"
        return f"{size} acks={self.acks} {self.compression}"

    @property
    def topic(self) -> str:
        return f"bench-{self.record_size}-{self.acks}-{self.compression}"


def java(main_class: str, *args: str, timeout_s: float) -> Tuple[int, str]:
    """Run one Kafka tool; returns (exit code, stdout+stderr). Exit -1 means it timed out."""
    argv = ["java", CLIENT_HEAP, "-cp", f"{KAFKA_LIBS}/*", main_class, *args]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL, cwd=ROOT
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode(errors="replace")
        return -1, out + f"\n(timed out after {timeout_s} s)"
    return proc.returncode, proc.stdout + proc.stderr


def reason(out: str) -> str:
    """The first line of a tool's output that says what went wrong, else its tail."""
    for line in out.splitlines():
        if "Exception" in line or "does not support" in line or "timed out" in line or "WARNING" in line:
            return line.strip()[:300]
    return out[-300:].strip()


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int = 1,
                 configs: Optional[Dict[str, str]] = None) -> Optional[str]:  # fmt: skip
    """kafka-topics --create; returns None on success, else the reason."""
    extra = [a for k, v in (configs or {}).items() for a in ("--config", f"{k}={v}")]
    code, out = java(
        TOPIC_COMMAND, "--bootstrap-server", bootstrap, "--create", "--topic", topic,
        "--partitions", str(partitions), "--replication-factor", str(replication_factor), *extra, timeout_s=90,
    )  # fmt: skip
    return None if code == 0 and f"Created topic {topic}" in out else f"create topic exited {code}: {out[-500:]}"


def produce(bootstrap: str, w: Workload, records: int, timeout_s: float, topic: Optional[str] = None,
            config: Optional[str] = None) -> Tuple[Optional[Dict], str]:  # fmt: skip
    """One kafka-producer-perf-test run at full speed; returns (figures, raw output). `topic`
    replaces the workload's own; `config` is a client properties file (security settings),
    passed as --command-config (4.4's name for --producer.config)."""
    extra = ["--command-config", config] if config else []
    code, out = java(
        PRODUCER_PERF, "--bootstrap-server", bootstrap, "--topic", topic or w.topic, "--num-records", str(records),
        "--record-size", str(w.record_size), "--throughput", "-1", *extra,
        "--command-property", f"acks={w.acks}", f"compression.type={w.compression}",
        timeout_s=timeout_s,
    )  # fmt: skip
    matches = list(PRODUCER_SUMMARY.finditer(out))
    if code != 0 or not matches:
        return None, out
    figures = {k: float(v) for k, v in matches[-1].groupdict().items()}
    # The tool counts failed sends as "sent" and prints their stack traces: do not report those.
    if int(figures["records"]) != records or "Exception" in out:
        return None, out
    return figures, out


def consume(bootstrap: str, topic: str, records: int, timeout_s: float,
            config: Optional[str] = None) -> Tuple[Optional[Dict], str]:  # fmt: skip
    """One kafka-consumer-perf-test run (it joins a consumer group) over `records` records;
    `config` as for produce() (4.4's --command-config, formerly --consumer.config)."""
    extra = ["--command-config", config] if config else []
    code, out = java(
        CONSUMER_PERF, "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records),
        "--timeout", "15000", "--hide-header", *extra, timeout_s=timeout_s,
    )  # fmt: skip
    for line in reversed(out.splitlines()):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(CONSUMER_FIELDS):
            continue
        try:
            values = dict(zip(CONSUMER_FIELDS[2:], (float(c) for c in cells[2:])))
        except ValueError:
            continue
        if code == 0 and int(values["data.consumed.in.nMsg"]) >= records:
            return {
                "mb_per_s": values["MB.sec"],
                "fetch_mb_per_s": values["fetch.MB.sec"],
                "records_per_s": values["nMsg.sec"],
                "rebalance_ms": values["rebalance.time.ms"],
            }, out
        break
    return None, out
