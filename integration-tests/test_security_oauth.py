"""SASL/OAUTHBEARER on SASL_PLAINTEXT listeners (issue 25 item 4), the same on Brook and Apache Kafka.

One broker for the module, with two SASL_PLAINTEXT listeners configured with Kafka's names:
- `SASL_PLAINTEXT` enables PLAIN (the admin, and Kafka's inter-broker login) and OAUTHBEARER with
  Kafka's default server callback handler: unsecured JWS tokens (KIP-255), as Kafka's default
  client login writes them (`OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="alice";`).
- `SIGNED` enables OAUTHBEARER with `OAuthBearerValidatorCallbackHandler` (KIP-768): RS256 JWTs
  verified with a JWKS read from a `file:` URL, expected audience and issuer. The Java client reads
  its token from a file (`OAuthBearerLoginCallbackHandler` with `sasl.oauthbearer.token.endpoint.url
  =file:...`); Kafka 4.x's clients and brokers open such URLs only when the JVM system property
  `org.apache.kafka.sasl.oauthbearer.allowed.urls` (and `.allowed.files`) lists them (given
  through JAVA_TOOL_OPTIONS).

Keys and tokens are made here with `cryptography`. The Java client produces and consumes with
both logins (keys, values and offsets read back); with ACLs on, the principal is `User:<sub>`
(alice may write, bob is refused TOPIC_AUTHORIZATION_FAILED). Refusals, with what the client is
told: a JWT signed by another key and one for another audience (the Java client reports
SaslAuthenticationException `{"status":"invalid_token"}`), and an expired one, which Kafka's
client would not send, sent over the wire: the `{"status":"invalid_token"}` challenge, then
SASL_AUTHENTICATION_FAILED with that message.
"""

import base64
import json
import os
import time
import uuid
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from harness import client_config, drivers, kafka_cli, paths, wire
from harness.broker import Broker, free_port
from harness.security import ADMIN, PLAIN_LOGIN, client_file, plain_jaas_server

OAUTH_LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
FILE_LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
ALLOWED_URLS = "org.apache.kafka.sasl.oauthbearer.allowed.urls"
# Kafka 4.x also checks the files its OAuth code opens against this list.
ALLOWED_FILES = "org.apache.kafka.sasl.oauthbearer.allowed.files"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ACLS = "org.apache.kafka.tools.AclCommand"
AUDIENCE = "brook-test"
ISSUER = "https://issuer.brook.test"
KID = "brook-test-key"
RECORDS = 10


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(key: rsa.RSAPrivateKey, claims: dict, kid: str = KID) -> str:
    header = b64url(json.dumps({"alg": "RS256", "kid": kid, "typ": "JWT"}).encode())
    payload = b64url(json.dumps(claims).encode())
    signing_input = f"{header}.{payload}".encode()
    signature = key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    return f"{header}.{payload}.{b64url(signature)}"


def claims(sub: str, audience: str = AUDIENCE, expires_in_s: int = 3600) -> dict:
    now = int(time.time())
    return {"sub": sub, "iss": ISSUER, "aud": audience, "iat": now - 60, "exp": now + expires_in_s,
            "scope": "kafka"}


def unsigned_big_endian(n: int) -> bytes:
    return n.to_bytes((n.bit_length() + 7) // 8, "big")


def jwks(key: rsa.RSAPrivateKey) -> dict:
    """The JSON Web Key Set that holds `key`'s public half (RFC 7517)."""
    numbers = key.public_key().public_numbers()
    return {"keys": [{"kty": "RSA", "kid": KID, "use": "sig", "alg": "RS256",
                      "n": b64url(unsigned_big_endian(numbers.n)), "e": b64url(unsigned_big_endian(numbers.e))}]}


def file_url(path: Path) -> str:
    """The URL Java's File.toURI() gives, which the allowed-URLs property must list as is."""
    return f"file:{path}"


@pytest.fixture(scope="module")
def oauth(tmp_path_factory):
    """Keys, token files and client settings files, and the JVM option that allows the file URLs."""
    d = tmp_path_factory.mktemp("oauth")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (d / "jwks.json").write_text(json.dumps(jwks(key)))
    tokens = {
        "signed-alice": jwt(key, claims("alice")),
        "bad-signature": jwt(other_key, claims("alice")),
        "wrong-audience": jwt(key, claims("alice", audience="somebody-else")),
    }
    files = {"admin": client_file(d, "admin", "PLAIN", *ADMIN), "dir": d}
    urls = [file_url(d / "jwks.json")]
    for name, token in tokens.items():
        (d / f"{name}.jwt").write_text(token)
        urls.append(file_url(d / f"{name}.jwt"))
        files[name] = str(client_config.write(d / f"{name}.properties", {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.login.callback.handler.class": FILE_LOGIN_HANDLER,
            "sasl.oauthbearer.token.endpoint.url": file_url(d / f"{name}.jwt"),
            "sasl.jaas.config": f"{OAUTH_LOGIN} required;",
        }))
    for user in ("alice", "bob"):
        files[f"unsecured-{user}"] = str(client_config.write(d / f"unsecured-{user}.properties", {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": f'{OAUTH_LOGIN} required unsecuredLoginStringClaim_sub="{user}";',
        }))
    previous = os.environ.get("JAVA_TOOL_OPTIONS")
    paths_allowed = ",".join(url[len("file:"):] for url in urls)
    os.environ["JAVA_TOOL_OPTIONS"] = f"-D{ALLOWED_URLS}={','.join(urls)} -D{ALLOWED_FILES}={paths_allowed}"
    try:
        yield {"key": key, "files": files, "jwks_url": urls[0]}
    finally:
        if previous is None:
            os.environ.pop("JAVA_TOOL_OPTIONS", None)
        else:
            os.environ["JAVA_TOOL_OPTIONS"] = previous


def broker_settings(kind: str, port: int, signed_port: int, jwks_url: str) -> dict:
    listeners = f"SASL_PLAINTEXT://127.0.0.1:{port},SIGNED://127.0.0.1:{signed_port}"
    protocol_map = "SASL_PLAINTEXT:SASL_PLAINTEXT,SIGNED:SASL_PLAINTEXT"
    if kind == "kafka":
        listeners += f",CONTROLLER://127.0.0.1:{port + 1}"
        protocol_map += ",CONTROLLER:PLAINTEXT"
    signed = "listener.name.signed.oauthbearer."
    return {
        "listeners": listeners,
        "advertised.listeners": f"SASL_PLAINTEXT://127.0.0.1:{port},SIGNED://127.0.0.1:{signed_port}",
        "listener.security.protocol.map": protocol_map,
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas_server({ADMIN[0]: ADMIN[1]}),
        # Kafka's default server callback handler: unsecured JWS. The broker's own login
        # (unused here) names a subject, as Kafka's KIP-255 example does.
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
            f'{OAUTH_LOGIN} required unsecuredLoginStringClaim_sub="{ADMIN[0]}";',
        "listener.name.signed.sasl.enabled.mechanisms": "OAUTHBEARER",
        f"{signed}sasl.jaas.config": f"{OAUTH_LOGIN} required;",
        f"{signed}sasl.server.callback.handler.class": VALIDATOR,
        f"{signed}sasl.oauthbearer.jwks.endpoint.url": jwks_url,
        f"{signed}sasl.oauthbearer.expected.audience": AUDIENCE,
        f"{signed}sasl.oauthbearer.expected.issuer": ISSUER,
        "authorizer.class.name": STANDARD_AUTHORIZER,
        # Kafka's controller listener is PLAINTEXT: its principal (ANONYMOUS) registers the node.
        "super.users": f"User:{ADMIN[0]};User:ANONYMOUS",
    }


@pytest.fixture(scope="module")
def broker(tmp_path_factory, oauth):
    kind = paths.target()
    port = free_port(2)
    signed_port = free_port(1, avoid=frozenset({port, port + 1}))
    b = Broker(kind, tmp_path_factory.mktemp("oauth-broker"),
               broker_settings(kind, port, signed_port, oauth["jwks_url"]), port=port)
    b.start()
    b.signed_bootstrap = f"127.0.0.1:{signed_port}"
    try:
        # alice may produce and consume any topic and group; bob has no ACL.
        kafka_cli.run(ACLS, "--bootstrap-server", b.bootstrap, "--command-config", oauth["files"]["admin"],
                      "--add", "--allow-principal", "User:alice", "--producer", "--consumer",
                      "--topic", "*", "--group", "*")
        yield b
    finally:
        b.stop()


def produce_and_consume(bootstrap: str, admin_bootstrap: str, config: str, admin_config: str) -> None:
    topic = f"t-oauth-{uuid.uuid4().hex[:10]}"
    drivers.run("confluent", "create-topic", admin_bootstrap, "--topic", topic, "--partitions", 1,
                "--client-config", admin_config)
    records = [{"key": f"k{i}", "value": f"oauth-{i}"} for i in range(RECORDS)]
    produced = drivers.run("java", "produce", bootstrap, "--topic", topic, "--client-config", config,
                           records=records)
    assert [(p["partition"], p["offset"]) for p in produced] == [(0, i) for i in range(RECORDS)]
    consumed = drivers.run("java", "consume", bootstrap, "--topic", topic, "--count", RECORDS,
                           "--partitions", "0", "--from", "earliest", "--client-config", config)
    assert [(r["offset"], r["key"], r["value"]) for r in consumed] == \
        [(i, r["key"], r["value"]) for i, r in enumerate(records)]


def test_the_unsecured_default_login_produces_and_consumes_as_its_subject(broker, oauth):
    produce_and_consume(broker.bootstrap, broker.bootstrap, oauth["files"]["unsecured-alice"],
                        oauth["files"]["admin"])


def test_a_signed_jwt_read_from_a_file_produces_and_consumes(broker, oauth):
    produce_and_consume(broker.signed_bootstrap, broker.bootstrap, oauth["files"]["signed-alice"],
                        oauth["files"]["admin"])


def test_the_principal_is_the_subject_so_a_user_without_acls_is_refused(broker, oauth):
    topic = f"t-oauth-bob-{uuid.uuid4().hex[:10]}"
    drivers.run("confluent", "create-topic", broker.bootstrap, "--topic", topic, "--partitions", 1,
                "--client-config", oauth["files"]["admin"])
    with pytest.raises(drivers.DriverError) as failure:
        drivers.run("java", "produce", broker.bootstrap, "--topic", topic,
                    "--client-config", oauth["files"]["unsecured-bob"], records=[{"key": "k", "value": "v"}],
                    timeout=60)
    text = failure.value.stdout + failure.value.stderr
    assert "TopicAuthorizationException" in text, text[-2000:]


@pytest.mark.parametrize("which", ["bad-signature", "wrong-audience"])
def test_a_jwt_the_broker_cannot_accept_is_refused_as_an_invalid_token(which, broker, oauth):
    with pytest.raises(drivers.DriverError) as failure:
        drivers.run("java", "list-topics", broker.signed_bootstrap, "--client-config", oauth["files"][which],
                    timeout=60)
    stderr = failure.value.stderr
    assert "SaslAuthenticationException" in stderr, stderr[-2000:]
    assert '{\\"status\\":\\"invalid_token\\"}' in stderr or '{"status":"invalid_token"}' in stderr, stderr[-2000:]


def test_an_expired_jwt_gets_the_invalid_token_challenge_then_sasl_authentication_failed(broker, oauth):
    expired = jwt(oauth["key"], claims("alice", expires_in_s=-3600))
    answer = wire.sasl_oauthbearer_login(broker.signed_bootstrap, expired)
    assert answer["challenge"] == '{"status":"invalid_token"}', answer
    assert answer["error_code"] == 58, answer  # SASL_AUTHENTICATION_FAILED
    assert answer["error_message"] == '{"status":"invalid_token"}', answer


def test_an_expired_unsecured_token_is_refused_and_a_fresh_one_gets_its_lifetime(broker):
    header = b64url(b'{"alg":"none"}')
    now = int(time.time())
    expired = f"{header}.{b64url(json.dumps({'sub': 'alice', 'exp': now - 60}).encode())}."
    answer = wire.sasl_oauthbearer_login(broker.bootstrap, expired)
    assert (answer["challenge"], answer["error_code"], answer["error_message"]) == \
        ('{"status":"invalid_token"}', 58, '{"status":"invalid_token"}'), answer
    fresh = f"{header}.{b64url(json.dumps({'sub': 'alice', 'exp': now + 600}).encode())}."
    answer = wire.sasl_oauthbearer_login(broker.bootstrap, fresh)
    assert (answer["challenge"], answer["error_code"]) == (None, 0), answer
    # KIP-368: the session ends when the token does.
    assert 590_000 <= answer["session_lifetime_ms"] <= 600_000, answer
