"""SASL on a SASL_PLAINTEXT listener (issue 25 item 4), the same on Brook and Apache Kafka.

One broker per configuration, shared by the module: `sasl_broker` enables PLAIN, SCRAM-SHA-256
and SCRAM-SHA-512 (PLAIN users from the listener's JAAS line, SCRAM users created with
kafka-configs); `plain_only_broker` enables PLAIN alone with connections.max.reauth.ms=3000.

- Every client (Java, confluent-kafka, kcat, franz-go, kafkajs, kafka-python) produces and
  consumes with PLAIN and with SCRAM-SHA-512; Java and confluent also with SCRAM-SHA-256.
- Refusals, each with the error the client reports: a wrong password and an unknown user
  (SASL_AUTHENTICATION_FAILED with the broker's message), a mechanism the listener does not
  enable (UNSUPPORTED_SASL_MECHANISM); a Metadata request before authentication and a frame
  over sasl.server.max.receive.size close that socket while other clients go on.
- kafka-configs creates, describes and deletes a SCRAM credential; it survives a restart;
  iterations below 4096 are refused (UNACCEPTABLE_CREDENTIAL).
- KIP-368: a Java consumer keeps consuming across several 3 s sessions.
"""

import socket
import struct
import subprocess
import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from harness import client_config, drivers, kafka_cli, paths
from harness.broker import HOST, Broker, free_port
from harness.security import ADMIN, client_file, sasl_broker_settings

CONFIGS = "org.apache.kafka.tools.ConfigCommand"
PLAIN_USERS = {"alice": "alice-secret"}
SCRAM_USER = ("scram-user", "scram-secret")
RECORDS = 20


def _start(tmp_path_factory, name: str, mechanisms, extra=None) -> Broker:
    kind = paths.target()
    port = free_port(2)
    settings = sasl_broker_settings(kind, port, mechanisms, PLAIN_USERS, extra)
    broker = Broker(kind, tmp_path_factory.mktemp(name), settings, port=port)
    broker.start()
    return broker


def configs(broker: Broker, command_config: str, *args, check=True):
    return kafka_cli.run(CONFIGS, "--bootstrap-server", broker.bootstrap, "--command-config", command_config,
                         *args, check=check)


def set_scram(broker: Broker, admin: str, user: str, password: str, mechanism: str, iterations=8192, check=True):
    return configs(broker, admin, "--alter", "--entity-type", "users", "--entity-name", user,
                   "--add-config", f"{mechanism}=[iterations={iterations},password={password}]", check=check)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("client-configs")
    return {
        "admin": client_file(d, "admin", "PLAIN", *ADMIN),
        "plain": client_file(d, "plain", "PLAIN", "alice", PLAIN_USERS["alice"]),
        "plain-wrong-password": client_file(d, "plain-wrong", "PLAIN", "alice", "not-her-password"),
        "plain-unknown-user": client_file(d, "plain-unknown", "PLAIN", "mallory", "alice-secret"),
        "scram-512": client_file(d, "scram-512", "SCRAM-SHA-512", *SCRAM_USER),
        "scram-256": client_file(d, "scram-256", "SCRAM-SHA-256", *SCRAM_USER),
        "scram-512-wrong-password": client_file(d, "scram-512-wrong", "SCRAM-SHA-512", SCRAM_USER[0], "nope"),
        "dir": str(d),
    }


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory, files):
    broker = _start(tmp_path_factory, "sasl", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
    try:
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            set_scram(broker, files["admin"], *SCRAM_USER, mechanism)
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def plain_only_broker(tmp_path_factory):
    broker = _start(tmp_path_factory, "plain-only", ["PLAIN"], {"connections.max.reauth.ms": "3000"})
    yield broker
    broker.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def produce_and_consume(client: str, broker: Broker, config: str, admin_config: str) -> None:
    topic = unique("t-sasl")
    drivers.run("confluent", "create-topic", broker.bootstrap, "--topic", topic, "--partitions", 1,
                "--client-config", admin_config)
    records = [{"key": f"k{i}", "value": f"{client}-{i}"} for i in range(RECORDS)]
    produced = drivers.run(client, "produce", broker.bootstrap, "--topic", topic, "--client-config", config,
                           records=records)
    assert len(produced) == RECORDS
    consumed = drivers.run(client, "consume", broker.bootstrap, "--topic", topic, "--count", RECORDS,
                           "--partitions", "0", "--from", "earliest", "--client-config", config)
    assert [r["value"] for r in consumed] == [r["value"] for r in records]


@pytest.mark.parametrize("client", drivers.CLIENTS)
def test_each_client_produces_and_consumes_over_sasl_plain(client, sasl_broker, files):
    produce_and_consume(client, sasl_broker, files["plain"], files["admin"])


# kcat (Debian's, on librdkafka 2.0.2) fails every SCRAM login against Apache Kafka 4.4 as well
# ("Authentication failed during authentication due to invalid credentials with SASL mechanism
# SCRAM-SHA-512", and -256 alike), where confluent-kafka's librdkafka 2.12.1 logs in: a gap of
# that old client, so kcat's SASL cell is PLAIN.
SCRAM_CLIENTS = [c for c in drivers.CLIENTS if c != "kcat"]


@pytest.mark.parametrize("client", SCRAM_CLIENTS)
def test_each_client_produces_and_consumes_over_scram_sha_512(client, sasl_broker, files):
    produce_and_consume(client, sasl_broker, files["scram-512"], files["admin"])


@pytest.mark.parametrize("client", ["java", "confluent"])
def test_java_and_confluent_produce_and_consume_over_scram_sha_256(client, sasl_broker, files):
    produce_and_consume(client, sasl_broker, files["scram-256"], files["admin"])


def java_failure(broker: Broker, config: str) -> str:
    """What the Java client reports when its admin client cannot log in (stderr JSON line)."""
    with pytest.raises(drivers.DriverError) as failure:
        drivers.run("java", "list-topics", broker.bootstrap, "--client-config", config, timeout=60)
    return failure.value.stderr


@pytest.mark.parametrize("which", ["plain-wrong-password", "plain-unknown-user"])
def test_a_wrong_plain_login_is_refused_with_the_brokers_message(which, sasl_broker, files):
    stderr = java_failure(sasl_broker, files[which])
    assert "SaslAuthenticationException" in stderr, stderr[-2000:]
    assert "Authentication failed: Invalid username or password" in stderr, stderr[-2000:]


def test_a_wrong_scram_password_is_refused_without_saying_whether_the_user_exists(sasl_broker, files):
    stderr = java_failure(sasl_broker, files["scram-512-wrong-password"])
    assert "SaslAuthenticationException" in stderr, stderr[-2000:]
    assert ("Authentication failed during authentication due to invalid credentials with SASL mechanism "
            "SCRAM-SHA-512") in stderr, stderr[-2000:]


def test_librdkafka_reports_the_failed_login_as_an_authentication_error(sasl_broker, files):
    # librdkafka reports the refused login through its error callback (served by poll) at once,
    # and retries the connection: waiting for the callback, not for a request's 30 s timeout.
    errors = []
    settings = client_config.librdkafka(client_config.load(files["plain-wrong-password"]))
    admin = AdminClient({"bootstrap.servers": sasl_broker.bootstrap, **settings, "error_cb": errors.append})
    deadline = time.monotonic() + 60
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        admin.poll(0.5)
    text = "; ".join(e.str() for e in errors)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), text
    assert "Authentication failed: Invalid username or password" in text, text


def test_a_mechanism_the_listener_does_not_enable_is_refused_naming_the_enabled_ones(plain_only_broker, files):
    stderr = java_failure(plain_only_broker, files["scram-512"])
    assert "UnsupportedSaslMechanismException" in stderr, stderr[-2000:]
    assert "enabled mechanisms are [PLAIN]" in stderr, stderr[-2000:]


def _closed_without_answer(s: socket.socket) -> bool:
    s.settimeout(10)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def test_a_request_before_authentication_closes_the_socket(sasl_broker, files):
    client_id = b"raw"
    # Metadata v4, all topics (null array), auto-create false.
    body = struct.pack(">hhih", 3, 4, 1, len(client_id)) + client_id + struct.pack(">i?", -1, False)
    with socket.create_connection((HOST, sasl_broker.port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        assert _closed_without_answer(s)
    assert drivers.run("java", "list-topics", sasl_broker.bootstrap, "--client-config", files["plain"]) is not None


def test_an_oversized_frame_before_authentication_closes_only_that_socket(sasl_broker, files):
    with socket.create_connection((HOST, sasl_broker.port), timeout=10) as s:
        s.sendall(struct.pack(">i", 600_000) + b"\0" * 1024)
        assert _closed_without_answer(s)
    assert drivers.run("java", "list-topics", sasl_broker.bootstrap, "--client-config", files["plain"]) is not None


def describe_users(broker: Broker, admin: str) -> str:
    return configs(broker, admin, "--describe", "--entity-type", "users").stdout


def can_log_in(broker: Broker, config: str) -> bool:
    try:
        drivers.run("java", "list-topics", broker.bootstrap, "--client-config", config, timeout=60)
        return True
    except drivers.DriverError as e:
        assert "SaslAuthenticationException" in e.stderr, e.stderr[-2000:]
        return False


def test_kafka_configs_creates_describes_and_deletes_a_scram_credential_that_survives_restart(sasl_broker, files):
    user = unique("carol")
    carol = client_file(files["dir"], user, "SCRAM-SHA-512", user, "carol-secret")
    set_scram(sasl_broker, files["admin"], user, "carol-secret", "SCRAM-SHA-512", iterations=8192)
    assert f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-512=iterations=8192" \
        in describe_users(sasl_broker, files["admin"])
    assert can_log_in(sasl_broker, carol)
    sasl_broker.restart()
    assert can_log_in(sasl_broker, carol)
    configs(sasl_broker, files["admin"], "--alter", "--entity-type", "users", "--entity-name", user,
            "--delete-config", "SCRAM-SHA-512")
    assert user not in describe_users(sasl_broker, files["admin"])
    assert not can_log_in(sasl_broker, carol)


def test_too_few_iterations_are_refused_as_unacceptable(sasl_broker, files):
    # kafka-configs refuses them itself, before asking the broker.
    proc = set_scram(sasl_broker, files["admin"], unique("dave"), "dave-secret", "SCRAM-SHA-512",
                     iterations=1000, check=False)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert "Iterations 1000 is less than the minimum 4096 required for SCRAM-SHA-512" in text, text[-2000:]
    # librdkafka sends them, and the broker answers UNACCEPTABLE_CREDENTIAL.
    admin = AdminClient(librdkafka_conf(sasl_broker, files["admin"]))
    upsertion = UserScramCredentialUpsertion(
        unique("dave"), ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 1000), b"dave-secret")
    with pytest.raises(KafkaException) as refused:
        for future in admin.alter_user_scram_credentials([upsertion]).values():
            future.result(timeout=30)
    error = refused.value.args[0]
    assert error.code() == KafkaError.UNACCEPTABLE_CREDENTIAL, error
    assert "Too few iterations" in error.str(), error


def librdkafka_conf(broker: Broker, config: str) -> dict:
    return {"bootstrap.servers": broker.bootstrap,
            **client_config.librdkafka(client_config.load(config))}


def test_a_java_consumer_keeps_consuming_across_reauthentications(plain_only_broker, files):
    topic = unique("t-reauth")
    bootstrap = plain_only_broker.bootstrap
    drivers.run("confluent", "create-topic", bootstrap, "--topic", topic, "--partitions", 1,
                "--client-config", files["admin"])
    consumer = subprocess.Popen(
        [*drivers.DRIVER_ARGV["java"], "consume", "--bootstrap", bootstrap, "--topic", topic, "--count", "4",
         "--partitions", "0", "--from", "earliest", "--timeout-ms", "30000", "--client-config", files["plain"]],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=paths.TESTS_DIR)
    try:
        # Four records 3.5 s apart: the consumer's session (3 s) ends between any two of them.
        for i in range(4):
            time.sleep(3.5)
            drivers.run("confluent", "produce", bootstrap, "--topic", topic, "--client-config", files["plain"],
                        records=[{"key": "k", "value": f"reauth-{i}"}])
        out, err = consumer.communicate(timeout=60)
    finally:
        consumer.kill()
    values = [line for line in out.splitlines() if line.strip()]
    assert len(values) == 4, err[-3000:]
    assert all(f'"reauth-{i}"' in values[i] for i in range(4)), values
    if plain_only_broker.kind == "brook":  # the sessions were renewed, not replaced by new connections
        assert plain_only_broker.metric("brook_sasl_authentications_total", result="reauthentication") >= 2


def _request(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    payload = struct.pack(">hhih", api_key, version, correlation_id, 3) + b"raw" + body
    return struct.pack(">i", len(payload)) + payload


def _response(s: socket.socket) -> bytes:
    def exact(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = s.recv(n - len(out))
            assert chunk, "connection closed"
            out += chunk
        return out
    (size,) = struct.unpack(">i", exact(4))
    return exact(size)


def _login_plain_v1(s: socket.socket, correlation_id: int) -> int:
    """SaslHandshake v1 + SaslAuthenticate v1 as alice: the session lifetime announced."""
    s.sendall(_request(17, 1, correlation_id, struct.pack(">h", 5) + b"PLAIN"))  # SaslHandshake v1
    assert struct.unpack(">ih", _response(s)[:6]) == (correlation_id, 0)
    token = f"\0alice\0{PLAIN_USERS['alice']}".encode()
    s.sendall(_request(36, 1, correlation_id + 1, struct.pack(">i", len(token)) + token))  # SaslAuthenticate v1
    answer = _response(s)
    answered_id, error_code, message_len = struct.unpack(">ihh", answer[:8])
    pos = 8 + max(message_len, 0)
    (bytes_len,) = struct.unpack(">i", answer[pos:pos + 4])
    (session_lifetime_ms,) = struct.unpack(">q", answer[pos + 4 + bytes_len:pos + 12 + bytes_len])
    assert (answered_id, error_code) == (correlation_id + 1, 0)
    return session_lifetime_ms


METADATA_V4_ALL_TOPICS = struct.pack(">i?", -1, False)


def test_a_socket_that_does_not_reauthenticate_is_closed_at_expiry(plain_only_broker):
    with socket.create_connection((HOST, plain_only_broker.port), timeout=10) as s:
        s.settimeout(10)
        assert _login_plain_v1(s, 1) == 3000
        s.sendall(_request(3, 4, 3, METADATA_V4_ALL_TOPICS))
        assert struct.unpack(">i", _response(s)[:4]) == (3,)
        time.sleep(3.3)
        s.sendall(_request(3, 4, 4, METADATA_V4_ALL_TOPICS))
        assert _closed_without_answer(s)


def test_a_reauthentication_that_starts_after_expiry_renews_the_session(plain_only_broker):
    # The Java client re-authenticates at 85-95% of the lifetime, but only when it next has a
    # request to send: after a Fetch long poll that is often past the end. Kafka offers a
    # SaslHandshake to re-authentication before it checks expiry, so the session goes on.
    with socket.create_connection((HOST, plain_only_broker.port), timeout=10) as s:
        s.settimeout(10)
        assert _login_plain_v1(s, 1) == 3000
        time.sleep(3.3)
        assert _login_plain_v1(s, 3) == 3000
        s.sendall(_request(3, 4, 5, METADATA_V4_ALL_TOPICS))
        assert struct.unpack(">i", _response(s)[:4]) == (5,)
