"""Set-up and views shared by the cluster tests (test_cluster_*.py): unique names, a node that
is not the controller, topics created through a chosen node and awaited on every node, each
node's own view of a topic's partitions, and keyed record sets."""

import uuid
from typing import Dict, List, Optional

from . import wire
from .cluster import Cluster, wait_for

VISIBLE_S = 30.0  # set-up waits (the 1 s visibility checks are the tests' own)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def non_controller(cluster: Cluster) -> int:
    """A running node that does not lead the metadata quorum (on brook also not named controller
    in its own Metadata answer; Kafka names a random broker there)."""
    leader = cluster.quorum_leader()
    for node_id in cluster.running_ids():
        if node_id == leader:
            continue
        if cluster.kind == "kafka" or cluster.metadata(node_id, [])["controller_id"] != node_id:
            return node_id
    raise AssertionError(f"no running node other than the controller (quorum leader {leader})")


def partitions_view(cluster: Cluster, node_id: int, topic: str) -> Optional[Dict[int, dict]]:
    """{partition: {"error", "leader", "epoch", "replicas", "isr"}} as node `node_id` sees
    `topic`, or None while it does not know the topic."""
    t = cluster.metadata(node_id, [topic])["topics"].get(topic)
    if t is None or t["error"] != 0:
        return None
    return t["partitions"]


def wait_topic_everywhere(cluster: Cluster, topic: str, partitions: int, timeout: float = VISIBLE_S,
                          node_ids: Optional[List[int]] = None) -> Dict[int, dict]:
    """Until every node of `node_ids` (default: running ones) shows `topic` with `partitions`
    partitions, each with a leader, and all show the same leaders, replicas and epochs; returns
    that common view."""
    ids = node_ids if node_ids is not None else cluster.running_ids()

    def agreed():
        views = [partitions_view(cluster, i, topic) for i in ids]
        if any(v is None or len(v) != partitions or any(p["leader"] < 0 for p in v.values()) for v in views):
            return None
        shapes = [{p: (v[p]["leader"], v[p]["epoch"], v[p]["replicas"]) for p in v} for v in views]
        return views[0] if all(s == shapes[0] for s in shapes) else None

    return wait_for(agreed, timeout, f"{topic} with {partitions} led partitions, the same on nodes {ids}")


def create_topic_via(cluster: Cluster, node_id: int, topic: str, partitions: int, replication_factor: int = 1,
                     configs: Optional[dict] = None) -> Dict[int, dict]:
    """CreateTopics sent to node `node_id` itself; waits until every running node agrees on the
    new topic and returns its partitions."""
    result = wire.create_topics(cluster.bootstrap_of(node_id), {topic: (partitions, replication_factor, configs)})
    assert result == {topic: 0}, f"CreateTopics via node {node_id}: {wire.error_name(result.get(topic, -1))}"
    return wait_topic_everywhere(cluster, topic, partitions)


def keyed_records(count: int, tag: str, keys: int = 60) -> List[dict]:
    """`count` records, keys cycling over `keys` distinct ones, values numbered in send order."""
    return [{"key": f"key-{i % keys:02d}", "value": f"value-{i:04d}-{tag}", "headers": [["seq", str(i)]]}
            for i in range(count)]
