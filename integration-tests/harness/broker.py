"""Broker processes for the system tests: brook (the binary under test) or Apache Kafka.

A `Broker` owns one server process on 127.0.0.1: a free port chosen once, a data directory,
and a log file (stdout+stderr, appended across restarts) whose tail is shown when a test
fails. Invariants: `port` and `data_dir` never change for the life of the object, so
`restart()` brings the same broker back with the same data; `start()` returns only once the
broker is ready, or raises `BrokerStartError` carrying the log tail.

Readiness: brook is ready when its port accepts a TCP connection (its listener binds only
after recovery). Apache Kafka binds its listener before it can serve, so for it we also wait
for an ApiVersions round trip.
"""

import os
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Optional

from . import paths

HOST = "127.0.0.1"
START_TIMEOUT_S = {"brook": 30.0, "kafka": 90.0}
STOP_TIMEOUT_S = 30.0


class BrokerStartError(RuntimeError):
    """The broker did not become ready; the message ends with its log tail."""


def free_port(consecutive: int = 1) -> int:
    """A loopback port such that `port .. port+consecutive-1` were all free just now."""
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        if port + consecutive > 65535:
            continue
        if all(_port_free(port + i) for i in range(1, consecutive)):
            return port
    raise RuntimeError("no free loopback port range found")


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def _accepts_tcp(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1.0):
            return True
    except OSError:
        return False


def _api_versions_ok(port: int) -> bool:
    """Send ApiVersions v0 (api key 18) and check the response's error code is 0."""
    client_id = b"brook-harness"
    body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    try:
        with socket.create_connection((HOST, port), timeout=2.0) as s:
            s.settimeout(2.0)
            s.sendall(struct.pack(">i", len(body)) + body)
            header = _recv_exact(s, 4 + 4 + 2)
    except OSError:
        return False
    if header is None:
        return False
    _size, correlation_id, error_code = struct.unpack(">iih", header)
    return correlation_id == 1 and error_code == 0


def _recv_exact(s: socket.socket, n: int) -> Optional[bytes]:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


class Broker:
    """One broker process. `kind` is "brook" or "kafka"; `overrides` are Kafka config keys."""

    def __init__(self, kind: str, data_dir: Path, overrides: Optional[dict] = None):
        if kind not in START_TIMEOUT_S:
            raise ValueError(f"unknown broker kind {kind!r}")
        self.kind = kind
        self.host = HOST
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.overrides = dict(overrides or {})
        # Kafka's reference script puts its controller on PORT+1.
        self.port = free_port(2)
        self.metrics_port = free_port() if kind == "brook" else None
        self.log_path = self.data_dir / "broker.log"
        self._proc: Optional[subprocess.Popen] = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def metrics_url(self) -> Optional[str]:
        if self.metrics_port is None:
            return None
        return f"http://{self.host}:{self.metrics_port}/metrics"

    @property
    def log_dirs(self) -> Path:
        """Where the broker keeps its partitions (brook's `log.dirs`; kafka-ref.sh's DIR/logs)."""
        return self.data_dir / ("data" if self.kind == "brook" else "kafka/logs")

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _argv(self) -> list:
        if self.kind == "brook":
            settings = {
                "listeners": f"PLAINTEXT://{self.bootstrap}",
                "advertised.listeners": f"PLAINTEXT://{self.bootstrap}",
                "log.dirs": str(self.log_dirs),
                "node.id": "1",
                "metrics.listener": f"{self.host}:{self.metrics_port}",
                # As scripts/kafka-ref.sh (and Kafka's shipped server.properties) do: a new
                # group's first rebalance is not held back 3 s, so group tests run as fast on
                # both brokers. A test may override it.
                "group.initial.rebalance.delay.ms": "0",
            }
            settings.update({k: str(v) for k, v in self.overrides.items()})
            argv = [str(paths.brook_bin())]
            for key, value in settings.items():
                argv += ["--override", f"{key}={value}"]
            return argv
        lines = [f"{k}={v}" for k, v in self.overrides.items()]
        return ["bash", str(paths.KAFKA_REF_SCRIPT), str(self.port), str(self.data_dir / "kafka"), *lines]

    def start(self) -> None:
        """Start the process and wait until it serves; raise BrokerStartError otherwise."""
        if self.running:
            return
        if self.kind == "brook" and not paths.brook_bin().is_file():
            raise BrokerStartError(f"brook binary not found at {paths.brook_bin()} (set BROOK_BIN)")
        with open(self.log_path, "ab") as log:
            log.write(f"==== start {' '.join(self._argv())}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                self._argv(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group, so kill() reaches java too
                env={**os.environ, "RUST_BACKTRACE": "1"},
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S[self.kind]
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                code = None if self._proc is None else self._proc.returncode
                raise BrokerStartError(f"{self.kind} exited with {code} before it was ready\n{self.log_tail()}")
            if _accepts_tcp(self.port) and (self.kind == "brook" or _api_versions_ok(self.port)):
                return
            time.sleep(0.1)
        self.kill()
        raise BrokerStartError(
            f"{self.kind} not ready on {self.bootstrap} after {START_TIMEOUT_S[self.kind]} s\n{self.log_tail()}"
        )

    def stop(self) -> None:
        """Graceful stop (SIGTERM, as an operator would), SIGKILL if it outlives the deadline."""
        if not self.running:
            return
        assert self._proc is not None
        self._signal(signal.SIGTERM)
        try:
            self._proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL the whole process group: a crash, no chance to flush."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._signal(signal.SIGKILL)
        self._proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def _signal(self, sig: int) -> None:
        assert self._proc is not None
        try:
            os.killpg(self._proc.pid, sig)
        except ProcessLookupError:
            pass

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as e:
            return f"(no broker log: {e})"
        return "\n".join(text.splitlines()[-lines:])

    def __repr__(self) -> str:
        return f"Broker({self.kind}, {self.bootstrap}, {self.data_dir})"
