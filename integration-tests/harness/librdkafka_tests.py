"""librdkafka's own test suite (librdkafka 2.12.1's tests/test-runner) run against a broker.

third-party/install.sh builds the runner once into .cache/librdkafka/2.12.1/tests (librdkafka's
source with its tests/ as bundled in the crate rdkafka-sys 4.10.0+2.12.1). `run_test` runs one
test number, optionally only the sub-tests whose name contains `subtests` (librdkafka's SUBTESTS,
matched against "do_test_<Name>:<line>: ..."), in quick mode (`-Q`: librdkafka's CI mode, one
client type), sequentially (`-p1`), with the broker in a test.conf of its own and
TEST_KAFKA_VERSION telling the runner which broker features to expect.
"""

import os
import re
import subprocess
from pathlib import Path
from typing import List, Optional, Tuple

from . import paths

VERSION = "2.12.1"
TESTS_DIR = paths.REPO_DIR / ".cache" / "librdkafka" / VERSION / "tests"
KAFKA_VERSION = "4.4.0"  # the broker version the runner assumes (feature checks)


def runner() -> Path:
    """The built test-runner; raises (naming the installer) when it is missing."""
    path = TESTS_DIR / "test-runner"
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"{path} missing: run integration-tests/third-party/install.sh")
    return path


def run_test(bootstrap: str, number: str, conf_path: Path, subtests: Optional[str] = None,
             timeout_s: float = 240) -> Tuple[int, str]:
    """Runs test `number` against `bootstrap`; returns (exit code, output). The output is the
    runner's own (ANSI colours removed)."""
    conf_path.write_text(f"bootstrap.servers={bootstrap}\n")
    env = {**os.environ, "RDKAFKA_TEST_CONF": str(conf_path), "TESTS": number, "TEST_KAFKA_VERSION": KAFKA_VERSION,
           "LD_LIBRARY_PATH": f"{TESTS_DIR.parent / 'src'}:{TESTS_DIR.parent / 'src-cpp'}"}
    if subtests:
        env["SUBTESTS"] = subtests
    try:
        proc = subprocess.run([str(runner()), "-p1", "-Q"], cwd=TESTS_DIR, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout_s)
        code, out = proc.returncode, proc.stdout
    except subprocess.TimeoutExpired as e:
        code, out = 124, (e.stdout or b"") + f"\n(timed out after {timeout_s} s)".encode()
    return code, re.sub(r"\x1b\[[0-9;]*m|\x1b\(B", "", out.decode(errors="replace"))


def passed_subtests(output: str) -> List[str]:
    """The sub-tests the runner reported passed: "do_test_X:LINE: what"."""
    return re.findall(r"\[ (do_test_\S+?:\d+[^\]]*?): PASS \(", output)


def failures(output: str) -> str:
    """The runner's failure reports: each "### Test ... failed at ..." line and the next."""
    lines = output.splitlines()
    picked = [f"{line}\n  {lines[i + 1] if i + 1 < len(lines) else ''}"
              for i, line in enumerate(lines) if line.startswith("### Test")]
    return "\n".join(picked)
