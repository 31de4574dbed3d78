#!/usr/bin/env python3
"""A throttled reassignment's rate: `kafka-reassign-partitions --throttle` moves one replica.

    python3 integration-tests/scripts/throttle-move.py [--target brook|kafka] [--mb 1024]
                                                       [--throttle-mb 10] [--tolerance 0.2]

A 3-node cluster (harness/cluster.py; Apache Kafka with --target kafka). A one-partition,
one-replica topic on broker 1 is filled with MB megabytes (kafka-producer-perf-test, 1 KB
records), then moved to broker 2 with `--execute --throttle <THROTTLE_MB * 10^6>`, polling
`--verify` every second until it reports completion (which also clears the throttle). The move
rate is the partition's size on broker 1 (DescribeLogDirs, through kafka-log-dirs) over the time
from --execute to completion. Meanwhile a producer writes to another topic led by broker 3 at
full speed, so its rate during the move shows whether client traffic was held back.

Kafka's quotas (and Brook's, which measure the same way) average over 11 one-second samples
and at least 10 s, so the first ~10 x THROTTLE bytes pass unthrottled: use at least 1 GB at
10 MB/s (issue #27's figure) for the average to mean the throttle. Prints one JSON line and
exits 1 when the move rate is outside THROTTLE x (1 +- TOLERANCE).
"""

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # integration-tests/, for harness

from harness import kafka_cli, paths  # noqa: E402
from harness.cluster import Cluster  # noqa: E402
from harness.replication import create_topic_assigned, producer_perf_test, wait_views  # noqa: E402

REASSIGN_TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
LOG_DIRS_TOOL = "org.apache.kafka.tools.LogDirsCommand"
PERF_TOOL = "org.apache.kafka.tools.ProducerPerformance"


def partition_size(cluster: Cluster, broker: int, topic: str) -> int:
    out = kafka_cli.run(LOG_DIRS_TOOL, "--bootstrap-server", cluster.bootstrap, "--describe",
                        "--broker-list", broker, "--topic-list", topic, timeout=60).stdout
    doc = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    return sum(p["size"] for b in doc["brokers"] for d in b["logDirs"] for p in d["partitions"]
               if p["partition"] == f"{topic}-0")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default=paths.target(), choices=["brook", "kafka"])
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--throttle-mb", type=float, default=10.0)
    ap.add_argument("--tolerance", type=float, default=0.2)
    args = ap.parse_args()
    throttle = int(args.throttle_mb * 1_000_000)
    work = Path(tempfile.mkdtemp(prefix="brook-throttle-"))
    cluster = Cluster(args.target, work / "cluster", 3)
    cluster.start()
    try:
        create_topic_assigned(cluster, 1, "moved", [[1]])
        create_topic_assigned(cluster, 1, "clients", [[3]])
        records = args.mb * 1024
        producer_perf_test(cluster.bootstrap, "moved", records, record_size=1000, acks="1", timeout=1800)
        size = partition_size(cluster, 1, "moved")
        plan = work / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "moved", "partition": 0, "replicas": [2]}]}))

        import subprocess  # the client load runs beside the move
        client = subprocess.Popen([*kafka_cli.KAFKA_JAVA, "-Xmx512m", PERF_TOOL, "--topic", "clients",
                                   "--num-records", "100000000", "--record-size", "1000", "--throughput", "-1",
                                   "--producer-props", f"bootstrap.servers={cluster.bootstrap}", "acks=1"],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            start = time.monotonic()
            kafka_cli.run(REASSIGN_TOOL, "--bootstrap-server", cluster.bootstrap, "--execute",
                          "--reassignment-json-file", plan, "--throttle", throttle, timeout=120)
            while True:
                out = kafka_cli.run(REASSIGN_TOOL, "--bootstrap-server", cluster.bootstrap, "--verify",
                                    "--reassignment-json-file", plan, timeout=120).stdout
                if "Reassignment of partition moved-0 is completed." in out:
                    break
                if time.monotonic() - start > 3600:
                    raise RuntimeError("the move did not complete within an hour")
                time.sleep(1)
            elapsed = time.monotonic() - start
        finally:
            client.terminate()
            client_out, _ = client.communicate(timeout=60)
        wait_views(cluster, "moved", lambda v: v[0]["replicas"] == [2], 60, "moved-0 on broker 2")
        client_rates = [float(m) for m in re.findall(r"\(([\d.]+) MB/sec\)", client_out or "")]
        rate = size / elapsed
        result = {
            "target": args.target, "moved_bytes": size, "seconds": round(elapsed, 1),
            "move_mb_per_s": round(rate / 1e6, 2), "throttle_mb_per_s": args.throttle_mb,
            "ratio_to_throttle": round(rate / throttle, 3),
            "client_mb_per_s_during_move": round(sum(client_rates) / len(client_rates), 1) if client_rates else None,
        }
        print(json.dumps(result))
        return 0 if abs(rate / throttle - 1) <= args.tolerance else 1
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)  # GBs of moved replicas


if __name__ == "__main__":
    sys.exit(main())
