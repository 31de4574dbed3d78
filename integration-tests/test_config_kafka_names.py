"""Every Kafka 4.4 config name is known (issue 29, section 2), on both targets, one broker per
module. The expected names, types, defaults and update modes come from Kafka 4.4's jars at
test time (harness/kafka_config_facts.py), never from a hand-copied list.

- DescribeConfigs of a topic lists every non-internal Kafka topic config name, of a broker every
  non-internal broker config name, each with Kafka's type, sensitivity (PASSWORD: value null) and
  read-only flag, and Kafka's default wherever the source is DEFAULT_CONFIG.
- IncrementalAlterConfigs DELETE of a name that is not set, or that no one defines, succeeds and
  changes nothing (MirrorMaker 2 sends one for every source config left at its default).
- A Kafka-only topic config (tiered storage, compression level) is stored and described back; a
  made-up one gets Kafka's InvalidConfigurationException.
- AlterConfigs (the legacy API, through librdkafka as its admin test 0081 sends it) of the broker
  config sasl.kerberos.min.time.before.relogin is accepted per broker; a read-only broker config
  and a per-broker one sent to the cluster default get Kafka's INVALID_REQUEST.
"""

import json
import time

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

from harness import drivers, kafka_config_facts, paths
from harness.broker import Broker, serving

NODE_ID = "1"  # the harness's node.id on both targets
DEADLINE_S = 15.0

# Brook-only broker keys (README "Configuration"), described beside Kafka's.
BROOK_ONLY_BROKER_KEYS = {
    "brook.fetch.zero.copy",
    "brook.log.open.files.max",
    "brook.offsets.retention.ms",
    "brook.transaction.version",
    "cluster.id",
    "metrics.listener",
}
# Brook's documented default deviations (README "Configuration"): where Kafka has no default
# (node.id, process.roles, controller.listener.names) or Brook chose another one.
BROOK_DEFAULTS = {
    "log.dir": "./data",
    "socket.send.buffer.bytes": "262144",
    "controller.quorum.fetch.timeout.ms": "1000",
    "process.roles": "broker,controller",
    "controller.listener.names": "",
    # Brook serves classic and consumer (KIP-848) groups, not streams groups (KIP-1071).
    "group.coordinator.rebalance.protocols": "classic,consumer",
}
# Per-broker dynamic in Kafka, read-only in Brook (it cannot rebind its listeners).
BROOK_READ_ONLY = {"listeners", "listener.security.protocol.map"}


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    b = Broker(paths.target(), tmp_path_factory.mktemp("config-names"))
    b.start()
    yield b
    b.stop()


@pytest.fixture
def broker(request, node):
    return serving(request, node)


def eventually(check, deadline_s: float = DEADLINE_S):
    """Poll `check` until it returns without AssertionError (Kafka applies config changes
    through its metadata log, so a describe right after an alter may not see it yet)."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def describe(broker, resource_type: str, name: str) -> dict:
    """DescribeConfigs through librdkafka (in-process, so polls are cheap): {name: {value, source}};
    the tests that compare every flag use the Java AdminClient (kafka_config_facts.describe)."""
    kind = ResourceType.TOPIC if resource_type == "topic" else ResourceType.BROKER
    resource = ConfigResource(kind, name)
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        entries = client.describe_configs([resource])[resource].result(timeout=30)
    except Exception as e:  # a just-created topic may not have reached the broker yet
        raise AssertionError(f"describe {resource_type} {name}: {e}")
    return {n: {"value": e.value, "source": ConfigSource(e.source).name} for n, e in entries.items()}


def alter(broker, *args: str) -> None:
    drivers.run("java", "alter-configs", broker.bootstrap, *args)


def refusal(broker, *args: str) -> dict:
    """The Java AdminClient's exception for an alter-configs that must fail: {error, message}."""
    with pytest.raises(drivers.DriverError) as failed:
        alter(broker, *args)
    return json.loads(failed.value.stderr.strip().splitlines()[-1])


def create_topic(broker, topic: str, *configs: str) -> None:
    args = ["--topic", topic, "--partitions", "1"]
    for config in configs:
        args += ["--config", config]
    drivers.run("java", "create-topic", broker.bootstrap, *args)


def kafka_names(kind: str) -> dict:
    return {n: d for n, d in kafka_config_facts.defs()[kind].items() if not d["internal"]}


def test_a_topic_is_described_with_every_kafka_topic_config_name_and_default(broker, topic):
    create_topic(broker, topic)
    expected = kafka_names("topic")
    eventually(lambda: describe(broker, "topic", topic))
    described = kafka_config_facts.describe(broker.bootstrap, "topic", topic)
    assert sorted(described) == sorted(expected)
    compared = 0
    for name, fact in expected.items():
        entry = described[name]
        assert (entry["type"], entry["sensitive"], entry["read_only"]) == (fact["type"], False, False), name
        if entry["source"] == "DEFAULT_CONFIG":
            assert entry["value"] == fact["default"], name
            compared += 1
    assert compared >= len(expected) - 2, "almost every topic config is at its default here"


def test_a_broker_is_described_with_every_kafka_broker_config_name_default_and_flag(broker):
    expected = kafka_names("broker")
    described = kafka_config_facts.describe(broker.bootstrap, "broker", NODE_ID)
    assert not set(expected) - set(described), "Kafka broker configs missing"
    extra = set(described) - set(expected)
    assert extra == (BROOK_ONLY_BROKER_KEYS if paths.target() == "brook" else set())
    brook = paths.target() == "brook"
    compared = 0
    for name, fact in expected.items():
        entry = described[name]
        assert entry["type"] == fact["type"], name
        sensitive = fact["type"] == "PASSWORD"
        assert entry["sensitive"] == sensitive, name
        if sensitive:
            assert entry["value"] is None, name
        read_only = fact["mode"] == "read-only" or (brook and name in BROOK_READ_ONLY)
        assert entry["read_only"] == read_only, name
        if entry["source"] == "DEFAULT_CONFIG" and not sensitive:
            default = BROOK_DEFAULTS.get(name, fact["default"]) if brook else fact["default"]
            assert entry["value"] == default, name
            compared += 1
    assert compared > 300, f"only {compared} defaults compared"
    # The name librdkafka's admin test alters: a per-broker dynamic key at Kafka's default.
    relogin = described["sasl.kerberos.min.time.before.relogin"]
    assert (relogin["value"], relogin["source"], relogin["read_only"]) == ("60000", "DEFAULT_CONFIG", False)


def test_deleting_unset_and_unknown_topic_configs_succeeds_and_changes_nothing(broker, topic):
    create_topic(broker, topic, "retention.ms=3600000")
    before = eventually(lambda: describe(broker, "topic", topic))
    assert before["retention.ms"]["value"] == "3600000"
    alter(broker, "--topic", topic,
          "--delete", "errors.deadletterqueue.group.enable",  # what MirrorMaker 2 sent
          "--delete", "compression.zstd.level",
          "--delete", "segment.ms",
          "--delete", "no.such.config.anywhere")
    assert describe(broker, "topic", topic) == before


def test_deleting_unset_and_unknown_broker_configs_succeeds_and_changes_nothing(broker):
    before = describe(broker, "broker", NODE_ID)
    alter(broker, "--broker", NODE_ID, "--delete", "no.such.broker.config", "--delete", "log.retention.ms",
          "--delete", "num.partitions")
    assert describe(broker, "broker", NODE_ID) == before


def test_a_kafka_only_topic_config_is_stored_and_described_back(broker, topic):
    create_topic(broker, topic)
    alter(broker, "--topic", topic, "--set", "remote.log.copy.disable=true", "--set", "compression.zstd.level=7")

    def stored():
        got = describe(broker, "topic", topic)
        assert (got["remote.log.copy.disable"]["value"], got["remote.log.copy.disable"]["source"]) == \
            ("true", "DYNAMIC_TOPIC_CONFIG")
        assert (got["compression.zstd.level"]["value"], got["compression.zstd.level"]["source"]) == \
            ("7", "DYNAMIC_TOPIC_CONFIG")
    eventually(stored)
    alter(broker, "--topic", topic, "--delete", "remote.log.copy.disable", "--delete", "compression.zstd.level")

    def back_to_defaults():
        got = describe(broker, "topic", topic)
        assert (got["remote.log.copy.disable"]["value"], got["remote.log.copy.disable"]["source"]) == \
            ("false", "DEFAULT_CONFIG")
        assert got["compression.zstd.level"]["value"] == "3"
    eventually(back_to_defaults)


def test_made_up_and_invalid_topic_configs_are_refused_as_kafka_refuses_them(broker, topic):
    create_topic(broker, topic)
    assert refusal(broker, "--topic", topic, "--set", "no.such.config=1") == {
        "error": "InvalidConfigurationException",
        "message": "Unknown topic config name: no.such.config",
    }
    assert refusal(broker, "--topic", topic, "--set", "compression.zstd.level=99") == {
        "error": "InvalidConfigurationException",
        "message": "Invalid value 99 for configuration compression.zstd.level: Value must be no more than 22",
    }
    assert refusal(broker, "--topic", topic, "--set", "remote.storage.enable=true") == {
        "error": "InvalidConfigurationException",
        "message": "Tiered Storage functionality is disabled in the broker. "
                   "Topic cannot be configured with remote log storage.",
    }
    described = describe(broker, "topic", topic)
    assert described["compression.zstd.level"]["source"] == "DEFAULT_CONFIG"
    assert described["remote.storage.enable"]["value"] == "false"


def legacy_alter_broker(broker, configs: dict):
    """AlterConfigs (the legacy API) of this broker through librdkafka, as test 0081 sends it;
    None on success, else the KafkaError."""
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, NODE_ID, set_config=configs)
    try:
        client.alter_configs([resource])[resource].result(timeout=30)
        return None
    except Exception as e:  # confluent raises KafkaException wrapping a KafkaError
        return e.args[0]


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_legacy_alter_configs_of_the_kerberos_relogin_time_is_stored_per_broker(broker):
    assert legacy_alter_broker(broker, {"sasl.kerberos.min.time.before.relogin": "58000"}) is None

    def stored():
        entry = describe(broker, "broker", NODE_ID)["sasl.kerberos.min.time.before.relogin"]
        assert (entry["value"], entry["source"]) == ("58000", "DYNAMIC_BROKER_CONFIG")
    eventually(stored)
    refused = legacy_alter_broker(broker, {"num.partitions": "3"})
    assert refused is not None and refused.code() == KafkaError.INVALID_REQUEST
    assert refused.str() == "Cannot update these configs dynamically: [num.partitions]"
    # A per-broker key cannot be a cluster default (the Java AdminClient's empty broker name).
    assert refusal(broker, "--broker", "", "--set", "sasl.kerberos.min.time.before.relogin=59000") == {
        "error": "InvalidRequestException",
        "message": "Cannot update these configs at default cluster level, broker id must be specified: "
                   "[sasl.kerberos.min.time.before.relogin]",
    }
    alter(broker, "--broker", NODE_ID, "--delete", "sasl.kerberos.min.time.before.relogin")

    def back():
        entry = describe(broker, "broker", NODE_ID)["sasl.kerberos.min.time.before.relogin"]
        assert (entry["value"], entry["source"]) == ("60000", "DEFAULT_CONFIG")
    eventually(back)
