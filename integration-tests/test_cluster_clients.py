"""Every client against a 3-node cluster (issue #10), bootstrapping from ONE node only:

* 1,000 keyed records produced to a 6-partition RF=1 topic whose leaders sit on all three
  brokers come back (by assignment, read through another single node) each once, at their
  produced partition and offset, in per-partition produce order, each key in one partition;
* consumer groups whose coordinators sit on the three different brokers (found with
  FindCoordinator, asked of every node) consume part of a topic, commit, stop; a new member of
  each group resumes exactly after the committed offsets: no loss, no re-delivery.

Clients: java, confluent, kcat, franz, kafka_python, kafkajs (kcat's group members are `kcat -G`,
harness/kcat_group.py). One cluster for the module; also passes against Apache Kafka.
"""

import concurrent.futures
import itertools

import pytest
from confluent_kafka import Producer

from harness import wire
from harness.cluster import wait_for
from harness.cluster_scenarios import create_topic_via, keyed_records, unique
from harness.drivers import CLIENTS, run
from harness.kcat_group import KcatGroupMember
from harness.members import GroupMember, committed

GROUP_CLIENTS = ["java", "confluent", "kcat", "franz", "kafka_python", "kafkajs"]
PARTITIONS = 6
RECORDS = 1000
GROUP_PER_PARTITION = 60
FIRST_PART = 150  # of GROUP_PER_PARTITION * PARTITIONS, read by each group's first member
DEADLINE_S = 60


def other_node(cluster, node_id: int) -> int:
    return node_id % cluster.size + 1


def leaders(partitions: dict) -> dict:
    return {p: v["leader"] for p, v in partitions.items()}


@pytest.mark.parametrize("client", CLIENTS)
def test_keyed_records_on_leaders_on_three_brokers_come_back_once_in_partition_order(cluster, client):
    index = CLIENTS.index(client)
    produce_via = index % cluster.size + 1
    consume_via = other_node(cluster, produce_via)
    topic = unique(f"t-keyed-{client}")
    parts = create_topic_via(cluster, consume_via, topic, PARTITIONS)
    assert set(leaders(parts).values()) == {1, 2, 3}, f"leaders {leaders(parts)}"

    records = keyed_records(RECORDS, client)
    produced = run(client, "produce", cluster.bootstrap_of(produce_via), "--topic", topic, "--acks", "all",
                   records=records, timeout=600)
    assert len(produced) == RECORDS
    consumed = run(client, "consume", cluster.bootstrap_of(consume_via), "--topic", topic, "--count", RECORDS,
                   "--from", "earliest", "--timeout-ms", DEADLINE_S * 1000, timeout=DEADLINE_S + 60)
    assert len(consumed) == RECORDS, f"read {len(consumed)} of {RECORDS}"

    by_value = {r["value"]: r for r in consumed}
    assert len(by_value) == RECORDS, "a record came back twice"
    for sent, ack in zip(records, produced):
        got = by_value[sent["value"]]
        assert (got["key"], got["headers"]) == (sent["key"], sent["headers"])
        assert (got["partition"], got["offset"]) == (ack["partition"], ack["offset"]), sent["value"]
    key_partitions = {}
    for r in consumed:
        key_partitions.setdefault(r["key"], set()).add(r["partition"])
    assert all(len(ps) == 1 for ps in key_partitions.values()), key_partitions
    for p in range(PARTITIONS):
        in_p = [r for r in consumed if r["partition"] == p]
        assert [r["offset"] for r in in_p] == list(range(len(in_p))), f"partition {p}: offsets not 0..n-1"
        seqs = [int(r["value"].split("-")[1]) for r in in_p]
        assert seqs == sorted(seqs), f"partition {p} out of produce order"
    used_leaders = {parts[r["partition"]]["leader"] for r in consumed}
    assert used_leaders == {1, 2, 3}, f"records landed only on brokers {used_leaders}"


# -- consumer groups with coordinators on every broker ------------------------------------------

@pytest.fixture(scope="module")
def group_topic(cluster):
    """A 6-partition RF=1 topic with leaders on all three brokers, GROUP_PER_PARTITION records in
    each partition (values `g-P-I`); returns (topic, values sent per partition)."""
    topic = unique("t-groups")
    parts = create_topic_via(cluster, 1, topic, PARTITIONS)
    assert set(leaders(parts).values()) == {1, 2, 3}, f"leaders {leaders(parts)}"
    producer = Producer({"bootstrap.servers": cluster.bootstrap_of(2), "linger.ms": 5, "acks": "all"})
    sent = {p: [f"g-{p}-{i}" for i in range(GROUP_PER_PARTITION)] for p in range(PARTITIONS)}
    for p, values in sent.items():
        for v in values:
            producer.produce(topic, value=v.encode(), key=f"k{p}".encode(), partition=p)
    assert producer.flush(30) == 0
    return topic, sent


def coordinator(cluster, group: str):
    """The group's coordinator if every node names the same one, else None (still loading)."""
    answers = [wire.find_coordinator(cluster.bootstrap_of(i), group) for i in cluster.node_ids]
    ids = {a["node_id"] for a in answers if a["error"] == 0}
    return ids.pop() if len(ids) == 1 and all(a["error"] == 0 for a in answers) else None


def groups_on_each_coordinator(cluster, prefix: str) -> dict:
    """{coordinator node id: group id} for fresh group ids, one per node."""
    found = {}
    names = (f"{prefix}-{i}" for i in itertools.count())

    def probe():
        while len(found) < cluster.size:
            name = next(names)
            node = coordinator(cluster, name)
            if node is None:
                return None  # the offsets topic is being created or loaded: ask again later
            found.setdefault(node, name)
        return found

    return wait_for(probe, DEADLINE_S, lambda: f"groups with coordinators on every node, so far {found}",
                    interval=0.3)


def start_member(client: str, bootstrap: str, group: str, topic: str, count: int):
    if client == "kcat":
        return KcatGroupMember(bootstrap, group, topic, count=count, name=f"kcat-{group}")
    return GroupMember(client, bootstrap, group, topic, "--count", count, "--timeout-ms", DEADLINE_S * 1000,
                       name=f"{client}-{group}")


def run_members(client: str, cluster, topic: str, groups: dict, count: int) -> dict:
    """One member per group, all at once, each bootstrapped from a node other than its group's
    coordinator, each reading `count` records then closing; {node: member}."""
    members = {node: start_member(client, cluster.bootstrap_of(other_node(cluster, node)), group, topic, count)
               for node, group in groups.items()}
    try:
        with concurrent.futures.ThreadPoolExecutor(len(members)) as pool:
            list(pool.map(lambda m: m.wait(DEADLINE_S * 2), members.values()))
    finally:
        for m in members.values():
            if m.alive:
                m.kill()
    return members


@pytest.mark.parametrize("client", GROUP_CLIENTS)
def test_groups_coordinated_by_each_broker_commit_and_a_new_member_resumes_exactly_after(cluster, group_topic, client):
    topic, sent = group_topic
    total = GROUP_PER_PARTITION * PARTITIONS
    groups = groups_on_each_coordinator(cluster, unique(f"g-{client}"))
    assert sorted(groups) == [1, 2, 3]

    first = run_members(client, cluster, topic, groups, FIRST_PART)
    resume_at = {}
    for node, member in first.items():
        group = groups[node]
        got = member.records
        assert len(got) == FIRST_PART and len({(r["partition"], r["offset"]) for r in got}) == FIRST_PART, \
            f"group {group}: first member read {len(got)} records, {len(set((r['partition'], r['offset']) for r in got))} distinct"
        last = {}
        for r in got:
            assert r["value"] == sent[r["partition"]][r["offset"]]
            last[r["partition"]] = max(last.get(r["partition"], -1), r["offset"])
        for p, offset in last.items():  # each partition was read from 0 without gaps
            assert sorted(r["offset"] for r in got if r["partition"] == p) == list(range(offset + 1))
        expected = {p: last.get(p, -1) + 1 for p in range(PARTITIONS)}
        # What was read is exactly what is committed (nothing for unread partitions).
        wait_for(lambda: {p: max(o, 0) for p, o in committed(cluster.bootstrap, group, topic, PARTITIONS).items()}
                 == expected, 10, lambda: f"group {group} committed {expected}, has "
                 f"{committed(cluster.bootstrap, group, topic, PARTITIONS)}")
        assert coordinator(cluster, group) == node, f"group {group} moved off node {node}"
        resume_at[node] = expected

    rest = run_members(client, cluster, topic, groups, total - FIRST_PART)
    for node, member in rest.items():
        group = groups[node]
        for p in range(PARTITIONS):
            offsets = [r["offset"] for r in member.records if r["partition"] == p]
            assert offsets == list(range(resume_at[node][p], GROUP_PER_PARTITION)), \
                f"group {group} (coordinator {node}), partition {p}: resumed at {offsets[:1]}, " \
                f"committed {resume_at[node][p]}"
        both = [(r["partition"], r["value"]) for r in first[node].records + member.records]
        assert sorted(both) == sorted((p, v) for p, vs in sent.items() for v in vs), \
            f"group {group}: not every record exactly once"
