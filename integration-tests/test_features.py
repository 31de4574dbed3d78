"""Feature levels with Kafka's own `kafka-features` (issue 27 item 6, UpdateFeatures 57): the
features Brook implements, `eligible.leader.replicas.version` (KIP-966), `group.version`
(KIP-848) and `transaction.version` (KIP-890), are described, upgraded, downgraded, dry-run and
disabled as on Kafka 4.4, with Kafka's refusals word for word; a level set by the tool is kept by
the metadata quorum across a restart and is what ApiVersions tells clients; at `group.version` 0
a KIP-848 member is refused (librdkafka's fatal UNSUPPORTED_VERSION, as on Kafka), and back at 1
it consumes again. Turning eligible leader replicas back on pins one cluster-wide
`min.insync.replicas` (Kafka's ELR safety configs), and while they are on `kafka-configs` may
neither set a broker's own min.insync.replicas nor remove the cluster-wide one.

One broker for the module, both targets. Only these features' lines are compared: Kafka 4.4
also lists features Brook does not implement (metadata.version, kraft.version, share.version,
streams.version), and Brook refuses to finalize those as a Kafka controller refuses a feature it
does not know.
"""

import re
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from harness import kafka_cli, paths
from harness.broker import Broker

TOOL = "org.apache.kafka.tools.FeatureCommand"
ELR = "eligible.leader.replicas.version"
FEATURES = (ELR, "group.version", "transaction.version")
DEFAULTS = {ELR: 1, "group.version": 1, "transaction.version": 2}
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
PREAMBLE = "The update failed for all features since the following feature had an error: "
DEADLINE_S = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = Broker(paths.target(), tmp_path_factory.mktemp("features"), {})
    b.start()
    yield b
    b.stop()


@pytest.fixture(autouse=True)
def default_levels(broker):
    """Each test starts from the default levels (ELR 1, group.version 1, transaction.version 2)."""
    if levels(broker) != DEFAULTS:
        features(broker, "upgrade", *[a for name, level in DEFAULTS.items() for a in ("--feature", f"{name}={level}")])


def features(broker, *args, check=True):
    return kafka_cli.run(TOOL, "--bootstrap-server", broker.bootstrap, *args, check=check)


def described(broker) -> dict:
    """`describe`'s fields per feature Brook implements, without the epoch."""
    out = {}
    for line in features(broker, "describe").stdout.splitlines():
        fields = dict(re.findall(r"(\w+): (\S+)", line))
        name = fields.pop("Feature", None)
        if name in FEATURES:
            out[name] = {k: v for k, v in fields.items() if k != "Epoch"}
    return out


def levels(broker) -> dict:
    return {name: int(f["FinalizedVersionLevel"]) for name, f in described(broker).items()}


def refused(broker, *args) -> str:
    proc = features(broker, *args, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return proc.stdout.strip()


def test_describe_lists_the_supported_ranges_and_default_levels(broker):
    assert described(broker) == {
        ELR: {"SupportedMinVersion": "0", "SupportedMaxVersion": "1", "FinalizedVersionLevel": "1"},
        "group.version": {"SupportedMinVersion": "0", "SupportedMaxVersion": "1", "FinalizedVersionLevel": "1"},
        "transaction.version": {"SupportedMinVersion": "0", "SupportedMaxVersion": "2", "FinalizedVersionLevel": "2"},
    }


def test_refusals_carry_kafkas_messages_and_change_nothing(broker):
    controller = r"Local controller \d+"
    cases = [
        (("upgrade", "--feature", "transaction.version=3"),
         rf"Could not upgrade transaction.version to 3\. {PREAMBLE}Invalid update version 3 for feature "
         rf"transaction\.version\. {controller} only supports versions 0-2"),
        (("upgrade", "--feature", "transaction.version=1"),
         rf"Could not upgrade transaction.version to 1\. {PREAMBLE}Invalid update version 1 for feature "
         r"transaction\.version\. Can't downgrade the version of this feature without setting the upgrade type to "
         r"either safe or unsafe downgrade\."),
        (("downgrade", "--feature", "group.version=3"),
         rf"Could not downgrade group.version to 3\. {PREAMBLE}Invalid update version 3 for feature "
         rf"group\.version\. {controller} only supports versions 0-1"),
        (("upgrade", "--feature", "foo.version=1"),
         rf"Could not upgrade foo.version to 1\. {PREAMBLE}Invalid update version 1 for feature foo\.version\. "
         rf"{controller} does not support this feature\."),
    ]
    for args, expected in cases:
        out = refused(broker, *args)
        assert re.fullmatch(expected, out), (args, out)
    # One bad feature fails both, and neither changes.
    out = refused(broker, "downgrade", "--feature", "transaction.version=1", "--feature", "group.version=5")
    lines = sorted(out.splitlines())
    assert len(lines) == 2 and all(l.endswith("only supports versions 0-1") for l in lines), out
    assert lines[0].startswith("Could not downgrade group.version to 5.") and \
        lines[1].startswith("Could not downgrade transaction.version to 1."), out
    assert levels(broker) == DEFAULTS


def test_dry_run_downgrade_and_disable_and_the_levels_survive_a_restart(broker):
    assert features(broker, "downgrade", "--feature", "transaction.version=1", "--dry-run").stdout.strip() == \
        "transaction.version can be downgraded to 1."
    assert levels(broker)["transaction.version"] == 2
    assert features(broker, "downgrade", "--feature", "transaction.version=1").stdout.strip() == \
        "transaction.version was downgraded to 1."
    assert levels(broker)["transaction.version"] == 1
    assert features(broker, "disable", "--feature", "group.version").stdout.strip() == "group.version was disabled."
    assert levels(broker) == {ELR: 1, "group.version": 0, "transaction.version": 1}
    broker.stop()
    broker.start()
    assert levels(broker) == {ELR: 1, "group.version": 0, "transaction.version": 1}
    out = features(broker, "upgrade", "--feature", "group.version=1", "--feature", "transaction.version=2").stdout
    assert sorted(out.strip().splitlines()) == ["group.version was upgraded to 1.", "transaction.version was upgraded to 2."]


def consume_one(broker, topic: str):
    """A KIP-848 member's first record, or the error it got instead."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                return msg.error() or msg.value()
        return None
    finally:
        consumer.close()


def test_group_version_0_refuses_kip_848_members_and_1_serves_them_again(broker):
    topic = f"features-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, b"v0", key=b"k0")
    assert producer.flush(30) == 0
    assert consume_one(broker, topic) == b"v0"
    features(broker, "downgrade", "--feature", "group.version=0")
    error = consume_one(broker, topic)
    assert isinstance(error, KafkaError) and error.code() == KafkaError._FATAL, error
    assert "ConsumerGroupHeartbeat" in error.str() and "API version not supported" in error.str(), error.str()
    features(broker, "upgrade", "--feature", "group.version=1")
    assert consume_one(broker, topic) == b"v0"


def configs(broker, *args, check=True):
    return kafka_cli.run(CONFIGS, "--bootstrap-server", broker.bootstrap, "--entity-type", "brokers", *args,
                         check=check)


def test_eligible_leader_replicas_switch_off_and_on_and_pin_one_cluster_min_isr(broker):
    assert features(broker, "downgrade", "--feature", f"{ELR}=0").stdout.strip() == f"{ELR} was downgraded to 0."
    assert levels(broker)[ELR] == 0
    # With ELR off a broker may have its own min.insync.replicas.
    configs(broker, "--entity-name", "1", "--alter", "--add-config", "min.insync.replicas=1")
    assert features(broker, "upgrade", "--feature", f"{ELR}=1").stdout.strip() == f"{ELR} was upgraded to 1."
    assert levels(broker)[ELR] == 1
    # Kafka's ELR safety configs: the cluster-wide value (the static one, default 1), no broker's own.
    cluster_wide = configs(broker, "--entity-default", "--describe").stdout
    assert "min.insync.replicas=1" in cluster_wide, cluster_wide
    own = configs(broker, "--entity-name", "1", "--describe").stdout
    assert "min.insync.replicas" not in own, own
    refused = configs(broker, "--entity-name", "1", "--alter", "--add-config", "min.insync.replicas=2", check=False)
    assert refused.returncode == 1 and \
        "Broker-level min.insync.replicas cannot be altered while ELR is enabled." in refused.stdout + refused.stderr, \
        refused.stdout + refused.stderr
    refused = configs(broker, "--entity-default", "--alter", "--delete-config", "min.insync.replicas", check=False)
    assert refused.returncode == 1 and \
        "Cluster-level min.insync.replicas cannot be removed while ELR is enabled." in refused.stdout + refused.stderr, \
        refused.stdout + refused.stderr
