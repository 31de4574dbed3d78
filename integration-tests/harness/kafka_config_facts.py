"""Kafka 4.4's configuration facts, read at test time from the jars in .cache/kafka/libs, and
DescribeConfigs through the Java AdminClient with every flag a test compares.

`defs()` is {"topic": {name: {...}}, "broker": {name: {...}}} with each key's `type` (Kafka's
ConfigDef type name), `default` (as Kafka prints it; None for none), `internal` and, for brokers,
the dynamic update `mode` ("read-only", "per-broker", "cluster-wide"): LogConfig's and
AbstractKafkaConfig.CONFIG_DEF's keys, so no test holds a hand-copied list of Kafka's names.
`describe(bootstrap, "topic"|"broker", name)` is {name: {value, source, read_only, sensitive,
type}}. Both run harness/java/KafkaConfigFacts.java as a single-file Java program.
"""

import functools
import json
import subprocess

from .paths import KAFKA_JAVA, TESTS_DIR

_SOURCE = TESTS_DIR / "harness" / "java" / "KafkaConfigFacts.java"


def _run(*args: str) -> dict:
    argv = [*KAFKA_JAVA, "-Xmx256m", str(_SOURCE), *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


@functools.lru_cache(maxsize=None)
def defs() -> dict:
    return _run("defs")


def describe(bootstrap: str, resource_type: str, name: str) -> dict:
    return _run("describe", bootstrap, resource_type, name)
