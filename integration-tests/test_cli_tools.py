"""Apache Kafka's own CLI tools (the kafka-*.sh scripts' main classes) against the broker.

Operators drive a cluster with these tools, so Brook must answer them exactly as Kafka does.
Each test runs the real tool from Kafka 4.4's jars (harness.kafka_cli) and asserts on what the
tool prints. In Kafka 4.x every tool lives in kafka-tools:
  kafka-topics.sh                 org.apache.kafka.tools.TopicCommand
  kafka-console-producer.sh       org.apache.kafka.tools.ConsoleProducer
  kafka-console-consumer.sh       org.apache.kafka.tools.consumer.ConsoleConsumer
  kafka-configs.sh                org.apache.kafka.tools.ConfigCommand
  kafka-get-offsets.sh            org.apache.kafka.tools.GetOffsetShell
Metadata changes (create, alter, delete) reach the broker that serves a later request
asynchronously in KRaft, so every read-after-write polls with a deadline instead of sleeping.
"""

import re
import time
from typing import Callable, Dict, List, TypeVar

from harness import kafka_cli
from harness.kafka_cli import ids, parse_topic_description

TOPICS = "org.apache.kafka.tools.TopicCommand"
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"

DEADLINE_S = 30.0
T = TypeVar("T")


def eventually(check: Callable[[], T], timeout: float = DEADLINE_S, interval: float = 0.5) -> T:
    """Call `check` until it stops raising AssertionError (returning its value) or the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() >= deadline:
                raise
        time.sleep(interval)


def topics_tool(broker, *args, check=True):
    return kafka_cli.run(TOPICS, "--bootstrap-server", broker.bootstrap, *args, check=check)


def configs_tool(broker, topic, *args):
    return kafka_cli.run(
        CONFIGS, "--bootstrap-server", broker.bootstrap, "--entity-type", "topics", "--entity-name", topic, *args
    )


def create_topic(broker, topic: str, partitions: int) -> None:
    out = topics_tool(
        broker, "--create", "--topic", topic, "--partitions", partitions, "--replication-factor", 1
    ).stdout
    assert f"Created topic {topic}." in out


def listed_topics(broker) -> List[str]:
    return [line.strip() for line in topics_tool(broker, "--list").stdout.splitlines() if line.strip()]


def test_kafka_topics_creates_lists_describes_alters_and_deletes_a_topic(broker, topic):
    create_topic(broker, topic, 3)

    eventually(lambda: _assert_in(topic, listed_topics(broker)))

    def described_with(count: int) -> Dict:
        desc = parse_topic_description(topics_tool(broker, "--describe", "--topic", topic).stdout)
        assert desc["header"].get("Topic") == topic, desc
        assert desc["header"].get("PartitionCount") == str(count), desc
        assert sorted(desc["partitions"]) == list(range(count)), desc
        return desc

    desc = eventually(lambda: described_with(3))
    topic_id = desc["header"]["TopicId"]
    assert topic_id and topic_id != "AAAAAAAAAAAAAAAAAAAAAA", "a real topic has a non-zero topic id"
    assert desc["header"]["ReplicationFactor"] == "1"
    for partition, fields in desc["partitions"].items():
        assert fields["Topic"] == topic
        replicas, isr = ids(fields["Replicas"]), ids(fields["Isr"])
        assert len(replicas) == 1, fields
        assert int(fields["Leader"]) == replicas[0], f"partition {partition}: leader must be the replica"
        assert isr == replicas, f"partition {partition}: a healthy single replica is in sync"

    out = topics_tool(broker, "--alter", "--topic", topic, "--partitions", 4).stdout
    assert "Error" not in out
    desc = eventually(lambda: described_with(4))
    assert desc["header"]["TopicId"] == topic_id, "adding partitions keeps the topic id"
    assert int(desc["partitions"][3]["Leader"]) == ids(desc["partitions"][3]["Replicas"])[0]

    topics_tool(broker, "--delete", "--topic", topic)
    eventually(lambda: _assert_not_in(topic, listed_topics(broker)))
    gone = topics_tool(broker, "--describe", "--topic", topic, check=False)
    assert gone.returncode != 0
    assert "does not exist" in gone.stdout + gone.stderr


def _assert_in(item, items):
    assert item in items, f"{item!r} not in {items!r}"


def _assert_not_in(item, items):
    assert item not in items, f"{item!r} still in {items!r}"


def test_console_producer_lines_come_back_from_console_consumer_in_partition_order(broker, topic):
    create_topic(broker, topic, 3)
    # Keys repeat (7 distinct) so several records share a partition; values are unique.
    sent = [(f"key-{i % 7}", f"value-{i:03d}") for i in range(100)]
    kafka_cli.run(
        CONSOLE_PRODUCER,
        "--bootstrap-server", broker.bootstrap,
        "--topic", topic,
        "--reader-property", "parse.key=true",
        "--reader-property", "key.separator=|",
        input="".join(f"{k}|{v}\n" for k, v in sent),
    )

    out = kafka_cli.run(
        CONSOLE_CONSUMER,
        "--bootstrap-server", broker.bootstrap,
        "--topic", topic,
        "--from-beginning",
        "--max-messages", 100,
        "--timeout-ms", 60000,
        "--formatter-property", "print.key=true",
        "--formatter-property", "print.partition=true",
        "--formatter-property", "key.separator=|",
    ).stdout
    received = []  # (partition, key, value)
    for line in out.splitlines():
        if not line.strip():
            continue
        match = re.fullmatch(r"Partition:(\d+)\|([^|]*)\|(.*)", line)
        assert match, f"unexpected console-consumer line {line!r}"
        received.append((int(match.group(1)), match.group(2), match.group(3)))

    assert sorted((k, v) for _, k, v in received) == sorted(sent), "exactly the produced lines come back"
    index = {v: i for i, (_, v) in enumerate(sent)}
    partition_of_key: Dict[str, int] = {}
    for partition, key, _ in received:
        assert partition_of_key.setdefault(key, partition) == partition, f"key {key} seen in two partitions"
    for partition in {p for p, _, _ in received}:
        order = [index[v] for p, _, v in received if p == partition]
        assert order == sorted(order), f"partition {partition} is not in produce order"


def parse_config_lines(text: str) -> Dict[str, Dict[str, str]]:
    """kafka-configs --describe lines `  name=value sensitive=false synonyms={SOURCE:name=value, ...}`
    -> {name: {"value": .., "source": first synonym's source, "" when it lists none}}."""
    configs = {}
    for line in text.splitlines():
        match = re.fullmatch(r"\s+([A-Za-z0-9._-]+)=(.*) sensitive=(true|false) synonyms=\{(.*)\}", line)
        if match:
            source = match.group(4).split(":", 1)[0]
            configs[match.group(1)] = {"value": match.group(2), "source": source}
    return configs


def test_kafka_configs_describes_alters_and_restores_topic_configs(broker, topic):
    create_topic(broker, topic, 1)

    def all_configs() -> Dict[str, Dict[str, str]]:
        out = configs_tool(broker, topic, "--describe", "--all").stdout
        assert f"All configs for topic {topic} are:" in out
        return parse_config_lines(out)

    def assert_defaults() -> Dict[str, Dict[str, str]]:
        configs = all_configs()
        assert configs.get("retention.ms", {}).get("value") == "604800000", configs
        assert configs.get("segment.bytes") == {"value": "1073741824", "source": "DEFAULT_CONFIG"}, configs
        # Kafka lists retention.ms with empty synonyms: its default comes from log.retention.hours,
        # and log.retention.ms is unset. Only require that it is no longer a topic override.
        assert configs["retention.ms"]["source"] != "DYNAMIC_TOPIC_CONFIG", configs
        return configs

    defaults = eventually(assert_defaults)
    assert defaults["cleanup.policy"]["value"] == "delete"
    assert defaults["max.message.bytes"]["value"] == "1048588"

    out = configs_tool(broker, topic, "--alter", "--add-config", "retention.ms=1000,segment.bytes=1048576").stdout
    assert f"Completed updating config for topic {topic}." in out

    def assert_altered() -> None:
        dynamic = configs_tool(broker, topic, "--describe").stdout
        assert f"Dynamic configs for topic {topic} are:" in dynamic
        assert parse_config_lines(dynamic) == {
            "retention.ms": {"value": "1000", "source": "DYNAMIC_TOPIC_CONFIG"},
            "segment.bytes": {"value": "1048576", "source": "DYNAMIC_TOPIC_CONFIG"},
        }
        configs = all_configs()
        assert configs["retention.ms"]["value"] == "1000"
        assert configs["segment.bytes"]["value"] == "1048576"
        assert configs["cleanup.policy"] == defaults["cleanup.policy"], "other keys are untouched"

    eventually(assert_altered)

    out = configs_tool(broker, topic, "--alter", "--delete-config", "retention.ms,segment.bytes").stdout
    assert f"Completed updating config for topic {topic}." in out
    eventually(assert_defaults)
    dynamic = configs_tool(broker, topic, "--describe").stdout
    assert parse_config_lines(dynamic) == {}, "no dynamic config is left"


def test_get_offset_shell_reports_the_log_end_offset_after_producing(broker, topic):
    create_topic(broker, topic, 1)
    n = 37
    kafka_cli.run(
        CONSOLE_PRODUCER,
        "--bootstrap-server", broker.bootstrap,
        "--topic", topic,
        input="".join(f"line-{i}\n" for i in range(n)),
    )

    def offsets(*args) -> List[str]:
        out = kafka_cli.run(GET_OFFSETS, "--bootstrap-server", broker.bootstrap, "--topic", topic, *args).stdout
        return [line.strip() for line in out.splitlines() if line.strip()]

    assert offsets() == [f"{topic}:0:{n}"], "latest (the default) is the log end offset"
    assert offsets("--time", "-1") == [f"{topic}:0:{n}"]
    assert offsets("--time", "-2") == [f"{topic}:0:0"], "earliest is the log start offset"
