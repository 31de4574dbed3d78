"""The fault-injection run's workload: producers and consumers as driver processes whose JSON
lines are recorded as they arrive (in memory and in the run's history files).

* `Producer`: a driver's `produce-stream` (Java or franz-go): idempotent acks=all, values
  `<prefix>-<seq>`, record i to partition i % N, one outcome line per record.
* `Burst`: franz-go's `produce` of a few thousand larger records at once, the heavy writes a
  restart follows; its outcome lines come at its end (no send times: only loss and duplicates
  are checked for them).
* `TailConsumer`: franz-go's `consume` assigned to every partition from the earliest offset,
  reading until stopped; each line stamped with the time it arrived.
* `GroupConsumer`: the Java driver's `group-consume --events` (subscribe, commit after each poll).
A process that exits by itself is restarted by `supervise()` (a producer under a new prefix, a
consumer as a new session), and counted. `config`: a `--client-config` file (the secured run's
SASL_SSL login), or None.
"""

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import List, Optional

from harness.drivers import DRIVER_ARGV

from .checker import ReadIndex, Send
from harness.members import MemberProcess
from harness.paths import TESTS_DIR


def config_args(config: Optional[str]) -> List[str]:
    return ["--client-config", str(config)] if config else []

FOREVER = 2_000_000_000


def now_ms() -> int:
    return int(time.time() * 1000)


class History:
    """One JSON-lines file per kind of history, appended under a lock."""

    def __init__(self, out_dir: Path):
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._files = {}

    def write(self, kind: str, doc: dict) -> None:
        with self._lock:
            f = self._files.get(kind)
            if f is None:
                f = self._files[kind] = open(self.out_dir / f"{kind}.jsonl", "a")
            f.write(json.dumps(doc) + "\n")

    def close(self) -> None:
        with self._lock:
            for f in self._files.values():
                f.close()
            self._files.clear()


class _Proc(MemberProcess):
    def __init__(self, name: str, argv: List[str], history: History):
        self.name, self.argv, self.history = name, argv, history
        self.records: List[dict] = []
        self.done: Optional[dict] = None
        self._start(argv, cwd=TESTS_DIR)

    def stop(self, timeout: float = 60) -> Optional[int]:
        return self._terminate(timeout)


class Producer(_Proc):
    def __init__(self, client: str, bootstrap: str, topic: str, partitions: int, prefix: str, rate: float,
                 history: History, config: Optional[str] = None):
        self.client, self.prefix = client, prefix
        argv = [*DRIVER_ARGV[client], "produce-stream", "--bootstrap", bootstrap, "--topic", topic,
                "--partitions", str(partitions), "--prefix", prefix, "--rate", str(rate), "--acks", "all",
                "--idempotent", *config_args(config)]
        super().__init__(prefix, argv, history)

    def acked_partitions(self, since_ms: int = 0) -> int:
        """How many partitions have acknowledged a record of this producer sent at or after
        `since_ms` (default: any so far)."""
        return len({r.partition for r in list(self.records) if r.ok and r.t_send >= since_ms})

    def _on_stdout(self, doc: dict, line: str) -> None:
        if doc.get("done"):
            self.done = doc
            return
        doc["producer"] = self.prefix
        self.records.append(Send(self.prefix, doc["value"], doc["seq"], doc["partition"], doc["offset"], doc["ok"],
                                 doc["t_send"], doc["t_ack"], doc.get("error")))
        self.history.write("sends", doc)


class Burst(_Proc):
    """`count` records of `size` bytes from franz-go's `produce` (acks=all, idempotent) at once."""

    def __init__(self, bootstrap: str, topic: str, name: str, count: int, size: int, history: History, tmp: Path,
                 config: Optional[str] = None):
        self.values = [f"{name}-{i:09d}" for i in range(count)]
        pad = "x" * max(0, size - len(self.values[0]))  # carried in a header: values stay short in the history
        self.input = Path(tmp) / f"{name}.jsonl"
        with open(self.input, "w") as f:
            for v in self.values:
                f.write(json.dumps({"value": v, "headers": [["pad", pad]]}) + "\n")
        self._index = 0
        self.t_start = now_ms()
        argv = [*DRIVER_ARGV["franz"], "produce", "--bootstrap", bootstrap, "--topic", topic, "--acks", "all",
                "--input", str(self.input), *config_args(config)]
        super().__init__(name, argv, history)

    def _on_stdout(self, doc: dict, line: str) -> None:
        if self._index >= len(self.values):
            return
        value = self.values[self._index]
        self._index += 1
        ok = "error" not in doc
        rec = {"producer": self.name, "value": value, "seq": None, "partition": doc.get("partition", -1),
               "offset": doc.get("offset", -1) if ok else -1, "ok": ok, "t_send": self.t_start, "t_ack": now_ms()}
        if not ok:
            rec["error"] = doc.get("error")
        self.records.append(Send(**rec))
        self.history.write("sends", rec)

    def finish(self, timeout: float = 120) -> None:
        """Wait for the produce to end; records it never reported are failed (indeterminate)."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self._join_readers()
        for value in self.values[self._index:]:
            rec = {"producer": self.name, "value": value, "seq": None, "partition": -1, "offset": -1, "ok": False,
                   "t_send": self.t_start, "t_ack": now_ms(), "error": "no outcome reported"}
            self.records.append(Send(**rec))
            self.history.write("sends", rec)
        self._index = len(self.values)
        self.input.unlink(missing_ok=True)


class SharedReads:
    """Every consumer's reads folded into one checker.ReadIndex, under one lock."""

    def __init__(self):
        self.index = ReadIndex()
        self.lock = threading.Lock()

    def add(self, rec: dict) -> None:
        with self.lock:
            self.index.add(rec)

    def tail_max(self):
        with self.lock:
            return self.index.tail_max()


class TailConsumer(_Proc):
    kind = "tail"

    def __init__(self, bootstrap: str, topic: str, name: str, session: int, history: History, reads: SharedReads,
                 config: Optional[str] = None):
        self.session, self.reads = session, reads
        argv = [*DRIVER_ARGV["franz"], "consume", "--bootstrap", bootstrap, "--topic", topic, "--count", str(FOREVER),
                "--from", "earliest", "--timeout-ms", str(FOREVER), *config_args(config)]
        super().__init__(name, argv, history)

    def _on_stdout(self, doc: dict, line: str) -> None:
        if "partition" not in doc or "offset" not in doc:
            return
        rec = {"consumer": self.name, "session": self.session, "kind": self.kind, "partition": doc["partition"],
               "offset": doc["offset"], "value": doc.get("value"), "t_read": now_ms()}
        self.reads.add(rec)
        self.history.write("reads", rec)
        if self.kind == "group":
            self.reached[doc["partition"]] = max(self.reached.get(doc["partition"], -1), doc["offset"])


class GroupConsumer(_Proc):
    kind = "group"

    def __init__(self, bootstrap: str, topic: str, group: str, name: str, session: int, history: History,
                 reads: SharedReads, config: Optional[str] = None):
        self.session, self.reads = session, reads
        self.events: List[dict] = []
        self.reached: dict = {}  # partition -> the highest offset this member read
        argv = [*DRIVER_ARGV["java"], "group-consume", "--bootstrap", bootstrap, "--group", group, "--topic", topic,
                "--count", str(FOREVER), "--timeout-ms", str(FOREVER), "--from", "earliest", "--events",
                "--session-timeout-ms", "10000", *config_args(config)]
        super().__init__(name, argv, history)

    def _on_stdout(self, doc: dict, line: str) -> None:
        if "event" in doc or "assigned" in doc:
            self.events.append(doc)
            return
        if "partition" not in doc:
            return
        rec = {"consumer": self.name, "session": self.session, "kind": self.kind, "partition": doc["partition"],
               "offset": doc["offset"], "value": doc.get("value"), "t_read": now_ms()}
        self.reads.add(rec)
        self.history.write("reads", rec)
        if self.kind == "group":
            self.reached[doc["partition"]] = max(self.reached.get(doc["partition"], -1), doc["offset"])
