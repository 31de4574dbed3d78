"""Run Apache Kafka's own CLI tools (kafka-topics, kafka-console-producer, ...) by main class.

`run(tool_main_class, *args)` is `java -cp "<repo>/.cache/kafka/libs/*" <class> args`, bounded by
a timeout, returning a CompletedProcess with text stdout/stderr; a non-zero exit raises
`CliError`. The jars are Apache Kafka's release (kafka-dist/pom.xml), the same ones the
reference broker runs, so these are exactly the tools operators use.
"""

import subprocess
from typing import Any, Dict, List, Optional

from . import door, jvm
from .paths import KAFKA_JAVA, KAFKA_LIBS, TESTS_DIR


class CliError(RuntimeError):
    """The tool exited non-zero (or timed out)."""

    def __init__(self, argv: list, returncode: int, stdout: str, stderr: str):
        self.argv, self.returncode, self.stdout, self.stderr = argv, returncode, stdout, stderr
        super().__init__(f"{' '.join(argv)} exited {returncode}\n--- stderr ---\n{stderr[-4000:]}\n--- stdout ---\n{stdout[-4000:]}")


def run(tool_main_class: str, *args: Any, timeout: float = 120, input: Optional[str] = None, check: bool = True):
    """Run one Kafka tool; `input` is fed to its stdin (e.g. the console producer's lines)."""
    if not KAFKA_LIBS.is_dir():
        raise CliError([tool_main_class], -1, "", f"Kafka jars missing in {KAFKA_LIBS}: run integration-tests/install.sh")
    args = [str(a) for a in args]
    # A node whose client listener is secured (harness/door.py): the tool logs in through its door.
    if "--bootstrap-server" in args and "--command-config" not in args:
        node_door = door.lookup(args[args.index("--bootstrap-server") + 1])
        if node_door is not None:
            args += ["--command-config", str(node_door.command_config)]
    # C1 only, serial GC and the tools' class archive (harness/jvm.py): a cheaper JVM start.
    argv = [KAFKA_JAVA[0], *jvm.KAFKA_TOOLS.flags(), *KAFKA_JAVA[1:], "-Xmx512m", tool_main_class, *args]
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            cwd=TESTS_DIR,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise CliError(argv, -1, out, err + f"\n(timed out after {timeout} s)")
    if check and proc.returncode != 0:
        raise CliError(argv, proc.returncode, proc.stdout, proc.stderr)
    return proc


def parse_topic_description(text: str) -> Dict:
    """kafka-topics --describe output: a header line of tab-separated `Key: value` fields, then
    one indented line per partition. Returns {"header": {...}, "partitions": {id: {...}}}."""
    header: Dict[str, str] = {}
    partitions: Dict[int, Dict[str, str]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = {}
        for field in line.strip().split("\t"):
            key, _, value = field.partition(":")
            fields[key.strip()] = value.strip()
        if "Partition" in fields:
            partitions[int(fields["Partition"])] = fields
        elif "PartitionCount" in fields:
            header = fields
    return {"header": header, "partitions": partitions}


def ids(text: str) -> List[int]:
    return [int(x) for x in text.split(",") if x.strip()]
