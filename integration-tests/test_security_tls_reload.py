"""A listener's key store replaced while the broker runs (issue 25 item 2), with Kafka's own tool
and Kafka's rules, the same on Brook and Apache Kafka 4.4.

One broker: PLAINTEXT (readiness, `kafka-configs`) and SSL, whose key store is a PKCS12 file given
per listener (`listener.name.ssl.ssl.keystore.*`). Certificates from scripts/certs.sh: the served
one, a renewal of it (same subject and SANs, new key) and one with another subject.

- `kafka-configs --entity-type brokers --entity-name 1 --alter --add-config
  listener.name.ssl.ssl.keystore.location=<renewal>`: new connections get the renewed certificate,
  a TLS connection opened before keeps answering on its session, and a producer round trip works.
- The same location set again after the file was replaced in place re-reads the file (Kafka
  reloads a key store whose file changed).
- Refused, leaving the served certificate as it was, with INVALID_REQUEST: a key store whose
  certificate has another subject ("Keystore DistinguishedName does not match", as Kafka says
  without `ssl.allow.dn.changes`), a key store that does not open (wrong password), and the key
  without its listener prefix (Kafka: "These security configs can be dynamically updated only
  per-listener using the listener prefix").
"""

import shutil
import socket
import ssl
import struct
import time
import uuid
from pathlib import Path

import pytest

from harness import client_config, drivers, kafka_cli, paths, records, security
from harness.broker import HOST, Broker, free_port

PASSWORD = "brook-secret"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
LOCATION = "listener.name.ssl.ssl.keystore.location"
DEADLINE_S = 30


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    return security.make_certificates(tmp_path_factory.mktemp("certs"), PASSWORD)


class Served:
    def __init__(self, broker: Broker, port: int, store: Path):
        self.broker, self.port, self.store = broker, port, store

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"


@pytest.fixture(scope="module")
def served(tmp_path_factory, certs):
    data = tmp_path_factory.mktemp("tls-reload")
    store = data / "served.p12"
    shutil.copy(certs / "broker.p12", store)
    b = Broker(paths.target(), data / "broker")
    port = free_port(avoid=frozenset({b.port, b.port + 1, b.metrics_port or 0}))
    b.add_listeners({"SSL": ("SSL", port, None)})
    b.overrides.update({
        "listener.name.ssl.ssl.keystore.type": "PKCS12",
        LOCATION: str(store),
        "listener.name.ssl.ssl.keystore.password": PASSWORD,
    })
    b.start()
    try:
        yield Served(b, port, store)
    finally:
        b.stop()


@pytest.fixture
def node(request, served) -> Served:
    served.broker.start()  # a no-op while it runs
    setattr(request.node, "_brook_brokers", [served.broker])
    return served


def pem_der(path: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(path.read_text())


def context(certs: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(certs / "ca.pem"))


def served_certificate(node: Served, certs: Path) -> bytes:
    """The certificate a new TLS connection to the SSL listener is shown (DER), verified."""
    with socket.create_connection((HOST, node.port), timeout=10) as raw:
        with context(certs).wrap_socket(raw, server_hostname="localhost") as secured:
            return secured.getpeercert(binary_form=True)


def wait_for_certificate(node: Served, certs: Path, expected: bytes) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while served_certificate(node, certs) != expected:
        assert time.monotonic() < deadline, "the listener never served the new key store"
        time.sleep(0.2)


def api_versions(secured: ssl.SSLSocket, correlation_id: int) -> int:
    """ApiVersions v0 on an open connection; returns the correlation id answered."""
    client_id = b"reload-test"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    secured.sendall(struct.pack(">i", len(body)) + body)
    secured.settimeout(10)
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        chunk = secured.recv(65536)
        assert chunk, "the connection opened before the update was closed"
        data += chunk
    (answered,) = struct.unpack(">i", data[4:8])
    (error_code,) = struct.unpack(">h", data[8:10])
    assert error_code == 0
    return answered


def alter(node: Served, key: str, value: str, check: bool = True):
    return kafka_cli.run(CONFIGS, "--bootstrap-server", node.broker.bootstrap, "--alter", "--entity-type", "brokers",
                         "--entity-name", "1", "--add-config", f"{key}={value}", check=check)


def refused(node: Served, key: str, value: str) -> str:
    result = alter(node, key, value, check=False)
    assert result.returncode != 0, result.stdout
    return result.stderr + result.stdout


def round_trip(node: Served, certs: Path, tmp_path: Path) -> None:
    config = str(client_config.write(tmp_path / "ssl.properties", {
        "security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs / "ca.pem"),
        "ssl.endpoint.identification.algorithm": "https"}))
    topic = f"reload-{uuid.uuid4().hex[:8]}"
    records.create_topic(node.broker.bootstrap, topic, 1)
    sent = [{"key": f"k{i}", "value": f"after the update {i}", "partition": 0} for i in range(5)]
    acks = drivers.run("java", "produce", node.bootstrap, "--topic", topic, "--client-config", config, records=sent)
    assert [a["offset"] for a in acks] == list(range(5))
    got = drivers.run("java", "consume", node.bootstrap, "--topic", topic, "--count", 5, "--from", "earliest",
                      "--partitions", "0", "--client-config", config)
    assert [(r["offset"], r["key"], r["value"]) for r in got] == [(i, s["key"], s["value"]) for i, s in enumerate(sent)]


def test_a_new_key_store_is_served_to_new_connections_and_open_ones_carry_on(node, certs, tmp_path):
    original = pem_der(certs / "broker.pem")
    renewed = pem_der(certs / "broker-renewed.pem")
    assert served_certificate(node, certs) == original
    renewal = tmp_path / "renewed.p12"
    shutil.copy(certs / "broker-renewed.p12", renewal)
    with socket.create_connection((HOST, node.port), timeout=10) as raw:
        with context(certs).wrap_socket(raw, server_hostname="localhost") as before:
            assert api_versions(before, 1) == 1
            alter(node, LOCATION, str(renewal))
            wait_for_certificate(node, certs, renewed)
            # The connection opened before the update keeps its session and is answered.
            assert api_versions(before, 2) == 2
    round_trip(node, certs, tmp_path)
    # Back to the module's store, for the other tests.
    alter(node, LOCATION, str(node.store))
    wait_for_certificate(node, certs, original)


def test_setting_the_same_location_again_rereads_a_file_replaced_in_place(node, certs):
    original = pem_der(certs / "broker.pem")
    assert served_certificate(node, certs) == original
    try:
        shutil.copy(certs / "broker-renewed.p12", node.store)
        alter(node, LOCATION, str(node.store))
        wait_for_certificate(node, certs, pem_der(certs / "broker-renewed.pem"))
    finally:
        shutil.copy(certs / "broker.p12", node.store)
        alter(node, LOCATION, str(node.store))
    wait_for_certificate(node, certs, original)


def test_a_key_store_with_another_subject_is_refused(node, certs, tmp_path):
    renamed = tmp_path / "renamed.p12"
    shutil.copy(certs / "broker-renamed.p12", renamed)
    output = refused(node, LOCATION, str(renamed))
    assert "InvalidRequestException" in output, output[-3000:]
    assert "Keystore DistinguishedName does not match" in output, output[-3000:]
    assert served_certificate(node, certs) == pem_der(certs / "broker.pem")


def test_a_key_store_that_does_not_open_is_refused(node, certs):
    output = refused(node, "listener.name.ssl.ssl.keystore.password", "not-" + PASSWORD)
    assert "InvalidRequestException" in output, output[-3000:]
    assert "Invalid dynamic configuration" in output, output[-3000:]
    assert served_certificate(node, certs) == pem_der(certs / "broker.pem")


def test_a_key_store_update_without_the_listener_prefix_is_refused(node, certs):
    output = refused(node, "ssl.keystore.location", str(node.store))
    assert "InvalidRequestException" in output, output[-3000:]
    assert "These security configs can be dynamically updated only per-listener using the listener prefix" \
        in output, output[-3000:]
