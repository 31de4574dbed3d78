#!/usr/bin/env python3
"""franz-go's own integration tests (package pkg/kgo) against a 3-node cluster.

    python3 integration-tests/scripts/franz-kgo-tests.py [--target brook|kafka] [--nodes 3]
        [--run TestTxnEtl] [--records 20000] [--timeout-s 300] [--keep] [--dir DIR]

franz-go v1.22.3's module source comes from the Go module proxy (`go mod download -json`); the
module cache is read-only, so it is copied once to .cache/franz-go/v1.22.3 (writable, where
`go test` can build). The cluster is harness/cluster.py's: `--nodes` combined broker+controller
nodes on one static quorum (process.roles=broker,controller, controller.quorum.voters), brook
(BROOK_BIN) or Apache Kafka 4.4 (--target kafka, the reference). Internal topics run at
replication factor 1 as in Kafka's shipped server.properties (issue 29's setup).

Then `go test -run RUN -count=1 -v ./pkg/kgo/` runs with franz-go's test knobs
(pkg/kgo/helpers_test.go): KGO_SEEDS = every node, KGO_TEST_RF=1, KGO_TEST_RECORDS = --records
(default 500,000 there; fewer keeps the run short: TestTxnEtl chains the records through 6
groups x 3 transactional copiers, each ending its transaction on every rebalance),
KGO_LOG_LEVEL (--log-level, default info: franz-go's client log goes to the test output).

Prints the go test output as it runs, then one summary line (PASS/FAIL, seconds, where the node
logs are); exits with go test's exit code (124 on timeout). With --keep (or on failure) the
cluster's directory is kept: node-N/broker.log is each node's log.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # integration-tests/, for harness

from harness import paths  # noqa: E402
from harness.cluster import Cluster  # noqa: E402

FRANZ_MODULE = "github.com/twmb/franz-go"
FRANZ_VERSION = "v1.22.3"
CACHE_DIR = paths.REPO_DIR / ".cache" / "franz-go" / FRANZ_VERSION

# As Kafka's shipped config/server.properties: single-replica internal topics.
CLUSTER_OVERRIDES = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}


def franz_source() -> Path:
    """franz-go's module source, writable, with its dependencies downloaded; fetched once."""
    marker = CACHE_DIR / ".complete"
    if marker.is_file():
        return CACHE_DIR
    out = subprocess.run(["go", "mod", "download", "-json", f"{FRANZ_MODULE}@{FRANZ_VERSION}"],
                         check=True, capture_output=True, text=True, cwd=tempfile.gettempdir())
    module_dir = Path(json.loads(out.stdout)["Dir"])
    if CACHE_DIR.exists():
        shutil.rmtree(CACHE_DIR)
    CACHE_DIR.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(module_dir, CACHE_DIR)
    for root, dirs, files in os.walk(CACHE_DIR):  # the module cache's files are read-only
        for name in dirs + files:
            os.chmod(Path(root) / name, 0o755 if name in dirs else 0o644)
    subprocess.run(["go", "mod", "download"], check=True, cwd=CACHE_DIR)
    marker.write_text(f"{FRANZ_MODULE}@{FRANZ_VERSION} from {module_dir}\n")
    return CACHE_DIR


def go_test_env(bootstrap: str, records: int, log_level: str) -> dict:
    return {
        **os.environ,
        "KGO_SEEDS": bootstrap,
        "KGO_TEST_RF": "1",
        "KGO_TEST_RECORDS": str(records),
        "KGO_LOG_LEVEL": log_level,
        "GOFLAGS": "-mod=mod -buildvcs=false",
    }


def run_go_test(src: Path, run: str, env: dict, timeout_s: float, log_path: Path) -> int:
    """go test in its own process group (killed as a whole on timeout); output teed to
    stdout and `log_path`. Returns its exit code, 124 on timeout."""
    argv = ["go", "test", "-run", run, "-count=1", "-v", f"-timeout={int(timeout_s)}s", "./pkg/kgo/"]
    print("$ cd", src, "&&", " ".join(f"{k}={env[k]}" for k in ("KGO_SEEDS", "KGO_TEST_RF", "KGO_TEST_RECORDS",
                                                                  "KGO_LOG_LEVEL")), " ".join(argv), flush=True)
    deadline = time.monotonic() + timeout_s + 60  # go test's own -timeout fires first
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, cwd=src, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default=paths.target(), choices=["brook", "kafka"])
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--run", default="TestTxnEtl", help="go test -run pattern")
    ap.add_argument("--records", type=int, default=20000, help="KGO_TEST_RECORDS")
    ap.add_argument("--log-level", default="info", choices=["info", "debug", "none"], help="KGO_LOG_LEVEL")
    ap.add_argument("--timeout-s", type=float, default=300)
    ap.add_argument("--dir", type=Path, help="the cluster's directory (default: a new temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the cluster's directory after a pass")
    args = ap.parse_args()

    src = franz_source()
    base = args.dir or Path(tempfile.mkdtemp(prefix=f"franz-kgo-{args.target}-"))
    cluster = Cluster(args.target, base, args.nodes, CLUSTER_OVERRIDES)
    t0 = time.monotonic()
    cluster.start()
    t_started = time.monotonic()
    code = 1
    try:
        env = go_test_env(cluster.bootstrap, args.records, args.log_level)
        code = run_go_test(src, args.run, env, args.timeout_s, base / "go-test.log")
    finally:
        cluster.stop()
        elapsed = time.monotonic() - t_started
        verdict = "PASS" if code == 0 else ("TIMEOUT" if code == 124 else "FAIL")
        print(f"\n== {verdict}: {args.run} on {args.nodes} {args.target} node(s), go test {elapsed:.0f} s "
              f"(cluster start {t_started - t0:.0f} s), exit {code}", flush=True)
        if code == 0 and not args.keep and args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"== go test output: {base / 'go-test.log'}")
            for n in cluster.nodes:
                print(f"== node {n.node_id} ({n.bootstrap}) log: {n.log_path}; data: {n.log_dirs}")
    return code


if __name__ == "__main__":
    sys.exit(main())
