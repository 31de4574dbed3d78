"""A SASL controller listener (issue 25 items 1 and 6): a 3-node cluster whose CONTROLLER listener
is SASL_PLAINTEXT with PLAIN, the same on Brook and Apache Kafka 4.4 (Kafka's keys on both).

Each combined node (harness/cluster.py) maps CONTROLLER to SASL_PLAINTEXT, enables PLAIN there
(`listener.name.controller.sasl.enabled.mechanisms`) and logs in to the other controllers with
`sasl.mechanism.controller.protocol=PLAIN` and the `username`/`password` of
`listener.name.controller.plain.sasl.jaas.config`, whose `user_<name>` entries are the logins a
controller accepts (the controllers' own, and an operator's). Clients stay on PLAINTEXT. Brook's
raft transport logs in with Kafka's SaslHandshake / SaslAuthenticate before its first raft frame;
Kafka's KRaft logs in as any Kafka client does. The StandardAuthorizer is on: raft and
broker-to-controller traffic needs CLUSTER_ACTION, so `super.users` holds the controllers' login
(and ANONYMOUS, the PLAINTEXT clients' and inter-broker principal).

- The quorum forms over the SASL listener: a topic with replication factor 3 gets all three
  replicas in sync, and records produced with acks=all come back with their keys, values and
  offsets.
- `kafka-metadata-quorum --bootstrap-controller … --command-config <SASL_PLAINTEXT, PLAIN>
  describe --status` answers with the three voters for the controllers' login; the operator's
  login is authorized as User:operator, which has no ACL (ClusterAuthorizationException); a
  wrong password fails with SaslAuthenticationException "Authentication failed: Invalid username
  or password".
- A connection that has not logged in gets nothing on the controller listener: neither a frame
  of Brook's raft transport nor a Kafka DescribeQuorum is answered.
- A controller restarted with a wrong password in its own login is refused by its peers (its log
  says "Authentication failed: Invalid username or password") and never registers its broker,
  while the two others create a topic and replicate without it; with the right password it
  rejoins.
- A broker-only node (process.roles=broker, last: it stays in the cluster) logs in to the
  controllers, registers, and is listed by every node.

SCRAM-SHA-512 on the controller listener (Brook-only, a second 3-node cluster): every node is
formatted with `--add-scram 'SCRAM-SHA-512=[name=controller,…,iterations=8192]'` and logs in
with `listener.name.controller.scram-sha-512.sasl.jaas.config` (ScramLoginModule). The voters
check SCRAM logins against those bootstrap records until the metadata log holds credentials, so
they elect a leader, which writes the records as the log's first entries.
- The quorum forms, an RF=3 topic gets all replicas in sync and its records come back as above;
  `kafka-configs --describe --entity-type users` lists the bootstrap credential (8192 iterations).
- A controller restarted with a wrong password is refused ("Authentication failed during
  authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512") and never
  registers, while the two others replicate without it; with the right password it rejoins.
Brook-only because Apache Kafka 4.4 checks controller-listener SCRAM logins against the metadata
log only: its voters fail every Vote with that message and never elect a leader (measured with
this cluster shape: the brokers give up registering after 60 s; KAFKA-15513).
"""

import contextlib
import socket
import struct
import uuid

import pytest

from harness import drivers, kafka_cli, paths, wire
from harness.cluster import Cluster

PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
CONTROLLER_LOGIN = ("controller", "controller-secret")
OPERATOR_LOGIN = ("operator", "operator-secret")
JAAS_KEY = "listener.name.controller.plain.sasl.jaas.config"
QUORUM_TOOL = "org.apache.kafka.tools.MetadataQuorumCommand"
REFUSED = "Authentication failed: Invalid username or password"
SCRAM_JAAS_KEY = "listener.name.controller.scram-sha-512.sasl.jaas.config"
SCRAM_REFUSED = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
# Not the default 4096: what kafka-configs lists is the formatted credential.
SCRAM_ITERATIONS = 8192
CONFIGS_TOOL = "org.apache.kafka.tools.ConfigCommand"
DEADLINE_S = 60
RECORDS = 20


def controller_jaas(password: str) -> str:
    """The controller listener's PLAIN entry: the node's own login (with `password`) and the users
    a controller accepts."""
    return (f'{PLAIN_LOGIN} required username="{CONTROLLER_LOGIN[0]}" password="{password}" '
            f'user_{CONTROLLER_LOGIN[0]}="{CONTROLLER_LOGIN[1]}" user_{OPERATOR_LOGIN[0]}="{OPERATOR_LOGIN[1]}";')


SASL_CONTROLLER = {
    "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "sasl.mechanism.controller.protocol": "PLAIN",
    "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
    JAAS_KEY: controller_jaas(CONTROLLER_LOGIN[1]),
    "min.insync.replicas": "2",
    # Raft and broker-to-controller traffic needs CLUSTER_ACTION: the controllers' login is a
    # super user; so is ANONYMOUS, the PLAINTEXT clients' and inter-broker principal.
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": f"User:{CONTROLLER_LOGIN[0]};User:ANONYMOUS",
}


def scram_controller_jaas(password: str) -> str:
    """The controller listener's SCRAM entry: the node's own login only (SCRAM's users are
    credentials in the metadata, not JAAS options)."""
    return f'{SCRAM_LOGIN} required username="{CONTROLLER_LOGIN[0]}" password="{password}";'


SCRAM_CONTROLLER = {
    **{k: v for k, v in SASL_CONTROLLER.items() if k != JAAS_KEY},
    "sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
    "listener.name.controller.sasl.enabled.mechanisms": "SCRAM-SHA-512",
    SCRAM_JAAS_KEY: scram_controller_jaas(CONTROLLER_LOGIN[1]),
}
BOOTSTRAP_SCRAM = (f"SCRAM-SHA-512=[name={CONTROLLER_LOGIN[0]},password={CONTROLLER_LOGIN[1]},"
                   f"iterations={SCRAM_ITERATIONS}]")

brook_only = pytest.mark.skipif(
    paths.target() == "kafka",
    reason="Kafka 4.4's voters check SCRAM against the metadata log only and never elect a leader (module doc)")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(paths.target(), tmp_path_factory.mktemp("sasl-controller"), 3, overrides=SASL_CONTROLLER)
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def scram_cluster(tmp_path_factory):
    c = Cluster(paths.target(), tmp_path_factory.mktemp("scram-controller"), 3, overrides=SCRAM_CONTROLLER)
    for node in c.nodes:
        node.add_scram = [BOOTSTRAP_SCRAM]
    c.start()
    try:
        yield c
    finally:
        c.stop()


def partition_0(cluster, topic: str, node_id: int):
    """Partition 0 of `topic` as node `node_id` sees it, or None."""
    t = cluster.metadata(node_id, [topic])["topics"].get(topic)
    if t is None or t["error"] or 0 not in t["partitions"]:
        return None
    return t["partitions"][0]


def in_sync(cluster, topic: str, replicas, node_id: int):
    p = partition_0(cluster, topic, node_id)
    return p if p and p["leader"] in replicas and sorted(p["isr"]) == sorted(replicas) else None


def produce_and_read_back(cluster, topic: str, replicas, node_ids):
    """Creates `topic` (one partition, replication factor len(replicas)) through node_ids[0],
    waits for `replicas` in sync, produces RECORDS with acks=all and asserts they come back."""
    bootstrap = ",".join(cluster.bootstrap_of(i) for i in node_ids)
    drivers.run("confluent", "create-topic", bootstrap, "--topic", topic, "--partitions", 1,
                "--replication-factor", len(replicas))
    cluster.wait_for(lambda: in_sync(cluster, topic, replicas, node_ids[0]), DEADLINE_S,
                     f"{topic} in sync on {replicas}")
    sent = [{"key": f"k{i}", "value": f"record {i}", "partition": 0} for i in range(RECORDS)]
    acks = drivers.run("java", "produce", bootstrap, "--topic", topic, "--acks", "all", records=sent, timeout=90)
    assert [a["offset"] for a in acks] == list(range(RECORDS)), acks
    got = drivers.run("java", "consume", bootstrap, "--topic", topic, "--partitions", "0", "--from", "earliest",
                      "--count", RECORDS, "--timeout-ms", 30000, timeout=90)
    assert [(r["offset"], r["key"], r["value"]) for r in got] == [
        (i, s["key"], s["value"]) for i, s in enumerate(sent)]


def quorum_tool(cluster, tmp_path, node_id: int, login, *args):
    """`kafka-metadata-quorum --bootstrap-controller` to node `node_id`'s controller listener,
    logged in with PLAIN as `login` (user, password); (exit code, output)."""
    props = tmp_path / f"{login[0]}-{uuid.uuid4().hex[:6]}.properties"
    props.write_text("\n".join([
        "security.protocol=SASL_PLAINTEXT",
        "sasl.mechanism=PLAIN",
        f'sasl.jaas.config={PLAIN_LOGIN} required username="{login[0]}" password="{login[1]}";',
    ]) + "\n")
    controller = f"127.0.0.1:{cluster.node(node_id).controller_port}"
    proc = kafka_cli.run(QUORUM_TOOL, "--bootstrap-controller", controller, "--command-config", props, *args,
                         timeout=90, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def test_the_quorum_forms_over_the_sasl_controller_listener_and_replicates(cluster):
    produce_and_read_back(cluster, f"sasl-ctl-{uuid.uuid4().hex[:8]}", [1, 2, 3], cluster.node_ids)


def test_the_quorum_tool_logs_in_on_the_controller_listener_and_is_authorized_as_its_user(cluster, tmp_path):
    code, out = quorum_tool(cluster, tmp_path, 1, CONTROLLER_LOGIN, "describe", "--status")
    assert code == 0 and "LeaderId:" in out, out
    assert all(f'"id": {i}' in out for i in (1, 2, 3)), out
    # The operator logs in, but as User:operator, with no ACL: DescribeQuorum needs DESCRIBE.
    code, out = quorum_tool(cluster, tmp_path, 1, OPERATOR_LOGIN, "describe", "--status")
    assert code != 0 and "ClusterAuthorizationException" in out, out
    code, out = quorum_tool(cluster, tmp_path, 1, (OPERATOR_LOGIN[0], "not-the-password"), "describe", "--status")
    assert code != 0 and "SaslAuthenticationException" in out and REFUSED in out, out


def answer_to(frame: bytes, port: int) -> bytes:
    """What comes back (until close or 3 s) after `frame` is sent to `port` on a fresh connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.settimeout(3)
        got = b""
        try:
            s.sendall(frame)
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    return got
                got += chunk
        except OSError:
            return got


def test_a_connection_that_has_not_logged_in_gets_nothing(cluster):
    port = cluster.node(1).controller_port
    # A frame of Brook's raft transport (a broker attaching), which a PLAINTEXT voter answers.
    body = b'{"Attach":{"broker_id":99,"broker_epoch":1}}'
    assert answer_to(struct.pack(">I", len(body)) + body, port) == b""
    # Kafka's DescribeQuorum before any login: the connection closes unanswered.
    with pytest.raises(ConnectionError):
        wire.describe_quorum(f"127.0.0.1:{port}", timeout=5)


@contextlib.contextmanager
def controller_with_a_wrong_password(cluster, jaas_key: str, jaas, refusal: str):
    """Restarts node 3 with `jaas("not-the-password")` as its controller login, asserts its peers
    refuse it (`refusal` three times in its log) and that nodes 1 and 2 create a topic and
    replicate without it, then yields while it still runs refused; afterwards node 3 is back with
    its right password, registered."""
    outsider = cluster.node(3)
    outsider.stop()
    others = [1, 2]
    cluster.wait_for(lambda: 3 not in wire.metadata(cluster.bootstrap_of(1), [])["brokers"], DEADLINE_S,
                     "broker 3 fenced after its shutdown")
    seen = len(outsider.log_text())
    outsider.overrides[jaas_key] = jaas("not-the-password")
    try:
        outsider.launch()
        cluster.wait_for(lambda: outsider.log_text()[seen:].count(refusal) >= 3, DEADLINE_S,
                         "three of node 3's logins refused")
        produce_and_read_back(cluster, f"sasl-ctl-without-3-{uuid.uuid4().hex[:8]}", others, others)
        assert 3 not in wire.metadata(cluster.bootstrap_of(1), [])["brokers"]
        yield
    finally:
        outsider.stop()
        outsider.overrides[jaas_key] = jaas(CONTROLLER_LOGIN[1])
    outsider.start()
    cluster.wait_registered(DEADLINE_S)


def test_a_controller_with_a_wrong_password_is_refused_and_the_quorum_works_without_it(cluster, tmp_path):
    with controller_with_a_wrong_password(cluster, JAAS_KEY, controller_jaas, REFUSED):
        code, out = quorum_tool(cluster, tmp_path, 1, CONTROLLER_LOGIN, "describe", "--status")
        assert code == 0 and "LeaderId:" in out, out


def test_a_broker_only_node_logs_in_to_the_controllers_and_registers(cluster):
    # add_broker waits until every running node, the new one included, lists it.
    node = cluster.add_broker()
    assert wire.metadata(node.bootstrap, [])["brokers"].keys() == {1, 2, 3, node.node_id}


@brook_only
def test_a_scram_quorum_formed_from_bootstrap_credentials_replicates_and_lists_them(scram_cluster):
    produce_and_read_back(scram_cluster, f"scram-ctl-{uuid.uuid4().hex[:8]}", [1, 2, 3], scram_cluster.node_ids)
    described = kafka_cli.run(CONFIGS_TOOL, "--bootstrap-server", scram_cluster.bootstrap_of(1), "--describe",
                              "--entity-type", "users", timeout=90).stdout
    assert (f"SCRAM credential configs for user-principal '{CONTROLLER_LOGIN[0]}' are "
            f"SCRAM-SHA-512=iterations={SCRAM_ITERATIONS}") in described, described


@brook_only
def test_a_scram_controller_with_a_wrong_password_is_refused_and_never_registers(scram_cluster):
    with controller_with_a_wrong_password(scram_cluster, SCRAM_JAAS_KEY, scram_controller_jaas, SCRAM_REFUSED):
        pass
