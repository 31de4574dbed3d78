"""A 3-node cluster with Kafka's StandardAuthorizer on (issue 25 item 5), the same on Brook and
Apache Kafka 4.4.

Each node serves a PLAINTEXT listener, the inter-broker one (`inter.broker.listener.name`), and a
SASL_PLAINTEXT (PLAIN) listener for clients. On PLAINTEXT the brokers' principal is User:ANONYMOUS,
which `super.users` lists beside the admin, as a Kafka operator configures it: replication,
transaction markers and the controllers keep working while clients need ACLs.

- A SASL user granted `--producer` / `--consumer` produces with acks=all to a 3-replica topic and
  reads it back through the cluster; every replica stays in the ISR.
- The same user has no CLUSTER_ACTION: a follower Fetch it sends (replica id of a real follower)
  is refused per partition with TOPIC_AUTHORIZATION_FAILED, and WriteTxnMarkers (kafka-transactions
  abort) with ClusterAuthorizationException; both are broker-only requests.
"""

import pytest

from harness import drivers, kafka_cli, paths, wire
from harness.cluster import Cluster, distinct_free_ports
from harness.security import ADMIN, client_file, plain_jaas_server
from test_security_acl import ACL_COMMAND, unique
from test_security_acl_apis import said

USER = ("app", "app-secret")
TOPIC_AUTHORIZATION_FAILED = 29
TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
DEADLINE_S = 60


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(paths.target(), tmp_path_factory.mktemp("acl-cluster"), 3)
    sasl_ports = distinct_free_ports(3)
    for node, sasl_port in zip(c.nodes, sasl_ports):
        plain = f"PLAINTEXT://{node.host}:{node.port}"
        sasl = f"SASL_PLAINTEXT://{node.host}:{sasl_port}"
        node.sasl_bootstrap = f"{node.host}:{sasl_port}"
        node.overrides.update({
            "listeners": f"{plain},{sasl},CONTROLLER://{node.host}:{node.controller_port}",
            "advertised.listeners": f"{plain},{sasl}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                plain_jaas_server({ADMIN[0]: ADMIN[1], USER[0]: USER[1]}),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": f"User:{ADMIN[0]};User:ANONYMOUS",
            "offsets.topic.replication.factor": "3",
            "transaction.state.log.replication.factor": "3",
            "transaction.state.log.min.isr": "2",
        })
    c.start()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def logins(tmp_path_factory):
    d = tmp_path_factory.mktemp("acl-cluster-clients")
    return {"admin": client_file(d, "admin", "PLAIN", *ADMIN), USER[0]: client_file(d, USER[0], "PLAIN", *USER)}


def sasl_bootstrap(cluster) -> str:
    return ",".join(n.sasl_bootstrap for n in cluster.nodes)


def acls(cluster, logins, *args) -> None:
    kafka_cli.run(ACL_COMMAND, "--bootstrap-server", sasl_bootstrap(cluster), "--command-config", logins["admin"],
                  *args)


def full_isr(cluster, topic: str):
    """Partition 0's metadata (node 1's view) once all three replicas are in sync, else None."""
    t = cluster.metadata(1, [topic])["topics"].get(topic)
    if t is None or t["error"] or 0 not in t["partitions"]:
        return None
    p = t["partitions"][0]
    return p if p["leader"] >= 0 and sorted(p["isr"]) == [1, 2, 3] else None


@pytest.fixture(scope="module")
def topic(cluster, logins):
    name = unique("rep")
    drivers.run("confluent", "create-topic", sasl_bootstrap(cluster), "--topic", name, "--partitions", 1,
                "--replication-factor", 3, "--client-config", logins["admin"])
    acls(cluster, logins, "--add", "--allow-principal", f"User:{USER[0]}", "--producer", "--consumer",
         "--topic", name, "--group", "*")
    cluster.wait_for(lambda: full_isr(cluster, name), DEADLINE_S, f"{name} has 3 in-sync replicas")
    return name


def test_a_sasl_user_with_acls_produces_with_acks_all_and_consumes_through_the_cluster(cluster, logins, topic):
    records = [{"key": f"k{i}", "value": f"v{i}"} for i in range(20)]

    def produced():
        return drivers.run("java", "produce", sasl_bootstrap(cluster), "--topic", topic, "--acks", "all",
                           "--client-config", logins[USER[0]], records=records, timeout=90)

    sent = cluster.wait_for(lambda: _quietly(produced), DEADLINE_S, "acks=all produce as the SASL user")
    assert [r["offset"] for r in sent] == list(range(20))
    got = drivers.run("java", "consume", sasl_bootstrap(cluster), "--topic", topic, "--partitions", "0",
                      "--from", "earliest", "--count", 20, "--timeout-ms", 30000,
                      "--client-config", logins[USER[0]], timeout=90)
    assert [r["value"] for r in got] == [f"v{i}" for i in range(20)]
    # Replication ran as ANONYMOUS on the PLAINTEXT listener: every replica caught up.
    leader_of = full_isr(cluster, topic)
    assert leader_of is not None, cluster.metadata(1, [topic])


def _quietly(run):
    try:
        return run()
    except drivers.DriverError:
        return None


def test_a_client_without_cluster_action_cannot_fetch_as_a_follower(cluster, logins, topic):
    p = cluster.wait_for(lambda: full_isr(cluster, topic), DEADLINE_S, "3 in-sync replicas")
    leader = p["leader"]
    follower = next(n for n in (1, 2, 3) if n != leader)
    leader_sasl = cluster.node(leader).sasl_bootstrap
    refused = wire.fetch(leader_sasl, {topic: {0: 0}}, max_wait_ms=100, replica_id=follower, sasl_plain=USER)
    assert refused["partitions"][(topic, 0)]["error"] == TOPIC_AUTHORIZATION_FAILED, refused
    assert refused["partitions"][(topic, 0)]["records"] == b""
    # The same user, as a consumer (READ granted by --consumer), is served.
    consumer = wire.fetch(leader_sasl, {topic: {0: 0}}, max_wait_ms=100, sasl_plain=USER)
    assert consumer["partitions"][(topic, 0)]["error"] == 0, consumer


def test_a_client_without_cluster_action_or_alter_cannot_write_transaction_markers(cluster, logins, topic):
    out = kafka_cli.run(TRANSACTIONS, "--bootstrap-server", sasl_bootstrap(cluster), "--command-config",
                        logins[USER[0]], "abort", "--topic", topic, "--partition", "0", "--producer-id", "4242",
                        "--producer-epoch", "0", "--coordinator-epoch", "0", check=False, timeout=90)
    assert out.returncode != 0
    # The admin client's wording for WriteTxnMarkers' CLUSTER_AUTHORIZATION_FAILED.
    assert "failed due to cluster authorization error" in said(out), said(out)
    assert "WriteTxnMarkers request with AbortTransactionSpec(topicPartition=" in said(out), said(out)
