"""The two client JVMs of the rebalance benchmark, both from the Java driver
(integration-tests/drivers/java, built by its install.sh; README.md's driver protocol):

- `Members`: one `group-members` process running every consumer of the group on its own thread,
  commanded on stdin (add, leave M, status, quit); its JSON event lines are read on a thread
  into a queue, so the orchestrator waits on them with deadlines.
- `Producer`: `produce-stream`, records at a fixed rate round robin over every partition (so a
  partition left unread shows as records read late); its per-record lines are discarded.

Invariants: both run in their own process group and are ended by stop() (SIGTERM, which both
commands handle by closing their clients, then SIGKILL after a deadline); every wait is bounded.
"""

import json
import os
import queue
import signal
import subprocess
import threading
from pathlib import Path
from typing import Dict, List, Optional

from procs import ROOT

DRIVER_JAR = ROOT / "integration-tests" / "drivers" / "java" / "target" / "brook-driver.jar"
STOP_TIMEOUT_S = 60.0


def ensure_driver() -> None:
    if not DRIVER_JAR.is_file():
        raise RuntimeError(f"{DRIVER_JAR} missing: bash integration-tests/drivers/java/install.sh")


def _spawn(argv: List[str], log_path: Path, **popen) -> subprocess.Popen:
    # A fresh log per run: the benchmark counts the ERROR lines of the members' log.
    with open(log_path, "wb") as log:
        return subprocess.Popen(argv, stderr=log, start_new_session=True, **popen)


def _stop(proc: subprocess.Popen, timeout_s: float = STOP_TIMEOUT_S) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=timeout_s)
    except ProcessLookupError:
        pass


class Members:
    """`group-members`: the group's consumers in one JVM."""

    def __init__(self, bootstrap: str, topic: str, group: str, members: int, protocol: str, heap: str,
                 log_path: Path, events_path: Path, late_ms: int, classic_heartbeat_ms: Optional[int]):  # fmt: skip
        argv = ["java", f"-Xmx{heap}", "-jar", str(DRIVER_JAR), "group-members", "--bootstrap", bootstrap,
                "--topic", topic, "--group", group, "--members", str(members), "--group-protocol", protocol,
                "--late-ms", str(late_ms)]  # fmt: skip
        if protocol == "classic":
            # Cooperative-sticky: the classic assignor that, like KIP-848's, leaves unmoved
            # partitions with their owner through a rebalance (eager range revokes everything).
            argv += ["--assignor", "cooperative-sticky"]
            if classic_heartbeat_ms is not None:
                argv += ["--heartbeat-interval-ms", str(classic_heartbeat_ms)]
        else:
            argv += ["--remote-assignor", "uniform"]
        self.events: "queue.Queue[Dict]" = queue.Queue()
        self._events_file = open(events_path, "w")
        self.proc = _spawn(argv, log_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            self._events_file.write(line + "\n")
            try:
                self.events.put(json.loads(line))
            except ValueError:
                continue
        self.events.put({"event": "exited"})

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def next_event(self, timeout_s: float) -> Optional[Dict]:
        try:
            return self.events.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def quit(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Every member closes (graceful leave), then the process exits; SIGTERM/SIGKILL if not."""
        try:
            self.send("quit")
            self.proc.stdin.close()  # type: ignore[union-attr]
            self.proc.wait(timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired):
            _stop(self.proc)
        self._reader.join(timeout=5)
        self._events_file.close()


class Producer:
    """`produce-stream` at `rate` records/s, record i to partition i % partitions (acks=1)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float, log_path: Path):
        argv = ["java", "-Xmx512m", "-jar", str(DRIVER_JAR), "produce-stream", "--bootstrap", bootstrap,
                "--topic", topic, "--partitions", str(partitions), "--prefix", "r", "--rate", str(rate),
                "--acks", "1"]  # fmt: skip
        self.proc = _spawn(argv, log_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        _stop(self.proc)
