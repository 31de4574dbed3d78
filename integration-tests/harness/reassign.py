"""`kafka-reassign-partitions` as the reassignment tests drive it (test_cluster_reassign.py,
test_cluster_grow.py): a plan written to a file per call, the tool's output returned, and
`--verify` polled until every partition of a plan is reported completed."""

import json
import time
from pathlib import Path

from . import kafka_cli
from .cluster import Cluster

REASSIGN_TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
MOVE_S = 120


def plan_of(topic: str, replicas: dict) -> dict:
    """The tool's JSON plan moving partition p of `topic` to `replicas[p]`."""
    return {"version": 1,
            "partitions": [{"topic": topic, "partition": p, "replicas": r} for p, r in sorted(replicas.items())]}


def reassign(cluster: Cluster, action: str, plan: dict, tmp_path: Path, *extra, check: bool = True):
    """`--<action> --reassignment-json-file <plan>` (execute, verify, cancel) with `extra`
    options; the CompletedProcess."""
    path = tmp_path / f"{action}-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(plan))
    return kafka_cli.run(REASSIGN_TOOL, "--bootstrap-server", cluster.bootstrap, f"--{action}",
                         "--reassignment-json-file", path, *extra, timeout=90, check=check)


def list_reassignments(cluster: Cluster) -> str:
    """`--list`'s output: the reassignments in progress."""
    return kafka_cli.run(REASSIGN_TOOL, "--bootstrap-server", cluster.bootstrap, "--list", timeout=90).stdout


def wait_verified(cluster: Cluster, plan: dict, tmp_path: Path, timeout: float = MOVE_S) -> str:
    """`--verify` until it reports every partition of `plan` completed; its last output."""
    names = [f"{p['topic']}-{p['partition']}" for p in plan["partitions"]]

    def verified():
        text = reassign(cluster, "verify", plan, tmp_path).stdout
        return text if all(f"Reassignment of partition {n} is completed." in text for n in names) else None

    return cluster.wait_for(verified, timeout, f"reassignment of {names} completed", interval=1)
