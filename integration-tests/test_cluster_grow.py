"""A cluster grown from 3 to 4 brokers and rebalanced with Kafka's own tools (issue #27 item 2:
"Grow 3 → 4 brokers and rebalance").

- A broker-only node (`process.roles=broker`, `Cluster.add_broker()`) joins the running
  3-voter cluster: every node's Metadata lists it at its address and the quorum shows it as an
  observer, not a voter.
- `kafka-reassign-partitions --generate --broker-list 1,2,3,4` proposes a plan that spreads an
  8-partition RF 2 topic over the four brokers (4 replicas and 2 preferred leaderships each);
  `--execute` runs it while an idempotent acks=all producer sends, `--verify` reports every
  partition completed and clears the throttles; every acknowledged record is read back once;
  after a preferred election broker 4 leads its two partitions, and `kafka-log-dirs --describe
  --broker-list 4` lists exactly the partitions it got, with the size of their segments on disk.
- A topic's replication factor is raised from 2 to 3 and another's lowered from 3 to 2 by
  reassignment: Metadata replicas and ISR, `kafka-topics --describe`'s ReplicationFactor, the
  batches on each replica's disk and the records read back.
- The broker-only node killed (SIGKILL) leaves the ISRs; records and a new topic made while it
  is down reach it when it restarts: it rejoins the ISR with the leader's batches and its
  Metadata lists the new topic.

One 3-node cluster for the module (conftest's `cluster`), grown to 4 by the first test that needs
broker 4. Also passes against Apache Kafka 4.4.
"""

import json

import pytest

from chaos import replicas as on_disk
from harness import kafka_cli
from harness.cluster import QUORUM_TOOL
from harness.cluster_scenarios import unique
from harness.reassign import REASSIGN_TOOL, plan_of, reassign, wait_verified
from harness.replication import PacedProducer, TOPICS_TOOL, assert_partitions_read_back, create_topic_assigned, \
    ensure_running, latest_offset, read_partition, wait_views

CLUSTER_OVERRIDES = {"min.insync.replicas": "2"}
ELECTION_TOOL = "org.apache.kafka.tools.LeaderElectionCommand"
LOG_DIRS_TOOL = "org.apache.kafka.tools.LogDirsCommand"
PARTITIONS = 8
RECORDS = 1200  # 10 ms apart: the producer runs for ~12 s, across the move


@pytest.fixture(scope="module")
def grown(cluster):
    """The module's cluster with broker-only node 4 added (once)."""
    if cluster.size == 3:
        cluster.add_broker()
    return cluster


@pytest.fixture(autouse=True)
def _all_running(cluster):
    ensure_running(cluster)


def assignment(plan: dict, topic: str, log_dir=lambda broker: "any") -> dict:
    """{partition: replicas} of `topic` in a reassignment JSON; each replica's log_dirs entry
    must be `log_dir(broker)`."""
    out = {}
    for entry in plan["partitions"]:
        assert entry["topic"] == topic, entry
        assert entry["log_dirs"] == [log_dir(b) for b in entry["replicas"]], entry
        out[entry["partition"]] = entry["replicas"]
    return out


def parse_generate(stdout: str) -> tuple:
    """(current, proposed) JSON documents of `--generate`'s two titled blocks."""
    lines = stdout.strip().splitlines()
    assert lines[0] == "Current partition replica assignment", stdout
    title = lines.index("Proposed partition reassignment configuration")
    assert lines[2] == "" and title == 3 and len(lines) == 5, stdout
    return json.loads(lines[1]), json.loads(lines[4])


def log_dirs_of(cluster, broker: int, topic: str) -> dict:
    """`kafka-log-dirs --describe --broker-list <broker> --topic-list <topic>`: checks the tool's
    two header lines and returns {logDir: {partition name: {"size", "offsetLag", "isFuture"}}}."""
    out = kafka_cli.run(LOG_DIRS_TOOL, "--bootstrap-server", cluster.bootstrap, "--describe",
                        "--broker-list", broker, "--topic-list", topic, timeout=60).stdout
    lines = out.strip().splitlines()
    assert lines[:2] == ["Querying brokers for log directories information",
                         f"Received log directory information from brokers {broker}"], out
    doc = json.loads(lines[2])
    assert doc["version"] == 1 and [b["broker"] for b in doc["brokers"]] == [broker], doc
    dirs = {}
    for d in doc["brokers"][0]["logDirs"]:
        assert d["error"] is None, d
        dirs[d["logDir"]] = {p["partition"]: {k: p[k] for k in ("size", "offsetLag", "isFuture")}
                             for p in d["partitions"]}
    return dirs


def wait_replica_dirs(cluster, topic: str, want: dict) -> None:
    """Until partition p of `topic` has a directory on exactly the brokers of `want[p]` (a
    replica moved away is deleted)."""
    dirs = {n: cluster.node(n).log_dirs for n in cluster.node_ids}

    def exact():
        holders = {p: sorted(n for n, d in dirs.items() if (d / f"{topic}-{p}").is_dir()) for p in want}
        return holders == {p: sorted(r) for p, r in want.items()} or holders
    cluster.wait_for(lambda: exact() is True, 60, lambda: f"{topic}'s replica directories on {want}: {exact()}")


def segment_bytes(log_dir, topic: str, partition: int) -> int:
    return sum(f.stat().st_size for f in (log_dir / f"{topic}-{partition}").glob("*.log"))


def produce_and_read_back(cluster, topic: str, partitions: int, per_partition: int, tmp_path, tag: str) -> dict:
    """Sends `per_partition` records to each partition (idempotent, acks=all) and returns
    {partition: [values]} in send order, every one acknowledged at offsets 0.."""
    records = [{"key": f"k-{i}", "value": f"{tag}-{i:04d}", "partition": i % partitions}
               for i in range(per_partition * partitions)]
    producer = PacedProducer("java", cluster.bootstrap, topic, records, "--acks", "all", "--idempotent",
                             "--interval-ms", 0, tmp_dir=tmp_path)
    results = producer.wait(90)
    assert [r for r in results if "error" in r] == [] and len(results) == len(records), results[:5]
    by_partition = {p: [r["value"] for r in records if r["partition"] == p] for p in range(partitions)}
    for p in range(partitions):
        assert sorted(r["offset"] for r in results if r["partition"] == p) == list(range(per_partition))
    return by_partition


def test_a_broker_only_node_joins_and_every_node_lists_it(grown):
    node4 = grown.node(4)
    assert node4.settings()["process.roles"] == "broker"
    expected = {i: grown.bootstrap_of(i) for i in (1, 2, 3, 4)}
    for n in (1, 2, 3, 4):
        assert grown.metadata(n, [])["brokers"] == expected, f"node {n}'s Metadata"
    status = grown.wait_for(lambda: (s := grown.describe_quorum(1)).get("CurrentObservers") == [4] and s, 30,
                            "the quorum lists node 4 as its one observer")
    assert status["CurrentVoters"] == [1, 2, 3], status
    assert grown.quorum_leader() in (1, 2, 3)

    # Asked of the broker-only node, --replication shows the leader's view of every member
    # (Kafka's brokers forward DescribeQuorum to the controller).
    def replication():
        out = kafka_cli.run(QUORUM_TOOL, "--bootstrap-server", grown.bootstrap_of(4), "describe", "--replication",
                            timeout=60).stdout
        rows = [line.split() for line in out.splitlines()[1:] if line.strip()]
        by_node = {int(r[0]): {"end": int(r[2]), "lag": int(r[3]), "status": r[-1]} for r in rows}
        ok = sorted(by_node) == [1, 2, 3, 4] and by_node[4]["status"] == "Observer" and \
            all(v["end"] >= 0 and v["lag"] >= 0 for v in by_node.values())
        return by_node if ok else None
    rows = grown.wait_for(replication, 30, "every member with its log end offset, asked of node 4", interval=1)
    assert sorted(v["status"] for v in rows.values()) == ["Follower", "Follower", "Leader", "Observer"], rows


def test_generate_proposes_a_plan_over_four_brokers_and_execute_moves_replicas_onto_the_new_one(grown, tmp_path):
    topic = unique("grow")
    before = {p: [(p % 3) + 1, ((p + 1) % 3) + 1] for p in range(PARTITIONS)}
    create_topic_assigned(grown, 1, topic, [before[p] for p in range(PARTITIONS)])
    records = [{"key": f"k-{i}", "value": f"v-{i:05d}", "partition": i % PARTITIONS} for i in range(RECORDS)]
    producer = PacedProducer("java", grown.bootstrap, topic, records, "--acks", "all", "--idempotent",
                             "--interval-ms", 10, "--delivery-timeout-ms", 120_000, tmp_dir=tmp_path)
    try:
        producer.wait_results(200, 60)
        to_move = tmp_path / "topics-to-move.json"
        to_move.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
        out = kafka_cli.run(REASSIGN_TOOL, "--bootstrap-server", grown.bootstrap, "--generate",
                            "--topics-to-move-json-file", to_move, "--broker-list", "1,2,3,4", timeout=90).stdout
        current, proposed_doc = parse_generate(out)
        # The current assignment names the directory each replica lives in; the proposal, "any".
        assert assignment(current, topic, lambda b: str(grown.node(b).log_dirs)) == before, out
        proposed = assignment(proposed_doc, topic)
        assert sorted(proposed) == list(range(PARTITIONS)), out
        assert all(len(set(r)) == 2 and set(r) <= {1, 2, 3, 4} for r in proposed.values()), out
        # Kafka's rack-unaware assignment: each broker holds 4 replicas and leads 2 partitions.
        for b in (1, 2, 3, 4):
            assert sum(b in r for r in proposed.values()) == 4, (b, proposed)
            assert sum(r[0] == b for r in proposed.values()) == 2, (b, proposed)

        plan = plan_of(topic, proposed)
        out = reassign(grown, "execute", plan, tmp_path).stdout
        assert "Current partition replica assignment" in out, out
        started = [line for line in out.splitlines() if line.startswith("Successfully started partition reassignment")]
        assert len(started) == 1 and started[0].startswith("Successfully started partition reassignments for "), out
        assert sorted(started[0].split(" for ", 1)[1].split(",")) == sorted(f"{topic}-{p}" for p in range(PARTITIONS))

        verify_out = wait_verified(grown, plan, tmp_path)
        results = producer.wait(120)
    finally:
        producer.kill()
    assert "Status of partition reassignment:" in verify_out
    assert "Clearing broker-level throttles on brokers 1,2,3,4" in verify_out.splitlines(), verify_out
    assert f"Clearing topic-level throttles on topic {topic}" in verify_out.splitlines(), verify_out
    assert [r for r in results if "error" in r] == [], [r for r in results if "error" in r][:5]
    assert len(results) == RECORDS

    view = wait_views(grown, topic, lambda v: {p: s["replicas"] for p, s in v.items()} == proposed
                      and all(sorted(s["isr"]) == sorted(proposed[p]) for p, s in v.items()), 60,
                      f"{topic}: replicas {proposed} and full ISRs on every node")

    # Every acknowledged record once, at its offset, in send order, per partition.
    assert_partitions_read_back("java", grown.bootstrap, topic, records, results)

    # The preferred leaders take over: broker 4 leads the two partitions the plan put it first on.
    election_json = tmp_path / "election.json"
    election_json.write_text(json.dumps({"partitions": [{"topic": topic, "partition": p} for p in range(PARTITIONS)]}))
    out = kafka_cli.run(ELECTION_TOOL, "--bootstrap-server", grown.bootstrap, "--election-type", "preferred",
                        "--path-to-json-file", election_json, timeout=90).stdout
    reported = []
    for line in out.splitlines():
        for prefix in ("Successfully completed leader election (PREFERRED) for partitions ",
                       "Valid replica already elected for partitions "):
            if line.startswith(prefix):
                reported += line[len(prefix):].split(", ")
    assert sorted(reported) == sorted(f"{topic}-{p}" for p in range(PARTITIONS)), out
    view = wait_views(grown, topic, lambda v: all(s["leader"] == proposed[p][0] for p, s in v.items()), 30,
                      f"{topic} led by its preferred replicas")
    assert sorted(p for p, s in view.items() if s["leader"] == 4) == sorted(p for p, r in proposed.items() if r[0] == 4)

    # The replicas hold the same batches; broker 4's log dir describes what it got, at its size on disk.
    hws = {p: latest_offset(grown, proposed[p][0], topic, p) for p in range(PARTITIONS)}
    assert sum(hws.values()) == RECORDS, hws
    wait_replica_dirs(grown, topic, proposed)
    compared = on_disk.compare({n: grown.node(n).log_dirs for n in (1, 2, 3, 4)}, topic, hws)
    assert compared["mismatches"] == [] and compared["replicas_compared"] == 2 * PARTITIONS, compared
    node4 = grown.node(4)
    got = sorted(p for p, r in proposed.items() if 4 in r)
    dirs = log_dirs_of(grown, 4, topic)
    assert list(dirs) == [str(node4.log_dirs)], dirs
    described = dirs[str(node4.log_dirs)]
    assert sorted(described) == sorted(f"{topic}-{p}" for p in got), described
    for p in got:
        entry = described[f"{topic}-{p}"]
        assert entry["size"] > 0 and entry["size"] == segment_bytes(node4.log_dirs, topic, p), (p, entry)
        assert entry["offsetLag"] == 0 and entry["isFuture"] is False, (p, entry)


def test_replication_factors_are_raised_and_lowered_by_reassignment(grown, tmp_path):
    raised, lowered = unique("rf-up"), unique("rf-down")
    create_topic_assigned(grown, 1, raised, [[1, 2], [2, 3]])
    create_topic_assigned(grown, 1, lowered, [[4, 1, 2], [3, 4, 1]])
    sent = {raised: produce_and_read_back(grown, raised, 2, 50, tmp_path, "up"),
            lowered: produce_and_read_back(grown, lowered, 2, 50, tmp_path, "down")}
    targets = {raised: {0: [1, 2, 4], 1: [2, 3, 4]}, lowered: {0: [4, 1], 1: [3, 4]}}
    plan = {"version": 1, "partitions": plan_of(raised, targets[raised])["partitions"]
            + plan_of(lowered, targets[lowered])["partitions"]}
    out = reassign(grown, "execute", plan, tmp_path).stdout
    assert "Successfully started partition reassignments for " in out, out
    wait_verified(grown, plan, tmp_path)

    for topic, rf in ((raised, 3), (lowered, 2)):
        want = targets[topic]
        view = wait_views(grown, topic, lambda v: {p: s["replicas"] for p, s in v.items()} == want
                          and all(sorted(s["isr"]) == sorted(want[p]) for p, s in v.items()), 60,
                          f"{topic}: replicas and ISR {want} on every node")
        assert all(s["leader"] in want[p] for p, s in view.items()), view
        described = kafka_cli.parse_topic_description(kafka_cli.run(
            TOPICS_TOOL, "--bootstrap-server", grown.bootstrap, "--describe", "--topic", topic, timeout=60).stdout)
        assert described["header"]["ReplicationFactor"] == str(rf), described
        for p in (0, 1):
            row = described["partitions"][p]
            assert row["Replicas"] == ",".join(map(str, want[p])), row
            assert sorted(kafka_cli.ids(row["Isr"])) == sorted(want[p]), row
            assert read_partition("java", grown.bootstrap, topic, p, 50) == list(enumerate(sent[topic][p]))
        hws = {p: latest_offset(grown, view[p]["leader"], topic, p) for p in (0, 1)}
        assert hws == {0: 50, 1: 50}
        wait_replica_dirs(grown, topic, want)
        compared = on_disk.compare({n: grown.node(n).log_dirs for n in (1, 2, 3, 4)}, topic, hws)
        assert compared["mismatches"] == [] and compared["replicas_compared"] == 2 * rf, compared


def test_the_broker_only_node_killed_and_restarted_catches_up_on_records_and_metadata(grown, tmp_path):
    topic, created_while_down = unique("rejoin"), unique("while-down")
    create_topic_assigned(grown, 1, topic, [[1, 4, 2]])
    first = produce_and_read_back(grown, topic, 1, 100, tmp_path, "before")[0]
    node4 = grown.node(4)
    node4.kill()
    wait_views(grown, topic, lambda v: sorted(v[0]["isr"]) == [1, 2] and v[0]["leader"] == 1, 60,
               f"{topic}-0: broker 4 out of the ISR", node_ids=[1, 2, 3])
    records = [{"key": f"k-{i}", "value": f"during-{i:04d}", "partition": 0} for i in range(100)]
    producer = PacedProducer("java", grown.bootstrap_of(1), topic, records, "--acks", "all", "--idempotent",
                             "--interval-ms", 0, tmp_dir=tmp_path)
    results = producer.wait(90)
    assert sorted(r.get("offset", -1) for r in results) == list(range(100, 200)), results[:5]
    create_topic_assigned(grown, 1, created_while_down, [[2, 3]])

    node4.start()
    view = wait_views(grown, topic, lambda v: v[0]["replicas"] == [1, 4, 2] and sorted(v[0]["isr"]) == [1, 2, 4], 60,
                      f"{topic}-0: broker 4 back in the ISR")
    assert view[0]["leader"] == 1
    assert grown.metadata(4, [created_while_down])["topics"][created_while_down]["partitions"][0]["replicas"] == [2, 3]
    assert latest_offset(grown, 1, topic) == 200
    compared = on_disk.compare({n: grown.node(n).log_dirs for n in (1, 2, 4)}, topic, {0: 200})
    assert compared["mismatches"] == [] and compared["replicas_compared"] == 3, compared
    assert read_partition("java", grown.bootstrap, topic, 0, 200) == \
        list(enumerate(first + [r["value"] for r in records]))
