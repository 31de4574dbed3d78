"""The processes a benchmark round starts: Apache Kafka, Brook, the null sink; and their probes.

`Server.start()` launches one server in its own process group (so a stop reaches the JVM that
kafka-ref.sh execs), then polls with a raw-socket ApiVersions v0 request every 10 ms until the
broker answers with error 0: the time from spawn to that answer is `startup_s`, measured the same
way for every kind (Kafka binds its port before it can serve, so "port open" would flatter it).
`RssSampler` reads VmRSS from /proc/PID/status every 100 ms on a thread; the orchestrator tags
phases ("idle-start", "load", "idle-after") and asks for the peak or median of one phase.
`process_cpu_s()` reads a process's CPU time (utime + stime, every thread, live or exited) from
/proc/PID/stat: both benches divide its growth over a workload by the GB that workload moved.

Invariants: every wait has a deadline; `stop()` always ends with the process group gone
(SIGTERM, then SIGKILL after STOP_TIMEOUT_S); only processes started here are signalled.
"""

import os
import random
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parent.parent
KAFKA_LIBS = Path(os.environ.get("KAFKA_LIBS", ROOT / ".cache" / "kafka" / "libs"))
KAFKA_REF = ROOT / "integration-tests" / "scripts" / "kafka-ref.sh"
NULL_SINK = Path(__file__).resolve().parent / "null_sink.py"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
CLK_TCK = os.sysconf("SC_CLK_TCK")
GB = 1e9  # bytes: CPU-s per GB counts decimal gigabytes of record values


def free_port(consecutive: int = 1, below: Optional[int] = None) -> int:
    """A loopback port such that port .. port+consecutive-1 were all free just now. With `below`,
    one drawn at random from 10000..below (under the kernel's ephemeral range, where a client's
    own outgoing port cannot take it between this check and the server's bind)."""
    for _ in range(200):
        if below is not None:
            port = random.randrange(10000, below - consecutive)
            if not _port_free(port):
                continue
        else:
            with socket.socket() as s:
                s.bind((HOST, 0))
                port = s.getsockname()[1]
        if port + consecutive <= 65535 and all(_port_free(port + i) for i in range(1, consecutive)):
            return port
    raise RuntimeError("no free loopback port range")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def api_versions_ok(port: int, timeout_s: float = 1.0) -> bool:
    """One ApiVersions v0 round trip on a fresh connection; True iff error_code == 0."""
    client_id = b"brook-bench"
    body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    try:
        with socket.create_connection((HOST, port), timeout=timeout_s) as s:
            s.settimeout(timeout_s)
            s.sendall(struct.pack(">i", len(body)) + body)
            buf = b""
            while len(buf) < 10:
                chunk = s.recv(10 - len(buf))
                if not chunk:
                    return False
                buf += chunk
    except OSError:
        return False
    _size, correlation_id, error_code = struct.unpack(">iih", buf)
    return correlation_id == 7 and error_code == 0


class Server:
    """One server process: kind is "kafka", "brook" or "sink"."""

    def __init__(self, kind: str, data_dir: Path, brook_bin: Optional[Path] = None, partitions: int = 3,
                 settings: Optional[Dict[str, str]] = None, port_below: Optional[int] = None):  # fmt: skip
        self.kind, self.data_dir = kind, data_dir
        self.port = free_port(2, below=port_below)  # kafka-ref.sh puts its controller on PORT+1
        self.metrics_port = free_port(below=port_below)
        self.brook_bin, self.partitions = brook_bin, partitions
        # Extra broker settings by Kafka's names, the same dict for both brokers (TLS, SASL, an
        # authorizer): Brook gets them as --overrides on top of its defaults below, Kafka as
        # server.properties lines that kafka-ref.sh appends (a later line wins in Java's
        # Properties). The readiness probe keeps using the PLAINTEXT listener on `port`.
        self.settings: Dict[str, str] = dict(settings or {})
        self.proc: Optional[subprocess.Popen] = None
        self.startup_s: Optional[float] = None
        self.log_path = data_dir.parent / f"{data_dir.name}.log"

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def add_listeners(self, extra: Dict[str, Tuple[str, int]]) -> None:
        """Serve more client listeners beside PLAINTEXT on `port`: `extra` maps a listener name
        to (security protocol, port), each advertised as 127.0.0.1:port. Sets `listeners`,
        `advertised.listeners` and `listener.security.protocol.map` in `settings`, with Kafka's
        CONTROLLER listener (PORT+1, kafka-ref.sh) kept in its lists."""
        listeners = [f"PLAINTEXT://{self.bootstrap}"]
        protocols = ["PLAINTEXT:PLAINTEXT"]
        for name, (protocol, port) in extra.items():
            listeners.append(f"{name}://{HOST}:{port}")
            protocols.append(f"{name}:{protocol}")
        advertised = ",".join(listeners)
        if self.kind == "kafka":
            listeners.append(f"CONTROLLER://{HOST}:{self.port + 1}")
            protocols.append("CONTROLLER:PLAINTEXT")
        self.settings.update({
            "listeners": ",".join(listeners),
            "advertised.listeners": advertised,
            "listener.security.protocol.map": ",".join(protocols),
        })  # fmt: skip

    def argv(self) -> List[str]:
        if self.kind == "kafka":
            lines = [f"{k}={v}" for k, v in self.settings.items()]
            return ["bash", str(KAFKA_REF), str(self.port), str(self.data_dir), *lines]
        if self.kind == "brook":
            listener = f"PLAINTEXT://{self.bootstrap}"
            overrides = {
                "listeners": listener,
                "advertised.listeners": listener,
                "log.dirs": str(self.data_dir),
                "metrics.listener": f"{HOST}:{self.metrics_port}",
                # As the Kafka reference's server.properties (kafka-ref.sh, Kafka's shipped
                # file): a one-member group joins at once instead of after the 3 s default,
                # so "MB/s incl. group join" compares the same thing.
                "group.initial.rebalance.delay.ms": "0",
                **self.settings,
            }
            return [str(self.brook_bin), *(a for k, v in overrides.items() for a in ("--override", f"{k}={v}"))]
        return [sys.executable, str(NULL_SINK), "--port", str(self.port), "--partitions", str(self.partitions)]

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            t0 = time.monotonic()
            self.proc = subprocess.Popen(
                self.argv(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
        deadline = t0 + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} exited with {self.proc.returncode}; see {self.log_path}")
            if api_versions_ok(self.port, timeout_s=0.5):
                self.startup_s = time.monotonic() - t0
                return
            time.sleep(0.01)
        self.stop()
        raise RuntimeError(f"{self.kind} did not answer ApiVersions within {START_TIMEOUT_S} s; see {self.log_path}")

    @property
    def pid(self) -> Optional[int]:
        # kafka-ref.sh ends in `exec java`, so the spawned pid is the JVM's.
        return None if self.proc is None else self.proc.pid

    def cpu_s(self) -> Optional[float]:
        """The server process's CPU seconds so far; None if it is not running."""
        try:
            return process_cpu_s(self.pid or 0)
        except (OSError, ValueError):  # gone: the workload that needed it fails and says why
            return None

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self._signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self.proc.wait(timeout=STOP_TIMEOUT_S)

    def _signal(self, sig: int) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass


def read_rss_kb(pid: int) -> Optional[int]:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


class RssSampler:
    """Samples a pid's VmRSS every `interval_s` on a daemon thread, tagged with the current phase."""

    def __init__(self, pid: int, interval_s: float = 0.1):
        self.pid, self.interval_s = pid, interval_s
        self.phase = "idle-start"
        self.samples: List[Tuple[str, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            kb = read_rss_kb(self.pid)
            if kb is not None:
                self.samples.append((self.phase, kb))

    def peak_mb(self, phase: str) -> Optional[float]:
        values = [kb for p, kb in self.samples if p == phase]
        return max(values) / 1024 if values else None

    def median_mb(self, phase: str) -> Optional[float]:
        values = [kb for p, kb in self.samples if p == phase]
        return statistics.median(values) / 1024 if values else None


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of every thread of `pid`, from /proc/PID/stat (OSError if gone)."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    # The command name may hold spaces or parentheses: the fields start after the last ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14 and 15 of proc(5))


def cpu_figures(cpu0: Optional[float], cpu1: Optional[float], gb: float) -> Dict[str, float]:
    """{broker_cpu_s, cpu_s_per_gb} over one workload that moved `gb` GB; {} when unmeasured."""
    if cpu0 is None or cpu1 is None or gb <= 0:
        return {}
    return {"broker_cpu_s": cpu1 - cpu0, "cpu_s_per_gb": (cpu1 - cpu0) / gb}


def _busy_s() -> Optional[float]:
    """CPU seconds all cores have spent not idle since boot (/proc/stat, USER_HZ ticks)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / CLK_TCK


def _own_s() -> float:
    """CPU seconds of this process and its waited-for children (brokers, clients)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class CpuMeter:
    """How busy the machine was with *other* work while we measured: (all busy CPU - ours) / wall.

    Ours counts only children already waited for, so read it after every child of the window
    has exited (run_server stops its broker and waits for its clients before returning).
    """

    def __init__(self) -> None:
        self.t0, self.busy0, self.own0 = time.monotonic(), _busy_s(), _own_s()

    def other_cores(self) -> Optional[float]:
        busy = _busy_s()
        wall = time.monotonic() - self.t0
        if busy is None or self.busy0 is None or wall <= 0:
            return None
        return max(0.0, (busy - self.busy0) - (_own_s() - self.own0)) / wall


def go_build(source_dir: Path, binary: Path) -> None:
    """`go build` of the bench client in `source_dir` into `binary`, unless the binary is newer
    than its .go, go.mod and go.sum files."""
    sources = [p for p in source_dir.iterdir() if p.suffix in (".go", ".mod", ".sum")]
    if binary.is_file() and binary.stat().st_mtime >= max(p.stat().st_mtime for p in sources):
        return
    binary.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["go", "build", "-buildvcs=false", "-o", str(binary), "."], cwd=source_dir,
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"go build {source_dir} failed: {proc.stdout}{proc.stderr}"[-1000:])
