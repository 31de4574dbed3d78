"""Eligible leader replicas (KIP-966, issue #27 item 4 and its ELR test), as Kafka 4.1+ runs them
with `eligible.leader.replicas.version=1` (what a cluster formatted for 4.4 finalizes).

A topic RF 3 with min.insync.replicas=2 on brokers [4, 5, X] (4 and 5 broker-only nodes added to
the module's 3-voter cluster, X a voter that does not lead the quorum: stopping the three keeps
the metadata quorum alive, which records every step). Keyed acks=all records are written; then
the leader, the next leader and the last ISR member are stopped one after the other, and
`kafka-topics --describe` (DescribeTopicPartitions) shows at each step:

    stop 4: Leader 5, Isr 5,X, Elr -,   LastKnownElr -     (ISR at min ISR: no ELR)
    stop 5: Leader X, Isr X,   Elr 5,   LastKnownElr -     (below min ISR: 5 is eligible)
    stop X: Leader none, Isr -, Elr 5,X, LastKnownElr X    (the ISR empties, X the last leader)

Broker 5 restarts and leads from the ELR (Isr 5, Elr X) although unclean leader election is off;
X and 4 restart and rejoin, the ELR empties, and every acknowledged record is read back with its
key, value and offset.

The stops are clean (SIGTERM, a controlled shutdown): KIP-966 counts on the high watermark not
moving while the ISR is below min ISR, so an ELR member holds every committed record, unless its
own log lost an unflushed tail. A broker that restarts without a clean-shutdown record (SIGKILL,
power loss: Kafka's `.kafka_cleanshutdown`, whose epoch goes in the registration as
PreviousBrokerEpoch) is therefore taken out of every ELR when it registers, and would not lead
here. The clean path is the one that shows an ELR member leading without an unclean election;
the second test shows the other: broker 5 killed with SIGKILL is fenced into the ELR, but when
it restarts it leaves the ELR and the partition waits for X, the member that stopped cleanly.

The third test is what lies beyond the ELR: an unclean election and the recovery that follows
it (KIP-704's leader recovery state). A topic on [4, 5] (min ISR 1): 5 stops, 4 alone
acknowledges more records, then 4 stops too (Isr -, Elr 4, LastKnownElr 4). Broker 5 restarts,
but is in neither ISR nor ELR, so the partition stays leaderless until `kafka-leader-election
--election-type unclean` makes 5 lead with Isr 5 (the controller marks its leader RECOVERING:
the ISR may not grow until the leader reports RECOVERED, which its next AlterPartition does).
Records written to 5 take the offsets of those only 4 had; 4 restarts, truncates its log to
the new leader's and rejoins (Isr 4,5). Read back through both leaders (5, then 4 after a
preferred election): the first batch and the unclean leader's batch at their offsets, the
records only 4 had gone, as Kafka loses them. The RECOVERING state itself is in the quorum's
records only (Kafka's Metadata and DescribeTopicPartitions do not carry it; on Kafka
`kafka-metadata-shell` shows it, Brook's metadata log is its own), so the controller's rules
for it are raft/src's unit tests.

One cluster for the module; also passes against Apache Kafka 4.4 (BROOK_TEST_TARGET=kafka).
"""

import pytest

from harness import kafka_cli
from harness.cluster import wait_for
from harness.cluster_scenarios import unique
from harness.drivers import run
from harness.replication import (TOPICS_TOOL, create_topic_assigned, elect_leaders, ensure_running, latest_offset,
                                 non_quorum_leaders)

STEP_S = 60
RECORDS = 20


@pytest.fixture(scope="module")
def grown(cluster):
    """The module's cluster with broker-only nodes 4 and 5 (added once)."""
    while cluster.size < 5:
        cluster.add_broker()
    return cluster


def describe(cluster, node_id: int, topic: str) -> dict:
    """Partition 0 as `kafka-topics --describe` prints it, asked of node `node_id`."""
    out = kafka_cli.run(TOPICS_TOOL, "--bootstrap-server", cluster.bootstrap_of(node_id), "--describe",
                        "--topic", topic).stdout
    p = kafka_cli.parse_topic_description(out)["partitions"][0]
    return {"leader": p["Leader"], "isr": sorted(kafka_cli.ids(p["Isr"])), "elr": sorted(kafka_cli.ids(p["Elr"])),
            "last_known_elr": kafka_cli.ids(p["LastKnownElr"])}


def wait_described(cluster, node_id: int, topic: str, leader, isr, elr, last_known_elr) -> dict:
    want = {"leader": str(leader), "isr": sorted(isr), "elr": sorted(elr), "last_known_elr": last_known_elr}
    seen = {}

    def matches():
        seen["now"] = describe(cluster, node_id, topic)
        return seen["now"] == want

    wait_for(matches, STEP_S, lambda: f"{topic} as {want}; described: {seen.get('now')}", interval=0.5)
    return seen["now"]


def produce(cluster, node_ids, topic: str, first: int, at: int = None) -> list:
    """Records k{first}.. / v{first}.., acknowledged (acks=all) at offsets `at`.. (default `first`)."""
    at = first if at is None else at
    records = [{"key": f"k{i}", "value": f"v{i}", "partition": 0} for i in range(first, first + RECORDS)]
    acks = run("franz", "produce", ",".join(cluster.bootstrap_of(n) for n in node_ids), "--topic", topic,
               "--acks", "all", records=records)
    assert [a["offset"] for a in acks] == list(range(at, at + RECORDS)), acks
    return records


def first_replica_stopped(cluster, prefix: str):
    """A min-ISR-2 topic on replicas [4, 5, x] (x a broker that is not the quorum's leader) with
    one batch acknowledged, then broker 4 stopped: 5 leads with ISR [5, x]. Returns x, a voter
    other than x (to describe through while x is down), the topic and the records sent."""
    ensure_running(cluster)
    x = non_quorum_leaders(cluster)[0]
    other_voter = next(n for n in (1, 2, 3) if n != x)
    topic = unique(prefix)
    create_topic_assigned(cluster, x, topic, [[4, 5, x]], {"min.insync.replicas": 2})
    sent = produce(cluster, [4, 5, x], topic, 0)
    cluster.node(4).stop()
    wait_described(cluster, x, topic, 5, [5, x], [], [])
    return x, other_voter, topic, sent


def assert_reads_back(cluster, topic: str, sent: list, bootstrap: str = None) -> None:
    """Every acknowledged record of partition 0 at its offset, with its key and value."""
    got = run("franz", "consume", bootstrap or cluster.bootstrap, "--topic", topic, "--count", len(sent),
              "--partitions", 0, "--from", "earliest", "--timeout-ms", 30000, timeout=90)
    assert [(r["offset"], r["key"], r["value"]) for r in got] == \
        [(i, s["key"], s["value"]) for i, s in enumerate(sent)]


@pytest.mark.timeout(420)
def test_an_elr_member_leads_again_after_the_isr_emptied_without_an_unclean_election(grown):
    cluster = grown
    x, other_voter, topic, sent = first_replica_stopped(cluster, "t-elr")
    sent += produce(cluster, [5, x], topic, RECORDS)

    cluster.node(5).stop()
    wait_described(cluster, x, topic, x, [x], [5], [])

    cluster.node(x).stop()
    wait_described(cluster, other_voter, topic, "none", [], [5, x], [x])

    cluster.node(5).start()
    wait_described(cluster, other_voter, topic, 5, [5], [x], [])

    cluster.node(x).start()
    cluster.node(4).start()
    wait_described(cluster, other_voter, topic, 5, [4, 5, x], [], [])

    assert_reads_back(cluster, topic, sent)


@pytest.mark.timeout(420)
def test_a_member_killed_uncleanly_leaves_the_elr_when_it_returns_and_the_clean_one_leads(grown):
    cluster = grown
    x, other_voter, topic, sent = first_replica_stopped(cluster, "t-elr-kill")
    cluster.node(5).kill()  # SIGKILL: fenced when its session lapses, no clean-shutdown record
    wait_described(cluster, x, topic, x, [x], [5], [])
    cluster.node(x).stop()
    wait_described(cluster, other_voter, topic, "none", [], [5, x], [x])

    cluster.node(5).start()
    cluster.wait_registered(STEP_S, [n for n in cluster.node_ids if n not in (4, x)])
    # Registered again after an unclean shutdown: out of the ELR, so it may not lead.
    wait_described(cluster, other_voter, topic, "none", [], [x], [x])

    cluster.node(x).start()
    wait_described(cluster, other_voter, topic, x, [5, x], [], [])
    cluster.node(4).start()
    wait_described(cluster, other_voter, topic, x, [4, 5, x], [], [])
    assert_reads_back(cluster, topic, sent)


@pytest.mark.timeout(420)
def test_an_unclean_election_leads_from_outside_isr_and_elr_and_the_records_it_lacked_are_lost(grown):
    cluster = grown
    ensure_running(cluster)
    voter = non_quorum_leaders(cluster)[0]  # describes and elects; never stopped here
    topic = unique("t-unclean")
    create_topic_assigned(cluster, voter, topic, [[4, 5]])
    kept = produce(cluster, [4, 5], topic, 0)
    cluster.node(5).stop()
    wait_described(cluster, voter, topic, 4, [4], [], [])
    produce(cluster, [4], topic, RECORDS)  # only 4 has these
    cluster.node(4).stop()
    wait_described(cluster, voter, topic, "none", [], [4], [4])

    cluster.node(5).start()
    cluster.wait_registered(STEP_S, [n for n in cluster.node_ids if n != 4])
    # Out of ISR and ELR, and unclean leader election is off for the topic: no leader.
    wait_described(cluster, voter, topic, "none", [], [4], [4])
    out = elect_leaders(cluster, voter, "UNCLEAN", topic).stdout
    assert f"Successfully completed leader election (UNCLEAN) for partitions {topic}-0" in out, out
    wait_described(cluster, voter, topic, 5, [5], [], [])
    kept += produce(cluster, [5], topic, 2 * RECORDS, at=RECORDS)

    # 4 truncates to the unclean leader's log and rejoins: the ISR grows once 5 has recovered.
    cluster.node(4).start()
    wait_described(cluster, voter, topic, 5, [4, 5], [], [])
    assert_reads_back(cluster, topic, kept, cluster.bootstrap_of(5))
    assert latest_offset(cluster, 5, topic) == len(kept)
    out = elect_leaders(cluster, voter, "PREFERRED", topic).stdout
    assert f"Successfully completed leader election (PREFERRED) for partitions {topic}-0" in out, out
    wait_described(cluster, voter, topic, 4, [4, 5], [], [])
    assert_reads_back(cluster, topic, kept, cluster.bootstrap_of(4))
    assert latest_offset(cluster, 4, topic) == len(kept), "4 kept records past the unclean leader's log"
