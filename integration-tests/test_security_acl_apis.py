"""Kafka's authorization checks on the APIs beyond produce, fetch and groups (issue 25 item 5), the
same on Brook and Apache Kafka 4.4.

One SASL_PLAINTEXT broker (PLAIN) with StandardAuthorizer, configured as test_security_acl.py's
(`super.users=User:admin;User:ANONYMOUS`, `allow.everyone.if.no.acl.found=false`). Each refusal
is driven by the tool an operator would run — kafka-delete-records, kafka-consumer-groups
--delete-offsets, kafka-leader-election, kafka-transactions (describe / list / describe-producers
/ abort), kafka-metadata-quorum, kafka-configs --entity-type clients, the Java AdminClient's
describeTopics — logged in as a user without the ACL; the test asserts the exact error the tool
reports and that nothing changed, then grants the ACL with kafka-acls and sees it work.

Where the tool needs an ACL before it reaches the API under test (Metadata to find a leader:
DESCRIBE on the topic; FindCoordinator: DESCRIBE on the group), that ACL is granted first and the
test waits until it is in force, so the refusal asserted is the API's own. OffsetForLeaderEpoch has
no tool: a consumer sends it after a leader change, so it is sent over the wire as a SASL user.
"""

import json
import os
import tempfile
import time
from typing import Callable

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from harness import client_config, drivers, kafka_cli, paths, wire
from harness.broker import free_port
from harness.security import plain_login_files, start_plain_broker
from test_security_acl import ACL_COMMAND, AUTHORIZER, unique

USERS = {name: f"{name}-secret" for name in
         ("del", "odel", "epoch", "elect", "quorum", "quotas", "prod", "txd", "txl", "abort", "dtp")}
DEADLINE_S = 30

DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"
TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"

TOPIC_AUTHORIZATION_FAILED = 29


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = start_plain_broker(paths.target(), tmp_path_factory.mktemp("acl-apis"), free_port(2), USERS, AUTHORIZER)
    yield b
    b.stop()


@pytest.fixture(scope="module")
def logins(tmp_path_factory):
    return plain_login_files(tmp_path_factory.mktemp("acl-apis-clients"), USERS)


def acls(broker, logins, *args) -> str:
    return kafka_cli.run(ACL_COMMAND, "--bootstrap-server", broker.bootstrap, "--command-config",
                         logins["admin"], *args).stdout


def grant(broker, logins, user: str, *resource_and_ops) -> None:
    acls(broker, logins, "--add", "--allow-principal", f"User:{user}", *resource_and_ops)


def tool(broker, logins, user: str, main_class: str, *args, check: bool = False):
    """Run a Kafka tool as `user`; its CompletedProcess (stdout + stderr checked by the caller)."""
    return kafka_cli.run(main_class, "--bootstrap-server", broker.bootstrap, "--command-config", logins[user],
                         *args, check=check, timeout=90)


def said(proc) -> str:
    return proc.stdout + proc.stderr


def eventually(check: Callable[[], object], what: str):
    """Retry `check` until it returns without raising (ACLs reach Kafka's authorizer through its
    metadata log a moment after kafka-acls returns), then return its value."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            return check()
        except (AssertionError, drivers.DriverError, kafka_cli.CliError, KafkaException) as e:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: still failing after {DEADLINE_S} s: {e}") from e
            time.sleep(0.3)


def conf(logins, user: str) -> dict:
    return client_config.librdkafka(client_config.load(logins[user]))


def create_topic(broker, logins, topic: str, partitions: int = 1) -> None:
    drivers.run("confluent", "create-topic", broker.bootstrap, "--topic", topic, "--partitions", partitions,
                "--client-config", logins["admin"])


def produce(broker, logins, topic: str, n: int) -> None:
    records = [{"key": f"k{i}", "value": f"v{i}"} for i in range(n)]
    drivers.run("confluent", "produce", broker.bootstrap, "--topic", topic, "--client-config", logins["admin"],
                records=records, timeout=60)


def consume_all(broker, logins, topic: str, n: int) -> list:
    got = drivers.run("java", "consume", broker.bootstrap, "--topic", topic, "--partitions", "0",
                      "--from", "earliest", "--count", n, "--timeout-ms", 15000,
                      "--client-config", logins["admin"], timeout=60)
    return [r["value"] for r in got]


def earliest(broker, logins, topic: str) -> int:
    offsets = drivers.run("java", "offsets", broker.bootstrap, "--topic", topic, "--spec", "earliest",
                          "--client-config", logins["admin"])
    return offsets["0"]["offset"]


def sees_topic(broker, logins, user: str, topic: str) -> None:
    """The user's DESCRIBE on the topic is in force (the Java AdminClient describes it)."""
    drivers.run("java", "describe-topic", broker.bootstrap, "--topic", topic, "--client-config", logins[user])


# ---- DeleteRecords: DELETE on the topic ------------------------------------------------------------

def delete_records(broker, logins, user: str, topic: str, offset: int) -> str:
    spec = {"partitions": [{"topic": topic, "partition": 0, "offset": offset}], "version": 1}
    fd, path = tempfile.mkstemp(suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(spec, f)
    try:
        return said(tool(broker, logins, user, DELETE_RECORDS, "--offset-json-file", path))
    finally:
        os.unlink(path)


def test_delete_records_without_delete_on_the_topic_is_refused_and_the_records_stay(broker, logins):
    topic = unique("dr")
    create_topic(broker, logins, topic)
    produce(broker, logins, topic, 4)
    grant(broker, logins, "del", "--operation", "Describe", "--topic", topic)
    eventually(lambda: sees_topic(broker, logins, "del", topic), "DESCRIBE in force")

    out = delete_records(broker, logins, "del", topic, 2)
    assert (f"partition: {topic}-0\terror: org.apache.kafka.common.errors.TopicAuthorizationException: "
            "Topic authorization failed.") in out, out
    assert earliest(broker, logins, topic) == 0
    assert consume_all(broker, logins, topic, 4) == ["v0", "v1", "v2", "v3"]

    grant(broker, logins, "del", "--operation", "Delete", "--topic", topic)

    def deleted():
        out = delete_records(broker, logins, "del", topic, 2)
        assert f"partition: {topic}-0\tlow_watermark: 2" in out, out

    eventually(deleted, "delete-records after --operation Delete")
    assert earliest(broker, logins, topic) == 2


# ---- OffsetDelete: DELETE on the group, READ on the topic -------------------------------------------

def commit_offsets(broker, logins, group: str, topic: str, offset: int) -> None:
    consumer = Consumer(conf(logins, "admin") | {"bootstrap.servers": broker.bootstrap, "group.id": group,
                                                  "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def committed(broker, logins, group: str, topic: str) -> int:
    consumer = Consumer(conf(logins, "admin") | {"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        return consumer.committed([TopicPartition(topic, 0)], timeout=20)[0].offset
    finally:
        consumer.close()


def test_offset_delete_needs_delete_on_the_group_and_read_on_the_topic(broker, logins):
    topic, group = unique("od"), unique("g-od")
    create_topic(broker, logins, topic)
    produce(broker, logins, topic, 3)
    eventually(lambda: commit_offsets(broker, logins, group, topic, 3), "commit (the coordinator loads)")
    # READ on the group lets the tool find the coordinator (DESCRIBE), not delete.
    grant(broker, logins, "odel", "--operation", "Read", "--group", group)

    def delete_offsets():
        return said(tool(broker, logins, "odel", GROUPS, "--delete-offsets", "--group", group,
                         "--topic", f"{topic}:0"))

    def group_refused():
        out = delete_offsets()
        assert "Error: Group authorization failed." in out, out
        assert "Error: org.apache.kafka.common.errors.GroupAuthorizationException" in out, out

    eventually(group_refused, "GROUP_AUTHORIZATION_FAILED from OffsetDelete")
    assert committed(broker, logins, group, topic) == 3

    grant(broker, logins, "odel", "--operation", "Delete", "--group", group)

    def topic_refused():
        out = delete_offsets()
        assert ("Error: org.apache.kafka.common.errors.TopicAuthorizationException: "
                "Topic authorization failed.") in out, out

    eventually(topic_refused, "TOPIC_AUTHORIZATION_FAILED per partition")
    assert committed(broker, logins, group, topic) == 3

    grant(broker, logins, "odel", "--operation", "Read", "--topic", topic)

    def deleted():
        out = delete_offsets()
        assert "Successful" in out and "Error" not in out, out

    eventually(deleted, "delete-offsets after READ on the topic")
    assert committed(broker, logins, group, topic) < 0  # no committed offset any more


# ---- OffsetForLeaderEpoch: DESCRIBE on the topic, or CLUSTER_ACTION -------------------------------

def test_offset_for_leader_epoch_needs_describe_on_the_topic_or_cluster_action(broker, logins):
    topic = unique("ofle")
    create_topic(broker, logins, topic)
    produce(broker, logins, topic, 5)
    login = ("epoch", USERS["epoch"])

    refused = wire.offset_for_leader_epoch(broker.bootstrap, topic, {0: 0}, sasl_plain=login)
    assert refused[0] == {"error": TOPIC_AUTHORIZATION_FAILED, "leader_epoch": -1, "end_offset": -1}

    grant(broker, logins, "epoch", "--operation", "Describe", "--topic", topic)

    def answered():
        got = wire.offset_for_leader_epoch(broker.bootstrap, topic, {0: 0}, sasl_plain=login)
        assert got[0]["error"] == 0 and got[0]["end_offset"] == 5, got
        return got

    eventually(answered, "OffsetForLeaderEpoch after DESCRIBE")

    # A broker's ask (CLUSTER_ACTION on the cluster) covers every topic, described or not.
    other = unique("ofle-other")
    create_topic(broker, logins, other)
    produce(broker, logins, other, 2)
    assert wire.offset_for_leader_epoch(broker.bootstrap, other, {0: 0}, sasl_plain=login)[0]["error"] == \
        TOPIC_AUTHORIZATION_FAILED
    grant(broker, logins, "epoch", "--operation", "ClusterAction", "--cluster")

    def as_broker():
        got = wire.offset_for_leader_epoch(broker.bootstrap, other, {0: 0}, replica_id=1, sasl_plain=login)
        assert got[0]["error"] == 0 and got[0]["end_offset"] == 2, got

    eventually(as_broker, "OffsetForLeaderEpoch with CLUSTER_ACTION")


# ---- ElectLeaders: ALTER on the cluster ---------------------------------------------------------------

def test_leader_election_needs_alter_on_the_cluster(broker, logins):
    topic = unique("elect")
    create_topic(broker, logins, topic)

    def elect():
        return tool(broker, logins, "elect", ELECTION, "--election-type", "preferred", "--topic", topic,
                    "--partition", "0")

    # The tool prints this when electLeaders fails with ClusterAuthorizationException.
    refused = elect()
    assert refused.returncode != 0
    assert "Not authorized to perform leader election" in refused.stdout, said(refused)

    grant(broker, logins, "elect", "--operation", "Alter", "--cluster")

    def elected():
        done = elect()
        assert f"Valid replica already elected for partitions {topic}-0" in done.stdout, said(done)

    eventually(elected, "leader election after ALTER on the cluster")


# ---- DescribeQuorum: DESCRIBE on the cluster ---------------------------------------------------------

def test_describe_quorum_needs_describe_on_the_cluster(broker, logins):
    def status():
        return tool(broker, logins, "quorum", QUORUM, "describe", "--status")

    refused = status()
    assert refused.returncode != 0
    assert "ClusterAuthorizationException: Cluster authorization failed." in said(refused), said(refused)

    grant(broker, logins, "quorum", "--operation", "Describe", "--cluster")

    def described():
        done = status()
        assert done.returncode == 0 and "LeaderId:" in done.stdout, said(done)

    eventually(described, "describe --status after DESCRIBE on the cluster")


# ---- DescribeClientQuotas: DESCRIBE_CONFIGS on the cluster ---------------------------------------------

def test_describing_client_quotas_needs_describe_configs_on_the_cluster(broker, logins):
    def describe():
        return tool(broker, logins, "quotas", CONFIGS, "--describe", "--entity-type", "clients",
                    "--entity-name", "some-client")

    refused = describe()
    assert refused.returncode != 0
    assert "ClusterAuthorizationException: Cluster authorization failed." in said(refused), said(refused)

    grant(broker, logins, "quotas", "--operation", "DescribeConfigs", "--cluster")

    def described():
        done = describe()
        assert done.returncode == 0, said(done)
        assert "Exception" not in said(done), said(done)

    eventually(described, "describe client quotas after DESCRIBE_CONFIGS")


# ---- DescribeTopicPartitions: DESCRIBE on the topic, as Metadata ----------------------------------------

def test_describe_topics_needs_describe_on_each_topic(broker, logins):
    topic = unique("dtp")
    create_topic(broker, logins, topic, partitions=2)
    with pytest.raises(drivers.DriverError) as refused:
        sees_topic(broker, logins, "dtp", topic)
    assert "TopicAuthorizationException" in refused.value.stdout + refused.value.stderr
    grant(broker, logins, "dtp", "--operation", "Describe", "--topic", topic)
    eventually(lambda: sees_topic(broker, logins, "dtp", topic), "describeTopics after DESCRIBE")


# ---- transactions: DescribeProducers (READ topic), DescribeTransactions / ListTransactions
#      (DESCRIBE transactional id, topics filtered), WriteTxnMarkers (ALTER or CLUSTER_ACTION) -----------

class OpenTransaction:
    """A transaction the admin leaves open on partition 0 of `topic` (aborted at the end)."""

    def __init__(self, broker, logins, topic: str, tid: str):
        # Open for as long as a slow test takes: not aborted by the coordinator's timeout.
        self.producer = Producer(conf(logins, "admin") | {"bootstrap.servers": broker.bootstrap,
                                                          "transactional.id": tid,
                                                          "transaction.timeout.ms": 600000})
        self.producer.init_transactions(30)
        self.producer.begin_transaction()
        self.producer.produce(topic, value=b"open", partition=0)
        assert self.producer.flush(30) == 0

    def close(self):
        try:
            self.producer.abort_transaction(30)
        except Exception:  # already aborted by the test's `abort`: the producer is fenced or done
            pass


def table(out: str) -> list:
    lines = [line for line in out.splitlines() if line.strip() and not line.startswith(("[", "SLF4J"))]
    if not lines:
        return []
    header = lines[0].split()
    return [dict(zip(header, line.split() + [""] * (len(header) - len(line.split())))) for line in lines[1:]]


@pytest.fixture
def open_txn(broker, logins):
    topic, tid = unique("txa"), unique("tid")
    create_topic(broker, logins, topic)
    txn = OpenTransaction(broker, logins, topic, tid)
    yield topic, tid
    txn.close()


def producers_as(broker, logins, user: str, topic: str):
    return tool(broker, logins, user, TRANSACTIONS, "describe-producers", "--topic", topic, "--partition", "0")


def test_describe_producers_needs_read_on_the_topic(broker, logins, open_txn):
    topic, _ = open_txn
    grant(broker, logins, "prod", "--operation", "Describe", "--topic", topic)
    eventually(lambda: sees_topic(broker, logins, "prod", topic), "DESCRIBE in force")
    refused = producers_as(broker, logins, "prod", topic)
    assert refused.returncode != 0
    assert "TopicAuthorizationException: Topic authorization failed." in said(refused), said(refused)

    grant(broker, logins, "prod", "--operation", "Read", "--topic", topic)

    def described():
        done = producers_as(broker, logins, "prod", topic)
        assert done.returncode == 0, said(done)
        rows = table(done.stdout)
        assert len(rows) == 1 and rows[0]["CurrentTransactionStartOffset"] == "0", rows

    eventually(described, "describe-producers after READ")


def test_describe_transactions_needs_describe_on_the_id_and_hides_undescribable_topics(broker, logins, open_txn):
    topic, tid = open_txn

    def describe():
        return tool(broker, logins, "txd", TRANSACTIONS, "describe", "--transactional-id", tid)

    # The admin client asks FindCoordinator first (also DESCRIBE on the id): that is what refuses.
    refused = describe()
    assert refused.returncode != 0
    assert (f"FindCoordinator request for transactionalId `CoordinatorKey(idValue='{tid}', type=TRANSACTION)` "
            "failed due to authorization failure") in said(refused), said(refused)

    grant(broker, logins, "txd", "--operation", "Describe", "--transactional-id", tid)

    def described_without_topics():
        done = describe()
        assert done.returncode == 0, said(done)
        rows = table(done.stdout)
        assert len(rows) == 1 and rows[0]["TransactionalId"] == tid, rows
        assert rows[0]["TransactionState"] == "Ongoing" and rows[0]["TopicPartitions"] == "", rows

    eventually(described_without_topics, "describe after DESCRIBE on the id")

    grant(broker, logins, "txd", "--operation", "Describe", "--topic", topic)

    def described_with_topics():
        rows = table(describe().stdout)
        assert rows and rows[0]["TopicPartitions"] == f"{topic}-0", rows

    eventually(described_with_topics, "describe after DESCRIBE on the topic")


def test_list_transactions_shows_only_describable_ids(broker, logins, open_txn):
    _, tid = open_txn

    def listed():
        done = tool(broker, logins, "txl", TRANSACTIONS, "list")
        assert done.returncode == 0, said(done)
        return {row["TransactionalId"] for row in table(done.stdout)}

    assert tid not in listed()
    grant(broker, logins, "txl", "--operation", "Describe", "--transactional-id", tid)

    def shown():
        ids = listed()
        assert ids == {tid}, ids

    eventually(shown, "list after DESCRIBE on the id")


def test_aborting_a_transaction_needs_alter_on_the_cluster_and_leaves_it_open_when_refused(broker, logins, open_txn):
    topic, _ = open_txn
    # READ on the topic: the tool's DescribeProducers (to find the transaction) succeeds.
    grant(broker, logins, "abort", "--operation", "Read", "--topic", topic)
    eventually(lambda: table(producers_as(broker, logins, "abort", topic).stdout) or None, "READ in force")

    def abort():
        return tool(broker, logins, "abort", TRANSACTIONS, "abort", "--topic", topic, "--partition", "0",
                    "--start-offset", "0")

    refused = abort()
    assert refused.returncode != 0
    # The admin client's wording for WriteTxnMarkers' CLUSTER_AUTHORIZATION_FAILED.
    assert "failed due to cluster authorization error" in said(refused), said(refused)
    assert "WriteTxnMarkers request with AbortTransactionSpec(topicPartition=" in said(refused), said(refused)
    rows = table(producers_as(broker, logins, "admin", topic).stdout)
    assert rows and rows[0]["CurrentTransactionStartOffset"] == "0", rows

    grant(broker, logins, "abort", "--operation", "Alter", "--cluster")

    def aborted():
        done = abort()
        assert done.returncode == 0, said(done)

    eventually(aborted, "abort after ALTER on the cluster")
    rows = table(producers_as(broker, logins, "admin", topic).stdout)
    assert rows and rows[0]["CurrentTransactionStartOffset"] == "None", rows
