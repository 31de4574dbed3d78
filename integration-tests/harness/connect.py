"""Kafka Connect and MirrorMaker 2 processes for the system tests (test_connect.py,
test_mirror_maker.py).

`ConnectJvm` runs one JVM of Apache Kafka's Connect distribution (connect-dist/pom.xml, 4.3.1 as
a whole, in .cache/connect/libs: a classpath apart from the broker's jars) with a main class and
a properties file written from a dict: `ConnectDistributed worker.properties` for a distributed
worker, `MirrorMaker mm2.properties` for MirrorMaker 2 in dedicated mode. Its Log4j 2 events go to
`log_path` (connect-dist/log4j2.properties: one line per event, "<time> <LEVEL> [thread] ..."),
the JVM's own stdout/stderr to `stdout_path`. `error_events()` lists every ERROR/FATAL event with
the stack trace under it, so a test can assert there is none.

`ConnectRest` is the worker's REST API (a JSON client over urllib): connector create/update,
status, committed offsets.
"""

import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional

from . import paths

JVM_HEAP = "-Xmx512m"
STOP_TIMEOUT_S = 60.0
_EVENT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3} (\w+)\s")


class ConnectError(RuntimeError):
    """The JVM exited early, or the REST API did not answer as expected."""


class ConnectJvm:
    """One Connect / MirrorMaker 2 JVM: `start()`, `stop()` (SIGTERM, returns the seconds it
    took to exit), `kill()`. The log file is appended across restarts."""

    def __init__(self, main_class: str, properties: Dict[str, Any], work_dir: Path, name: str):
        self.main_class = main_class
        self.properties = {k: str(v) for k, v in properties.items()}
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.properties_path = self.work_dir / f"{name}.properties"
        self.log_path = self.work_dir / f"{name}.log"
        self.stdout_path = self.work_dir / f"{name}.stdout"
        self.returncode: Optional[int] = None
        self._proc: Optional[subprocess.Popen] = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def argv(self) -> List[str]:
        libs = paths.CONNECT_LIBS
        if not any(libs.glob("connect-runtime-*.jar")):
            raise ConnectError(f"Kafka Connect jars missing in {libs}: run integration-tests/install.sh")
        return [
            "java", JVM_HEAP, "-XX:+UseG1GC", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={paths.CONNECT_LOG4J2}",
            f"-Dbrook.log.file={self.log_path}",
            "-cp", f"{libs}/*", self.main_class, str(self.properties_path),
        ]

    def start(self) -> None:
        if self.running:
            return
        self.properties_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
        argv = self.argv()
        with open(self.stdout_path, "ab") as out:
            out.write(f"==== start {' '.join(argv)}\n".encode())
            out.flush()
            self._proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=self.work_dir, start_new_session=True,
            )
        self.returncode = None

    def check_alive(self) -> None:
        """Raise ConnectError (with the log tail) if the JVM has exited."""
        if self._proc is not None and self._proc.poll() is not None:
            raise ConnectError(f"{self.main_class} exited with {self._proc.returncode}\n{self.log_tail()}")

    def stop(self) -> float:
        """SIGTERM, as an operator stops a worker; the seconds until the JVM exited (SIGKILL and
        ConnectError after STOP_TIMEOUT_S)."""
        if not self.running:
            return 0.0
        assert self._proc is not None
        started = time.monotonic()
        os.killpg(self._proc.pid, signal.SIGTERM)
        try:
            self.returncode = self._proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise ConnectError(f"{self.main_class} still running {STOP_TIMEOUT_S} s after SIGTERM\n{self.log_tail()}")
        return time.monotonic() - started

    def kill(self) -> None:
        if self._proc is None or self._proc.poll() is not None:
            return
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.returncode = self._proc.wait()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def error_events(self) -> List[str]:
        """Every ERROR or FATAL event of the log, each with the lines under it (its stack trace)."""
        return error_events(self.log_text())

    def log_tail(self, lines: int = 80) -> str:
        text = self.log_text().splitlines()[-lines:]
        try:
            out = self.stdout_path.read_text(errors="replace").splitlines()[-20:]
        except OSError:
            out = []
        return "\n".join(["--- log tail ---", *text, "--- stdout/stderr tail ---", *out])


def error_events(text: str) -> List[str]:
    """The ERROR/FATAL events of a log in connect-dist/log4j2.properties' layout, each joined
    with its continuation lines (at most 15 of them)."""
    events: List[str] = []
    current: Optional[List[str]] = None
    for line in text.splitlines():
        m = _EVENT.match(line)
        if m:
            if current is not None:
                events.append("\n".join(current[:16]))
            current = [line] if m.group(1) in ("ERROR", "FATAL") else None
        elif current is not None:
            current.append(line)
    if current is not None:
        events.append("\n".join(current[:16]))
    return events


class ConnectRest:
    """A Connect worker's REST API on 127.0.0.1:`port`."""

    def __init__(self, port: int):
        self.base = f"http://127.0.0.1:{port}"

    def call(self, method: str, path: str, body: Any = None, timeout: float = 30) -> tuple:
        """(HTTP status, parsed JSON body or None); connection errors raise OSError."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        try:
            return status, json.loads(raw) if raw else None
        except json.JSONDecodeError:
            return status, raw.decode(errors="replace")

    def wait_ready(self, jvm: ConnectJvm, timeout_s: float = 90) -> None:
        """Until the worker's REST server answers GET /connectors with 200 (its herder has
        joined the group and read the config topic)."""
        deadline = time.monotonic() + timeout_s
        last: Any = None
        while time.monotonic() < deadline:
            jvm.check_alive()
            try:
                status, body = self.call("GET", "/connectors", timeout=5)
                if status == 200:
                    return
                last = (status, body)
            except OSError as e:
                last = e
            time.sleep(0.2)
        raise ConnectError(f"worker REST not ready after {timeout_s} s (last: {last})\n{jvm.log_tail()}")

    def put_connector(self, name: str, config: Dict[str, str], timeout_s: float = 60) -> None:
        """PUT /connectors/<name>/config (create or update), retried while the herder answers
        409 (a rebalance in progress) or 5xx."""
        deadline = time.monotonic() + timeout_s
        while True:
            status, body = self.call("PUT", f"/connectors/{name}/config", config)
            if status in (200, 201):
                return
            if time.monotonic() > deadline or status not in (409, 500, 503):
                raise ConnectError(f"PUT connector {name}: {status} {body}")
            time.sleep(0.3)

    def wait_running(self, name: str, jvm: ConnectJvm, tasks: int = 1, timeout_s: float = 60) -> Dict:
        """Until the connector and its `tasks` tasks are RUNNING; its status. A FAILED
        connector or task raises at once with its trace."""
        deadline = time.monotonic() + timeout_s
        last: Any = None
        while time.monotonic() < deadline:
            jvm.check_alive()
            status, body = self.call("GET", f"/connectors/{name}/status")
            last = (status, body)
            if status == 200:
                states = [body["connector"]["state"], *(t["state"] for t in body["tasks"])]
                if "FAILED" in states:
                    raise ConnectError(f"connector {name} failed: {json.dumps(body, indent=1)}")
                if len(body["tasks"]) == tasks and set(states) == {"RUNNING"}:
                    return body
            time.sleep(0.2)
        raise ConnectError(f"connector {name} not RUNNING after {timeout_s} s: {last}\n{jvm.log_tail()}")

    def offsets(self, name: str) -> List[Dict]:
        """GET /connectors/<name>/offsets (KIP-875): [{"partition": {..}, "offset": {..}}]."""
        status, body = self.call("GET", f"/connectors/{name}/offsets")
        if status != 200:
            raise ConnectError(f"GET offsets of {name}: {status} {body}")
        return body["offsets"]
