"""The harness's own way into a node whose client listener is secured (harness.security
`secure_cluster`: no PLAINTEXT listener at all): by the node's address, the TLS trust and the
SASL/PLAIN login the harness's connections use there.

`secure_cluster` registers every node's address; harness.wire (single requests: readiness,
metadata polls), harness.broker (Kafka's readiness ApiVersions), harness.kafka_cli (the Kafka tools'
`--command-config`) and harness.security (AdminClient checks) look the address up, so callers keep
passing a node's `bootstrap` as for a PLAINTEXT node. `Cluster.stop` forgets its nodes'
addresses: a later module's plaintext broker may get the same free port.
"""

import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, Optional


@dataclass(frozen=True)
class Door:
    ca: Path
    user: str
    password: str
    command_config: Path  # the Kafka tools' --command-config for this login


_DOORS: Dict[str, Door] = {}


def register(address: str, door: Door) -> None:
    _DOORS[address] = door


def forget(addresses: Iterable[str]) -> None:
    for address in addresses:
        _DOORS.pop(address, None)


def lookup(bootstrap: str) -> Optional[Door]:
    """The door of `bootstrap` (its first address when several are given), if it has one."""
    return _DOORS.get(bootstrap.split(",")[0].strip())


def connect(bootstrap: str, timeout: float) -> socket.socket:
    """A connected socket to `bootstrap` (HOST:PORT): TLS, the host name verified, if it has a
    door; the caller logs in (harness.wire)."""
    host, _, port = bootstrap.rpartition(":")
    s = socket.create_connection((host, int(port)), timeout=timeout)
    door = lookup(bootstrap)
    if door is None:
        return s
    context = ssl.create_default_context(cafile=str(door.ca))
    try:
        return context.wrap_socket(s, server_hostname=host)
    except (OSError, ssl.SSLError):
        s.close()
        raise


def admin_config(bootstrap: str) -> dict:
    """confluent-kafka settings reaching `bootstrap` through its door (plain ones without)."""
    door = lookup(bootstrap)
    config = {"bootstrap.servers": bootstrap}
    if door is not None:
        config.update({
            "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
            "sasl.username": door.user, "sasl.password": door.password,
            "ssl.ca.location": str(door.ca), "ssl.endpoint.identification.algorithm": "https",
        })
    return config
