"""Security inside the cluster (issue 25 item 6): a 3-node cluster whose brokers replicate over
a secured inter-broker listener and whose controllers talk over mutual TLS, the same on Brook and
Apache Kafka 4.4.

Each node serves (Kafka's keys, harness/cluster.py's combined broker+controller nodes, secured by
harness.security.secure_cluster, which the secured chaos run shares):
- CLIENT, SASL_SSL with SCRAM-SHA-512 (and PLAIN for kcat, whose librdkafka 2.0.2 fails SCRAM),
  for the applications, and the harness's own way in (harness/door.py: readiness, metadata polls
  and the Kafka tools log in with PLAIN as a super user); no listener is PLAINTEXT;
- INTERNAL, SASL_SSL with SCRAM-SHA-512, the inter-broker listener (`inter.broker.listener.name`,
  `sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512`): each broker logs in to its peers with the
  `username`/`password` of `listener.name.internal.scram-sha-512.sasl.jaas.config` (the broker
  user's credential and the application's are in the metadata from the first start: every node
  is formatted with them, `brook format --add-scram` / Kafka's `kafka-storage format
  --add-scram`), and verifies their certificates with the CA
  (certificates from scripts/certs.sh: SANs localhost and 127.0.0.1);
- CONTROLLER, SSL with `ssl.client.auth=required`: the metadata quorum (Brook's raft transport,
  Kafka's KRaft) between mutually authenticated nodes, each presenting the broker certificate.
The StandardAuthorizer is on: `super.users` holds the brokers' principal (User:broker, as
Kafka's docs configure inter-broker principals: follower fetches need CLUSTER_ACTION), the
nodes' certificate subject (Kafka authorizes controller and broker-to-controller requests:
CLUSTER_ACTION), the harness's login and the application's user.

- A topic with replication factor 3 and min.insync.replicas=2: Java and confluent-kafka produce
  with acks=all over SASL_SSL, all three replicas are in the ISR (DescribeTopics over SASL_SSL),
  and the records come back with their keys, values and offsets; after the leader stops, a new
  leader serves the same records.
- The replication client matrix over SASL_SSL: every client (Java, confluent-kafka, kcat,
  franz-go, kafka-python, kafkajs) produces to an RF=3 topic with acks=all and reads its records
  back (keys, values, offsets).
- The controller listener answers neither plaintext nor a TLS client without a certificate.
- Kafka's quorum tool on the controller listener (`kafka-metadata-quorum --bootstrap-controller`)
  is authorized as Kafka's controller authorizes it: with the nodes' certificate (a super user)
  `describe --status` answers; with a client certificate whose principal has no ACL,
  `describe --status` and `remove-controller` are refused with ClusterAuthorizationException.
- A broker restarted with a wrong inter-broker password never rejoins the ISR: its peers refuse
  its login. Brook counts the refusal (`brook_inter_broker_connections_total{result=
  "authentication_failed"}`) and logs "inter-broker authentication failed"; Kafka's follower
  logs its SaslAuthenticationException.
"""

import socket
import ssl
import struct
import uuid
from pathlib import Path

import pytest

from harness import client_config, drivers, kafka_cli, paths, security
from harness.cluster import Cluster
from harness.security import INTERNAL_JAAS, client_bootstrap, internal_jaas

PASSWORD = security.CLUSTER_PASSWORD
APP = ("app", "app-secret")
# kcat's librdkafka 2.0.2 fails every SCRAM login (against Kafka too, test_security_sasl.py): its
# cell logs in with PLAIN.
PLAIN_APP = ("plain-app", "plain-app-secret")
DEADLINE_S = 60
RECORDS = 20
MATRIX_RECORDS = 10


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    return security.make_certificates(tmp_path_factory.mktemp("certs"), PASSWORD)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, certs):
    c = Cluster(paths.target(), tmp_path_factory.mktemp("secure-cluster"), 3)
    security.secure_cluster(c, certs, APP, plain_users={PLAIN_APP[0]: PLAIN_APP[1]})
    for node in c.nodes:
        node.overrides.update({"min.insync.replicas": "2", "offsets.topic.replication.factor": "3"})
    c.start()
    try:
        security.wait_scram_users(c, [APP], DEADLINE_S)
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def app_config(tmp_path_factory, certs) -> str:
    settings = security.sasl_ssl_client_settings(certs, "SCRAM-SHA-512", *APP)
    return str(client_config.write(tmp_path_factory.mktemp("app") / "app.properties", settings))


@pytest.fixture(scope="module")
def plain_app_config(tmp_path_factory, certs) -> str:
    settings = security.sasl_ssl_client_settings(certs, "PLAIN", *PLAIN_APP)
    return str(client_config.write(tmp_path_factory.mktemp("plain-app") / "plain-app.properties", settings))


def partition_view(cluster, topic: str, node_id: int):
    """Partition 0 as node `node_id` sees it (its own Metadata answer), or None."""
    t = cluster.metadata(node_id, [topic])["topics"].get(topic)
    if t is None or t["error"] or 0 not in t["partitions"]:
        return None
    return t["partitions"][0]


def full_isr(cluster, topic: str):
    p = partition_view(cluster, topic, cluster.running_ids()[0])
    return p if p and p["leader"] >= 0 and sorted(p["isr"]) == [1, 2, 3] else None


def consume_all(cluster, topic: str, config: str, count: int, node_ids=None) -> list:
    return drivers.run("java", "consume", client_bootstrap(cluster, node_ids), "--topic", topic, "--partitions", "0",
                       "--from", "earliest", "--count", count, "--timeout-ms", 30000, "--client-config", config,
                       timeout=90)


@pytest.fixture(scope="module")
def replicated(cluster, app_config):
    """The topic, its records as produced (Java then confluent, acks=all over SASL_SSL)."""
    topic = f"secure-{uuid.uuid4().hex[:8]}"
    drivers.run("confluent", "create-topic", client_bootstrap(cluster), "--topic", topic, "--partitions", 1,
                "--replication-factor", 3, "--config", "min.insync.replicas=2", "--client-config", app_config)
    cluster.wait_for(lambda: full_isr(cluster, topic), DEADLINE_S, f"{topic} has 3 in-sync replicas")
    sent = []
    for client in ("java", "confluent"):
        batch = [{"key": f"{client}-k{i}", "value": f"{client} record {i}", "partition": 0} for i in range(RECORDS)]
        acks = drivers.run(client, "produce", client_bootstrap(cluster), "--topic", topic, "--acks", "all",
                           "--client-config", app_config, records=batch, timeout=90)
        assert [a["offset"] for a in acks] == list(range(len(sent), len(sent) + RECORDS)), acks
        sent += batch
    return topic, sent


def test_acks_all_producers_over_sasl_ssl_replicate_to_all_three_brokers_over_the_secured_listener(
        cluster, app_config, replicated):
    topic, sent = replicated
    described = drivers.run("confluent", "describe-topic", client_bootstrap(cluster), "--topic", topic,
                            "--client-config", app_config)
    (partition,) = described["partitions"]
    assert sorted(partition["replicas"]) == [1, 2, 3]
    # The high watermark passed every record only once a second replica had it (min.insync=2);
    # all three in sync shows every follower fetched over INTERNAL.
    assert sorted(cluster.wait_for(lambda: full_isr(cluster, topic), DEADLINE_S, "3 in sync")["isr"]) == [1, 2, 3]
    got = consume_all(cluster, topic, app_config, len(sent))
    assert [(r["offset"], r["key"], r["value"]) for r in got] == [
        (i, s["key"], s["value"]) for i, s in enumerate(sent)]


def test_the_records_survive_the_leader_stopping_and_a_new_leader_serves_them(cluster, app_config, replicated):
    topic, sent = replicated
    leader = cluster.wait_for(lambda: full_isr(cluster, topic), DEADLINE_S, "3 in sync")["leader"]
    cluster.node(leader).stop()
    try:
        others = [i for i in cluster.node_ids if i != leader]

        def new_leader():
            p = partition_view(cluster, topic, others[0])
            return p if p and p["leader"] in others else None

        cluster.wait_for(new_leader, DEADLINE_S, f"a leader other than {leader}")
        got = consume_all(cluster, topic, app_config, len(sent), others)
        assert [(r["offset"], r["key"], r["value"]) for r in got] == [
            (i, s["key"], s["value"]) for i, s in enumerate(sent)]
    finally:
        cluster.node(leader).start()
    cluster.wait_for(lambda: full_isr(cluster, topic), DEADLINE_S, f"{leader} back in sync")


@pytest.mark.parametrize("client", drivers.CLIENTS)
def test_every_client_produces_with_acks_all_and_consumes_over_sasl_ssl_on_the_cluster(
        cluster, app_config, plain_app_config, client):
    config = plain_app_config if client == "kcat" else app_config
    topic = f"secure-{client}-{uuid.uuid4().hex[:8]}"
    drivers.run("confluent", "create-topic", client_bootstrap(cluster), "--topic", topic, "--partitions", 1,
                "--replication-factor", 3, "--config", "min.insync.replicas=2", "--client-config", app_config)
    cluster.wait_for(lambda: full_isr(cluster, topic), DEADLINE_S, f"{topic} has 3 in-sync replicas")
    sent = [{"key": f"{client}-k{i}", "value": f"{client} record {i}", "partition": 0} for i in range(MATRIX_RECORDS)]
    acks = drivers.run(client, "produce", client_bootstrap(cluster), "--topic", topic, "--acks", "all",
                       "--client-config", config, records=sent, timeout=90)
    assert [a["offset"] for a in acks] == list(range(MATRIX_RECORDS)), acks
    got = drivers.run(client, "consume", client_bootstrap(cluster), "--topic", topic, "--partitions", "0",
                      "--from", "earliest", "--count", MATRIX_RECORDS, "--client-config", config, timeout=90)
    assert [(r["offset"], r["key"], r["value"]) for r in got] == [
        (i, s["key"], s["value"]) for i, s in enumerate(sent)]


def answer_to(stream, frame: bytes) -> bytes:
    """What comes back (until close or 3 s) after `frame` is sent on `stream`."""
    stream.settimeout(3)
    got = b""
    try:
        stream.sendall(frame)
        while True:
            chunk = stream.recv(4096)
            if not chunk:
                return got
            got += chunk
    except (OSError, ssl.SSLError):
        return got


def test_the_controller_listener_answers_neither_plaintext_nor_a_tls_client_without_a_certificate(cluster, certs):
    # A frame of Brook's raft transport (a broker attaching), which a plaintext voter would answer.
    body = b'{"Attach":{"broker_id":99,"broker_epoch":1}}'
    frame = struct.pack(">I", len(body)) + body
    port = cluster.node(1).controller_port
    with socket.create_connection(("127.0.0.1", port), timeout=5) as plain:
        got = answer_to(plain, frame)
    assert b"Attach" not in got and (got == b"" or got[0] == 0x15), got  # nothing, or a TLS alert
    context = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    context.check_hostname = False
    with socket.create_connection(("127.0.0.1", port), timeout=5) as tcp:
        try:
            with context.wrap_socket(tcp, server_hostname="127.0.0.1") as tls:
                got = answer_to(tls, frame)
        except ssl.SSLError:
            got = b""
    assert b"Attach" not in got, got


QUORUM_TOOL = "org.apache.kafka.tools.MetadataQuorumCommand"


def quorum_tool_as(cluster, certs, tmp_path, keystore: str, *args):
    """`kafka-metadata-quorum --bootstrap-controller` to node 1's controller listener over mutual
    TLS with the PEM key store `keystore` of `certs`; (exit code, output)."""
    props = tmp_path / f"{keystore}.properties"
    props.write_text("\n".join([
        "security.protocol=SSL",
        "ssl.truststore.type=PEM", f"ssl.truststore.location={certs / 'ca.pem'}",
        "ssl.keystore.type=PEM", f"ssl.keystore.location={certs / keystore}",
        "ssl.endpoint.identification.algorithm=",
    ]) + "\n")
    controller = f"127.0.0.1:{cluster.node(1).controller_port}"
    proc = kafka_cli.run(QUORUM_TOOL, "--bootstrap-controller", controller, "--command-config", props, *args,
                         timeout=90, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def test_the_quorum_tool_on_the_controller_listener_is_authorized_as_kafka_authorizes_it(cluster, certs, tmp_path):
    code, out = quorum_tool_as(cluster, certs, tmp_path, "broker-keystore.pem", "describe", "--status")
    assert code == 0 and "LeaderId:" in out and "CurrentVoters:" in out, out
    code, out = quorum_tool_as(cluster, certs, tmp_path, "client-keystore.pem", "describe", "--status")
    assert code != 0 and "ClusterAuthorizationException" in out, out
    code, out = quorum_tool_as(cluster, certs, tmp_path, "client-keystore.pem", "remove-controller",
                               "--controller-id", "3", "--controller-directory-id=AAAAAAAAAAAAAAAAAAAAAA")
    assert code != 0 and "ClusterAuthorizationException" in out, out
    # Nothing changed: the three voters are still there.
    code, out = quorum_tool_as(cluster, certs, tmp_path, "broker-keystore.pem", "describe", "--status")
    assert code == 0 and all(f'"id": {i}' in out for i in (1, 2, 3)), out


def test_a_broker_with_a_wrong_inter_broker_password_never_rejoins_the_isr(cluster, replicated):
    topic, _ = replicated
    p = cluster.wait_for(lambda: full_isr(cluster, topic), DEADLINE_S, "3 in sync")
    outsider = next(i for i in cluster.node_ids if i != p["leader"])
    node = cluster.node(outsider)
    node.stop()
    others = [i for i in cluster.node_ids if i != outsider]
    cluster.wait_for(lambda: outsider not in ((partition_view(cluster, topic, others[0]) or {}).get("isr") or [outsider]),
                     DEADLINE_S, f"{outsider} out of the ISR")
    right = node.overrides[INTERNAL_JAAS]
    node.overrides[INTERNAL_JAAS] = internal_jaas("not-the-password")
    try:
        node.start()
        cluster.wait_registered(DEADLINE_S)
        # Refused again and again (the follower retries every few hundred ms): after several
        # refusals it is still outside the ISR.
        if cluster.kind == "brook":
            cluster.wait_for(lambda: node.metric("brook_inter_broker_connections_total",
                                                 result="authentication_failed") >= 3,
                             DEADLINE_S, "three refused logins counted")
            assert "inter-broker authentication failed" in node.log_text()
        else:
            cluster.wait_for(lambda: node.log_text().count("SaslAuthenticationException") >= 3, DEADLINE_S,
                             "three refused logins logged by the follower")
        view = partition_view(cluster, topic, others[0])
        assert view is not None and outsider not in view["isr"], view
    finally:
        node.stop()
        node.overrides[INTERNAL_JAAS] = right
        node.start()
    cluster.wait_for(lambda: full_isr(cluster, topic), DEADLINE_S, f"{outsider} back in sync with the right password")
