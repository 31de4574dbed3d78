"""The benchmark's own Java-client driver (bench/java/BenchDriver.java): build it, run it, parse it.

It is compiled with `javac` against the Kafka 4.4 jars in .cache/kafka/libs (the same
kafka-clients the perf tools use) into bench/.build, only when the class is older than the
source: no Maven, nothing fetched, so it works offline once `make deps` has run.

`e2e()` runs the fixed-rate produce -> consume latency measurement and returns its JSON figures,
failing a run that lost or failed a record; `e2e_point()` returns the figures of any run that
printed them, so a point of the latency curve where the broker fell behind is charted, not dropped;
`ScaleRun` starts the 100-topic producer as a child process, whose stdout says
{"phase":"producing"} once its topics exist; `finish()` waits for its figures.

Invariants: every run has a wall-clock timeout, after which the JVM is killed and the figure
is None with the reason; a child started here is always waited for.
"""

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, Optional, Tuple

from procs import KAFKA_LIBS, ROOT

BENCH_DIR = Path(__file__).resolve().parent
SOURCE = BENCH_DIR / "java" / "BenchDriver.java"
BUILD_DIR = BENCH_DIR / ".build"
CLIENT_HEAP = "-Xmx512m"


def ensure_built() -> None:
    """javac BenchDriver.java into bench/.build unless the class is newer than the source."""
    cls = BUILD_DIR / "BenchDriver.class"
    if cls.is_file() and cls.stat().st_mtime >= SOURCE.stat().st_mtime:
        return
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["javac", "-d", str(BUILD_DIR), "-cp", f"{KAFKA_LIBS}/*", str(SOURCE)],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"javac BenchDriver.java failed: {proc.stdout}{proc.stderr}"[-1000:])


def _argv(*args: str) -> list:
    return ["java", CLIENT_HEAP, "-cp", f"{BUILD_DIR}:{KAFKA_LIBS}/*", "BenchDriver", *args]


def _last_json(out: str) -> Optional[Dict]:
    for line in reversed(out.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if "phase" not in doc:
                return doc
    return None


def e2e(bootstrap: str, topic: str, rate: float, warmup_s: float, duration_s: float, acks: str,
        size: int = 1024) -> Tuple[Optional[Dict], str]:  # fmt: skip
    """One fixed-rate end-to-end latency run; (figures, raw output). A lossy run is a failure."""
    figures, out = e2e_point(bootstrap, topic, rate, warmup_s, duration_s, acks, size)
    if figures is not None and not delivered_all(figures):
        return None, f"lost records: {json.dumps(figures)}"
    return figures, out


def delivered_all(figures: Dict) -> bool:
    """Every measured record acknowledged without error and received by the consumer."""
    return not figures["errors"] and figures["measured_received"] >= figures["measured_sent"]


def e2e_point(bootstrap: str, topic: str, rate: float, warmup_s: float, duration_s: float, acks: str,
              size: int = 1024, config: Optional[str] = None) -> Tuple[Optional[Dict], str]:  # fmt: skip
    """One fixed-rate run; its figures even if records were late past the drain or failed
    (see delivered_all); None only when the driver printed none (crash, timeout). `config`: a
    client properties file (security settings) for both its producer and consumer."""
    # + client start, metadata, the 15 s drain, up to 15 s more for a backlogged producer, its close
    timeout_s = warmup_s + duration_s + 90
    argv = _argv("e2e", bootstrap, topic, f"{rate:.1f}", str(warmup_s), str(duration_s), acks, str(size),
                 *([config] if config else []))  # fmt: skip
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return None, f"BenchDriver e2e timed out after {timeout_s} s"
    out = proc.stdout + proc.stderr
    figures = _last_json(proc.stdout)
    if proc.returncode != 0 or figures is None:
        return None, out
    return figures, out


class ScaleRun:
    """The scale producer running as a child; `wait_producing()` then `finish()`."""

    def __init__(self, bootstrap: str, prefix: str, topics: int, partitions: int, rate: float,
                 duration_s: float, size: int):  # fmt: skip
        self.deadline = time.monotonic() + duration_s + 180  # + creating 1,000 partitions
        self.proc = subprocess.Popen(
            _argv("scale", bootstrap, prefix, str(topics), str(partitions), f"{rate:.1f}", str(duration_s), str(size)),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL, cwd=ROOT,
        )  # fmt: skip
        self.lines: list = []
        # wait_producing() blocks on the pipe: the watchdog kills a JVM that outlives the deadline.
        self.watchdog = threading.Timer(self.deadline - time.monotonic(), self.kill)
        self.watchdog.daemon = True
        self.watchdog.start()

    def wait_producing(self) -> bool:
        """Read output until the driver says its topics exist; False if it ended first."""
        assert self.proc.stdout is not None  # set by Popen(stdout=PIPE) just above
        for line in self.proc.stdout:  # ends at EOF, at the latest when the watchdog kills the JVM
            self.lines.append(line)
            if '"phase":"producing"' in line:
                return True
        return False

    def finish(self) -> Tuple[Optional[Dict], str]:
        self.watchdog.cancel()
        try:
            rest, _ = self.proc.communicate(timeout=max(1.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rest, _ = self.proc.communicate()
            self.lines.append(rest or "")
            return None, "".join(self.lines) + "\n(BenchDriver scale timed out)"
        self.lines.append(rest or "")
        out = "".join(self.lines)
        figures = _last_json(out)
        if self.proc.returncode != 0 or figures is None:
            return None, out
        return figures, out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def acls(bootstrap: str, *args: str, timeout_s: float = 300) -> Tuple[Optional[Dict], str]:
    """`BenchDriver acls BOOTSTRAP ARGS...` (bench/tls.py's ACL set-up): creates the ACLs and
    waits until they are listed; (figures, raw output), figures None on failure."""
    try:
        proc = subprocess.run(_argv("acls", bootstrap, *args), capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL, cwd=ROOT)  # fmt: skip
    except subprocess.TimeoutExpired:
        return None, f"BenchDriver acls timed out after {timeout_s} s"
    figures = _last_json(proc.stdout)
    return (figures if proc.returncode == 0 else None), proc.stdout + proc.stderr
