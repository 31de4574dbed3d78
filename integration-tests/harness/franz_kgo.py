"""franz-go's own integration tests (its module's pkg/kgo package) run against a cluster.

franz-go v1.22.3's module source comes from the Go module proxy (`go mod download -json`); the
module cache is read-only, so `franz_source()` copies it once to .cache/franz-go/v1.22.3 (with
its dependencies downloaded), where `go test` can build. `run_go_test` runs
`go test -run RUN -count=1 -v ./pkg/kgo/` there with franz-go's test knobs
(pkg/kgo/helpers_test.go): KGO_SEEDS (every node), KGO_TEST_RF, KGO_TEST_RECORDS (records the
ETL tests push through; 500,000 by default there), KGO_LOG_LEVEL (the client's log in the test
output). Used by scripts/franz-kgo-tests.py and test_franz_kgo.py.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict

from . import paths

MODULE = "github.com/twmb/franz-go"
VERSION = "v1.22.3"
SOURCE_DIR = paths.REPO_DIR / ".cache" / "franz-go" / VERSION

# As Kafka's shipped config/server.properties: single-replica internal topics (issue 29's setup).
CLUSTER_OVERRIDES = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}


def franz_source() -> Path:
    """franz-go's module source, writable, its dependencies downloaded and its kgo tests
    compiled once (so a test's time is the run's); fetched only the first time."""
    marker = SOURCE_DIR / ".complete"
    if marker.is_file():
        return SOURCE_DIR
    out = subprocess.run(["go", "mod", "download", "-json", f"{MODULE}@{VERSION}"],
                         check=True, capture_output=True, text=True, cwd=tempfile.gettempdir())
    module_dir = Path(json.loads(out.stdout)["Dir"])
    if SOURCE_DIR.exists():
        shutil.rmtree(SOURCE_DIR)
    SOURCE_DIR.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(module_dir, SOURCE_DIR)
    for root, dirs, files in os.walk(SOURCE_DIR):  # the module cache's files are read-only
        for name in dirs:
            os.chmod(Path(root) / name, 0o755)
        for name in files:
            os.chmod(Path(root) / name, 0o644)
    subprocess.run(["go", "mod", "download"], check=True, cwd=SOURCE_DIR)
    subprocess.run(["go", "test", "-c", "-o", os.devnull, "./pkg/kgo/"], check=True, cwd=SOURCE_DIR,
                   env=go_env())
    marker.write_text(f"{MODULE}@{VERSION} from {module_dir}\n")
    return SOURCE_DIR


def go_env(**knobs: str) -> Dict[str, str]:
    return {**os.environ, "GOFLAGS": "-mod=mod -buildvcs=false", **knobs}


def run_go_test(bootstrap: str, run: str, records: int, log_level: str, timeout_s: float, log_path: Path,
                echo: bool = False) -> int:
    """`go test -run RUN` against `bootstrap`, in its own process group (killed as a whole
    past the deadline); output to `log_path` (and stdout with `echo`). Returns its exit code,
    124 on timeout."""
    src = franz_source()
    env = go_env(KGO_SEEDS=bootstrap, KGO_TEST_RF="1", KGO_TEST_RECORDS=str(records), KGO_LOG_LEVEL=log_level)
    argv = ["go", "test", "-run", run, "-count=1", "-v", f"-timeout={int(timeout_s)}s", "./pkg/kgo/"]
    header = (f"$ cd {src} && KGO_SEEDS={bootstrap} KGO_TEST_RF=1 KGO_TEST_RECORDS={records} "
              f"KGO_LOG_LEVEL={log_level} {' '.join(argv)}\n")
    deadline = time.monotonic() + timeout_s + 60  # go test's own -timeout fires first
    with open(log_path, "wb") as log:
        log.write(header.encode())
        if echo:
            print(header, end="", flush=True)
        proc = subprocess.Popen(argv, cwd=src, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            if echo:
                sys.stdout.buffer.write(line)
                sys.stdout.flush()
            if time.monotonic() > deadline:
                break
        try:
            return proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return 124


def results(output: str) -> Dict[str, str]:
    """{test name: PASS|FAIL|SKIP} from go test -v output (subtests included)."""
    return {m.group(2): m.group(1) for m in re.finditer(r"^\s*--- (PASS|FAIL|SKIP): (\S+)", output, re.M)}
