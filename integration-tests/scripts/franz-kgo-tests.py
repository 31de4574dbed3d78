#!/usr/bin/env python3
"""franz-go's own integration tests (package pkg/kgo) against a 3-node cluster.

    python3 integration-tests/scripts/franz-kgo-tests.py [--target brook|kafka] [--nodes 3]
        [--run TestTxnEtl] [--records 20000] [--log-level info|debug|none] [--timeout-s 300]
        [--keep] [--dir DIR] [--fetch-only]

franz-go v1.22.3's module source comes from the Go module proxy, copied once to
.cache/franz-go/v1.22.3 (harness/franz_kgo.py; `--fetch-only` does only that, as install.sh
does). The cluster is harness/cluster.py's: `--nodes` combined broker+controller nodes on one
static quorum (process.roles=broker,controller, controller.quorum.voters), brook (BROOK_BIN) or
Apache Kafka 4.4 (--target kafka, the reference), internal topics at replication factor 1 as in
Kafka's shipped server.properties (issue 29's setup). Then `go test -run RUN -count=1 -v
./pkg/kgo/` with KGO_SEEDS = every node, KGO_TEST_RF=1, KGO_TEST_RECORDS = --records (500,000
by default in franz-go; TestTxnEtl chains the records through 3 groups of transactional
copiers per subtest, so fewer keeps the run short), KGO_LOG_LEVEL = --log-level.

Prints the go test output as it runs, then a summary line (PASS/FAIL, seconds, where the node
logs are); exits with go test's exit code (124 on timeout). On failure or with --keep the
cluster's directory stays: DIR/go-test.log, DIR/node-N/broker.log (each node's log).
"""

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # integration-tests/, for harness

from harness import franz_kgo, paths  # noqa: E402
from harness.cluster import Cluster  # noqa: E402


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
    ap.add_argument("--fetch-only", action="store_true", help="only fetch and compile franz-go's tests")
    args = ap.parse_args()

    src = franz_kgo.franz_source()
    if args.fetch_only:
        print(f"franz-go {franz_kgo.VERSION} tests ready in {src}")
        return 0
    base = args.dir or Path(tempfile.mkdtemp(prefix=f"franz-kgo-{args.target}-"))
    cluster = Cluster(args.target, base, args.nodes, franz_kgo.CLUSTER_OVERRIDES)
    t0 = time.monotonic()
    cluster.start()
    t_started = time.monotonic()
    code = 1
    try:
        code = franz_kgo.run_go_test(cluster.bootstrap, args.run, args.records, args.log_level, args.timeout_s,
                                     base / "go-test.log", echo=True)
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
