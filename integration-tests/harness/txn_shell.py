"""A running `txn-shell` of the Java driver (drivers/java TxnShellCommand): one JVM holding named
Java 4.4 producers and consumers that a transaction scenario drives step by step.

`TxnShell(bootstrap)` starts it; `call(op, **fields)` writes one JSON request line and returns the
one JSON answer line (a dict; `{"ok": False, "error": <exception class>, "causes": [..]}` when the
client raised, which the scenario asserts on); `ok(op, **fields)` is `call` that fails the test on
an error answer. Every answer is awaited with a deadline (a stuck client fails the test with the
shell's stderr tail instead of hanging it, and ends the session). `close()` ends the session (EOF, then kill after 15 s).
"""

import json
import queue
import subprocess
import threading
from collections import deque
from typing import Any, Optional

from .drivers import DRIVER_ARGV
from .paths import TESTS_DIR


# Longer than the Java clients' own bounds on a blocking call (max.block.ms, default.api.timeout.ms:
# 60 s), so that a client's error is what a failing test reports.
CALL_TIMEOUT_S = 90


class TxnShellError(AssertionError):
    """The shell answered with an error where the scenario expected success, or did not answer."""


class TxnShell:
    def __init__(self, bootstrap: str):
        argv = [*DRIVER_ARGV["java"], "txn-shell", "--bootstrap", bootstrap]
        self._proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, bufsize=1, cwd=TESTS_DIR,
        )
        self._answers: "queue.Queue[Optional[str]]" = queue.Queue()
        self._stderr: deque = deque(maxlen=80)
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._answers.put(line)
        self._answers.put(None)

    def _read_stderr(self) -> None:
        assert self._proc.stderr is not None
        for line in self._proc.stderr:
            self._stderr.append(line.rstrip("\n"))

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def stderr_tail(self) -> str:
        return "\n".join(self._stderr)

    def call(self, op: str, timeout: float = CALL_TIMEOUT_S, **fields: Any) -> dict:
        """Send {"op": op, **fields}; the answer, an error answer included."""
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps({"op": op, **fields}) + "\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            raise TxnShellError(f"txn-shell has exited ({self._proc.poll()})\n{self.stderr_tail()}")
        try:
            line = self._answers.get(timeout=timeout)
        except queue.Empty:
            # Its late answer would be taken for the next request's: the session is over.
            self._proc.kill()
            raise TxnShellError(f"txn-shell gave no answer to {op} within {timeout} s\n{self.stderr_tail()}")
        if line is None:
            raise TxnShellError(f"txn-shell exited ({self._proc.wait()}) during {op}\n{self.stderr_tail()}")
        return json.loads(line)

    def ok(self, op: str, timeout: float = CALL_TIMEOUT_S, **fields: Any) -> dict:
        """`call`, failing the test unless the answer is ok."""
        answer = self.call(op, timeout=timeout, **fields)
        if not answer.get("ok"):
            raise TxnShellError(f"{op} {fields if len(json.dumps(fields)) < 2000 else ''} failed: {answer}\n"
                                f"{self.stderr_tail()}")
        return answer

    def send(self, name: str, topic: str, records: list, **fields: Any) -> list:
        """Send records with producer `name`, wait for them, return [{"partition","offset"}] in
        order; fails the test if any record failed."""
        results = self.ok("send", name=name, topic=topic, records=records, **fields)["results"]
        failed = [r for r in results if "error" in r]
        if failed:
            raise TxnShellError(f"send to {topic} failed: {failed[:5]}\n{self.stderr_tail()}")
        return results

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.close()
            except OSError:
                pass
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def __enter__(self) -> "TxnShell":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
