"""Where things live: the repository, the integration-tests folder, Kafka's and Connect's jars, brook's binary.

Every path is absolute and derived from this file's location, so the suite runs from any
working directory. Environment variables override the defaults (BROOK_BIN, KAFKA_LIBS, CONNECT_LIBS).
"""

import os
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent.parent
REPO_DIR = TESTS_DIR.parent
KAFKA_LIBS = Path(os.environ.get("KAFKA_LIBS", REPO_DIR / ".cache" / "kafka" / "libs"))
# How the JVMs on KAFKA_LIBS log (kafka-dist/): tools and helpers WARN to stderr, so stdout stays
# their answer. `KAFKA_JAVA` starts such a JVM: `[*KAFKA_JAVA, "-Xmx512m", main_class, args...]`.
KAFKA_TOOLS_LOG4J2 = TESTS_DIR / "kafka-dist" / "log4j2-tools.properties"
KAFKA_JAVA = ["java", f"-Dlog4j2.configurationFile={KAFKA_TOOLS_LOG4J2}", "-cp", f"{KAFKA_LIBS}/*"]
KAFKA_REF_SCRIPT = TESTS_DIR / "scripts" / "kafka-ref.sh"
KAFKA_CLUSTER_SCRIPT = TESTS_DIR / "scripts" / "kafka-cluster-ref.sh"
# Kafka Connect + MirrorMaker 2 (connect-dist/pom.xml): a classpath of their own, and the Log4j 2
# configuration their JVMs log with.
CONNECT_LIBS = Path(os.environ.get("CONNECT_LIBS", REPO_DIR / ".cache" / "connect" / "libs"))
CONNECT_LOG4J2 = TESTS_DIR / "connect-dist" / "log4j2.properties"


def brook_bin() -> Path:
    """The brook binary under test: $BROOK_BIN, else the debug build in the shared target dir."""
    return Path(os.environ.get("BROOK_BIN", REPO_DIR / "target" / "debug" / "brook"))


def target() -> str:
    """Which broker the suite runs against: "brook" (default) or "kafka" (the reference)."""
    value = os.environ.get("BROOK_TEST_TARGET", "brook").strip().lower()
    if value not in ("brook", "kafka"):
        raise ValueError(f"BROOK_TEST_TARGET must be 'brook' or 'kafka', not {value!r}")
    return value
