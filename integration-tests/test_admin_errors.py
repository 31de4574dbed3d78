"""Topic administration edge cases answered with the error codes Kafka's spec names,
through confluent-kafka's AdminClient (librdkafka) — and nothing changes when a request is
refused or only validated. The ACL APIs without an authorizer: served at Kafka 4.4's
versions and answered SECURITY_DISABLED with Kafka's messages, on the wire and through
Kafka's own `kafka-acls` (AclCommand).
"""

import time

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from harness import kafka_cli, wire


def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def error_of(futures: dict, key):
    try:
        futures[key].result(timeout=30)
        return None
    except Exception as e:  # confluent raises KafkaException wrapping a KafkaError
        return e.args[0].code()


def topic_names(client) -> set:
    return set(client.list_topics(timeout=30).topics)


def test_validate_only_creates_nothing(broker, topic):
    client = admin(broker)
    assert error_of(client.create_topics([NewTopic(topic, 3, 1)], validate_only=True), topic) is None
    assert topic not in topic_names(client)


def test_refused_creations_carry_the_spec_error_codes(broker, topic):
    client = admin(broker)
    assert error_of(client.create_topics([NewTopic(topic, 2, 1)]), topic) is None
    assert error_of(client.create_topics([NewTopic(topic, 2, 1)]), topic) == KafkaError.TOPIC_ALREADY_EXISTS
    bad_name = "bad name!"
    assert error_of(client.create_topics([NewTopic(bad_name, 1, 1)]), bad_name) == KafkaError.TOPIC_EXCEPTION
    bad_config = topic + "-cfg"
    futures = client.create_topics([NewTopic(bad_config, 1, 1, config={"retention.ms": "soon"})])
    assert error_of(futures, bad_config) == KafkaError.INVALID_CONFIG
    unknown_key = topic + "-key"
    futures = client.create_topics([NewTopic(unknown_key, 1, 1, config={"no.such.key": "1"})])
    assert error_of(futures, unknown_key) == KafkaError.INVALID_CONFIG
    zero = topic + "-zero"
    assert error_of(client.create_topics([NewTopic(zero, 0, 1)]), zero) == KafkaError.INVALID_PARTITIONS
    rf = topic + "-rf"
    assert error_of(client.create_topics([NewTopic(rf, 1, 3)]), rf) == KafkaError.INVALID_REPLICATION_FACTOR
    names = topic_names(client)
    assert topic in names and not {bad_config, unknown_key, zero, rf} & names


def test_partitions_only_grow_and_deleted_topics_are_unknown(broker, topic):
    client = admin(broker)
    assert error_of(client.create_topics([NewTopic(topic, 3, 1)]), topic) is None
    assert error_of(client.create_partitions([NewPartitions(topic, 2)]), topic) == KafkaError.INVALID_PARTITIONS
    assert error_of(client.create_partitions([NewPartitions(topic, 4)]), topic) is None
    # Kafka's brokers learn the new partition from the metadata log a moment after the
    # controller answers: poll with a deadline.
    deadline = time.monotonic() + 30
    while len(client.list_topics(topic, timeout=30).topics[topic].partitions) != 4:
        assert time.monotonic() < deadline, "the 4th partition never appeared in Metadata"
        time.sleep(0.2)
    assert error_of(client.delete_topics([topic]), topic) is None
    deadline = time.monotonic() + 30
    while topic in topic_names(client):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert error_of(client.delete_topics([topic]), topic) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_a_topic_deleted_by_id_is_gone_and_its_name_reusable(broker, topic):
    """DeleteTopics v6+ by topic id (the Java AdminClient's TopicCollection.ofTopicIds);
    re-creating the same name yields a new, empty topic with a new id."""
    from harness import drivers

    drivers.run("java", "create-topic", broker.bootstrap, "--topic", topic, "--partitions", "1")
    first_id = drivers.run("java", "describe-topic", broker.bootstrap, "--topic", topic)["topic_id"]
    drivers.run("java", "produce", broker.bootstrap, "--topic", topic, records=[{"key": "old", "value": "old"}])
    drivers.run("java", "delete-topic", broker.bootstrap, "--topic-id", first_id)
    deadline = time.monotonic() + 30
    while topic in drivers.run("java", "list-topics", broker.bootstrap)["topics"]:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    drivers.run("java", "create-topic", broker.bootstrap, "--topic", topic, "--partitions", "1")
    second_id = drivers.run("java", "describe-topic", broker.bootstrap, "--topic", topic)["topic_id"]
    assert second_id != first_id
    assert drivers.run("java", "offsets", broker.bootstrap, "--topic", topic, "--spec", "latest")["0"]["offset"] == 0


SECURITY_DISABLED = 54
ACL_COMMAND = "org.apache.kafka.tools.AclCommand"
ERROR_PREFIX = "Error while executing ACL command: org.apache.kafka.common.errors.SecurityDisabledException: "


def test_acl_requests_without_an_authorizer_are_security_disabled(broker, topic):
    """Kafka without an authorizer serves DescribeAcls, CreateAcls and DeleteAcls (v1-3 since
    4.0) and refuses them with SECURITY_DISABLED (AclApis): DescribeAcls as a whole, the
    others per creation / per filter. MirrorMaker 2's ACL sync takes this answer quietly."""
    advertised = wire.api_versions(broker.bootstrap)
    assert [advertised.get(api) for api in (29, 30, 31)] == [(1, 3)] * 3
    assert wire.describe_acls(broker.bootstrap) == {
        "error": SECURITY_DISABLED, "message": "No Authorizer is configured on the broker", "resources": []}
    refused = {"error": SECURITY_DISABLED, "message": "No Authorizer is configured."}
    assert wire.create_acls(broker.bootstrap, [topic, topic + "-2"]) == [refused] * 2
    assert wire.delete_acls(broker.bootstrap, filters=2) == [dict(refused, matching=[])] * 2


def acl_command(broker, *args):
    proc = kafka_cli.run(ACL_COMMAND, "--bootstrap-server", broker.bootstrap, *args, check=False)
    errors = [line for line in proc.stdout.splitlines() if line.startswith("Error while executing")]
    return proc.returncode, errors


def test_kafka_acls_says_no_authorizer_is_configured(broker, topic):
    """--list and --add (which lists the topic's ACLs first) stop at DescribeAcls; --remove
    --force sends DeleteAcls. Each prints Kafka's message and exits 1."""
    assert acl_command(broker, "--list") == (1, [ERROR_PREFIX + "No Authorizer is configured on the broker"])
    added = acl_command(broker, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic)
    assert added == (1, [ERROR_PREFIX + "No Authorizer is configured on the broker"])
    removed = acl_command(broker, "--remove", "--force", "--topic", topic)
    assert removed == (1, [ERROR_PREFIX + "No Authorizer is configured."])
