"""Feature levels with Kafka's own `kafka-features` (issue 27 item 6, UpdateFeatures 57): the
features Brook implements, `eligible.leader.replicas.version` (KIP-966), `group.version`
(KIP-848) and `transaction.version` (KIP-890), are described, upgraded, downgraded, dry-run and
disabled as on Kafka 4.4, with Kafka's refusals word for word; a level set by the tool is kept by
the metadata quorum across a restart and is what ApiVersions tells clients; at `group.version` 0
a KIP-848 member is refused (librdkafka's fatal UNSUPPORTED_VERSION, as on Kafka), and back at 1
it consumes again. Turning eligible leader replicas back on pins one cluster-wide
`min.insync.replicas` (Kafka's ELR safety configs), and while they are on `kafka-configs` may
neither set a broker's own min.insync.replicas nor remove the cluster-wide one.

`metadata.version` and `kraft.version` (the second half of the module) on a node formatted as
Kafka's reference node is (`--standalone`, a dynamic quorum of one) but at an older release,
`--release-version 3.9-IV0`: describe shows the release's levels; eligible leader replicas wait
for metadata.version 4.0-IV1 (Kafka's dependency message), also within one request;
`upgrade --release-version` sends every feature of a release at once and passes as a whole,
and `downgrade --release-version` across a level that changed the metadata records fails as a
whole, nothing changed; `--metadata` upgrades and downgrades as Kafka allows and refuses;
the levels survive a restart; kraft.version cannot go back to 0.

A static quorum (`controller.quorum.voters`, three combined nodes of harness/cluster.py, at
3.9-IV0, kraft.version 0) is upgraded to kraft.version 1 once every voter has published its
directory id to the leader (KIP-853; Kafka's voters send UpdateRaftVoter): while node 3 has
never run the upgrade, dry run included, is refused with Kafka's message ("controller 3 has not
registered"); once it runs, `upgrade --release-version 4.0-IV3` passes whole, and the voters
carry their meta.properties' directory ids in `kafka-metadata-quorum describe --status /
--replication`; after a restart of every node the voters (with their directory ids) and the
level come from the metadata log, not from `controller.quorum.voters`; and
`remove-controller` then takes node 3 out (it stays an observer).

Three deployments for the module (the default broker, the older release, the static quorum),
both targets. Only the features Brook implements are compared: Kafka 4.4 also lists
share.version and streams.version, which Brook supports at level 0 only, as a Kafka controller
without them does.
"""

import re
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from harness import kafka_cli, paths
from harness.broker import HOST, Broker
from harness.cluster import QUORUM_TOOL, Cluster, parse_quorum_status, wait_for

TOOL = "org.apache.kafka.tools.FeatureCommand"
ELR = "eligible.leader.replicas.version"
FEATURES = (ELR, "group.version", "transaction.version")
QUORUM_FEATURES = ("kraft.version", "metadata.version")
OLD_RELEASE = "3.9-IV0"
DOWNGRADE_REFUSED = "Refusing to perform the requested downgrade because it might delete metadata information."
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


def described(broker, names=FEATURES) -> dict:
    """`describe`'s fields per feature of `names`, without the epoch."""
    out = {}
    for line in features(broker, "describe").stdout.splitlines():
        fields = dict(re.findall(r"(\w+): (\S+)", line))
        name = fields.pop("Feature", None)
        if name in names:
            out[name] = {k: v for k, v in fields.items() if k != "Epoch"}
    return out


def levels(broker) -> dict:
    return {name: int(f["FinalizedVersionLevel"]) for name, f in described(broker).items()}


def refused(broker, *args) -> str:
    proc = features(broker, *args, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return proc.stdout.strip()


def supported(low: str, high: str, level: str) -> dict:
    return {"SupportedMinVersion": low, "SupportedMaxVersion": high, "FinalizedVersionLevel": level}


def test_describe_lists_the_supported_ranges_and_default_levels(broker):
    assert described(broker, FEATURES + ("metadata.version",)) == {
        ELR: supported("0", "1", "1"),
        "group.version": supported("0", "1", "1"),
        "metadata.version": supported("3.3-IV3", "4.4-IV2", "4.4-IV2"),
        "transaction.version": supported("0", "2", "2"),
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


def standalone(node: Broker) -> Broker:
    """`node` as Kafka's reference node runs (scripts/kafka-ref.sh): combined broker and
    controller, its controller listener on PORT+1, formatted `--standalone` (a dynamic quorum
    of one, kraft.version 1)."""
    if node.kind == "brook":
        controller = f"{node.host}:{node.port + 1}"
        node.overrides.update({
            "process.roles": "broker,controller",
            "listeners": f"PLAINTEXT://{node.bootstrap},CONTROLLER://{controller}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "controller.quorum.bootstrap.servers": controller,
        })
        node.format_args = ["--standalone"]
    return node


@pytest.fixture(scope="module")
def old_release(tmp_path_factory):
    """A node formatted at metadata.version 3.9-IV0 (`format --release-version 3.9-IV0`)."""
    node = standalone(Broker(paths.target(), tmp_path_factory.mktemp("features-old"), {}))
    node.format_args += ["--release-version", OLD_RELEASE]
    node.start()
    yield node
    node.stop()


def quorum_levels(node) -> dict:
    """Every compared feature's finalized level as describe prints it."""
    return {name: f["FinalizedVersionLevel"] for name, f in described(node, FEATURES + QUORUM_FEATURES).items()}


def failed_lines(out: str) -> dict:
    """`Could not <op> <feature> to <level>. <message>` lines, by feature: (level, message)."""
    lines = {}
    for line in out.splitlines():
        m = re.fullmatch(r"Could not \w+ (\S+) to (\d+)\. (.*)", line)
        if m:
            lines[m.group(1)] = (int(m.group(2)), m.group(3))
    return lines


def test_a_cluster_formatted_at_an_older_release_shows_its_levels(old_release):
    assert described(old_release, FEATURES + QUORUM_FEATURES) == {
        ELR: supported("0", "1", "0"),
        "group.version": supported("0", "1", "0"),
        "kraft.version": supported("0", "1", "1"),
        "metadata.version": supported("3.3-IV3", "4.4-IV2", OLD_RELEASE),
        "transaction.version": supported("0", "2", "0"),
    }


def test_eligible_leader_replicas_need_metadata_version_4_0_iv1_even_within_one_request(old_release):
    out = refused(old_release, "upgrade", "--feature", f"{ELR}=1")
    assert out == (f"Could not upgrade {ELR} to 1. {PREAMBLE}Invalid update version 1 for feature {ELR}. "
                   f"{ELR} could not be set to 1 because it depends on metadata.version level 23"), out
    assert quorum_levels(old_release)[ELR] == "0"
    # The level the request leaves counts: metadata.version 4.0-IV1 and ELR 1 together pass.
    out = features(old_release, "upgrade", "--feature", "metadata.version=23", "--feature", f"{ELR}=1").stdout
    assert sorted(out.strip().splitlines()) == [f"{ELR} was upgraded to 1.", "metadata.version was upgraded to 23."]
    levels = quorum_levels(old_release)
    assert (levels["metadata.version"], levels[ELR]) == ("4.0-IV1", "1"), levels


def test_a_release_version_upgrade_passes_and_a_refused_downgrade_changes_nothing(old_release):
    out = features(old_release, "upgrade", "--release-version", "4.0-IV3").stdout
    # Kafka's tool sends the release's metadata.version and each feature it finalizes above 0.
    assert sorted(out.strip().splitlines()) == [
        "group.version was upgraded to 1.", "kraft.version was upgraded to 1.",
        "metadata.version was upgraded to 25.", "transaction.version was upgraded to 2."], out
    after_upgrade = quorum_levels(old_release)
    assert after_upgrade == {ELR: "1", "group.version": "1", "kraft.version": "1",
                             "metadata.version": "4.0-IV3", "transaction.version": "2"}
    # Down to 3.9-IV0 crosses 4.0-IV1, which changed the metadata records: every feature of the
    # release (share.version and streams.version at 0 too) fails with that one reason.
    proc = features(old_release, "downgrade", "--release-version", OLD_RELEASE, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    why = f"{PREAMBLE}Unsupported metadata.version downgrade from 25 to 21. {DOWNGRADE_REFUSED}"
    assert failed_lines(proc.stdout) == {
        ELR: (0, why), "group.version": (0, why), "kraft.version": (1, why), "metadata.version": (21, why),
        "share.version": (0, why), "streams.version": (0, why), "transaction.version": (0, why)}, proc.stdout
    assert quorum_levels(old_release) == after_upgrade


def test_metadata_version_moves_as_kafka_allows_and_its_level_survives_a_restart(old_release):
    deprecated = " `metadata` flag is deprecated and may be removed in a future release."
    out = features(old_release, "upgrade", "--metadata", "4.4-IV0").stdout
    assert out.splitlines() == [deprecated, "metadata.version was upgraded to 31."], out
    # 4.4-IV0 changed no metadata record since 4.3-IV0: that downgrade is allowed.
    out = features(old_release, "downgrade", "--metadata", "4.3-IV0").stdout
    assert out.splitlines() == [deprecated, "metadata.version was downgraded to 30."], out
    out = features(old_release, "upgrade", "--feature", "metadata.version=33").stdout
    assert out.strip() == "metadata.version was upgraded to 33.", out
    for args, why in [
        ((), DOWNGRADE_REFUSED),
        (("--unsafe",), "Unsafe metadata downgrade is not supported in this version."),
    ]:
        out = refused(old_release, "downgrade", "--metadata", "4.4-IV1", *args)
        assert out.splitlines()[-1] == (f"Could not downgrade metadata.version to 32. {PREAMBLE}"
                                        f"Unsupported metadata.version downgrade from 33 to 32. {why}"), out
    out = refused(old_release, "upgrade", "--feature", "metadata.version=34")
    assert re.fullmatch(rf"Could not upgrade metadata.version to 34\. {PREAMBLE}Invalid update version 34 for "
                        r"feature metadata\.version\. Local controller \d+ only supports versions 7-33", out), out
    expected = {ELR: "1", "group.version": "1", "kraft.version": "1", "metadata.version": "4.4-IV2",
                "transaction.version": "2"}
    assert quorum_levels(old_release) == expected
    old_release.stop()
    old_release.start()
    assert quorum_levels(old_release) == expected


def test_kraft_version_of_a_dynamic_quorum_cannot_go_back_to_0(old_release):
    out = refused(old_release, "downgrade", "--feature", "kraft.version=0")
    assert out == (f"Could not downgrade kraft.version to 0. {PREAMBLE}Invalid update version 0 for feature "
                   "kraft.version. Can't downgrade the version of this feature."), out
    assert features(old_release, "upgrade", "--feature", "kraft.version=1").stdout.strip() == \
        "kraft.version was upgraded to 1."
    assert quorum_levels(old_release)["kraft.version"] == "1"


def directory_id(node: Broker) -> str:
    """The directory id in the node's meta.properties (written by format, or by Brook's first start)."""
    text = (node.log_dirs / "meta.properties").read_text()
    return re.search(r"^directory\.id=(\S+)", text, re.M).group(1)


def quorum_tool(cluster: Cluster, *args, via: int = 1) -> str:
    controller = f"{HOST}:{cluster.node(via).controller_port}"
    return kafka_cli.run(QUORUM_TOOL, "--bootstrap-controller", controller, *args).stdout


def voters_shown(cluster: Cluster, via: int = 1) -> dict:
    """`describe --status`'s CurrentVoters: node id -> directory id (None when not shown)."""
    line = next(l for l in quorum_tool(cluster, "describe", "--status", via=via).splitlines()
                if l.startswith("CurrentVoters:"))
    voters = re.findall(r'\{"id": (\d+)(?:, "directoryId": "([^"]+)")?', line)
    return {int(n): d or None for n, d in voters}


def replication_shown(cluster: Cluster, via: int = 1) -> dict:
    """`describe --replication`: node id -> (directory id, status)."""
    rows = {}
    for line in quorum_tool(cluster, "describe", "--replication", via=via).splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 3 and fields[0].isdigit():
            rows[int(fields[0])] = (fields[1], fields[-1])
    return rows


@pytest.fixture(scope="module")
def static_quorum(tmp_path_factory):
    """Three combined nodes of a static quorum (`controller.quorum.voters`, kraft.version 0;
    harness/cluster.py) formatted at 3.9-IV0; only nodes 1 and 2 run at first (a quorum of
    three), node 3 is started by the first test."""
    cluster = Cluster(paths.target(), tmp_path_factory.mktemp("features-static"))
    for node in cluster.nodes:
        node.format_args = ["--release-version", OLD_RELEASE]
    first_two = cluster.nodes[:2]
    for node in first_two:
        node.launch()
    try:
        for node in first_two:
            node.wait_ready()
        yield cluster
    finally:
        cluster.stop()


def test_a_static_quorum_upgrades_kraft_version_once_every_voter_has_published_its_directory_id(static_quorum):
    cluster, first = static_quorum, static_quorum.node(1)
    assert quorum_levels(first)["kraft.version"] == "0"
    assert set(voters_shown(cluster).values()) == {None}, "a static quorum's voters have no directory ids"
    # Node 3 never ran, so the leader has not learned its directory id (Kafka: the
    # controller has not registered); the dry run is refused the same way.
    why = (f"{PREAMBLE}Invalid update version 1 for feature kraft.version. "
           "controller 3 has not registered, and may not support this feature")
    assert refused(first, "upgrade", "--feature", "kraft.version=1") == f"Could not upgrade kraft.version to 1. {why}"
    assert refused(first, "upgrade", "--feature", "kraft.version=1", "--dry-run") == \
        f"Can not upgrade kraft.version to 1. {why}"
    assert quorum_levels(first)["kraft.version"] == "0"

    # Once node 3 runs it publishes its directory id to the leader, and the release's
    # upgrade, which includes kraft.version 1, passes whole.
    cluster.node(3).start()

    def upgraded():
        proc = features(first, "upgrade", "--release-version", "4.0-IV3", check=False)
        return proc.stdout if proc.returncode == 0 else None

    out = wait_for(upgraded, DEADLINE_S, "the release upgrade accepted", interval=0.5)
    assert sorted(out.strip().splitlines()) == [
        "group.version was upgraded to 1.", "kraft.version was upgraded to 1.",
        "metadata.version was upgraded to 25.", "transaction.version was upgraded to 2."], out
    # The voter set now holds each voter with the directory id of its meta.properties.
    dirs = {n: directory_id(cluster.node(n)) for n in cluster.node_ids}
    wait_for(lambda: voters_shown(cluster) == dirs, DEADLINE_S, f"voters {dirs}", interval=0.5)
    rows = replication_shown(cluster)
    assert {n: rows[n][0] for n in dirs} == dirs, rows
    assert sorted(status for _, status in rows.values()) == ["Follower", "Follower", "Leader"], rows


def test_the_upgraded_static_quorum_keeps_its_voters_and_level_across_a_restart(static_quorum):
    """After a restart the voters come from the metadata log, with their directory ids, not
    from `controller.quorum.voters`."""
    cluster = static_quorum
    dirs = {n: directory_id(cluster.node(n)) for n in cluster.node_ids}
    cluster.stop()
    cluster.start()
    assert quorum_levels(cluster.node(1))["kraft.version"] == "1"
    assert wait_for(lambda: voters_shown(cluster, via=2) == dirs and voters_shown(cluster, via=2),
                    DEADLINE_S, f"voters {dirs}", interval=0.5)


def test_a_controller_is_removed_from_the_upgraded_static_quorum(static_quorum):
    cluster = static_quorum
    removed = directory_id(cluster.node(3))
    # `=`: a directory id may start with '-', which argparse would take for an option.
    out = quorum_tool(cluster, "remove-controller", "--controller-id", "3", f"--controller-directory-id={removed}")
    assert out.strip() == f"Removed KRaft controller 3 with directory id {removed}", out

    # A removed controller keeps following the log, as an observer.
    def shown():
        status = parse_quorum_status(quorum_tool(cluster, "describe", "--status"))
        return (status["CurrentVoters"] == [1, 2] and status["LeaderId"] in (1, 2)
                and status.get("CurrentObservers") == [3])

    wait_for(shown, DEADLINE_S, "voters [1, 2], observer 3", interval=0.5)


@pytest.mark.skipif(paths.target() == "kafka", reason="Brook-only: a data directory formatted by a Brook that "
                    "did not keep metadata.version")
def test_a_node_formatted_before_metadata_version_was_kept_runs_at_4_4_iv2(tmp_path):
    # What `brook format -r 3.9-IV0` wrote before metadata.version was kept (raft/FORMAT.md's
    # bootstrap.json, format version 1): the release's other levels, no metadata.version.
    node = Broker("brook", tmp_path / "formatted-before", {})
    metadata_dir = node.log_dirs / "__cluster_metadata"
    metadata_dir.mkdir(parents=True)
    (node.log_dirs / "meta.properties").write_text(
        "#\nversion=1\ncluster.id=4KeXbaNCQV-5iFRvErIIlw\nnode.id=1\ndirectory.id=6c4ADJYqTxmYZI2WxdrHjw\n")
    (metadata_dir / "bootstrap.json").write_text(
        '{"format_version":1,"records":[{"UpdateFeatures":{"levels":[["eligible.leader.replicas.version",0],'
        '["group.version",0],["transaction.version",0],["kraft.version",0]]}}]}')
    node.start()
    try:
        assert quorum_levels(node) == {ELR: "0", "group.version": "0", "kraft.version": "0",
                                       "metadata.version": "4.4-IV2", "transaction.version": "0"}
        assert features(node, "upgrade", "--feature", f"{ELR}=1").stdout.strip() == f"{ELR} was upgraded to 1."
    finally:
        node.stop()
