"""Security inside the cluster (issue 25 item 6): a 3-node cluster whose brokers replicate over
a secured inter-broker listener and whose controllers talk over mutual TLS, the same on Brook and
Apache Kafka 4.4.

Each node serves (Kafka's keys, harness/cluster.py's combined broker+controller nodes):
- PLAINTEXT, the harness's own door (readiness, metadata polls, SCRAM administration);
- CLIENT, SASL_SSL with SCRAM-SHA-512, for the applications;
- INTERNAL, SASL_SSL with SCRAM-SHA-512, the inter-broker listener (`inter.broker.listener.name`,
  `sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512`): each broker logs in to its peers with the
  `username`/`password` of `listener.name.internal.scram-sha-512.sasl.jaas.config` (the broker
  user's credential is created with the application's, through the PLAINTEXT listener, as
  `kafka-configs --alter --entity-type users` would; replication starts once it exists), and
  verifies their certificates with the CA
  (certificates from scripts/certs.sh: SANs localhost and 127.0.0.1);
- CONTROLLER, SSL with `ssl.client.auth=required`: the metadata quorum (Brook's raft transport,
  Kafka's KRaft) between mutually authenticated nodes, each presenting the broker certificate.
The StandardAuthorizer is on: `super.users` holds the brokers' principal (User:broker, as
Kafka's docs configure inter-broker principals: follower fetches need CLUSTER_ACTION),
User:ANONYMOUS (the PLAINTEXT listener), the nodes' certificate subject (Kafka authorizes
controller and broker-to-controller requests: CLUSTER_ACTION) and the application's user.

- A topic with replication factor 3 and min.insync.replicas=2: Java and confluent-kafka produce
  with acks=all over SASL_SSL, all three replicas are in the ISR (DescribeTopics over SASL_SSL),
  and the records come back with their keys, values and offsets; after the leader stops, a new
  leader serves the same records.
- The controller listener answers neither plaintext nor a TLS client without a certificate.
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
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from harness import client_config, drivers, paths, security
from harness.cluster import Cluster, distinct_free_ports
from harness.security import SCRAM_LOGIN

PASSWORD = "brook-secret"
APP = ("app", "app-secret")
BROKER_LOGIN = ("broker", "broker-secret")
# The RFC 2253 subject of scripts/certs.sh's broker certificate (/CN=localhost/O=Brook).
NODE_PRINCIPAL = "User:O=Brook,CN=localhost"
DEADLINE_S = 60
RECORDS = 20


INTERNAL_JAAS = "listener.name.internal.scram-sha-512.sasl.jaas.config"


def internal_jaas(password: str) -> str:
    """The INTERNAL listener's SCRAM entry, with the broker's own login."""
    return f'{SCRAM_LOGIN} required username="{BROKER_LOGIN[0]}" password="{password}";'


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    return security.make_certificates(tmp_path_factory.mktemp("certs"), PASSWORD)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, certs):
    c = Cluster(paths.target(), tmp_path_factory.mktemp("secure-cluster"), 3)
    taken = set()
    for n in c.nodes:
        taken |= {n.port, n.controller_port, n.metrics_port or 0}
    ports = [p for p in distinct_free_ports(12) if p not in taken][:6]
    for node, client_port, internal_port in zip(c.nodes, ports[:3], ports[3:]):
        node.client_bootstrap = f"{node.host}:{client_port}"
        plain = f"PLAINTEXT://{node.host}:{node.port}"
        client = f"CLIENT://{node.host}:{client_port}"
        internal = f"INTERNAL://{node.host}:{internal_port}"
        node.overrides.update({
            "listeners": f"{plain},{client},{internal},CONTROLLER://{node.host}:{node.controller_port}",
            "advertised.listeners": f"{plain},{client},{internal}",
            "listener.security.protocol.map":
                "CONTROLLER:SSL,PLAINTEXT:PLAINTEXT,CLIENT:SASL_SSL,INTERNAL:SASL_SSL",
            "listener.name.controller.ssl.client.auth": "required",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.client.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.client.scram-sha-512.sasl.jaas.config": f"{SCRAM_LOGIN} required;",
            "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            INTERNAL_JAAS: internal_jaas(BROKER_LOGIN[1]),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(certs / "broker-keystore.pem"),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(certs / "ca.pem"),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": f"User:{BROKER_LOGIN[0]};User:ANONYMOUS;{NODE_PRINCIPAL};User:{APP[0]}",
            "min.insync.replicas": "2",
            "offsets.topic.replication.factor": "3",
        })
    c.start()
    try:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                                password.encode()) for user, password in (APP, BROKER_LOGIN)]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(timeout=30)
        for n in c.nodes:
            for user in (APP[0], BROKER_LOGIN[0]):
                c.wait_for(lambda: scram_user_known(n.bootstrap, user), DEADLINE_S, f"node {n.node_id} knows {user}")
        yield c
    finally:
        c.stop()


def scram_user_known(bootstrap: str, user: str) -> bool:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        found = admin.describe_user_scram_credentials([user])[user].result(timeout=10)
    except Exception:  # noqa: BLE001 - RESOURCE_NOT_FOUND until the credential is applied
        return False
    return bool(found.scram_credential_infos)


@pytest.fixture(scope="module")
def app_config(tmp_path_factory, certs) -> str:
    settings = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": f'{SCRAM_LOGIN} required username="{APP[0]}" password="{APP[1]}";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs / "ca.pem"),
        "ssl.endpoint.identification.algorithm": "https",
    }
    return str(client_config.write(tmp_path_factory.mktemp("app") / "app.properties", settings))


def client_bootstrap(cluster, node_ids=None) -> str:
    ids = node_ids if node_ids is not None else cluster.running_ids()
    return ",".join(cluster.node(i).client_bootstrap for i in ids)


def partition_view(cluster, topic: str, node_id: int):
    """Partition 0 as node `node_id` sees it (PLAINTEXT Metadata), or None."""
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
