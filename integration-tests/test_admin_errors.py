"""Topic administration edge cases answered with the error codes Kafka's spec names,
through confluent-kafka's AdminClient (librdkafka) — and nothing changes when a request is
refused or only validated.
"""

import time

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic


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
    assert len(client.list_topics(topic, timeout=30).topics[topic].partitions) == 4
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
