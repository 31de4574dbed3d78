"""No silent downgrade (issue 25 item 0), brook only: a configuration asking for security Brook
does not serve yet stops the node at start, and a dynamic update that would change security is
refused, instead of Brook serving plain, unauthenticated Kafka where the operator asked for
security. Client listeners of all four protocols are served: SSL and SASL_SSL
(test_security_tls.py), SASL_PLAINTEXT with PLAIN and SCRAM (test_security_sasl.py) and OAUTHBEARER
(test_security_oauth.py); GSSAPI (Kafka's default mechanism) is refused, and so is an OAUTHBEARER
JWKS that is not a file: URL. Kafka serves these settings, so this
module does not run against it; what Kafka and Brook answer alike (the Kerberos relogin timing
stored, read-only keys refused) is in test_config_kafka_names.py.

- A node whose SASL controller listener would log nodes in with Kafka's default GSSAPI
  (test_security_controller_sasl.py serves PLAIN there), a cluster node whose
  inter-broker listener does not exist or logs in with a mechanism Brook's inter-broker client
  cannot use (Kafka's default GSSAPI; test_security_cluster.py serves a secured one), a SASL listener left with GSSAPI or without its JAAS entry, an authorizer.class.name
  other than Kafka's StandardAuthorizer (test_security_acl.py serves that one), a SASL mechanism
  Brook cannot serve, or an SSL listener without a key store exits non-zero at once (a JKS key
  store: test_security_tls.py), its stderr naming the listener and protocol or the key, and never
  listens on its ports.
- IncrementalAlterConfigs of sasl.enabled.mechanisms, ssl.client.auth (also listener-prefixed) is
  refused with INVALID_CONFIG saying Brook does not support it, and nothing changes; a key store
  for a listener without TLS is refused with INVALID_REQUEST (a TLS listener's stores can change:
  test_security_tls_reload.py).
"""

import json
import subprocess

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

from harness import drivers, paths
from harness.broker import HOST, Broker, _accepts_tcp, free_port

pytestmark = pytest.mark.skipif(paths.target() == "kafka",
                                reason="brook's own refusals: Apache Kafka serves TLS, SASL and ACLs")

EXIT_WITHIN_S = 30


def run_brook(tmp_path, settings: dict) -> tuple:
    """Start brook with these settings on fresh ports; (exit code, stderr, the ports)."""
    ports = [free_port(), free_port()]
    values = {
        "log.dirs": str(tmp_path / "data"),
        "metrics.listener": f"{HOST}:{free_port()}",
        **{k: v.format(p0=ports[0], p1=ports[1], host=HOST) for k, v in settings.items()},
    }
    argv = [str(paths.brook_bin())]
    for key, value in values.items():
        argv += ["--override", f"{key}={value}"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=EXIT_WITHIN_S)
    return result.returncode, result.stderr, ports


PLAINTEXT_AND = "PLAINTEXT://{host}:{p0},"


@pytest.mark.parametrize("settings, named", [
    pytest.param({"listeners": PLAINTEXT_AND + "CONTROLLER://{host}:{p1}",
                  "controller.listener.names": "CONTROLLER",
                  "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
                  "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
                  "listener.name.controller.plain.sasl.jaas.config":
                      'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b" user_a="b";'},
                 ["sasl.mechanism.controller.protocol=GSSAPI", "controller listener CONTROLLER is SASL_PLAINTEXT",
                  "GSSAPI, Kafka's default, is Kerberos"],
                 id="sasl-controller-listener-with-kafkas-default-gssapi"),
    pytest.param({"listeners": "INTERNAL://{host}:{p0},CONTROLLER://{host}:{p1}",
                  "controller.listener.names": "CONTROLLER",
                  "controller.quorum.voters": "1@{host}:{p1},2@{host}:1,3@{host}:2",
                  "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
                  "inter.broker.listener.name": "INTERNAL",
                  "sasl.enabled.mechanisms": "PLAIN",
                  "listener.name.internal.plain.sasl.jaas.config":
                      'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'},
                 ["sasl.mechanism.inter.broker.protocol=GSSAPI", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"],
                 id="sasl-inter-broker-listener-with-kafkas-default-gssapi"),
    pytest.param({"listeners": "PLAINTEXT://{host}:{p0},CONTROLLER://{host}:{p1}",
                  "controller.listener.names": "CONTROLLER",
                  "controller.quorum.voters": "1@{host}:{p1},2@{host}:1,3@{host}:2",
                  "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                  "inter.broker.listener.name": "INTERNAL"},
                 ["inter.broker.listener.name", "must be a listener name defined in advertised.listeners"],
                 id="inter-broker-listener-that-does-not-exist"),
    pytest.param({"listeners": PLAINTEXT_AND + "SSL://{host}:{p1}"},
                 ["listener SSL", "listener.name.ssl.ssl.keystore.location",
                  "an SSL listener needs a key store"],
                 id="ssl-listener-without-a-key-store"),
    pytest.param({"listeners": PLAINTEXT_AND + "SASL_PLAINTEXT://{host}:{p1}"},
                 ["sasl.enabled.mechanisms=GSSAPI", "GSSAPI (Kerberos) is not supported by Brook"],
                 id="sasl-plaintext-listener-with-kafkas-default-gssapi"),
    pytest.param({"listeners": PLAINTEXT_AND + "SASL_PLAINTEXT://{host}:{p1}", "sasl.enabled.mechanisms": "PLAIN"},
                 ["listener.name.sasl_plaintext.plain.sasl.jaas.config is not set"],
                 id="sasl-plaintext-listener-without-its-jaas-entry"),
    pytest.param({"listeners": "PLAINTEXT://{host}:{p0}",
                  "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"},
                 ["authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                  "org.apache.kafka.metadata.authorizer.StandardAuthorizer"], id="authorizer-other-than-kafkas-standard"),
    pytest.param({"listeners": "PLAINTEXT://{host}:{p0}", "sasl.enabled.mechanisms": "PLAIN,CRAM-MD5"},
                 ["sasl.enabled.mechanisms=PLAIN,CRAM-MD5", "CRAM-MD5 is not a SASL mechanism Brook knows"],
                 id="sasl-mechanisms-brook-cannot-serve"),
    pytest.param({"listeners": PLAINTEXT_AND + "SASL_PLAINTEXT://{host}:{p1}", "sasl.enabled.mechanisms": "OAUTHBEARER",
                  "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
                      "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
                  "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
                      "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
                  "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url":
                      "https://idp.example/keys"},
                 ["listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url=https://idp.example/keys",
                  "file: URL only"],
                 id="oauthbearer-jwks-over-https"),
])
def test_security_brook_cannot_serve_stops_the_node_naming_it(tmp_path, settings, named):
    code, stderr, ports = run_brook(tmp_path, settings)
    assert code != 0, stderr[-2000:]
    for text in named:
        assert text.format(p0=ports[0], p1=ports[1]) in stderr, stderr[-2000:]
    assert "invalid configuration" in stderr
    assert not any(_accepts_tcp(p) for p in ports)
    # It stopped before creating anything: a refused node leaves no cluster behind.
    assert not (tmp_path / "data" / "meta.properties").exists()


def test_plaintext_listeners_under_any_name_still_serve(tmp_path):
    b = Broker("brook", tmp_path / "named")
    b.overrides = {  # a listener named CLIENTS, mapped to PLAINTEXT, serves as before
        "listeners": f"CLIENTS://{b.bootstrap}",
        "advertised.listeners": f"CLIENTS://{b.bootstrap}",
        "listener.security.protocol.map": "CLIENTS:PLAINTEXT",
    }
    b.start()
    try:
        assert drivers.run("java", "metadata", b.bootstrap)["brokers"] == [{"id": 1, "host": HOST, "port": b.port}]
    finally:
        b.stop()


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    b = Broker("brook", tmp_path_factory.mktemp("security-refused"))
    b.start()
    yield b
    b.stop()


@pytest.fixture
def broker(request, node):
    node.start()
    setattr(request.node, "_brook_brokers", [node])
    return node


@pytest.mark.parametrize("key, value", [
    ("sasl.enabled.mechanisms", "PLAIN"),
    ("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required;"),
    ("ssl.client.auth", "required"),
    ("principal.builder.class", "org.example.Builder"),
    ("listener.name.plaintext.ssl.client.auth", "required"),
])
def test_a_dynamic_security_update_is_refused_and_changes_nothing(broker, key, value):
    before = broker_configs(broker)
    with pytest.raises(drivers.DriverError) as failed:
        drivers.run("java", "alter-configs", broker.bootstrap, "--broker", "1", "--set", f"{key}={value}")
    error = json.loads(failed.value.stderr.strip().splitlines()[-1])
    assert error["error"] == "InvalidConfigurationException"
    assert error["message"].startswith("Brook cannot change this TLS or SASL setting while it runs")
    assert f"{key} cannot be set" in error["message"]
    assert broker_configs(broker) == before
    assert before["sasl.enabled.mechanisms"] == ("GSSAPI", "DEFAULT_CONFIG")  # Kafka's default, unused


def test_a_key_store_for_a_listener_without_tls_is_refused_and_changes_nothing(broker):
    """A listener's stores can change while it serves (test_security_tls_reload.py), but only on
    a listener that speaks TLS: for the PLAINTEXT one the key would be stored and never read."""
    before = broker_configs(broker)
    key = "listener.name.plaintext.ssl.keystore.location"
    with pytest.raises(drivers.DriverError) as failed:
        drivers.run("java", "alter-configs", broker.bootstrap, "--broker", "1", "--set", f"{key}=/etc/brook/ks.p12")
    error = json.loads(failed.value.stderr.strip().splitlines()[-1])
    assert error["error"] == "InvalidRequestException"
    assert error["message"] == (f"Invalid dynamic configuration: {key}: "
                                "PLAINTEXT is not an SSL or SASL_SSL listener of this broker")
    assert broker_configs(broker) == before


def broker_configs(broker) -> dict:
    """DescribeConfigs of broker 1 through librdkafka: {name: (value, source)}."""
    resource = ConfigResource(ResourceType.BROKER, "1")
    client = AdminClient({"bootstrap.servers": broker.bootstrap})  # alive until the result is in
    entries = client.describe_configs([resource])[resource].result(timeout=30)
    return {n: (e.value, ConfigSource(e.source).name) for n, e in entries.items()}
