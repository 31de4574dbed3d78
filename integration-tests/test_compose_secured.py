"""docker-compose.secured.yml (issue 25 item 7), the secured compose stack, checked as
test_compose.py checks docker-compose.yml (there is no Docker engine here):

1. Debian's `docker-compose config` accepts it. Every Kafka listener of every brook service is
   secured (SASL_SSL with SCRAM-SHA-512 for clients and between brokers, SSL with client
   certificates required for the controller), the authorizer is on with the brokers' login as a
   super user, and each node is formatted (`brook format`, a one-shot service on its volume that
   it waits for) with the credential its inter-broker JAAS entry logs in with, all with one
   cluster id.
2. The format services, then the brook services, run as local processes (harness/compose.py:
   brook-N -> 127.0.3.N, volumes and the `./certs` bind mount -> temp dirs). The certificates
   are made by scripts/certs.sh, as the file's comment says, with the SANs the stack needs
   (brook-1..3) plus the loopback addresses the test maps them to. The three form one cluster
   on their first start with no unauthenticated listener: a SASL_SSL client (confluent-kafka,
   SCRAM-SHA-512, the broker's host name verified) sees the three brokers, creates a topic
   replicated on all three, produces records with acks=all and reads them back, and every
   partition's ISR holds the three replicas (the brokers replicate over INTERNAL, logged in
   with their formatted credential). A client without SASL, with a wrong password, or in
   plain text is refused; a user without ACLs is refused the topic (TOPIC_AUTHORIZATION_FAILED).
3. Every scrape target of prometheus/prometheus.yml (the file the stack mounts) answers with the
   node's metrics, in plain HTTP.
The processes are stopped with SIGTERM at the end. The static checks run on either target; the
process checks only on brook.
"""

import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Dict, List

import pytest
import yaml
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion,
)

from harness import compose, paths
from harness.compose import Node, brook_service_names, one_shot_service_names, service_argv, service_env, settings_of

REPO = paths.REPO_DIR
# The nodes' loopback subnet, 127.0.3.N: test_compose.py's stack uses 127.0.1.N, at the same time.
SUBNET = 3
COMPOSE_FILE = REPO / "docker-compose.secured.yml"
PROMETHEUS_FILE = REPO / "prometheus" / "prometheus.yml"
ADMIN = ("admin", "admin-secret")  # seeded by the format services
RECORDS = 300
SECURED = {"SASL_SSL", "SSL"}


def load() -> dict:
    return compose.load_compose(COMPOSE_FILE)


def settings(svc: dict) -> Dict[str, str]:
    return settings_of(service_argv(svc), service_env(svc))


def jaas_login(jaas: str) -> tuple:
    fields = dict(part.split("=", 1) for part in jaas.replace(";", " ").split() if "=" in part)
    return fields["username"].strip('"'), fields["password"].strip('"')


# ---------------------------------------------------------------------------------------------
# Static checks: any target


def test_docker_compose_config_accepts_the_secured_file():
    exe = shutil.which("docker-compose")
    assert exe, "docker-compose is not installed (integration-tests/install.sh installs Debian's 1.29)"
    result = subprocess.run([exe, "--project-directory", str(REPO), "-f", str(COMPOSE_FILE), "config"],
                            capture_output=True, text=True, timeout=60, cwd=REPO)
    assert result.returncode == 0, f"docker-compose config failed:\n{result.stderr}"
    assert set(yaml.safe_load(result.stdout)["services"]) == set(load()["services"])


def test_every_kafka_listener_is_secured_and_the_brokers_are_super_users():
    services = load()["services"]
    names = brook_service_names(load())
    assert len(names) == 3, names
    for name in names:
        s = settings(services[name])
        protocols = dict(item.split(":") for item in s["listener.security.protocol.map"].split(","))
        listeners = [item.split("://")[0] for item in s["listeners"].split(",")]
        assert {l: protocols[l] for l in listeners} == {"CLIENT": "SASL_SSL", "INTERNAL": "SASL_SSL", "CONTROLLER": "SSL"}
        assert s["listener.name.controller.ssl.client.auth"] == "required"
        assert s["inter.broker.listener.name"] == "INTERNAL"
        assert s["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
        assert s["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
        user, _ = jaas_login(s["listener.name.internal.scram-sha-512.sasl.jaas.config"])
        assert f"User:{user}" in s["super.users"].split(";"), s["super.users"]


def test_each_node_is_formatted_with_its_inter_broker_credential_before_it_starts():
    spec = load()
    services = spec["services"]
    formats = set(one_shot_service_names(spec))
    cluster_ids = set()
    for name in brook_service_names(spec):
        svc = services[name]
        waits_for = [d for d, how in (svc.get("depends_on") or {}).items()
                     if d in formats and how.get("condition") == compose.COMPLETED]
        assert len(waits_for) == 1, f"{name} must wait for one format service: {svc.get('depends_on')}"
        fmt = services[waits_for[0]]
        argv = service_argv(fmt)
        assert "format" in argv, argv
        rest = argv[argv.index("format") + 1:]
        cluster_ids.add(rest[rest.index("--cluster-id") + 1])
        credentials = [rest[i + 1] for i, a in enumerate(rest) if a == "--add-scram"]
        user, password = jaas_login(settings(svc)["listener.name.internal.scram-sha-512.sasl.jaas.config"])
        assert f"SCRAM-SHA-512=[name={user},password={password}]" in credentials, credentials
        node_volume = [v for v in svc["volumes"] if str(v).endswith(":/var/lib/brook")]
        assert node_volume and node_volume[0] in fmt["volumes"], (svc["volumes"], fmt["volumes"])
        assert settings(fmt)["node.id"] == settings(svc)["node.id"]
    assert len(cluster_ids) == 1, cluster_ids


# ---------------------------------------------------------------------------------------------
# The services as local processes: brook only


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("secured") / "certs"
    sans = [f"DNS:brook-{n}" for n in (1, 2, 3)] + [f"IP:127.0.{SUBNET}.{n}" for n in (1, 2, 3)]
    subprocess.run(["bash", str(REPO / "scripts" / "certs.sh"), str(out), "brook-secret", *sans],
                   check=True, capture_output=True, timeout=120)
    return out


@pytest.fixture(scope="module")
def secured_cluster(tmp_path_factory, certs):
    if paths.target() == "kafka":
        pytest.skip("the compose services run brook")
    if not paths.brook_bin().is_file():
        pytest.fail(f"brook binary not found at {paths.brook_bin()} (set BROOK_BIN)")
    nodes = compose.compose_nodes(load(), tmp_path_factory.mktemp("compose-secured"), binds={"./certs": certs},
                                  subnet=SUBNET)
    yield from compose.serve(nodes)


@pytest.fixture
def nodes(request, secured_cluster):
    """The running nodes; their log tails are attached to a failing test's report."""
    setattr(request.node, "_brook_brokers", list(secured_cluster))
    return secured_cluster


def client(node: Node, certs: Path, user: str = ADMIN[0], password: str = ADMIN[1], **extra) -> dict:
    return {
        "bootstrap.servers": node.bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": str(certs / "ca.pem"),
        "ssl.endpoint.identification.algorithm": "https",
        **extra,
    }


def wait_until(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            assert value, what
            return value
        time.sleep(0.2)


def test_the_secured_nodes_form_one_cluster_over_sasl_ssl(nodes, certs):
    expected = {n.node_id: n.bootstrap for n in nodes}
    admin = AdminClient(client(nodes[0], certs))

    def brokers():
        md = admin.list_topics(timeout=10)
        return md if {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()} == expected else None

    md = wait_until(brokers, 15, f"Metadata lists the three brokers {expected}")
    assert md.controller_id in expected


@pytest.fixture(scope="module")
def replicated(secured_cluster, certs) -> dict:
    """A 3-partition topic replicated on all three nodes, produced to with acks=all and read
    back through one node's CLIENT listener as the seeded admin."""
    node = secured_cluster[0]
    topic = f"t-secured-{uuid.uuid4().hex[:10]}"
    admin = AdminClient(client(node, certs))
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])[topic].result(timeout=30)
    delivered, errors = [], []
    producer = Producer(client(node, certs, **{"acks": "all", "linger.ms": 5}))

    def on_delivery(err, msg):
        (errors if err else delivered).append(err or (msg.partition(), msg.offset(), msg.key().decode(), msg.value().decode()))

    produced = [(i % 3, f"k{i}", f"v{i}") for i in range(RECORDS)]
    for partition, key, value in produced:
        producer.produce(topic, key=key, value=value, partition=partition, on_delivery=on_delivery)
    producer.flush(60)
    consumer = Consumer(client(node, certs, **{"group.id": f"g-{topic}", "enable.auto.commit": False}))
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
    consumed: Dict[int, List[tuple]] = {0: [], 1: [], 2: []}
    deadline = time.monotonic() + 30
    while sum(map(len, consumed.values())) < len(delivered) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            consumed[msg.partition()].append((msg.key().decode(), msg.value().decode()))
    consumer.close()
    return {"topic": topic, "produced": produced, "delivered": delivered, "errors": errors, "consumed": consumed}


def test_a_sasl_ssl_client_produces_and_reads_back_a_topic_replicated_on_every_node(nodes, certs, replicated):
    assert replicated["errors"] == [] and len(replicated["delivered"]) == RECORDS, replicated["errors"][:3]
    for partition in range(3):
        expected = [(k, v) for p, k, v in replicated["produced"] if p == partition]
        assert replicated["consumed"][partition] == expected, f"partition {partition}"
    topic, ids = replicated["topic"], sorted(n.node_id for n in nodes)
    admin = AdminClient(client(nodes[1], certs))

    def all_in_sync():
        partitions = admin.list_topics(topic=topic, timeout=10).topics[topic].partitions
        return partitions if all(sorted(p.isrs) == ids == sorted(p.replicas) for p in partitions.values()) else None

    wait_until(all_in_sync, 30, f"every partition of {topic} has its three replicas in sync (replication over INTERNAL)")


def refusal(config: dict) -> List[KafkaError]:
    """The errors a client with `config` reports (its error callback) when its metadata request
    fails, as it must."""
    reported = []
    admin = AdminClient({**config, "socket.timeout.ms": 5000, "error_cb": reported.append})
    with pytest.raises(KafkaException) as failed:
        admin.list_topics(timeout=5)
    admin.poll(1)  # serves the error callbacks queued meanwhile
    return reported + [failed.value.args[0]]


def test_a_wrong_password_is_refused_with_an_authentication_error(nodes, certs):
    errors = refusal(client(nodes[0], certs, password="not-" + ADMIN[1]))
    authentication = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert authentication, errors
    assert ("Authentication failed during authentication due to invalid credentials with SASL mechanism "
            "SCRAM-SHA-512") in authentication[0].str(), authentication[0]


@pytest.mark.parametrize("protocol", ["SSL", "PLAINTEXT"])
def test_a_client_without_sasl_gets_no_metadata(nodes, certs, protocol):
    config = {"bootstrap.servers": nodes[0].bootstrap, "security.protocol": protocol}
    if protocol == "SSL":
        config["ssl.ca.location"] = str(certs / "ca.pem")
    errors = refusal(config)
    assert all(e.code() in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN)
               for e in errors), errors
    # The cluster still serves its authenticated clients.
    assert len(AdminClient(client(nodes[0], certs)).list_topics(timeout=10).brokers) == 3


def test_a_user_without_acls_is_refused_the_topic(nodes, certs, replicated):
    admin = AdminClient(client(nodes[0], certs))
    user = ("secured-alice", "alice-secret")
    upsert = UserScramCredentialUpsertion(user[0], ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                          user[1].encode())
    admin.alter_user_scram_credentials([upsert])[user[0]].result(timeout=30)
    errors = []
    producer = Producer(client(nodes[0], certs, user=user[0], password=user[1], **{"message.timeout.ms": 10000}))

    def produce_once():
        producer.produce(replicated["topic"], value=b"x", on_delivery=lambda err, msg: errors.append(err))
        producer.flush(15)
        return errors

    # The credential reaches every node's image shortly after the write.
    wait_until(lambda: produce_once() and errors[-1] is not None and errors[-1].code() != KafkaError._AUTHENTICATION,
               30, f"alice logs in: {errors}")
    assert errors[-1].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errors[-1]


def test_every_prometheus_scrape_target_answers_in_plain_http(nodes):
    by_service = {n.service: n for n in nodes}
    targets = set()
    for job in yaml.safe_load(PROMETHEUS_FILE.read_text()).get("scrape_configs") or []:
        for static in job.get("static_configs") or []:
            targets.update(static.get("targets") or [])
    assert {t.split(":")[0] for t in targets} == set(by_service), targets
    for target in sorted(targets):
        service, port = target.split(":")
        node = by_service[service]
        assert node.settings["metrics.listener"] == f"{node.ip}:{port}", node.settings["metrics.listener"]
        text = compose.fetch(f"http://{node.ip}:{port}/metrics")
        assert "brook_controller_active" in text, text[:500]
