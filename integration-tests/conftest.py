"""pytest fixtures shared by every system test: `broker`, `broker_factory`, `topic`, `cluster`.

Target selection (BROOK_TEST_TARGET): "brook" (default) starts a fresh brook process per test
(free port, fresh temp data dir); "kafka" runs the same tests against one Apache Kafka node
shared by the session (it takes ~10 s to start), so a test that fails there is a wrong test.
`cluster` is one 3-node cluster (harness/cluster.py) per test module, of the same target; a
module may set CLUSTER_OVERRIDES = {key: value} for every node of its cluster.
When a test fails, the tail of every broker log it used is attached to its report.
"""

import re
import uuid

import pytest

from harness import jvm, paths
from harness.broker import Broker
from harness.cluster import Cluster

_BROKERS_ATTR = "_brook_brokers"


def _assert_clean_teardown(brokers) -> None:
    """Every broker process a fixture started: no panic in its log, and each SIGTERM it got ended
    it cleanly within the bound (harness/broker.py `teardown_faults`). Fails the teardown."""
    faults = {repr(b): f for b in brokers if (f := b.teardown_faults())}
    assert not faults, "unclean broker teardown: " + "; ".join(f"{b}: {', '.join(f)}" for b, f in faults.items())


def _register(request, broker: Broker) -> None:
    brokers = getattr(request.node, _BROKERS_ATTR, None)
    if brokers is None:
        brokers = []
        setattr(request.node, _BROKERS_ATTR, brokers)
    brokers.append(broker)


def pytest_configure(config):
    # The JVM class archives (harness/jvm.py), made once per JDK and classpath, before the test
    # modules import harness.drivers (its Java command line names the archive when it exists).
    jvm.ensure()


@pytest.fixture(scope="session")
def _shared_kafka(tmp_path_factory):
    """The session's Apache Kafka (BROOK_TEST_TARGET=kafka only)."""
    if paths.target() != "kafka":
        yield None
        return
    kafka = Broker("kafka", tmp_path_factory.mktemp("kafka-shared"))
    kafka.start()
    yield kafka
    kafka.stop()
    _assert_clean_teardown([kafka])


@pytest.fixture
def broker(request, tmp_path, _shared_kafka):
    """A running broker: `.bootstrap`, `.host`, `.port`, `.metrics_url`, `.data_dir`,
    `.restart()`, `.stop()`, `.kill()`, `.start()`."""
    if _shared_kafka is not None:
        _shared_kafka.start()  # no-op when running; revives it if a previous test killed it
        _register(request, _shared_kafka)
        yield _shared_kafka
        return
    b = Broker("brook", tmp_path / "broker")
    _register(request, b)
    b.start()
    yield b
    b.stop()
    _assert_clean_teardown([b])


@pytest.fixture
def broker_factory(request, tmp_path):
    """`broker_factory(overrides: dict) -> Broker`: a dedicated broker with non-default config
    (Kafka property names). On the kafka target this starts a dedicated Apache Kafka too."""
    started = []

    def make(overrides=None):
        b = Broker(paths.target(), tmp_path / f"broker-{len(started)}", overrides or {})
        _register(request, b)
        started.append(b)
        b.start()
        return b

    yield make
    for b in started:
        b.stop()
    _assert_clean_teardown(started)


@pytest.fixture(scope="module")
def cluster(request, tmp_path_factory):
    """A running 3-node cluster (brook or Kafka, per BROOK_TEST_TARGET) shared by the module's
    tests: `.nodes`, `.node(id)`, `.bootstrap`, `.bootstrap_of(id)`, `.metadata(id)`,
    `.quorum_leader()`. A test that kills or pauses a node brings it back before it ends."""
    overrides = getattr(request.module, "CLUSTER_OVERRIDES", {})
    c = Cluster(paths.target(), tmp_path_factory.mktemp("cluster"), 3, overrides)
    c.start()
    yield c
    c.stop()
    _assert_clean_teardown(c.nodes)


_TOPIC_ILLEGAL = re.compile(r"[^a-zA-Z0-9_-]+")


@pytest.fixture
def topic(request):
    """A topic name unique to this test run: `t-<testname>-<random>`, legal for Kafka
    ([a-zA-Z0-9._-], at most 249 chars; we avoid '.' since Kafka treats '.' and '_' as colliding)."""
    name = _TOPIC_ILLEGAL.sub("-", request.node.name).strip("-")
    return f"t-{name[:200]}-{uuid.uuid4().hex[:10]}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and report.when in ("setup", "call"):
        for b in getattr(item, _BROKERS_ATTR, []):
            report.sections.append((f"broker log tail {b!r}", b.log_tail()))
        c = getattr(item, "funcargs", {}).get("cluster")
        if isinstance(c, Cluster):
            for n in c.nodes:
                report.sections.append((f"cluster node {n.node_id} log tail {n!r}", n.log_tail()))


def pytest_report_header(config):
    target = paths.target()
    detail = str(paths.brook_bin()) if target == "brook" else str(paths.KAFKA_LIBS)
    return f"brook system tests: target={target} ({detail})"


# Modules that run alone (`make integration`'s second pass, `-m serial`): they measure the
# broker's CPU or a stop's duration, drive 20,000 partitions, or inject faults on a timer, so a
# neighbour's load would change what they measure.
SERIAL_MODULES = {
    "test_idle.py", "test_shutdown.py", "test_scale_partitions.py", "test_scale_file_limits.py",
    "test_soak.py", "test_chaos_short.py", "test_slow_clients.py",
}
# The parallel pass hands whole modules to workers in collection order, so the longest go first
# (longest-processing-time-first scheduling): no worker is left with a long module at the end
# while the others idle. Seconds per module (setup, tests and teardown) in `make test`'s parallel
# pass of 2026-12-06 (warm, 3 workers, the lint and fuzz builds beside it, the cheaper JVM starts
# of harness/jvm.py); modules under 20 s follow in file order.
# Refresh from target/integration-parallel-junit.xml (`make test` writes it) when modules grow.
MODULE_SECONDS = {
    "test_compat.py": 205, "test_group_failover.py": 131, "test_group_consumer_protocol.py": 118,
    "test_group_zombie.py": 109, "test_group_clients.py": 107, "test_features.py": 98,
    "test_librdkafka_0081.py": 89, "test_client_quotas.py": 89, "test_cluster_reassign.py": 74,
    "test_security_acl.py": 72, "test_security_acl_apis.py": 61, "test_security_tls.py": 58,
    "test_security_sasl.py": 58, "test_cluster_clients.py": 58, "test_cluster_grow.py": 54,
    "test_cluster_txn_group.py": 46, "test_replication_isr.py": 45, "test_group_resume.py": 44,
    "test_cluster_disk_faults.py": 43, "test_transactions.py": 41, "test_quorum_changes.py": 40,
    "test_group_migration.py": 40, "test_produce_fetch_semantics.py": 39, "test_retention.py": 37,
    "test_group_kcat.py": 36, "test_replication_clients.py": 34, "test_jbod.py": 32,
    "test_sarama.py": 32, "test_security_cluster.py": 31, "test_cli_tools.py": 30,
    "test_corrupt_files.py": 30, "test_connection_limits.py": 29, "test_format.py": 28,
    "test_mirror_maker.py": 28, "test_crash_recovery.py": 24, "test_config_kafka_names.py": 21,
    "test_group_consumer_regex.py": 20,
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in SERIAL_MODULES:
            item.add_marker(pytest.mark.serial)
    items.sort(key=lambda item: -MODULE_SECONDS.get(item.path.name, 0))  # stable: keeps order within a module
