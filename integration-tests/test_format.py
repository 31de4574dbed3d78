"""`brook format` (issue 25 item 7), Kafka's `kafka-storage format` for a node's storage before its
first start, brook only (Kafka's own tool is what harness/broker.py `add_scram` runs for Kafka
nodes, test_security_cluster.py):

- `--add-scram` credentials are in the metadata quorum from the first start: a node whose only
  listener is SASL_PLAINTEXT with SCRAM-SHA-512 logs its admin in (DescribeUserScramCredentials
  lists the credential with its iterations, a record goes in and comes back), after a restart
  too; neither the password nor anything but salted keys is written (data dir, node log).
- Bad `--add-scram` input stops the tool with exit code 1 and Kafka's sentence, writing nothing;
  the cluster id is required; a formatted directory is refused with Kafka's sentence unless
  `--ignore-formatted`.
(The first start of a 3-node cluster whose brokers log in to each other with a formatted SCRAM
credential: test_compose_secured.py and test_security_cluster.py.)
"""

import os
import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness import paths
from harness.broker import Broker, free_port
from harness.security import sasl_broker_settings

pytestmark = pytest.mark.skipif(paths.target() == "kafka", reason="brook's own format tool")

ADMIN = ("format-admin", "format-admin-secret")
CLUSTER_ID = "3Db5QLSqSZieL3rJBUUegA"


# brook reads BROOK_<KEY> variables as settings and warns about any other (the suite's own
# BROOK_BIN, which `make test` sets): the tool's output is compared without them.
TOOL_ENV = {k: v for k, v in os.environ.items() if not k.startswith("BROOK_")}


def brook(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(paths.brook_bin()), *args], capture_output=True, text=True, timeout=60,
                          env=TOOL_ENV)


def sasl_client(broker: Broker) -> dict:
    return {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": ADMIN[0],
        "sasl.password": ADMIN[1],
    }


@pytest.fixture(scope="module")
def formatted(tmp_path_factory) -> Broker:
    """A node formatted with the admin's SCRAM-SHA-512 credential, served on its one listener
    (SASL_PLAINTEXT, SCRAM-SHA-512 only: no unauthenticated door)."""
    port = free_port(2)
    settings = sasl_broker_settings("brook", port, ["SCRAM-SHA-512"], {})
    b = Broker("brook", tmp_path_factory.mktemp("formatted"), settings, port=port, cluster_id=CLUSTER_ID)
    b.add_scram = [f"SCRAM-SHA-512=[name={ADMIN[0]},password={ADMIN[1]},iterations=8192]"]
    b.start()
    yield b
    b.stop()


def scram_credentials(broker: Broker) -> list:
    admin = AdminClient(sasl_client(broker))
    described = admin.describe_user_scram_credentials([ADMIN[0]])[ADMIN[0]].result(timeout=30)
    return [(str(i.mechanism), i.iterations) for i in described.scram_credential_infos]


def round_trip(broker: Broker) -> list:
    topic = f"t-format-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(sasl_client(broker))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    producer = Producer(sasl_client(broker))
    producer.produce(topic, key=b"k", value=b"formatted")
    assert producer.flush(30) == 0
    consumer = Consumer({**sasl_client(broker), "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        msg = consumer.poll(30)
        assert msg is not None and msg.error() is None, msg and msg.error()
        return [(msg.key(), msg.value(), msg.offset())]
    finally:
        consumer.close()


def test_a_formatted_credential_logs_in_on_the_first_start_and_after_a_restart(formatted):
    assert scram_credentials(formatted) == [("ScramMechanism.SCRAM_SHA_512", 8192)]
    assert round_trip(formatted) == [(b"k", b"formatted", 0)]
    formatted.restart()
    assert scram_credentials(formatted) == [("ScramMechanism.SCRAM_SHA_512", 8192)]
    # The node's own log and every file it wrote hold no password.
    assert ADMIN[1] not in formatted.log_text().split("==== start")[-1]
    for path in Path(formatted.log_dirs).rglob("*"):
        if path.is_file():
            assert ADMIN[1].encode() not in path.read_bytes(), path


def test_the_cluster_id_is_the_formatted_one(formatted):
    meta = (Path(formatted.log_dirs) / "meta.properties").read_text()
    assert f"cluster.id={CLUSTER_ID}" in meta and "node.id=1" in meta
    assert AdminClient(sasl_client(formatted)).describe_cluster().result(timeout=30).cluster_id == CLUSTER_ID


@pytest.mark.parametrize("argument, sentence", [
    ("SCRAM-SHA-1=[name=a,password=b]", "The add-scram mechanism SCRAM-SHA-1 is not supported."),
    ("SCRAM-SHA-512=[name=a,password=b", "Expected configuration string to end with ]"),
    ("SCRAM-SHA-512=[password=b]", "You must supply 'name' to add-scram"),
    ("SCRAM-SHA-512=[name=a,saltedpassword=eHl6]", "You must supply 'salt' with 'saltedpassword' to add-scram"),
    ("SCRAM-SHA-512=[name=a,password=b,iterations=100]",
     "The 'iterations' value must be >= 4096 for add-scram using SCRAM_SHA_512"),
    ("SCRAM-SHA-512=[name=a,password=b,foo=1]", "Unknown SCRAM configurations: foo"),
])
def test_bad_add_scram_input_stops_with_kafkas_sentence_and_writes_nothing(tmp_path, argument, sentence):
    data = tmp_path / "data"
    result = brook("--override", f"log.dirs={data}", "format", "-t", CLUSTER_ID, "-S", argument)
    assert (result.returncode, result.stderr.strip().splitlines()[-1]) == (1, sentence), result.stderr
    assert not data.exists() or not any(data.rglob("*")), list(data.rglob("*"))


def test_the_cluster_id_is_required_and_a_formatted_directory_is_refused_unless_ignored(tmp_path):
    data = tmp_path / "data"
    missing = brook("format", "--override", f"log.dirs={data}")
    assert missing.returncode == 1 and "--cluster-id" in missing.stderr, missing.stderr
    first = brook("format", "--override", f"log.dirs={data}", "--cluster-id", CLUSTER_ID)
    assert (first.returncode, first.stdout.strip()) == (0, f"Formatting metadata directory {data} with metadata.version 4.4-IV2."), first
    again = brook("format", "--override", f"log.dirs={data}", "--cluster-id", CLUSTER_ID)
    assert again.returncode == 1, again
    assert again.stderr.strip().splitlines()[-1] == (
        f"Log directory {data} is already formatted. "
        "Use --ignore-formatted to ignore this directory and format the others."), again.stderr
    ignored = brook("format", "--override", f"log.dirs={data}", "--cluster-id", CLUSTER_ID, "--ignore-formatted")
    assert (ignored.returncode, ignored.stdout.strip()) == (0, "All of the log directories are already formatted.")


# KIP-853's quorum flags and the feature flags: brook format and Kafka 4.4's kafka-storage format
# are run on the same configuration with the same arguments; both must refuse (exit 1) with the
# same sentence, or both succeed with the same line (the data directory aside).
CONTROLLER = {"process.roles": "controller", "node.id": "1", "controller.listener.names": "CONTROLLER",
              "listeners": "CONTROLLER://127.0.0.1:19990",
              "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"}
DYNAMIC = {**CONTROLLER, "controller.quorum.bootstrap.servers": "127.0.0.1:19990"}
STATIC = {**CONTROLLER, "controller.quorum.voters": "1@127.0.0.1:19990"}
BROKER_ONLY = {**DYNAMIC, "process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.1:19991"}
DIR = "JEXY6aqzQY-32P5TStzaFg"


def format_both(tmp_path: Path, settings: dict, args: list) -> dict:
    """{kind: (exit code, last line)} of brook format and kafka-storage format."""
    out = {}
    for kind in ("brook", "kafka"):
        data = tmp_path / kind
        props = tmp_path / f"{kind}.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in {**settings, "log.dirs": data}.items()))
        if kind == "brook":
            argv = [str(paths.brook_bin()), "format", "-c", str(props)]
        else:
            argv = [*paths.KAFKA_JAVA, "kafka.tools.StorageTool", "format", "-c", str(props)]
        result = subprocess.run([*argv, "-t", CLUSTER_ID, *args], capture_output=True, text=True, timeout=120,
                                env=TOOL_ENV)
        lines = [l for l in (result.stdout + result.stderr).splitlines()
                 if l.strip() and not l.startswith(("\tat ", "Bootstrap metadata:", "SLF4J"))]
        thrown = [l for l in lines if l.startswith('Exception in thread "main"')]
        last = (thrown or lines or [""])[-1].replace(str(data), "DATA")
        # Kafka's tool lets a parse error escape as an exception: its message is the sentence.
        out[kind] = (result.returncode, last.split("Exception: ", 1)[-1])
    return out


@pytest.mark.parametrize("settings, args", [
    (DYNAMIC, []),
    (DYNAMIC, ["--standalone"]),
    (DYNAMIC, ["--no-initial-controllers"]),
    (DYNAMIC, ["--initial-controllers", f"1@127.0.0.1:19990:{DIR}"]),
    (DYNAMIC, ["--initial-controllers", f"2@127.0.0.1:19990:{DIR}"]),
    (DYNAMIC, ["--initial-controllers", "1@127.0.0.1:19990"]),
    (DYNAMIC, ["--initial-controllers", "1@127.0.0.1:19990:xyz"]),
    (DYNAMIC, ["--initial-controllers", f"1@h:1:{DIR},1@h:2:MvDxzVmcRsaTz33bUuRU6A"]),
    (DYNAMIC, ["--standalone", "--feature", "kraft.version=0"]),
    (DYNAMIC, ["-N", "--feature", "transaction.version=3"]),
    (DYNAMIC, ["-N", "--feature", "transaction.version"]),
    (DYNAMIC, ["-N", "--feature", "transaction.version=x"]),
    (DYNAMIC, ["-N", "--feature", "eligible.leader.replicas.version=2"]),
    (DYNAMIC, ["-N", "--release-version", "3.9-IV0", "--feature", "eligible.leader.replicas.version=1"]),
    (DYNAMIC, ["-N", "--release-version", "4.0-IV1", "--feature", "eligible.leader.replicas.version=1"]),
    (DYNAMIC, ["-N", "--release-version", "9.9-IV0"]),
    (DYNAMIC, ["-N", "--release-version", "3.9-IV0"]),
    (DYNAMIC, ["-N", "--release-version", "4.0-IV0", "--feature", "metadata.version=20"]),
    (DYNAMIC, ["-N", "--feature", "metadata.version=20"]),
    (STATIC, []),
    (STATIC, ["--standalone"]),
    (STATIC, ["--feature", "kraft.version=1"]),
    (BROKER_ONLY, ["--standalone"]),
    (BROKER_ONLY, ["--initial-controllers", f"1@127.0.0.1:19990:{DIR}"]),
], ids=lambda v: "" if isinstance(v, dict) else " ".join(v) or "none")
def test_quorum_and_feature_flags_are_refused_or_accepted_as_kafka_storage_format_does(tmp_path, settings, args):
    both = format_both(tmp_path, settings, args)
    assert both["brook"] == both["kafka"], both
