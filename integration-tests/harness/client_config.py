"""`--client-config FILE`, the drivers' one way to receive client settings (security first):
a Java-properties file of Kafka's own client setting names (`security.protocol`,
`sasl.mechanism`, `sasl.jaas.config`, `ssl.*`, ...), as a Java client would take it.

The Java driver loads the file as it is. The other drivers map each key to their client's
own spelling here (Python) or in their own code (franz-go: drivers/franz/client_config.go,
kafkajs: drivers/kafkajs/client_config.js); a key a driver cannot map fails the driver
(exit 1, naming the key) rather than being dropped, so a test never runs unsecured by mistake.
The SASL user and password come from the JAAS line's `username="…" password="…"` options.

TLS (security.protocol SSL or SASL_SSL) uses Kafka's PEM stores, which every client can read:
`ssl.truststore.type=PEM` + `ssl.truststore.location` (the CA certificates that verify the
broker) and, for mTLS, `ssl.keystore.type=PEM` + `ssl.keystore.location` (one PEM file holding
the client's unencrypted private key and its certificate chain, as Kafka's PEM key store file
is); `ssl.endpoint.identification.algorithm` is `https` (verify the broker's host name, the
default) or empty. librdkafka takes the key store file as both its certificate and its key
location (OpenSSL picks the right PEM block from each); kafka-python as ssl_certfile +
ssl_keyfile; franz-go and kafkajs read the same files (drivers' own client_config).

`write(path, settings)` is the harness side: it writes the settings for every driver.
"""

import re
from pathlib import Path
from typing import Dict

_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def write(path: Path, settings: Dict[str, str]) -> Path:
    """Write `settings` as a properties file (values must not span lines)."""
    lines = [f"{key}={value}" for key, value in settings.items()]
    Path(path).write_text("\n".join(lines) + "\n")
    return Path(path)


def load(path: str) -> Dict[str, str]:
    """Parse a Java-properties file: `k=v` or `k: v`, `#`/`!` comments, `\\` line continuations."""
    props: Dict[str, str] = {}
    pending = ""
    for raw in Path(path).read_text().splitlines():
        line = pending + raw.lstrip() if pending else raw.strip()
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        pending = ""
        if not line or line[0] in "#!":
            continue
        match = re.match(r"([^=:\s]+)\s*[=:]?\s*(.*)", line)
        if match:
            props[match.group(1)] = match.group(2)
    return props


def jaas_options(jaas: str) -> Dict[str, str]:
    """The `name="value"` options of a JAAS line."""
    return {name: value.replace('\\"', '"') for name, value in _JAAS_OPTION.findall(jaas)}


def _unmappable(client: str, key: str) -> ValueError:
    return ValueError(f"--client-config: {key} has no mapping for {client} (add one in harness/client_config.py)")


TLS_KEYS = ("ssl.truststore.type", "ssl.truststore.location", "ssl.keystore.type", "ssl.keystore.location",
            "ssl.endpoint.identification.algorithm")


def tls_files(client: str, props: Dict[str, str]) -> Dict[str, str]:
    """The TLS settings as {"ca": PEM file, "keystore": PEM key+chain file, "verify_host": "1"/""}:
    only PEM stores map to every client."""
    for kind in ("truststore", "keystore"):
        store_type = props.get(f"ssl.{kind}.type", "PEM" if f"ssl.{kind}.location" in props else "")
        if store_type not in ("", "PEM"):
            raise ValueError(f"--client-config: ssl.{kind}.type={store_type} has no mapping for {client}: use PEM")
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https")
    if algorithm not in ("", "https"):
        raise _unmappable(client, f"ssl.endpoint.identification.algorithm={algorithm}")
    return {
        "ca": props.get("ssl.truststore.location", ""),
        "keystore": props.get("ssl.keystore.location", ""),
        "verify_host": "1" if algorithm == "https" else "",
    }


def librdkafka(props: Dict[str, str]) -> Dict[str, str]:
    """librdkafka's names (confluent-kafka, kcat)."""
    out = {}
    if any(key in props for key in TLS_KEYS):
        tls = tls_files("librdkafka", props)
        if tls["ca"]:
            out["ssl.ca.location"] = tls["ca"]
        if tls["keystore"]:
            out["ssl.certificate.location"] = tls["keystore"]
            out["ssl.key.location"] = tls["keystore"]
        out["ssl.endpoint.identification.algorithm"] = "https" if tls["verify_host"] else "none"
    for key, value in props.items():
        if key in TLS_KEYS:
            continue
        if key in ("security.protocol", "sasl.mechanism"):
            out[key] = value
        elif key == "sasl.jaas.config":
            options = jaas_options(value)
            out["sasl.username"] = options.get("username", "")
            out["sasl.password"] = options.get("password", "")
        else:
            raise _unmappable("librdkafka", key)
    return out


def kafka_python(props: Dict[str, str]) -> Dict[str, str]:
    """kafka-python's keyword arguments."""
    out = {}
    if any(key in props for key in TLS_KEYS):
        tls = tls_files("kafka-python", props)
        out["ssl_check_hostname"] = bool(tls["verify_host"])
        if tls["ca"]:
            out["ssl_cafile"] = tls["ca"]
        if tls["keystore"]:
            out["ssl_certfile"] = tls["keystore"]
            out["ssl_keyfile"] = tls["keystore"]
    for key, value in props.items():
        if key in TLS_KEYS:
            continue
        if key == "security.protocol":
            out["security_protocol"] = value
        elif key == "sasl.mechanism":
            out["sasl_mechanism"] = value
        elif key == "sasl.jaas.config":
            options = jaas_options(value)
            out["sasl_plain_username"] = options.get("username", "")
            out["sasl_plain_password"] = options.get("password", "")
        else:
            raise _unmappable("kafka-python", key)
    return out
