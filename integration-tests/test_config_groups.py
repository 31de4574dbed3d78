"""Group configs (KIP-848, ConfigResource type GROUP = 32) through Kafka 4.4's own
`kafka-configs --entity-type groups` and librdkafka's AdminClient, on both targets, one broker
per module. Asserted on what the tool prints, line for line.

- `--alter --add-config consumer.session.timeout.ms=50000` on a group that does not exist is
  stored; `--describe` lists it as DYNAMIC_GROUP_CONFIG with the broker key it defaults from
  as synonym; `--describe --all` lists Kafka's 21 group names, the others at their defaults;
  `--delete-config` removes it and `--describe` then says the group has none.
- An unknown group config name and a session timeout outside the broker's
  group.consumer.min/max.session.timeout.ms are refused with Kafka's
  InvalidConfigurationException and message; nothing is stored.
- Error codes as clients see them: INVALID_CONFIG for a bad value, INVALID_REQUEST for the
  empty group name (DescribeConfigs and IncrementalAlterConfigs each with Kafka's message).
- A group's configs survive a broker restart.
"""

import time
import uuid

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from harness import kafka_cli, paths, wire
from harness.broker import Broker, serving

CONFIGS = "org.apache.kafka.tools.ConfigCommand"
INVALID_REQUEST = 42
DEADLINE_S = 15.0

SESSION_LINE = ("  consumer.session.timeout.ms=50000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
                "consumer.session.timeout.ms=50000, DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}")
# Kafka 4.4's GroupConfig, as `--describe --all` prints a group that sets nothing.
DEFAULT_LINES = [
    "  consumer.assignment.interval.ms=1000 sensitive=false synonyms={DEFAULT_CONFIG:group.consumer.assignment.interval.ms=1000}",
    "  consumer.heartbeat.interval.ms=5000 sensitive=false synonyms={DEFAULT_CONFIG:group.consumer.heartbeat.interval.ms=5000}",
    "  consumer.session.timeout.ms=45000 sensitive=false synonyms={DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}",
    "  errors.deadletterqueue.copy.record.enable=false sensitive=false synonyms={DEFAULT_CONFIG:errors.deadletterqueue.copy.record.enable=false}",
    "  errors.deadletterqueue.topic.name= sensitive=false synonyms={DEFAULT_CONFIG:errors.deadletterqueue.topic.name=}",
    "  share.assignment.interval.ms=1000 sensitive=false synonyms={DEFAULT_CONFIG:group.share.assignment.interval.ms=1000}",
    "  share.auto.offset.reset=latest sensitive=false synonyms={DEFAULT_CONFIG:share.auto.offset.reset=latest}",
    "  share.delivery.count.limit=5 sensitive=false synonyms={DEFAULT_CONFIG:group.share.delivery.count.limit=5}",
    "  share.heartbeat.interval.ms=5000 sensitive=false synonyms={DEFAULT_CONFIG:group.share.heartbeat.interval.ms=5000}",
    "  share.isolation.level=read_uncommitted sensitive=false synonyms={DEFAULT_CONFIG:share.isolation.level=read_uncommitted}",
    "  share.partition.max.record.locks=2000 sensitive=false synonyms={DEFAULT_CONFIG:group.share.partition.max.record.locks=2000}",
    "  share.record.lock.duration.ms=30000 sensitive=false synonyms={DEFAULT_CONFIG:group.share.record.lock.duration.ms=30000}",
    "  share.renew.acknowledge.enable=true sensitive=false synonyms={DEFAULT_CONFIG:share.renew.acknowledge.enable=true}",
    "  share.session.timeout.ms=45000 sensitive=false synonyms={DEFAULT_CONFIG:group.share.session.timeout.ms=45000}",
    "  streams.assignment.interval.ms=1000 sensitive=false synonyms={DEFAULT_CONFIG:group.streams.assignment.interval.ms=1000}",
    "  streams.assignor.name=sticky sensitive=false synonyms={DEFAULT_CONFIG:group.streams.assignors=sticky}",
    "  streams.heartbeat.interval.ms=5000 sensitive=false synonyms={DEFAULT_CONFIG:group.streams.heartbeat.interval.ms=5000}",
    "  streams.initial.rebalance.delay.ms=3000 sensitive=false synonyms={DEFAULT_CONFIG:group.streams.initial.rebalance.delay.ms=3000}",
    "  streams.num.standby.replicas=0 sensitive=false synonyms={DEFAULT_CONFIG:group.streams.num.standby.replicas=0}",
    "  streams.rack.aware.assignment.tags= sensitive=false synonyms={DEFAULT_CONFIG:group.streams.rack.aware.assignment.tags=}",
    "  streams.session.timeout.ms=45000 sensitive=false synonyms={DEFAULT_CONFIG:group.streams.session.timeout.ms=45000}",
]


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    b = Broker(paths.target(), tmp_path_factory.mktemp("config-groups"))
    b.start()
    yield b
    b.stop()


@pytest.fixture
def broker(request, node):
    return serving(request, node)


@pytest.fixture
def group():
    return f"cfg-group-{uuid.uuid4().hex[:8]}"


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


def configs_tool(broker, group: str, *args, check: bool = True):
    return kafka_cli.run(CONFIGS, "--bootstrap-server", broker.bootstrap, "--entity-type", "groups",
                         "--entity-name", group, *args, check=check)


def lines(broker, group: str, *args) -> list:
    return configs_tool(broker, group, *args).stdout.splitlines()


def refusal(broker, group: str, *args) -> str:
    """The exception line kafka-configs prints for a refused alter (exit code 1)."""
    proc = configs_tool(broker, group, "--alter", *args, check=False)
    assert proc.returncode == 1, proc
    caused = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("Caused by: ")]
    assert caused, proc.stdout + proc.stderr
    return caused[-1]


def nothing_stored(broker, group: str) -> None:
    assert lines(broker, group, "--describe") == [
        f"The group '{group}' doesn't exist and doesn't have dynamic config."]


def test_kafka_configs_alters_describes_and_deletes_a_groups_session_timeout(broker, group):
    nothing_stored(broker, group)
    assert lines(broker, group, "--alter", "--add-config", "consumer.session.timeout.ms=50000") == [
        f"Completed updating config for group {group}."]

    def stored():
        assert lines(broker, group, "--describe") == [f"Dynamic configs for group {group} are:", SESSION_LINE]
    eventually(stored)
    expected_all = [f"All configs for group {group} are:"] + [
        SESSION_LINE if line.startswith("  consumer.session.timeout.ms=") else line for line in DEFAULT_LINES]
    assert lines(broker, group, "--describe", "--all") == expected_all

    assert lines(broker, group, "--alter", "--delete-config", "consumer.session.timeout.ms") == [
        f"Completed updating config for group {group}."]
    eventually(lambda: nothing_stored(broker, group))
    assert lines(broker, group, "--describe", "--all") == [f"All configs for group {group} are:"] + DEFAULT_LINES


def test_an_unknown_group_config_name_is_refused_and_nothing_is_stored(broker, group):
    assert refusal(broker, group, "--add-config", "no.such.config=1") == (
        "Caused by: org.apache.kafka.common.errors.InvalidConfigurationException: "
        "Unknown group config name: no.such.config")
    nothing_stored(broker, group)


def test_a_session_timeout_outside_the_brokers_bounds_is_refused(broker, group):
    for value in ("1000", "70000"):
        assert refusal(broker, group, "--add-config", f"consumer.session.timeout.ms={value}") == (
            "Caused by: org.apache.kafka.common.errors.InvalidConfigurationException: "
            "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.")
    assert refusal(broker, group, "--add-config", "consumer.heartbeat.interval.ms=abc") == (
        "Caused by: org.apache.kafka.common.errors.InvalidConfigurationException: "
        "Invalid value abc for configuration consumer.heartbeat.interval.ms: Not a number of type INT")
    nothing_stored(broker, group)


def alter_error(broker, group: str, name: str, value: str):
    """IncrementalAlterConfigs SET through librdkafka: None, or the KafkaError."""
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group,
                              incremental_configs=[ConfigEntry(name, value,
                                                               incremental_operation=AlterConfigOpType.SET)])
    try:
        client.incremental_alter_configs([resource])[resource].result(timeout=30)
        return None
    except Exception as e:  # confluent raises KafkaException wrapping a KafkaError
        return e.args[0]


def test_clients_get_kafkas_codes_for_a_bad_value_and_an_empty_group_name(broker, group):
    bad = alter_error(broker, group, "share.auto.offset.reset", "none")
    assert bad is not None and bad.code() == KafkaError.INVALID_CONFIG, bad
    assert bad.str() == (
        "Invalid value none for configuration share.auto.offset.reset: Invalid value `none` for configuration "
        "share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format "
        "'by_duration:<PnDTnHnMn.nS>'.")
    assert wire.describe_configs(broker.bootstrap, wire.GROUP_RESOURCE, group)["error"] == 0, \
        "any group name is described, existing or not"
    # Client libraries refuse an empty name themselves; on the wire Kafka refuses it per API.
    assert wire.incremental_alter_configs(broker.bootstrap, wire.GROUP_RESOURCE, "",
                                          {"consumer.session.timeout.ms": "50000"}) == {
        "error": INVALID_REQUEST, "message": "Default group resources are not allowed."}
    described = wire.describe_configs(broker.bootstrap, wire.GROUP_RESOURCE, "")
    assert (described["error"], described["message"]) == (INVALID_REQUEST, "Group name must not be empty")
    nothing_stored(broker, group)


def test_group_configs_survive_a_restart(broker, group):
    configs_tool(broker, group, "--alter", "--add-config",
                 "consumer.session.timeout.ms=50000,consumer.heartbeat.interval.ms=6000")
    expected = [
        f"Dynamic configs for group {group} are:",
        "  consumer.heartbeat.interval.ms=6000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
        "consumer.heartbeat.interval.ms=6000, DEFAULT_CONFIG:group.consumer.heartbeat.interval.ms=5000}",
        SESSION_LINE,
    ]

    def stored():
        assert lines(broker, group, "--describe") == expected
    eventually(stored)
    broker.restart()
    eventually(stored)
    configs_tool(broker, group, "--alter", "--delete-config",
                 "consumer.session.timeout.ms,consumer.heartbeat.interval.ms")
    eventually(lambda: nothing_stored(broker, group))
