"""Security settings a test gives both targets alike: a broker whose one client listener is
SASL_PLAINTEXT (Kafka's names and JAAS lines, as Kafka's own examples write them), the client
settings files each driver reads (`--client-config`, harness/client_config.py), certificates, and
a 3-node cluster secured on every listener (`secure_cluster`), its SCRAM credentials formatted
into every node before the first start, the harness going in through harness/door.py.

Apache Kafka (scripts/kafka-ref.sh) also keeps its CONTROLLER listener on PORT+1 and talks to
itself over the inter-broker listener, here the SASL one with PLAIN and the broker's own
`username`/`password`; brook has no inter-broker traffic on one node and stores those keys.
"""

import subprocess
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

from confluent_kafka.admin import AdminClient

from . import client_config, door, paths
from .broker import Broker
from .cluster import distinct_free_ports

PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
ADMIN = ("admin", "admin-secret")


def plain_jaas_server(users: Dict[str, str]) -> str:
    """The broker's PLAIN entry: its own login (admin) and every `user_<name>`."""
    entries = " ".join(f'user_{name}="{password}"' for name, password in users.items())
    return f'{PLAIN_LOGIN} required username="{ADMIN[0]}" password="{ADMIN[1]}" {entries};'


def sasl_broker_settings(kind: str, port: int, mechanisms: Iterable[str], plain_users: Dict[str, str],
                         extra: Dict[str, str] = None) -> Dict[str, str]:
    """Overrides for a broker (harness/broker.py) whose client listener on `port` is
    SASL_PLAINTEXT with `mechanisms` enabled."""
    mechanisms = list(mechanisms)
    listeners = f"SASL_PLAINTEXT://127.0.0.1:{port}"
    protocol_map = "SASL_PLAINTEXT:SASL_PLAINTEXT"
    if kind == "kafka":
        listeners += f",CONTROLLER://127.0.0.1:{port + 1}"
        protocol_map += ",CONTROLLER:PLAINTEXT"
    settings = {
        "listeners": listeners,
        "advertised.listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "listener.security.protocol.map": protocol_map,
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": ",".join(mechanisms),
        # Kafka's inter-broker login is PLAIN: its JAAS entry is needed even where clients
        # may not use PLAIN.
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas_server({ADMIN[0]: ADMIN[1], **plain_users}),
    }
    if kind == "kafka" and "PLAIN" not in mechanisms:
        raise ValueError("Kafka's inter-broker login here is PLAIN: enable it")
    for mechanism in mechanisms:
        if mechanism.startswith("SCRAM-"):
            settings[f"listener.name.sasl_plaintext.{mechanism.lower()}.sasl.jaas.config"] = f"{SCRAM_LOGIN} required;"
    settings.update(extra or {})
    return settings


def client_settings(mechanism: str, user: str, password: str) -> Dict[str, str]:
    login = PLAIN_LOGIN if mechanism == "PLAIN" else SCRAM_LOGIN
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": f'{login} required username="{user}" password="{password}";',
    }


def client_file(directory: Path, name: str, mechanism: str, user: str, password: str) -> str:
    """A `--client-config` file (also a Kafka tool's `--command-config`) for this login."""
    path = Path(directory) / f"{name}.properties"
    client_config.write(path, client_settings(mechanism, user, password))
    return str(path)


def start_plain_broker(kind: str, directory: Path, port: int, users: Dict[str, str],
                       extra: Dict[str, str] = None) -> Broker:
    """A started broker of `kind` on `port` (and PORT+1 for Kafka's controller) whose SASL_PLAINTEXT
    listener logs in the admin and `users` with PLAIN; `extra` adds settings (an authorizer)."""
    b = Broker(kind, directory, sasl_broker_settings(kind, port, ["PLAIN"], users, extra), port=port)
    b.start()
    return b


def plain_login_files(directory: Path, users: Dict[str, str]) -> Dict[str, str]:
    """`--client-config` files by login name: the admin's and each user's, all PLAIN."""
    files = {"admin": client_file(directory, "admin", "PLAIN", *ADMIN)}
    for user, password in users.items():
        files[user] = client_file(directory, user, "PLAIN", user, password)
    return files


def make_certificates(out: Path, password: str) -> Path:
    """A local CA and broker and client certificates in `out` (scripts/certs.sh: SANs localhost
    and 127.0.0.1; PEM and keystores under `password`)."""
    subprocess.run(["bash", str(paths.REPO_DIR / "scripts" / "certs.sh"), str(out), password],
                   check=True, capture_output=True, timeout=120)
    return out


def java_truststore(certs: Path, password: str) -> Path:
    """The CA of `certs` as a PKCS12 trust store written by keytool, its entry marked trusted
    (Java ignores certificates without that mark, which `openssl pkcs12 -nokeys` leaves out)."""
    out = Path(certs) / "ca-truststore.p12"
    if not out.exists():
        subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", str(Path(certs) / "ca.pem"),
                        "-keystore", str(out), "-storetype", "PKCS12", "-storepass", password],
                       check=True, capture_output=True, timeout=60)
    return out


# -- A secured 3-node cluster (issue 25 item 6): test_security_cluster.py, the secured chaos run --

CLUSTER_PASSWORD = "brook-secret"  # scripts/certs.sh's key store password
BROKER_LOGIN = ("broker", "broker-secret")
# The RFC 2253 subject of scripts/certs.sh's broker certificate (/CN=localhost/O=Brook).
NODE_PRINCIPAL = "User:O=Brook,CN=localhost"
INTERNAL_JAAS = "listener.name.internal.scram-sha-512.sasl.jaas.config"
# The harness's own login on a secured cluster's CLIENT listener (harness/door.py), a super user.
HARNESS_LOGIN = ("harness", "harness-secret")


def internal_jaas(password: str) -> str:
    """The INTERNAL listener's SCRAM entry, with the broker's own login."""
    return f'{SCRAM_LOGIN} required username="{BROKER_LOGIN[0]}" password="{password}";'


def scram_credential(user: str, password: str) -> str:
    """Kafka's `--add-scram` value for a SCRAM-SHA-512 login (8192 iterations)."""
    return f"SCRAM-SHA-512=[name={user},password={password},iterations=8192]"


def secure_cluster(cluster, certs: Path, app: Tuple[str, str], plain_users: Optional[Dict[str, str]] = None) -> None:
    """Secures every listener of every node of `cluster` (harness/cluster.py, not started), Kafka's
    keys on both targets; no listener is PLAINTEXT:
    - CLIENT, SASL_SSL with SCRAM-SHA-512 and PLAIN, on the node's own port (`node.bootstrap`,
      also `node.client_bootstrap`, `client_bootstrap(cluster)`): the applications log in with
      SCRAM (or PLAIN for `plain_users`), the harness with PLAIN as HARNESS_LOGIN through the
      node's door (harness/door.py: its readiness, metadata polls and Kafka tools);
    - INTERNAL, SASL_SSL with SCRAM-SHA-512, the inter-broker listener: each broker logs in to its
      peers as BROKER_LOGIN and verifies their certificates with the CA;
    - CONTROLLER, SSL with `ssl.client.auth=required`: the metadata quorum between mutually
      authenticated nodes, each presenting the broker certificate of `certs` (scripts/certs.sh).
    The SCRAM-SHA-512 credentials of BROKER_LOGIN and `app` (user, password) are in the metadata
    from the first start: every node's storage is formatted with them (`Broker.add_scram`:
    `brook format --add-scram`, Kafka's `kafka-storage format --add-scram`), so the brokers
    replicate from the start; `wait_scram_users` waits until every node serves them.
    The StandardAuthorizer is on; `super.users` holds the brokers' login (follower fetches need
    CLUSTER_ACTION), the nodes' certificate subject (controller and broker-to-controller
    requests), the harness's login and the app's user. `node.listener_ports` holds the INTERNAL
    port (chaos/netfault.py isolates a node on it too)."""
    taken = set()
    for n in cluster.nodes:
        taken |= {n.port, n.controller_port, n.metrics_port or 0}
    ports = [p for p in distinct_free_ports(3 * len(cluster.nodes)) if p not in taken][:len(cluster.nodes)]
    command_config = client_config.write(Path(certs) / "harness-door.properties",
                                         sasl_ssl_client_settings(certs, "PLAIN", *HARNESS_LOGIN))
    plain_logins = {HARNESS_LOGIN[0]: HARNESS_LOGIN[1], **(plain_users or {})}
    for node, internal_port in zip(cluster.nodes, ports):
        node.client_bootstrap = node.bootstrap
        node.listener_ports = {"INTERNAL": internal_port}
        client = f"CLIENT://{node.host}:{node.port}"
        internal = f"INTERNAL://{node.host}:{internal_port}"
        node.overrides.update({
            "listeners": f"{client},{internal},CONTROLLER://{node.host}:{node.controller_port}",
            "advertised.listeners": f"{client},{internal}",
            "listener.security.protocol.map": "CONTROLLER:SSL,CLIENT:SASL_SSL,INTERNAL:SASL_SSL",
            "listener.name.controller.ssl.client.auth": "required",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.client.sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
            "listener.name.client.scram-sha-512.sasl.jaas.config": f"{SCRAM_LOGIN} required;",
            "listener.name.client.plain.sasl.jaas.config":
                f"{PLAIN_LOGIN} required " + " ".join(f'user_{u}="{p}"' for u, p in plain_logins.items()) + ";",
            "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            INTERNAL_JAAS: internal_jaas(BROKER_LOGIN[1]),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(Path(certs) / "broker-keystore.pem"),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(Path(certs) / "ca.pem"),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": ";".join([f"User:{BROKER_LOGIN[0]}", NODE_PRINCIPAL, f"User:{app[0]}",
                                     *(f"User:{u}" for u in plain_logins)]),
        })
        node.add_scram = [scram_credential(*BROKER_LOGIN), scram_credential(*app)]
        door.register(node.bootstrap, door.Door(Path(certs) / "ca.pem", *HARNESS_LOGIN, Path(command_config)))


def scram_user_known(bootstrap: str, user: str) -> bool:
    admin = AdminClient(door.admin_config(bootstrap))
    try:
        found = admin.describe_user_scram_credentials([user])[user].result(timeout=10)
    except Exception:  # noqa: BLE001 - RESOURCE_NOT_FOUND until the credential is applied
        return False
    return bool(found.scram_credential_infos)


def wait_scram_users(cluster, users: List[Tuple[str, str]], timeout_s: float = 60) -> None:
    """Returns once every node serves the SCRAM credentials of `users` (BROKER_LOGIN is added),
    which `secure_cluster` formatted the nodes with: the first metadata leader applies them."""
    for n in cluster.nodes:
        for user, _ in [*users, BROKER_LOGIN]:
            cluster.wait_for(lambda: scram_user_known(n.bootstrap, user), timeout_s, f"node {n.node_id} knows {user}")


def client_bootstrap(cluster, node_ids=None) -> str:
    """The CLIENT (SASL_SSL) addresses of `node_ids` (default: the running nodes)."""
    ids = node_ids if node_ids is not None else cluster.running_ids()
    return ",".join(cluster.node(i).client_bootstrap for i in ids)


def sasl_ssl_client_settings(certs: Path, mechanism: str, user: str, password: str) -> Dict[str, str]:
    """A SASL_SSL client's settings (Kafka's names): the login, the CA, host names verified."""
    login = PLAIN_LOGIN if mechanism == "PLAIN" else SCRAM_LOGIN
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": f'{login} required username="{user}" password="{password}";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(Path(certs) / "ca.pem"),
        "ssl.endpoint.identification.algorithm": "https",
    }
