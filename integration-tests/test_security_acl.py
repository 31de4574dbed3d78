"""ACLs with Kafka's StandardAuthorizer (issue 25 item 5), the same on Brook and Apache Kafka.

One SASL_PLAINTEXT broker (PLAIN) for the module, with
`authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer` and
`super.users=User:admin;User:ANONYMOUS` (Kafka's inter-broker and controller principals must be
super users);
`allow.everyone.if.no.acl.found` stays false. ACLs are managed with Kafka's own kafka-acls.sh
(`AclCommand`, `--command-config` with the admin login). Each test uses its own users and
topics, so ACLs of one never grant or deny another's.

- `--add` / `--list` / `--remove` round-trip literal, prefixed and `*` resources, and the
  `--producer` / `--consumer --group` / `--transactional-id` / `--idempotent` conveniences.
- With real clients (Java and confluent-kafka through their drivers; confluent-kafka's API for
  group members and transactions): a principal without the ACL is refused with the exact error
  (TopicAuthorizationException / TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED,
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and succeeds once the ACL is added; prefixed and
  wildcard resources grant; DENY beats ALLOW; the super user needs no ACL; Metadata hides the
  topics a principal cannot describe and refuses them when named; a KIP-848 member's topic
  pattern resolves only to the topics its principal may describe (Kafka 4.4's
  TopicRegexResolver), and follows a DESCRIBE granted later.

ACL changes reach Kafka's authorizer through its metadata log a moment after kafka-acls
returns: every "now it works" is polled with a deadline.
"""

import re
import time
import uuid
from typing import Callable, Set, Tuple

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from harness import client_config, drivers, kafka_cli, paths
from harness.broker import Broker, free_port
from harness.security import ADMIN, plain_login_files, start_plain_broker

ACL_COMMAND = "org.apache.kafka.tools.AclCommand"
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    # Kafka's controller listener here is PLAINTEXT: its principal (ANONYMOUS) registers the
    # broker and must be a super user too. Clients only reach the SASL listener.
    "super.users": f"User:{ADMIN[0]};User:ANONYMOUS",
}
# Kafka re-resolves a consumer group's topic patterns when topics are created or every this
# often (default 10 min): a DESCRIBE granted later is picked up within it. Brook re-resolves
# at the first heartbeat after any metadata change, ACLs included.
REGEX_REFRESH = {"group.consumer.regex.refresh.interval.ms": 10000}
USERS = {name: f"{name}-secret" for name in
         ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "ken")}
DEADLINE_S = 30

Binding = Tuple[str, str, str, str, str, str, str]  # type, name, pattern, principal, host, op, permission


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = start_plain_broker(paths.target(), tmp_path_factory.mktemp("acl"), free_port(2), USERS, AUTHORIZER | REGEX_REFRESH)
    yield b
    b.stop()


@pytest.fixture(scope="module")
def logins(tmp_path_factory):
    return plain_login_files(tmp_path_factory.mktemp("acl-clients"), USERS)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def acls(broker: Broker, logins, *args) -> str:
    return kafka_cli.run(ACL_COMMAND, "--bootstrap-server", broker.bootstrap, "--command-config",
                         logins["admin"], *args).stdout


_PATTERN = re.compile(r"ResourcePattern\(resourceType=(\w+), name=(.*?), patternType=(\w+)\)")
_ENTRY = re.compile(r"\(principal=(.*?), host=(.*?), operation=(\w+), permissionType=(\w+)\)")


def listed(output: str) -> Set[Binding]:
    """kafka-acls --list output: each `Current ACLs for resource ResourcePattern(...)` header
    followed by its `(principal=…, host=…, operation=…, permissionType=…)` lines."""
    out: Set[Binding] = set()
    pattern = None
    for line in output.splitlines():
        m = _PATTERN.search(line)
        if m:
            pattern = m.groups()
            continue
        e = _ENTRY.search(line)
        if e and pattern:
            out.add((*pattern, *e.groups()))
    return out


def list_acls(broker, logins, *resource) -> Set[Binding]:
    return listed(acls(broker, logins, "--list", *resource))


def create_topic(broker, logins, topic: str) -> None:
    drivers.run("confluent", "create-topic", broker.bootstrap, "--topic", topic, "--partitions", 1,
                "--client-config", logins["admin"])


def conf(logins, user: str) -> dict:
    return client_config.librdkafka(client_config.load(logins[user]))


def eventually(check: Callable[[], object], what: str, deadline_s: float = DEADLINE_S):
    """Retry `check` until it returns without raising (ACLs propagate), then return its value."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return check()
        except (drivers.DriverError, KafkaException, AssertionError) as e:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: still failing after {deadline_s} s: {e}") from e
            time.sleep(0.3)


def produce(client: str, broker, logins, user: str, topic: str, n: int = 3):
    records = [{"key": f"k{i}", "value": f"{user}-{i}"} for i in range(n)]
    args = ["--topic", topic, "--client-config", logins[user]]
    if client == "java":
        args += ["--acks", "1"]  # not idempotent: the refusal is the topic's, not InitProducerId's
    return drivers.run(client, "produce", broker.bootstrap, *args, records=records, timeout=60)


def produce_refused(client: str, broker, logins, user: str, topic: str) -> str:
    """What the driver reported: Java prints each failed record's exception on stdout."""
    with pytest.raises(drivers.DriverError) as refused:
        produce(client, broker, logins, user, topic)
    return refused.value.stdout + refused.value.stderr


def topic_error(broker, logins, user: str, topic: str):
    """The error Metadata gives `user` for a named topic (None when it is served)."""
    md = AdminClient(conf(logins, user) | {"bootstrap.servers": broker.bootstrap}).list_topics(topic=topic, timeout=20)
    t = md.topics.get(topic)
    return None if t is None or t.error is None else t.error.code()


# ---- kafka-acls round trips -----------------------------------------------------------------

def test_literal_prefixed_and_wildcard_acls_round_trip_through_kafka_acls(broker, logins):
    topic, prefix = unique("lit"), unique("pre")
    acls(broker, logins, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic)
    acls(broker, logins, "--add", "--allow-principal", "User:alice", "--operation", "Write",
         "--resource-pattern-type", "prefixed", "--topic", prefix)
    acls(broker, logins, "--add", "--deny-principal", "User:alice", "--deny-host", "10.0.0.1",
         "--operation", "Describe", "--topic", "*")
    assert list_acls(broker, logins, "--topic", topic) == {
        ("TOPIC", topic, "LITERAL", "User:alice", "*", "READ", "ALLOW")}
    assert list_acls(broker, logins, "--resource-pattern-type", "prefixed", "--topic", prefix) == {
        ("TOPIC", prefix, "PREFIXED", "User:alice", "*", "WRITE", "ALLOW")}
    assert ("TOPIC", "*", "LITERAL", "User:alice", "10.0.0.1", "DESCRIBE", "DENY") in list_acls(
        broker, logins, "--topic", "*")
    # A MATCH filter lists every binding that applies to a topic: literal, prefixed and `*`.
    matching = list_acls(broker, logins, "--resource-pattern-type", "match", "--topic", prefix + "-x")
    assert ("TOPIC", prefix, "PREFIXED", "User:alice", "*", "WRITE", "ALLOW") in matching
    assert ("TOPIC", "*", "LITERAL", "User:alice", "10.0.0.1", "DESCRIBE", "DENY") in matching
    assert not any(b[1] == topic for b in matching)
    by_principal = list_acls(broker, logins, "--principal", "User:alice")
    assert {b[1] for b in by_principal} >= {topic, prefix, "*"}

    acls(broker, logins, "--remove", "--force", "--topic", topic)
    acls(broker, logins, "--remove", "--force", "--resource-pattern-type", "prefixed", "--topic", prefix)
    acls(broker, logins, "--remove", "--force", "--deny-principal", "User:alice", "--deny-host", "10.0.0.1",
         "--operation", "Describe", "--topic", "*")
    assert list_acls(broker, logins, "--topic", topic) == set()
    assert list_acls(broker, logins, "--resource-pattern-type", "prefixed", "--topic", prefix) == set()
    assert not any(b[3] == "User:alice" for b in list_acls(broker, logins, "--topic", "*"))


def test_producer_consumer_transactional_and_idempotent_conveniences_round_trip(broker, logins):
    topic, group, txn = unique("conv"), unique("g"), unique("txn")
    acls(broker, logins, "--add", "--allow-principal", "User:bob", "--producer", "--topic", topic,
         "--transactional-id", txn, "--idempotent")
    acls(broker, logins, "--add", "--allow-principal", "User:bob", "--consumer", "--topic", topic, "--group", group)
    bob = {b for b in list_acls(broker, logins, "--principal", "User:bob")}
    assert bob == {
        ("TOPIC", topic, "LITERAL", "User:bob", "*", op, "ALLOW") for op in ("WRITE", "DESCRIBE", "CREATE", "READ")
    } | {
        ("TRANSACTIONAL_ID", txn, "LITERAL", "User:bob", "*", op, "ALLOW") for op in ("WRITE", "DESCRIBE")
    } | {
        ("GROUP", group, "LITERAL", "User:bob", "*", "READ", "ALLOW"),
        ("CLUSTER", "kafka-cluster", "LITERAL", "User:bob", "*", "IDEMPOTENT_WRITE", "ALLOW"),
    }
    acls(broker, logins, "--remove", "--force", "--allow-principal", "User:bob", "--producer", "--topic", topic,
         "--transactional-id", txn, "--idempotent")
    acls(broker, logins, "--remove", "--force", "--allow-principal", "User:bob", "--consumer", "--topic", topic,
         "--group", group)
    assert list_acls(broker, logins, "--principal", "User:bob") == set()


# ---- the ACL matrix with real clients ----------------------------------------------------------

@pytest.mark.parametrize("client", ["java", "confluent"])
def test_a_producer_without_write_is_refused_then_produces_once_granted(client, broker, logins):
    user = {"java": "carol", "confluent": "dave"}[client]
    topic = unique(f"w-{client}")
    create_topic(broker, logins, topic)
    stderr = produce_refused(client, broker, logins, user, topic)
    expected = "TopicAuthorizationException" if client == "java" else "TOPIC_AUTHORIZATION_FAILED"
    assert expected in stderr, stderr[-2000:]
    acls(broker, logins, "--add", "--allow-principal", f"User:{user}", "--producer", "--topic", topic)
    produced = eventually(lambda: produce(client, broker, logins, user, topic), "produce after --producer")
    assert len(produced) == 3


def test_a_java_consumer_without_read_is_refused_then_consumes_once_granted(broker, logins):
    topic = unique("r-java")
    create_topic(broker, logins, topic)
    produce("confluent", broker, logins, "admin", topic)

    def consume():
        return drivers.run("java", "consume", broker.bootstrap, "--topic", topic, "--partitions", "0",
                           "--from", "earliest", "--count", 3, "--timeout-ms", 15000,
                           "--client-config", logins["erin"], timeout=60)

    with pytest.raises(drivers.DriverError) as refused:
        consume()
    reported = refused.value.stdout + refused.value.stderr
    assert "TopicAuthorizationException" in reported, reported[-2000:]
    acls(broker, logins, "--add", "--allow-principal", "User:erin", "--operation", "Read", "--topic", topic)
    consumed = eventually(consume, "consume after --add Read")
    assert [r["value"] for r in consumed] == [f"admin-{i}" for i in range(3)]


def group_member(broker, logins, user: str, group: str, topic: str) -> Consumer:
    consumer = Consumer(conf(logins, user) | {
        "bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False})
    consumer.subscribe([topic])
    return consumer


def first_error_or_record(consumer: Consumer, timeout_s: float = 20):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        return msg
    return None


def test_a_group_member_without_read_on_its_group_gets_group_authorization_failed(broker, logins):
    topic, group = unique("grp"), unique("g")
    create_topic(broker, logins, topic)
    produce("confluent", broker, logins, "admin", topic)
    acls(broker, logins, "--add", "--allow-principal", "User:grace", "--operation", "Read", "--topic", topic)
    consumer = group_member(broker, logins, "grace", group, topic)
    try:
        msg = first_error_or_record(consumer)
        assert msg is not None and msg.error() is not None, "a record arrived without READ on the group"
        assert msg.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED, msg.error()
    finally:
        consumer.close()
    acls(broker, logins, "--add", "--allow-principal", "User:grace", "--consumer", "--topic", topic, "--group", group)

    def joined():
        member = group_member(broker, logins, "grace", group, topic)
        try:
            msg = first_error_or_record(member)
            assert msg is not None and msg.error() is None, None if msg is None else msg.error()
            member.commit(message=msg, asynchronous=False)
            return msg.value()
        finally:
            member.close()

    assert eventually(joined, "group consume after --consumer --group") == b"admin-0"


def test_a_confluent_member_without_read_on_its_topic_gets_topic_authorization_failed(broker, logins):
    topic, group = unique("r-confluent"), unique("g")
    create_topic(broker, logins, topic)
    produce("confluent", broker, logins, "admin", topic)
    acls(broker, logins, "--add", "--allow-principal", "User:frank", "--operation", "Read", "--group", group)
    consumer = group_member(broker, logins, "frank", group, topic)
    try:
        msg = first_error_or_record(consumer)
        assert msg is not None and msg.error() is not None, "a record arrived without READ on the topic"
        assert msg.error().code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, msg.error()
    finally:
        consumer.close()
    acls(broker, logins, "--add", "--allow-principal", "User:frank", "--operation", "Read", "--topic", topic)

    def consumed():
        member = group_member(broker, logins, "frank", group, topic)
        try:
            msg = first_error_or_record(member)
            assert msg is not None and msg.error() is None, None if msg is None else msg.error()
            return msg.value()
        finally:
            member.close()

    assert eventually(consumed, "consume after --add Read on the topic") == b"admin-0"


def transactional_producer(broker, logins, user: str, txn: str) -> Producer:
    return Producer(conf(logins, user) | {"bootstrap.servers": broker.bootstrap, "transactional.id": txn})


def test_a_transactional_producer_without_write_on_its_id_is_refused_then_commits(broker, logins):
    topic, txn = unique("tx"), unique("txn")
    create_topic(broker, logins, topic)
    acls(broker, logins, "--add", "--allow-principal", "User:heidi", "--producer", "--topic", topic)
    with pytest.raises(KafkaException) as refused:
        transactional_producer(broker, logins, "heidi", txn).init_transactions(20)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, refused.value
    acls(broker, logins, "--add", "--allow-principal", "User:heidi", "--producer", "--topic", topic,
         "--transactional-id", txn)

    def commit():
        producer = transactional_producer(broker, logins, "heidi", txn)
        producer.init_transactions(20)
        producer.begin_transaction()
        producer.produce(topic, value=b"committed")
        producer.commit_transaction(20)

    eventually(commit, "transaction after --transactional-id")


def test_prefixed_and_wildcard_acls_grant_and_a_deny_beats_every_allow(broker, logins):
    prefix = unique("pfx")
    granted, other, denied = f"{prefix}-a", unique("nopfx"), f"{prefix}-secret"
    for topic in (granted, other, denied):
        create_topic(broker, logins, topic)
    acls(broker, logins, "--add", "--allow-principal", "User:ivan", "--operation", "Write", "--operation", "Describe",
         "--resource-pattern-type", "prefixed", "--topic", prefix)
    eventually(lambda: produce("confluent", broker, logins, "ivan", granted), "produce under a prefixed ACL")
    assert "TOPIC_AUTHORIZATION_FAILED" in produce_refused("confluent", broker, logins, "ivan", other)
    # DENY beats ALLOW: a literal deny under the prefix, and again under a `*` allow of everything.
    acls(broker, logins, "--add", "--deny-principal", "User:ivan", "--operation", "Write", "--topic", denied)
    acls(broker, logins, "--add", "--allow-principal", "User:ivan", "--operation", "All", "--topic", "*")
    eventually(lambda: produce("confluent", broker, logins, "ivan", other), "produce under a `*` ACL")

    def refused():
        assert "TOPIC_AUTHORIZATION_FAILED" in produce_refused("confluent", broker, logins, "ivan", denied)

    eventually(refused, "a DENY under prefixed and `*` ALLOWs")


def test_the_super_user_needs_no_acl(broker, logins):
    topic = unique("su")
    create_topic(broker, logins, topic)
    assert len(produce("java", broker, logins, "admin", topic)) == 3


def test_metadata_hides_topics_the_principal_cannot_describe(broker, logins):
    seen, hidden = unique("seen"), unique("hidden")
    for topic in (seen, hidden):
        create_topic(broker, logins, topic)
    acls(broker, logins, "--add", "--allow-principal", "User:judy", "--operation", "Read", "--topic", seen)

    def listed_topics():
        names = set(drivers.run("java", "list-topics", broker.bootstrap, "--client-config", logins["judy"])["topics"])
        assert seen in names, names
        return names

    names = eventually(listed_topics, "list-topics after READ (implies DESCRIBE)")
    assert hidden not in names
    assert topic_error(broker, logins, "judy", hidden) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Not even whether a topic exists: an unknown name is refused the same way.
    assert topic_error(broker, logins, "judy", unique("nowhere")) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert topic_error(broker, logins, "judy", seen) is None


def test_a_consumer_protocol_pattern_resolves_only_to_topics_the_member_may_describe(broker, logins):
    prefix = unique("rx")
    seen, hidden = f"{prefix}-seen", f"{prefix}-hidden"
    for topic in (seen, hidden):
        create_topic(broker, logins, topic)
        produce("confluent", broker, logins, "admin", topic)
    group = unique("g")
    acls(broker, logins, "--add", "--allow-principal", "User:ken", "--consumer", "--topic", seen, "--group", group)
    consumer = Consumer(conf(logins, "ken") | {
        "bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
        "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got = []

    def read(topic: str):
        def check():
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append((msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value()))
            assert sum(1 for r in got if r[0] == topic) == 3, got
        return check

    def described():
        admin = AdminClient(conf(logins, "admin") | {"bootstrap.servers": broker.bootstrap})
        desc = admin.describe_consumer_groups([group])[group].result(20)
        return {(tp.topic, tp.partition) for m in desc.members for tp in m.assignment.topic_partitions}

    try:
        consumer.subscribe([f"^{prefix}-.*"])
        eventually(read(seen), "the records of the topic ken may read")
        assert {(tp.topic, tp.partition) for tp in consumer.assignment()} == {(seen, 0)}
        assert described() == {(seen, 0)}
        assert [r[0] for r in got] == [seen] * 3, got
        assert [(r[2], r[3], r[4]) for r in got] == [(i, f"k{i}".encode(), f"admin-{i}".encode()) for i in range(3)]

        # Allowed to describe and read the other topic, the member's pattern takes it in.
        acls(broker, logins, "--add", "--allow-principal", "User:ken", "--consumer", "--topic", hidden, "--group", group)
        # Kafka: at the first heartbeat (5 s) after REGEX_REFRESH has passed.
        eventually(read(hidden), "the records of the topic granted later", deadline_s=60)
        assert {(tp.topic, tp.partition) for tp in consumer.assignment()} == {(seen, 0), (hidden, 0)}
    finally:
        consumer.close()
