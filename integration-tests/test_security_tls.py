"""TLS on client listeners (issue 25 items 1, 2 and 7), configured with Kafka's keys on both targets.

One broker for the module, certificates from scripts/certs.sh (a local CA; the broker's SANs are
localhost and 127.0.0.1), four client listeners:
- PLAINTEXT (readiness, topic set-up, SCRAM administration), advertised as `localhost`;
- SSL: server authentication only, the key store a PEM file (`ssl.keystore.type=PEM`);
- MTLS (mapped to SSL): `ssl.client.auth=required`, every key given per listener
  (`listener.name.mtls.ssl.*`): a PEM key store and a PEM trust store;
- SASL_SSL: SCRAM-SHA-512 and PLAIN inside TLS (the broker-wide PEM key store);
- P12 (mapped to SSL): `ssl.client.auth=required` with PKCS12 stores, the key store written by
  `openssl pkcs12 -export` (OpenSSL 3: PBES2/AES-256), the trust store by keytool;
- ENC (mapped to SSL): a PEM key store file whose private key is encrypted PKCS#8, decrypted with
  `listener.name.enc.ssl.key.password` (`openssl pkcs8 -topk8 -v1 PBE-SHA1-3DES`: Kafka on Java 17
  cannot decrypt OpenSSL 3's default PBES2 keys, Brook reads both).
Clients get their settings through `--client-config` files of Kafka's client names
(harness/client_config.py): PEM trust and key stores, host names verified.

- Every client (Java, confluent-kafka, kcat, franz-go, kafkajs, kafka-python) produces and reads
  back records (keys, values, offsets) over SSL, over SASL_SSL with SCRAM-SHA-512 (kcat with PLAIN:
  its librdkafka 2.0.2 fails SCRAM against Kafka too, see test_security_sasl.py) and over mTLS.
  Brook's log names the mTLS principal, `User:` + the certificate's RFC 2253 subject (Brook only:
  Kafka logs no principal; ACLs will observe it on both).
- Refusals, with the error the Java client reports: a client certificate from another CA, an
  expired one, none on the mTLS listener; plaintext bytes to a TLS port close that connection
  (at most a TLS alert comes back) while a TLS connection opened before carries on.
- Metadata answers each listener with its own advertised address.
- The PKCS12 listener serves Java and confluent-kafka with client certificates and refuses one
  from another CA (its trust store is read, not bypassed).
- Encrypted PEM keys: the ENC listener, and a node of its own whose key is inline
  (`ssl.keystore.key`), serve Java and confluent-kafka; a wrong `ssl.key.password`, none for an
  encrypted key, or one for an unencrypted key stops the node (as Kafka refuses each) without
  the password in its log; Brook's error names the listener's `ssl.key.password` key.
- A store password on a PEM store (`ssl.keystore.password` with a PEM key store, file or inline,
  per listener or broker-wide; `ssl.truststore.password` with a PEM trust store) stops the node
  with Kafka's sentence; Brook's error names the key as it was set.
- Brook only: a JKS key store stops the node (exit 2) naming the key and the keytool command
  that converts it to PKCS12, a PKCS12 one with a wrong password naming ssl.keystore.password;
  Kafka's inline PEM example configuration with line continuations is served. (Other start-up
  refusals are in test_config_security_refused.py.)
"""

import os
import socket
import ssl
import struct
import subprocess
import time
import uuid
from pathlib import Path
from typing import Optional

import pytest
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from harness import client_config, drivers, paths, records, security
from harness.broker import HOST, Broker, free_port
from harness.security import PLAIN_LOGIN, SCRAM_LOGIN

PASSWORD = "brook-secret"
SCRAM_USER = ("tls-scram-user", "tls-scram-secret")
PLAIN_USER = ("alice", "alice-secret")
RECORDS = 10
CLIENT_DN = "CN=brook-client,OU=clients,O=Brook"
# The CIPH listener's one cipher suite (TLS 1.2 only, so that Python's `ssl` can narrow its
# offer), and one it does not offer; Kafka's (IANA) names and OpenSSL's.
CIPH_SUITE, CIPH_OPENSSL = "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384"
OTHER_SUITE, OTHER_OPENSSL = "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256"
brook_only = pytest.mark.skipif(paths.target() == "kafka", reason="brook's own start-up refusals and log")


class TlsBroker:
    """The module's broker and the bootstrap of each of its listeners."""

    def __init__(self, broker: Broker, ports: dict):
        self.broker = broker
        self.ports = ports

    def bootstrap(self, listener: str) -> str:
        return self.broker.bootstrap if listener == "PLAINTEXT" else f"{HOST}:{self.ports[listener]}"


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    return security.make_certificates(tmp_path_factory.mktemp("certs"), PASSWORD)


def wait_for_scram_user(bootstrap: str, user: str, timeout_s: float = 30) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            found = admin.describe_user_scram_credentials([user])[user].result(timeout=10)
            if found.scram_credential_infos:
                return
        except Exception:  # noqa: BLE001 - RESOURCE_NOT_FOUND until the credential is applied
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


@pytest.fixture(scope="module")
def node(tmp_path_factory, certs):
    b = Broker(paths.target(), tmp_path_factory.mktemp("tls"))
    taken = {b.port, b.port + 1, b.metrics_port or 0}
    ports = {}
    for name in ("SSL", "MTLS", "SASL_SSL", "P12", "ENC", "CIPH"):
        ports[name] = free_port(avoid=frozenset(taken))
        taken.add(ports[name])
    b.add_listeners({
        "SSL": ("SSL", ports["SSL"], None),
        "MTLS": ("SSL", ports["MTLS"], None),
        "SASL_SSL": ("SASL_SSL", ports["SASL_SSL"], None),
        "P12": ("SSL", ports["P12"], None),
        "ENC": ("SSL", ports["ENC"], None),
        "CIPH": ("SSL", ports["CIPH"], None),
    }, plaintext_advertised=f"localhost:{b.port}")
    b.overrides.update({
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs / "broker-keystore.pem"),
        "listener.name.mtls.ssl.keystore.type": "PEM",
        "listener.name.mtls.ssl.keystore.location": str(certs / "broker-keystore.pem"),
        "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.location": str(certs / "ca.pem"),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.p12.ssl.keystore.type": "PKCS12",
        "listener.name.p12.ssl.keystore.location": str(certs / "broker.p12"),
        "listener.name.p12.ssl.keystore.password": PASSWORD,
        "listener.name.p12.ssl.truststore.type": "PKCS12",
        "listener.name.p12.ssl.truststore.location": str(security.java_truststore(certs, PASSWORD)),
        "listener.name.p12.ssl.truststore.password": PASSWORD,
        "listener.name.p12.ssl.client.auth": "required",
        "listener.name.enc.ssl.keystore.type": "PEM",
        "listener.name.enc.ssl.keystore.location": str(certs / "broker-encrypted-keystore.pem"),
        "listener.name.enc.ssl.key.password": PASSWORD,
        "listener.name.ciph.ssl.enabled.protocols": "TLSv1.2",
        "listener.name.ciph.ssl.cipher.suites": CIPH_SUITE,
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": f"{SCRAM_LOGIN} required;",
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            f'{PLAIN_LOGIN} required user_{PLAIN_USER[0]}="{PLAIN_USER[1]}";',
    })
    # Brook logs the principal of a certificate at DEBUG (one line per connection).
    os.environ["BROOK_LOG"] = "info,openraft=off,brook::server::connection=debug"
    try:
        b.start()
    finally:
        os.environ.pop("BROOK_LOG", None)
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        upsert = UserScramCredentialUpsertion(
            SCRAM_USER[0], ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), SCRAM_USER[1].encode())
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(timeout=30)
        wait_for_scram_user(b.bootstrap, SCRAM_USER[0])
        yield TlsBroker(b, ports)
    finally:
        b.stop()


@pytest.fixture
def tls(request, node) -> TlsBroker:
    node.broker.start()  # a no-op while it runs
    setattr(request.node, "_brook_brokers", [node.broker])
    return node


@pytest.fixture(scope="module")
def files(tmp_path_factory, certs) -> dict:
    """`--client-config` files (Kafka's client names) for each way in."""
    d = tmp_path_factory.mktemp("client-configs")
    trust = {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs / "ca.pem"),
             "ssl.endpoint.identification.algorithm": "https"}

    def keystore(name: str) -> dict:
        return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs / f"{name}-keystore.pem")}

    def sasl(mechanism: str, user: str, password: str) -> dict:
        login = PLAIN_LOGIN if mechanism == "PLAIN" else SCRAM_LOGIN
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
                "sasl.jaas.config": f'{login} required username="{user}" password="{password}";', **trust}

    settings = {
        "ssl": {"security.protocol": "SSL", **trust},
        "mtls": {"security.protocol": "SSL", **trust, **keystore("client")},
        "mtls-other-ca": {"security.protocol": "SSL", **trust, **keystore("other-client")},
        "mtls-expired": {"security.protocol": "SSL", **trust, **keystore("expired-client")},
        "sasl-ssl-scram-512": sasl("SCRAM-SHA-512", *SCRAM_USER),
        "sasl-ssl-plain": sasl("PLAIN", *PLAIN_USER),
        "ssl-ciph": {"security.protocol": "SSL", **trust, "ssl.cipher.suites": CIPH_SUITE},
        "ssl-other-suite": {"security.protocol": "SSL", **trust, "ssl.cipher.suites": OTHER_SUITE},
    }
    return {name: str(client_config.write(d / f"{name}.properties", s)) for name, s in settings.items()}


def round_trip(client: str, tls: TlsBroker, listener: str, config: str) -> None:
    """`client` produces records over `listener` and reads them back over it."""
    topic = f"tls-{client}-{uuid.uuid4().hex[:8]}"
    records.create_topic(tls.broker.bootstrap, topic, 1)
    bootstrap = tls.bootstrap(listener)
    sent = [{"key": f"k{i}", "value": f"{client} over {listener} {i}", "partition": 0} for i in range(RECORDS)]
    acks = drivers.run(client, "produce", bootstrap, "--topic", topic, "--client-config", config, records=sent)
    assert [a["offset"] for a in acks] == list(range(RECORDS))
    got = drivers.run(client, "consume", bootstrap, "--topic", topic, "--count", RECORDS, "--from", "earliest",
                      "--partitions", "0", "--client-config", config)
    assert [(r["offset"], r["key"], r["value"]) for r in got] == [(i, s["key"], s["value"]) for i, s in enumerate(sent)]


@pytest.mark.parametrize("client", drivers.CLIENTS)
def test_every_client_produces_and_consumes_over_ssl_verifying_the_broker(tls, files, client):
    round_trip(client, tls, "SSL", files["ssl"])


@pytest.mark.parametrize("client", drivers.CLIENTS)
def test_every_client_produces_and_consumes_over_sasl_ssl(tls, files, client):
    # kcat's librdkafka 2.0.2 fails every SCRAM login, against Kafka too: its cell is PLAIN.
    config = files["sasl-ssl-plain"] if client == "kcat" else files["sasl-ssl-scram-512"]
    round_trip(client, tls, "SASL_SSL", config)


@pytest.mark.parametrize("client", drivers.CLIENTS)
def test_every_client_produces_and_consumes_with_a_client_certificate(tls, files, client):
    round_trip(client, tls, "MTLS", files["mtls"])


@pytest.mark.parametrize("client", ["java", "confluent"])
def test_a_listener_with_pkcs12_stores_serves_client_certificates(tls, files, client):
    round_trip(client, tls, "P12", files["mtls"])


def test_a_listener_with_a_pkcs12_trust_store_refuses_another_cas_client(tls, files):
    stderr = java_refusal(tls.bootstrap("P12"), files["mtls-other-ca"])
    assert '{"error":"SslAuthenticationException"' in stderr, stderr[-2000:]


@pytest.mark.parametrize("client", ["java", "confluent"])
def test_a_listener_whose_pem_key_is_encrypted_serves_clients(tls, files, client):
    round_trip(client, tls, "ENC", files["ssl"])


def one_line(pem_file: Path) -> str:
    """A PEM file on one line, as a properties value (Kafka's reader and Brook's take blanks
    in the base64)."""
    return " ".join(pem_file.read_text().split())


def encrypted_key_node(tmp_path, key_settings: dict) -> tuple:
    """A node of the target's kind, not started, with one SSL listener (ENC) configured by
    `key_settings` (keys without the `listener.name.enc.` prefix), and its port."""
    b = Broker(paths.target(), tmp_path / "enc")
    port = free_port(avoid=frozenset({b.port, b.port + 1, b.metrics_port or 0}))
    b.add_listeners({"ENC": ("SSL", port, None)})
    b.overrides.update({f"listener.name.enc.{key}": value for key, value in
                        {"ssl.keystore.type": "PEM", **key_settings}.items()})
    return b, port


def test_an_inline_encrypted_key_is_decrypted_with_the_listeners_key_password(tmp_path, certs, files):
    b, port = encrypted_key_node(tmp_path, {
        "ssl.keystore.certificate.chain": one_line(certs / "broker.pem"),
        "ssl.keystore.key": one_line(certs / "broker-encrypted.key"),
        "ssl.key.password": PASSWORD,
    })
    b.start()
    try:
        node = TlsBroker(b, {"ENC": port})
        for client in ("java", "confluent"):
            round_trip(client, node, "ENC", files["ssl"])
    finally:
        b.stop()


REFUSED_KEYS = {
    "wrong-password": ("broker-encrypted-keystore.pem", "not-" + PASSWORD,
                       "cannot decrypt the private key in listener.name.enc.ssl.keystore.location: the password was incorrect"),
    "no-password": ("broker-encrypted-keystore.pem", None,
                    "the private key in listener.name.enc.ssl.keystore.location is encrypted"),
    "unencrypted-key": ("broker-keystore.pem", PASSWORD,
                        "the private key in listener.name.enc.ssl.keystore.location is not encrypted"),
}


@pytest.mark.parametrize("case", list(REFUSED_KEYS))
def test_a_key_password_that_does_not_fit_the_key_stops_the_node(tmp_path, certs, case):
    store, password, brook_reason = REFUSED_KEYS[case]
    settings = {"ssl.keystore.location": str(certs / store)}
    if password is not None:
        settings["ssl.key.password"] = password
    b, _ = encrypted_key_node(tmp_path, settings)
    b.launch()
    code = b.wait_exit(120)
    if code is None:
        b.kill()
        pytest.fail(f"the node kept running\n{b.log_tail()}")
    # The harness writes the command line (with the settings) first; the node's own lines follow.
    log = "\n".join(line for line in b.log_text().splitlines() if not line.startswith("==== start"))
    assert code != 0, log[-3000:]
    if password is not None:
        assert password not in log
    if b.kind == "brook":
        assert code == 2, log[-3000:]
        assert f"invalid TLS configuration for listener ENC: listener.name.enc.ssl.key.password: {brook_reason}" in log, log
    else:
        assert "Failed to load PEM SSL keystore" in log, log[-3000:]


# A PEM store has no store password (Kafka's DefaultSslEngineFactory refuses one at start, with
# a full stop after the inline key store's sentence and none after the file's): (settings without
# the `listener.name.enc.` prefix unless given, the key Brook names, Kafka's sentence).
KEYSTORE_PEM_PASSWORD = "SSL key store password cannot be specified with PEM format, only key password may be specified"
PEM_STORE_PASSWORDS = {
    "key-store-file": ({"ssl.keystore.location": "broker-keystore.pem", "ssl.keystore.password": PASSWORD},
                       "listener.name.enc.ssl.keystore.password", KEYSTORE_PEM_PASSWORD),
    "inline-key-store": ({"ssl.keystore.certificate.chain": "broker.pem", "ssl.keystore.key": "broker.key",
                          "ssl.keystore.password": PASSWORD},
                         "listener.name.enc.ssl.keystore.password", KEYSTORE_PEM_PASSWORD + "."),
    "broker-wide-password": ({"ssl.keystore.location": "broker-keystore.pem", "=ssl.keystore.password": PASSWORD},
                             "ssl.keystore.password", KEYSTORE_PEM_PASSWORD),
    "trust-store-file": ({"ssl.keystore.location": "broker-keystore.pem", "ssl.truststore.type": "PEM",
                          "ssl.truststore.location": "ca.pem", "ssl.truststore.password": PASSWORD},
                         "listener.name.enc.ssl.truststore.password",
                         "SSL trust store password cannot be specified for PEM format."),
}


@pytest.mark.parametrize("case", list(PEM_STORE_PASSWORDS))
def test_a_store_password_on_a_pem_store_stops_the_node_as_kafka_refuses_it(tmp_path, certs, case):
    given, named, sentence = PEM_STORE_PASSWORDS[case]
    b, _ = encrypted_key_node(tmp_path, {})
    for key, value in given.items():
        if key in ("ssl.keystore.certificate.chain", "ssl.keystore.key"):
            value = one_line(certs / value)
        elif key.endswith(".location"):
            value = str(certs / value)
        # "=key": broker-wide, not per listener.
        b.overrides[key[1:] if key.startswith("=") else f"listener.name.enc.{key}"] = value
    b.launch()
    code = b.wait_exit(120)
    if code is None:
        b.kill()
        pytest.fail(f"the node kept running\n{b.log_tail()}")
    log = "\n".join(line for line in b.log_text().splitlines() if not line.startswith("==== start"))
    assert code != 0, log[-3000:]
    assert sentence in log, log[-3000:]
    assert PASSWORD not in log
    if b.kind == "brook":
        assert code == 2, log[-3000:]
        assert f"invalid TLS configuration for listener ENC: {named}: {sentence}" in log, log[-3000:]


@brook_only
def test_the_mtls_principal_is_the_certificates_subject_in_rfc_2253_order(tls, files):
    drivers.run("confluent", "metadata", tls.bootstrap("MTLS"), "--client-config", files["mtls"])
    log = tls.broker.log_text()
    assert f"principal=User:{CLIENT_DN}" in log, log[-3000:]


def test_metadata_answers_each_listener_with_its_own_addresses(tls, files):
    over_plaintext = drivers.run("java", "metadata", tls.broker.bootstrap)
    assert [(b["host"], b["port"]) for b in over_plaintext["brokers"]] == [("localhost", tls.broker.port)]
    for listener, config in (("SSL", "ssl"), ("MTLS", "mtls"), ("SASL_SSL", "sasl-ssl-scram-512")):
        answer = drivers.run("java", "metadata", tls.bootstrap(listener), "--client-config", files[config])
        assert [(b["host"], b["port"]) for b in answer["brokers"]] == [(HOST, tls.ports[listener])], listener


def java_refusal(bootstrap: str, config: str) -> str:
    """The Java client's error (stderr) when the TLS handshake refuses it."""
    with pytest.raises(drivers.DriverError) as failed:
        drivers.run("java", "metadata", bootstrap, "--client-config", config, timeout=90)
    return failed.value.stderr


@pytest.mark.parametrize("case", ["ssl", "mtls-other-ca", "mtls-expired"],
                         ids=["no-certificate", "another-ca", "expired"])
def test_a_client_certificate_that_cannot_be_verified_is_refused(tls, files, case):
    stderr = java_refusal(tls.bootstrap("MTLS"), files[case])
    # The broker's TLS alert ends the client's handshake (TLS 1.3: as the client reads the
    # first records after its Finished). The alert's name is the TLS stack's choice: Kafka's
    # JSSE sends certificate_unknown (certificate_required when none is sent), rustls names
    # the fault (unknown_ca, certificate_expired, certificate_required).
    assert '{"error":"SslAuthenticationException"' in stderr, stderr[-2000:]
    assert "javax.net.ssl.SSLHandshakeException: Received fatal alert: " in stderr, stderr[-2000:]
    # The broker serves the next client as before.
    assert drivers.run("java", "metadata", tls.bootstrap("MTLS"), "--client-config", files["mtls"])["brokers"]


def api_versions_v0(correlation_id: int) -> bytes:
    client_id = b"tls-test"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def read_response(sock, deadline_s: float = 10) -> bytes:
    sock.settimeout(deadline_s)
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_plaintext_bytes_to_the_tls_port_close_only_that_connection(tls, certs, files):
    port = tls.ports["SSL"]
    context = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    with socket.create_connection((HOST, port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=HOST) as secured:
            # A plaintext Kafka request to the TLS port: that connection is closed with no
            # Kafka response (at most a TLS alert record, content type 21).
            with socket.create_connection((HOST, port), timeout=10) as plain:
                plain.sendall(api_versions_v0(1))
                plain.settimeout(10)
                answer = b""
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    try:
                        chunk = plain.recv(4096)
                    except ConnectionResetError:
                        break
                    if not chunk:
                        break
                    answer += chunk
                else:
                    pytest.fail("the plaintext connection was not closed")
                assert answer == b"" or answer[0] == 21, answer[:16]
            # The TLS connection opened before carries on.
            secured.sendall(api_versions_v0(7))
            response = read_response(secured)
            assert len(response) > 8 and struct.unpack(">i", response[4:8])[0] == 7
    assert drivers.run("confluent", "metadata", tls.bootstrap("SSL"), "--client-config", files["ssl"])["brokers"]


def tls12_handshake(certs: Path, port: int, ciphers: Optional[str] = None) -> tuple:
    """A TLS 1.2 handshake with Python's `ssl` (OpenSSL), offering `ciphers` (OpenSSL names) or
    its defaults: the negotiated (version, suite), or the SSLError."""
    context = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    if ciphers:
        context.set_ciphers(ciphers)
    with socket.create_connection((HOST, port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=HOST) as secured:
            return secured.version(), secured.cipher()[0]


def test_a_listener_offers_only_the_cipher_suites_of_its_ssl_cipher_suites(tls, certs, files):
    port = tls.ports["CIPH"]
    # OpenSSL's default offer holds both suites (AES-128 among the first): the listener's is chosen.
    assert tls12_handshake(certs, port) == ("TLSv1.2", CIPH_OPENSSL)
    with pytest.raises(ssl.SSLError) as refused:
        tls12_handshake(certs, port, OTHER_OPENSSL)
    assert "handshake failure" in str(refused.value).lower(), refused.value
    # The Java client that offers only another suite is refused with the broker's alert ...
    stderr = java_refusal(tls.bootstrap("CIPH"), files["ssl-other-suite"])
    assert '{"error":"SslAuthenticationException"' in stderr, stderr[-2000:]
    assert "javax.net.ssl.SSLHandshakeException: Received fatal alert: handshake_failure" in stderr, stderr[-2000:]
    # ... and one that offers the listener's suite produces and reads back, as any client with defaults.
    round_trip("java", tls, "CIPH", files["ssl-ciph"])
    round_trip("confluent", tls, "CIPH", files["ssl"])


@brook_only
@pytest.mark.parametrize("suites,reason", [
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "Brook implements none of these cipher suites; it offers TLS_"),
    (f"{CIPH_SUITE},{OTHER_OPENSSL}", f"Unsupported CipherSuite: {OTHER_OPENSSL}"),
], ids=["none-implemented", "not-a-suite"])
def test_a_cipher_suite_list_brook_cannot_serve_stops_the_node_naming_the_key(tmp_path, certs, suites, reason):
    result = run_brook(tmp_path, {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs / "broker-keystore.pem"),
                                  "listener.name.ssl.ssl.cipher.suites": suites})
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"listener.name.ssl.ssl.cipher.suites: {reason}" in result.stderr, result.stderr[-2000:]


def run_brook(tmp_path, settings: dict) -> subprocess.CompletedProcess:
    """brook with a PLAINTEXT and an SSL listener on fresh ports, until it exits (or 30 s)."""
    ports = [free_port(), free_port()]
    values = {
        "log.dirs": str(tmp_path / "data"),
        "metrics.listener": f"{HOST}:{free_port()}",
        "listeners": f"PLAINTEXT://{HOST}:{ports[0]},SSL://{HOST}:{ports[1]}",
        **settings,
    }
    argv = [str(paths.brook_bin())]
    for key, value in values.items():
        argv += ["--override", f"{key}={value}"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


@brook_only
def test_a_jks_key_store_stops_the_node_naming_the_key_and_keytool(tmp_path, certs):
    jks = tmp_path / "broker.jks"
    subprocess.run(["keytool", "-importkeystore", "-srckeystore", str(certs / "broker.p12"), "-srcstoretype",
                    "PKCS12", "-srcstorepass", PASSWORD, "-destkeystore", str(jks), "-deststoretype", "JKS",
                    "-deststorepass", PASSWORD, "-noprompt"], check=True, capture_output=True, timeout=60)
    result = run_brook(tmp_path, {"ssl.keystore.location": str(jks), "ssl.keystore.password": PASSWORD})
    assert result.returncode == 2, result.stderr[-2000:]
    assert "ssl.keystore.location" in result.stderr and "keytool -importkeystore" in result.stderr, result.stderr
    assert PASSWORD not in result.stderr


@brook_only
def test_a_pkcs12_key_store_with_a_wrong_password_stops_the_node_naming_the_password_key(tmp_path, certs):
    wrong = "not-" + PASSWORD
    result = run_brook(tmp_path, {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(certs / "broker.p12"),
                                  "ssl.keystore.password": wrong})
    assert result.returncode == 2, result.stderr[-2000:]
    assert "ssl.keystore.password: cannot open the PKCS12 store" in result.stderr, result.stderr
    assert "the password was incorrect" in result.stderr, result.stderr
    assert wrong not in result.stderr


@brook_only
def test_kafkas_inline_pem_example_with_line_continuations_is_served(tmp_path, certs, files):
    """Kafka's documented form: PEM values inline in server.properties, one logical line
    joined with backslash continuations."""

    def inline(path) -> str:
        return " \\\n    ".join(path.read_text().strip().splitlines())

    config_text = (
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.certificate.chain={inline(certs / 'broker.pem')}\n"
        f"ssl.keystore.key={inline(certs / 'broker.key')}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.certificates={inline(certs / 'ca.pem')}\n"
        "ssl.client.auth=required\n"
    )
    b = Broker("brook", tmp_path / "inline")
    ssl_port = free_port(avoid=frozenset({b.port, b.port + 1, b.metrics_port or 0}))
    config = tmp_path / "inline.properties"
    config.write_text(config_text)
    b.add_listeners({"SSL": ("SSL", ssl_port, None)})
    # The harness passes settings as --override; the PEM values come from the file.
    original = b._argv
    b._argv = lambda: original()[:1] + ["--config", str(config)] + original()[1:]
    b.start()
    try:
        answer = drivers.run("confluent", "metadata", f"{HOST}:{ssl_port}", "--client-config", files["mtls"])
        assert answer["brokers"]
        assert "-----BEGIN" not in b.log_text()  # no secret in the log
    finally:
        b.stop()
