"""Security settings a test gives both targets alike: a broker whose one client listener is
SASL_PLAINTEXT (Kafka's names and JAAS lines, as Kafka's own examples write them), and the
client settings files each driver reads (`--client-config`, harness/client_config.py).

Apache Kafka (scripts/kafka-ref.sh) also keeps its CONTROLLER listener on PORT+1 and talks to
itself over the inter-broker listener, here the SASL one with PLAIN and the broker's own
`username`/`password`; brook has no inter-broker traffic on one node and stores those keys.
"""

import subprocess
from pathlib import Path
from typing import Dict, Iterable

from . import client_config, paths
from .broker import Broker

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
