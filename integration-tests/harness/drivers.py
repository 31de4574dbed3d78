"""Run a client's driver (see integration-tests/README.md, "The driver protocol").

`run(client, command, bootstrap, *args, records=None)` starts the driver, hands it `records`
as a JSON-lines `--input` file, and returns what it printed: a list for the JSON-lines
commands (`produce`, `consume`), the parsed document otherwise. A non-zero exit raises
`DriverError` (with stderr); exit code 3 raises `Unsupported`.

`CAPABILITIES` is the per-client table of what each client can express. The matrix in
test_compat.py parametrizes a scenario only over the clients that have every capability it
needs, so no cell is ever skipped for a missing feature: an absent cell is a documented gap.
  admin          create/delete/describe/list topics, create-partitions, configs
  timestamps     produce with an explicit per-record timestamp
  max-timestamp  `offsets --spec max-timestamp` (ListOffsets v7, KIP-734)
  idempotent     `produce --idempotent` (enable.idempotence), retrying a batch with the same
                 producer id and sequence after a dropped connection (the client's default
                 retries; kcat's driver runs `kcat -E` so the CLI does not exit first)
  codec:<name>   produce with that compression codec
Every client reports the controller id (`metadata`) and each record's offset (`produce` with
acks=1 or all), so neither needs a row: the matrix requires both from all of them.
kcat (librdkafka 2.0.2) sets no record timestamps, has no admin API and its ListOffsets is
older than v7; kafka-python 2.x speaks ListOffsets only up to v5; kafkajs' ListOffsets stops before v7.

`PAST_TIMESTAMP_GIVES_LATEST`: clients that answer "offset for a timestamp after the last
record" with the log end offset instead of Kafka's -1 (kafkajs substitutes the high watermark;
franz-go's kadm re-asks for the end offset when the broker says -1).
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable, Optional

from . import jvm
from .paths import TESTS_DIR

EXIT_UNSUPPORTED = 3
LINE_COMMANDS = {"produce", "consume", "txn-produce", "txn-copy"}

_PY = sys.executable  # the interpreter running pytest, which has the clients installed
DRIVER_ARGV = {
    # C1 only, serial GC and the driver's class archive (harness/jvm.py; conftest.py makes it
    # before any test module imports this one): a cheaper JVM start.
    "java": ["java", *jvm.JAVA_DRIVER.flags(), "-jar", str(jvm.JAVA_DRIVER_JAR)],
    "confluent": [_PY, str(TESTS_DIR / "drivers/confluent/driver.py")],
    "kafka_python": [_PY, str(TESTS_DIR / "drivers/kafka_python/driver.py")],
    "kcat": [_PY, str(TESTS_DIR / "drivers/kcat/driver.py")],
    "franz": [str(TESTS_DIR / "drivers/franz/franz-driver")],
    "kafkajs": ["node", str(TESTS_DIR / "drivers/kafkajs/driver.js")],
    "sarama": [str(TESTS_DIR / "drivers/sarama/sarama-driver")],
}
# sarama's driver speaks only the commands test_sarama.py uses (no offsets, no client config, no
# produce-stream), so it has its own module rather than cells in the shared matrices.
CLIENTS = [c for c in DRIVER_ARGV if c != "sarama"]
# Client names match their driver folders (so `pytest -k kafka_python` selects a client);
# the PyPI spelling is accepted too.
ALIASES = {"kafka-python": "kafka_python", "confluent-kafka": "confluent", "franz-go": "franz"}

_ALL_CODECS = {f"codec:{c}" for c in ("gzip", "snappy", "lz4", "zstd")}
_FULL = {"admin", "timestamps", "max-timestamp", "idempotent"} | _ALL_CODECS
CAPABILITIES = {
    "java": _FULL,
    "confluent": _FULL,
    "kafka_python": _FULL - {"max-timestamp"},
    "kcat": {"idempotent"} | _ALL_CODECS,
    "franz": _FULL,
    "kafkajs": _FULL - {"max-timestamp"},
}
PAST_TIMESTAMP_GIVES_LATEST = {"kafkajs", "franz"}


class DriverError(RuntimeError):
    """The driver exited non-zero: the client reported an error."""

    def __init__(self, client: str, argv: list, returncode: int, stdout: str, stderr: str):
        self.client, self.argv, self.returncode = client, argv, returncode
        self.stdout, self.stderr = stdout, stderr
        super().__init__(
            f"{client} driver exited {returncode}: {' '.join(argv)}\n"
            f"--- stderr (tail) ---\n{_tail(stderr)}\n--- stdout (tail) ---\n{_tail(stdout)}"
        )


class Unsupported(DriverError):
    """The driver exited 3: the client cannot express this command."""


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def clients_with(*needs: str) -> list:
    """The clients that have every capability in `needs`, in CLIENTS order."""
    return [c for c in CLIENTS if set(needs) <= CAPABILITIES[c]]


def admin_client_for(client: str) -> str:
    """The client that sets up topics for a scenario: itself if it has admin, else confluent."""
    client = ALIASES.get(client, client)
    return client if "admin" in CAPABILITIES[client] else "confluent"


def run(
    client: str,
    command: str,
    bootstrap: str,
    *args: Any,
    records: Optional[Iterable[dict]] = None,
    timeout: float = 120,
) -> Any:
    """Run `<driver> command --bootstrap B args...` and return its parsed stdout."""
    client = ALIASES.get(client, client)
    if client not in DRIVER_ARGV:
        raise ValueError(f"unknown client {client!r}; known: {CLIENTS}")
    argv = [*DRIVER_ARGV[client], command, "--bootstrap", bootstrap, *(str(a) for a in args)]
    input_path = None
    try:
        if records is not None:
            fd, input_path = tempfile.mkstemp(prefix=f"brook-{client}-", suffix=".jsonl")
            with os.fdopen(fd, "w") as f:
                for record in records:
                    f.write(json.dumps(record) + "\n")
            argv += ["--input", input_path]
        try:
            proc = subprocess.run(
                argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, cwd=TESTS_DIR
            )
        except subprocess.TimeoutExpired as e:
            raise DriverError(client, argv, -1, _text(e.stdout), _text(e.stderr) + f"\n(timed out after {timeout} s)")
    finally:
        if input_path is not None:
            Path(input_path).unlink(missing_ok=True)
    if proc.returncode == EXIT_UNSUPPORTED:
        raise Unsupported(client, argv, proc.returncode, proc.stdout, proc.stderr)
    if proc.returncode != 0:
        raise DriverError(client, argv, proc.returncode, proc.stdout, proc.stderr)
    try:
        return parse_output(command, proc.stdout)
    except ValueError as e:
        raise DriverError(client, argv, 0, proc.stdout, proc.stderr + f"\n(unparsable stdout: {e})")


def _text(data: Any) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def parse_output(command: str, stdout: str) -> Any:
    """JSON lines -> list for produce/consume; otherwise one JSON document (or lines -> list)."""
    text = stdout.strip()
    if command in LINE_COMMANDS:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    if not text:
        raise ValueError("empty output")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
