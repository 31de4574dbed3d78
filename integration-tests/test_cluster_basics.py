"""A 3-node cluster (issue #10) seen by operators' tools and by each node itself: the Java
AdminClient's describeCluster lists the three nodes and a controller among them;
kafka-metadata-quorum names a leader among the three voters; topics created through a node
that is not the controller are spread over all three brokers (RF=1: leaders on every broker;
RF=3: three distinct replicas per partition), as `kafka-topics --describe` shows; and every
node's own Metadata answer agrees on leaders, replicas and leader epochs.

One cluster for the module (conftest.py `cluster`); also passes against Apache Kafka
(BROOK_TEST_TARGET=kafka), where Metadata's controller_id names a random broker and only the
quorum tool tells the quorum leader.
"""

import collections

import pytest

from harness import kafka_cli
from harness.cluster_scenarios import create_topic_via, non_controller, unique, wait_topic_everywhere
from harness.drivers import run
from harness.kafka_cli import ids, parse_topic_description

TOPICS_TOOL = "org.apache.kafka.tools.TopicCommand"


def test_describe_cluster_lists_the_three_nodes_and_a_controller_among_them(cluster):
    for node_id in cluster.node_ids:  # bootstrapping from any single node shows the whole cluster
        md = run("java", "metadata", cluster.bootstrap_of(node_id))
        assert [(b["id"], b["host"], b["port"]) for b in md["brokers"]] == [
            (n.node_id, n.host, n.port) for n in cluster.nodes
        ]
        assert md["controller_id"] in cluster.node_ids
        if cluster.kind == "brook":
            assert md["controller_id"] == cluster.quorum_leader(node_id)


def test_metadata_quorum_tool_names_a_leader_among_the_three_voters(cluster):
    status = cluster.describe_quorum(cluster.node_ids[-1])
    assert status["CurrentVoters"] == [1, 2, 3], status
    assert status["LeaderId"] in (1, 2, 3), status
    assert status["LeaderEpoch"] >= 1 and status["HighWatermark"] > 0, status
    if cluster.kind == "brook":  # brook's Metadata controller_id is the quorum leader
        assert {cluster.metadata(i, [])["controller_id"] for i in cluster.node_ids} == {status["LeaderId"]}


def describe(cluster, node_id: int, topic: str) -> dict:
    """kafka-topics --describe through node `node_id`: {partition: (leader, replicas, isr)}."""
    out = kafka_cli.run(TOPICS_TOOL, "--bootstrap-server", cluster.bootstrap_of(node_id), "--describe",
                        "--topic", topic).stdout
    parsed = parse_topic_description(out)
    return {p: (int(f["Leader"]), ids(f["Replicas"]), ids(f["Isr"])) for p, f in parsed["partitions"].items()}


@pytest.fixture(scope="module")
def spread_topics(cluster):
    """A 6-partition RF=1 and a 3-partition RF=3 topic, created through a non-controller node."""
    via = non_controller(cluster)
    rf1, rf3 = unique("t-rf1"), unique("t-rf3")
    create_topic_via(cluster, via, rf1, 6, 1)
    create_topic_via(cluster, via, rf3, 3, 3)
    return {"via": via, "rf1": rf1, "rf3": rf3}


def test_rf1_topic_created_through_a_non_controller_has_leaders_on_all_three_brokers(cluster, spread_topics):
    topic = spread_topics["rf1"]
    desc = describe(cluster, spread_topics["via"], topic)
    assert sorted(desc) == list(range(6))
    for p, (leader, replicas, isr) in desc.items():
        assert replicas == [leader] and isr == [leader], (p, desc[p])
    per_broker = collections.Counter(leader for leader, _, _ in desc.values())
    assert set(per_broker) == {1, 2, 3}, f"leaders per broker: {dict(per_broker)}"


def test_rf3_topic_created_through_a_non_controller_has_three_distinct_replicas_per_partition(cluster, spread_topics):
    topic = spread_topics["rf3"]
    desc = describe(cluster, spread_topics["via"], topic)
    assert sorted(desc) == [0, 1, 2]
    for p, (leader, replicas, isr) in desc.items():
        assert sorted(replicas) == [1, 2, 3], (p, desc[p])
        assert leader == replicas[0], f"partition {p}: the leader is the first (preferred) replica: {desc[p]}"
        assert leader in isr and set(isr) <= set(replicas), (p, desc[p])
    leaders = sorted(leader for leader, _, _ in desc.values())
    assert leaders == [1, 2, 3], f"the 3 partitions' leaders are spread over the 3 brokers: {desc}"


def test_every_node_answers_the_same_leaders_replicas_and_epochs(cluster, spread_topics):
    for topic, count in ((spread_topics["rf1"], 6), (spread_topics["rf3"], 3)):
        common = wait_topic_everywhere(cluster, topic, count, timeout=10)
        tool = describe(cluster, cluster.node_ids[0], topic)
        assert {p: (v["leader"], v["replicas"]) for p, v in common.items()} == {
            p: (leader, replicas) for p, (leader, replicas, _) in tool.items()
        }
        assert all(v["epoch"] >= 0 and v["error"] == 0 for v in common.values()), common
    views = [cluster.metadata(i, []) for i in cluster.node_ids]
    assert len({v["cluster_id"] for v in views}) == 1 and views[0]["cluster_id"], [v["cluster_id"] for v in views]
    assert all(v["brokers"] == {n.node_id: n.bootstrap for n in cluster.nodes} for v in views), views
