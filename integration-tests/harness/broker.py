"""Broker processes for the system tests: brook (the binary under test) or Apache Kafka.

A `Broker` owns one server process on 127.0.0.1: a free port chosen once, a data directory,
and a log file (stdout+stderr, appended across restarts) whose tail is shown when a test
fails. Invariants: `port` and `data_dir` never change for the life of the object, so
`restart()` brings the same broker back with the same data; `start()` returns only once the
broker is ready, or raises `BrokerStartError` carrying the log tail.

Readiness: brook is ready when its port accepts a TCP connection (its listener binds only
after recovery, and in a cluster only once the quorum has a leader and the node has
registered). Apache Kafka binds its listener before it can serve, so for it we also wait for
an ApiVersions round trip.

`add_scram` (Kafka's `--add-scram` values, e.g. `SCRAM-SHA-512=[name=broker,password=...]`)
formats the node's storage with those SCRAM credentials before its first start, so a node whose
only listeners are secured has its logins from the start: brook runs `brook format` (with the
node's settings and `cluster_id`, `--ignore-formatted` on a restart); Kafka's
kafka-cluster-ref.sh passes them to `kafka-storage format` (cluster nodes only).

A cluster node (harness/cluster.py) is a `Broker` given `node_settings`: the node's full
settings (Kafka keys: node.id, controller.quorum.voters, listeners, ...) replace the
single-node defaults, its ports are chosen by the cluster, and Apache Kafka runs through
scripts/kafka-cluster-ref.sh (formatted once with the cluster's shared id). Its processes are
started with `launch()` and waited for with `wait_ready()` separately, because a node of a
cluster cannot become ready before a quorum of its peers runs.
"""

import os
import random
import re
import signal
import socket
import struct
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import List, Optional

from . import door, paths, wire

HOST = "127.0.0.1"
START_TIMEOUT_S = {"brook": 30.0, "kafka": 90.0}
STOP_TIMEOUT_S = 30.0
CLEAN_EXIT_CODES = {"brook": (0,), "kafka": (0, 143)}



SECRET_KEY_PARTS = ("password", "jaas.config", "secret")


def shown_argv(argv: list) -> list:
    """`argv` as the broker log shows it: a setting whose key names a secret (a JAAS entry, a
    password) is written `key=[hidden]`, as Kafka logs such values."""
    def shown(arg: str) -> str:
        key, eq, _ = arg.partition("=")
        return f"{key}=[hidden]" if eq and any(p in key for p in SECRET_KEY_PARTS) else arg
    return [shown(str(a)) for a in argv]


def serving(request, node: "Broker") -> "Broker":
    """A module's broker handed to one test: started again if an earlier test stopped it, and
    named on the test so a failure's report carries its log tail."""
    node.start()  # no-op while it runs
    setattr(request.node, "_brook_brokers", [node])
    return node

class BrokerStartError(RuntimeError):
    """The broker did not become ready; the message ends with its log tail."""


# Test ports sit below the kernel's ephemeral range (32768+), so a client's local port can never
# take a port a test chose but has not bound yet. Each pytest-xdist worker draws from its own
# slice, and a process hands its ports out in turn from a random start, so two runs on one
# machine (or a port just released) rarely meet; a port is also checked free before it is used.
_PORT_LOW, _PORT_HIGH = 12000, 32000
_next_port: Optional[int] = None


def _port_slice() -> tuple:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")), 1)
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    span = (_PORT_HIGH - _PORT_LOW) // count
    low = _PORT_LOW + (index % count) * span
    return low, low + span


def free_port(consecutive: int = 1, avoid: frozenset = frozenset()) -> int:
    """A loopback port such that `port .. port+consecutive-1` were all free just now and none
    is in `avoid` (ports already chosen but not yet bound)."""
    global _next_port
    low, high = _port_slice()
    if _next_port is None or not low <= _next_port < high:
        _next_port = random.randrange(low, high)
    for _ in range(high - low):
        port = _next_port
        _next_port = port + consecutive if port + 2 * consecutive <= high else low
        if port + consecutive > high or any(port + i in avoid for i in range(consecutive)):
            continue
        if all(_port_free(port + i) for i in range(consecutive)):
            return port
    raise RuntimeError(f"no free loopback port range found in {low}..{high}")


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
    """Send ApiVersions v0 (api key 18) and check the response's error code is 0 (through the
    node's door, harness/door.py, when its client listener is secured)."""
    if door.lookup(f"{HOST}:{port}") is not None:
        try:
            answer = wire.call(f"{HOST}:{port}", 18, 0, [], {}, [("error_code", "int16")], timeout=2.0)
        except (OSError, ValueError, PermissionError, struct.error):
            return False
        return answer["error_code"] == 0
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

    def __init__(self, kind: str, data_dir: Path, overrides: Optional[dict] = None, *, port: Optional[int] = None,
                 metrics_port: Optional[int] = None, node_settings: Optional[dict] = None,
                 cluster_id: Optional[str] = None, start_timeout_s: Optional[float] = None):
        """`port`/`metrics_port`: fixed ports (default: free ones). `node_settings`: the full
        settings of a cluster node (replacing the single-node defaults; `overrides` still
        apply on top); `cluster_id`: the id Kafka's storage is formatted with (kafka only)."""
        if kind not in START_TIMEOUT_S:
            raise ValueError(f"unknown broker kind {kind!r}")
        self.kind = kind
        self.host = HOST
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.overrides = dict(overrides or {})
        self.node_settings = None if node_settings is None else dict(node_settings)
        self.cluster_id = cluster_id
        # SCRAM credentials the storage is formatted with before the first start (module doc).
        self.add_scram: List[str] = []
        # More `format` arguments, for both kinds (e.g. KIP-853's `--initial-controllers …`,
        # `--no-initial-controllers`): brook formats with them, Kafka's script passes them on.
        self.format_args: List[str] = []
        # Kafka's reference script puts its controller on PORT+1.
        self.port = port if port is not None else free_port(2)
        if metrics_port is None and kind == "brook":
            metrics_port = free_port(avoid=frozenset({self.port, self.port + 1}))
        self.metrics_port = metrics_port if kind == "brook" else None
        self.start_timeout_s = start_timeout_s if start_timeout_s is not None else START_TIMEOUT_S[kind]
        self.log_path = self.data_dir / "broker.log"
        self._proc: Optional[subprocess.Popen] = None
        # What went wrong when this process was stopped (`stop()`); `teardown_faults()`.
        self.stop_faults: List[str] = []

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def metrics_url(self) -> Optional[str]:
        if self.metrics_port is None:
            return None
        return f"http://{self.host}:{self.metrics_port}/metrics"

    def metric(self, name: str, **labels) -> float:
        """The sum of brook's /metrics samples of `name` whose labels include `labels` (0 when
        there is none, or no metrics endpoint: Kafka)."""
        if self.metrics_url is None:
            return 0.0
        with urllib.request.urlopen(self.metrics_url, timeout=10) as response:
            text = response.read().decode()
        total = 0.0
        for m in re.finditer(rf'^{re.escape(name)}(?:{{(.*)}})? (\S+)$', text, re.M):
            got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
            if all(got.get(k) == str(v) for k, v in labels.items()):
                total += float(m.group(2))
        return total

    def requests_served(self, api: str) -> float:
        """`brook_requests_total{api=..}` from brook's /metrics (0 without a metrics endpoint:
        Kafka), e.g. to show that a request reached the broker rather than being refused by
        the client."""
        if self.metrics_url is None:
            return 0.0
        with urllib.request.urlopen(self.metrics_url, timeout=10) as response:
            text = response.read().decode()
        m = re.search(rf'^brook_requests_total{{api="{api}"}} (\S+)$', text, re.M)
        return float(m.group(1)) if m else 0.0

    @property
    def log_dirs(self) -> Path:
        """Where the broker keeps its partitions (brook's `log.dirs`; kafka-ref.sh's DIR/logs)."""
        return self.data_dir / ("data" if self.kind == "brook" else "kafka/logs")

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> Optional[int]:
        return None if self._proc is None else self._proc.pid

    @property
    def returncode(self) -> Optional[int]:
        """The exit code once the process has ended (None while it runs or before a start)."""
        return None if self._proc is None else self._proc.poll()

    def settings(self) -> dict:
        """Every setting the broker is started with (Kafka keys), overrides applied."""
        if self.node_settings is not None:
            settings = dict(self.node_settings)
            settings["log.dirs"] = str(self.log_dirs)
        else:
            settings = {
                "listeners": f"PLAINTEXT://{self.bootstrap}",
                "advertised.listeners": f"PLAINTEXT://{self.bootstrap}",
                "log.dirs": str(self.log_dirs),
                "node.id": "1",
                # As scripts/kafka-ref.sh (and Kafka's shipped server.properties) do: a new
                # group's first rebalance is not held back 3 s, so group tests run as fast on
                # both brokers. A test may override it.
                "group.initial.rebalance.delay.ms": "0",
            }
        if self.kind == "brook":
            settings["metrics.listener"] = f"{self.host}:{self.metrics_port}"
        settings.update({k: str(v) for k, v in self.overrides.items()})
        return settings

    def add_listeners(self, extra: dict, plaintext_advertised: Optional[str] = None) -> None:
        """Serve client listeners beside the PLAINTEXT one, configured the same way on both
        targets (Kafka keys, set in `overrides` before `start()`): `extra` maps a listener name
        to (security protocol, port, advertised "host:port" or None for 127.0.0.1:port).
        `plaintext_advertised` re-advertises the PLAINTEXT listener. The readiness check still
        uses the PLAINTEXT port; the Kafka reference keeps its CONTROLLER listener on PORT+1."""
        listeners = [f"PLAINTEXT://{self.bootstrap}"]
        advertised = [f"PLAINTEXT://{plaintext_advertised or self.bootstrap}"]
        protocols = ["PLAINTEXT:PLAINTEXT"]
        for name, (protocol, port, adv) in extra.items():
            listeners.append(f"{name}://{self.host}:{port}")
            advertised.append(f"{name}://{adv or f'{self.host}:{port}'}")
            protocols.append(f"{name}:{protocol}")
        if self.kind == "kafka":
            listeners.append(f"CONTROLLER://{self.host}:{self.port + 1}")
            protocols.append("CONTROLLER:PLAINTEXT")
        self.overrides.update({
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "listener.security.protocol.map": ",".join(protocols),
        })

    def _argv(self) -> list:
        if self.kind == "brook":
            argv = [str(paths.brook_bin())]
            for key, value in self.settings().items():
                argv += ["--override", f"{key}={value}"]
            return argv
        if self.node_settings is not None:
            lines = [f"{k}={v}" for k, v in self.settings().items()]
            return ["bash", str(paths.KAFKA_CLUSTER_SCRIPT), str(self.cluster_id), str(self.data_dir / "kafka"), *lines]
        lines = [f"{k}={v}" for k, v in self.overrides.items()]
        return ["bash", str(paths.KAFKA_REF_SCRIPT), str(self.port), str(self.data_dir / "kafka"), *lines]

    def start(self) -> None:
        """Start the process and wait until it serves; raise BrokerStartError otherwise."""
        if self.running:
            return
        self.launch()
        self.wait_ready()

    def launch(self) -> None:
        """Start the process without waiting for it (a no-op while it runs)."""
        if self.running:
            return
        if self.kind == "brook" and not paths.brook_bin().is_file():
            raise BrokerStartError(f"brook binary not found at {paths.brook_bin()} (set BROOK_BIN)")
        if (self.add_scram or self.format_args) and self.kind == "brook":
            self._format_brook()
        env = {**os.environ, "RUST_BACKTRACE": "1"}
        if self.format_args and self.kind == "kafka":
            env["KAFKA_FORMAT_ARGS"] = "\n".join(self.format_args)
        if self.add_scram and self.kind == "kafka":
            if self.node_settings is None:
                raise ValueError("add_scram on Kafka needs a cluster node (kafka-cluster-ref.sh formats)")
            env["KAFKA_ADD_SCRAM"] = "\n".join(self.add_scram)
        with open(self.log_path, "ab") as log:
            log.write(f"==== start {' '.join(shown_argv(self._argv()))}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                self._argv(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group, so kill() reaches java too
                env=env,
            )

    def _format_brook(self) -> None:
        """`brook format` with this node's settings, its cluster id and `add_scram`; a no-op
        (`--ignore-formatted`) once the node has run. The passwords stay out of the log."""
        if self.cluster_id is None:
            from harness.cluster import kafka_uuid  # cluster.py imports this module
            self.cluster_id = kafka_uuid()
        argv = self._argv() + ["format", f"--cluster-id={self.cluster_id}", "--ignore-formatted"]
        for credential in self.add_scram:
            argv += ["--add-scram", credential]
        argv += self.format_args
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                                env={**os.environ, "RUST_BACKTRACE": "1"})
        with open(self.log_path, "ab") as log:
            log.write(f"==== format: {result.stdout}{result.stderr}".encode())
        if result.returncode != 0:
            raise BrokerStartError(f"brook format exited with {result.returncode}: {result.stderr}{result.stdout}")

    def wait_ready(self, timeout_s: Optional[float] = None) -> None:
        """Wait until the launched process serves; raise BrokerStartError (and kill it) otherwise."""
        timeout_s = self.start_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                code = None if self._proc is None else self._proc.returncode
                raise BrokerStartError(f"{self.kind} exited with {code} before it was ready\n{self.log_tail()}")
            if _accepts_tcp(self.port) and (self.kind == "brook" or _api_versions_ok(self.port)):
                return
            time.sleep(0.1)
        self.kill()
        raise BrokerStartError(f"{self.kind} not ready on {self.bootstrap} after {timeout_s} s\n{self.log_tail()}")

    def wait_exit(self, timeout_s: float) -> Optional[int]:
        """Wait up to `timeout_s` for the process to end by itself: its exit code, or None if it
        is still running."""
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        """Graceful stop (SIGTERM, as an operator would), SIGKILL if it outlives the deadline."""
        if not self.running:
            return
        assert self._proc is not None
        self._signal(signal.SIGCONT)  # a paused broker cannot act on SIGTERM
        self._signal(signal.SIGTERM)
        try:
            code = self._proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            # Kafka's shutdown time is not what the suite checks; brook's is (README).
            if self.kind == "brook":
                self.stop_faults.append(f"did not exit within {STOP_TIMEOUT_S:.0f} s of SIGTERM (killed)")
            self.kill()
            return
        # A JVM ended by SIGTERM exits 143 after its shutdown hooks ran; brook exits 0.
        if code not in CLEAN_EXIT_CODES[self.kind]:
            self.stop_faults.append(f"exited {code} after SIGTERM")

    def teardown_faults(self) -> List[str]:
        """What a fixture's teardown holds against this process: an unclean stop, or (brook) a
        panic anywhere in its log, restarts included."""
        faults = list(self.stop_faults)
        if self.kind == "brook" and "panicked at" in self.log_text():
            faults.append("its log has 'panicked at'")
        return faults

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

    def pause(self) -> None:
        """SIGSTOP the process group: the broker freezes (no heartbeats, no answers)."""
        if self.running:
            self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after `pause()`."""
        if self.running:
            self._signal(signal.SIGCONT)

    def _signal(self, sig: int) -> None:
        assert self._proc is not None
        try:
            os.killpg(self._proc.pid, sig)
        except ProcessLookupError:
            pass

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as e:
            return f"(no broker log: {e})"
        return "\n".join(text.splitlines()[-lines:])

    def __repr__(self) -> str:
        return f"Broker({self.kind}, {self.bootstrap}, {self.data_dir})"
