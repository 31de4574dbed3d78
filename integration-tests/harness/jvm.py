"""Cheaper starts for the harness's short-lived JVMs: Kafka's tools (kafka_cli.py) and the Java
driver (drivers.py). Neither changes what the program does, only what its start costs; on the
2-core test machine a tool run is mostly JVM start-up, competing for the cores with the brokers
under test (measured per `kafka-topics --list`: 1.8 s of CPU plain, 1.2 s with FAST_START,
0.6 s with the class archive too; the Java driver's `metadata`: 1.25 s, 1.0 s, 0.5 s).

* FAST_START: the C1 compiler only and the serial collector. A tool lives a few seconds, too
  short for C2's code to pay back its compile threads, and needs no parallel collector.
* A class-data-sharing archive per classpath (JDK 13+ dynamic AppCDS): the classes a warm-up run
  loaded, mapped at start instead of read from the jars, parsed and verified again. `ensure()`
  makes it once per JDK and classpath (the key hashes them) under REPO/.cache/jvm-cds/, from a
  throwaway run (the tool or driver asking a closed port, stopped after WARM_UP_S: it has loaded
  the admin client and networking classes by then); conftest.py calls it once per session. A
  missing archive means a plain start; one the JVM finds stale it ignores (its warning silenced,
  so tools' output stays theirs).

BROOK_JVM_PLAIN=1 turns both off (plain JVM starts, no archive made), e.g. to compare.
"""

import fcntl
import hashlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import List

from .paths import KAFKA_JAVA, KAFKA_LIBS, REPO_DIR, TESTS_DIR

FAST_START = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
# A stale or unreadable archive makes the JVM print a warning on stdout: off.
QUIET_CDS = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
ARCHIVE_DIR = Path(os.environ.get("BROOK_JVM_CDS_DIR", REPO_DIR / ".cache" / "jvm-cds"))
WARM_UP_S = 6.0
PLAIN = os.environ.get("BROOK_JVM_PLAIN", "") not in ("", "0")
JAVA_DRIVER_JAR = TESTS_DIR / "drivers/java/target/brook-driver.jar"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ClassArchive:
    """One archive: `flags()` for a JVM on `classpath` (FAST_START, plus the archive once made)."""

    def __init__(self, name: str, classpath: List[Path]):
        self.name, self.classpath = name, classpath
        self._path = None

    def path(self) -> Path:
        """REPO/.cache/jvm-cds/<name>-<hash of the JDK and of every classpath file's name, size
        and mtime>.jsa: a new JDK or jar gets a new archive."""
        if self._path is None:
            h = hashlib.sha256()
            java = Path(shutil.which("java") or "java").resolve()
            h.update(str(java).encode())
            if java.exists():
                h.update(str(java.stat().st_mtime_ns).encode())
            for entry in self.classpath:
                files = sorted(entry.iterdir()) if entry.is_dir() else [entry]
                for f in files:
                    st = f.stat() if f.exists() else None
                    h.update(f"{f}:{st.st_size if st else -1}:{st.st_mtime_ns if st else -1}\n".encode())
            self._path = ARCHIVE_DIR / f"{self.name}-{h.hexdigest()[:16]}.jsa"
        return self._path

    def flags(self) -> List[str]:
        if PLAIN:
            return []
        path = self.path()
        return [*FAST_START, *([f"-XX:SharedArchiveFile={path}", *QUIET_CDS] if path.is_file() else [])]

    def start_warm_up(self, argv_of) -> "subprocess.Popen | None":
        """Start the run that writes the archive (None when it exists or cannot be made);
        `argv_of(jvm_flags)` is the warm-up command line. `finish_warm_up` completes it."""
        path = self.path()
        if path.is_file() or not all(p.exists() for p in self.classpath):
            return None
        ARCHIVE_DIR.mkdir(parents=True, exist_ok=True)
        lock = open(ARCHIVE_DIR / f"{path.name}.lock", "w")
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session making it: wait for it, then use it
        if path.is_file():
            lock.close()
            return None
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        try:
            proc = subprocess.Popen(argv_of([*FAST_START, f"-XX:ArchiveClassesAtExit={tmp}", *QUIET_CDS]),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    cwd=TESTS_DIR)
        except OSError:  # no java: no archive, the tests say why when they start one
            lock.close()
            return None
        proc.archive = (lock, tmp, path)
        return proc

    @staticmethod
    def finish_warm_up(proc, deadline: float) -> None:
        """Stop the warm-up run at `deadline` (SIGTERM: the JVM writes the archive as it exits)
        and put the archive in place."""
        lock, tmp, path = proc.archive
        try:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if tmp.is_file() and tmp.stat().st_size > 0:
                os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
            lock.close()


KAFKA_TOOLS = ClassArchive("kafka-tools", [KAFKA_LIBS])
JAVA_DRIVER = ClassArchive("java-driver", [JAVA_DRIVER_JAR])


def ensure() -> None:
    """Make the archives that are missing, both warm-up runs at once (~WARM_UP_S)."""
    if PLAIN:
        return
    port = _closed_port()
    deadline = time.monotonic() + WARM_UP_S
    runs = [
        KAFKA_TOOLS.start_warm_up(lambda flags: [*KAFKA_JAVA[:1], *flags, *KAFKA_JAVA[1:], "-Xmx512m",
                                                 "org.apache.kafka.tools.TopicCommand",
                                                 "--bootstrap-server", f"127.0.0.1:{port}", "--list"]),
        JAVA_DRIVER.start_warm_up(lambda flags: ["java", *flags, "-jar", str(JAVA_DRIVER_JAR), "metadata",
                                                 "--bootstrap", f"127.0.0.1:{port}"]),
    ]
    for proc in runs:
        if proc is not None:
            ClassArchive.finish_warm_up(proc, deadline)
