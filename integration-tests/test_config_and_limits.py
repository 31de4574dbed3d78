"""Configuration as a Kafka operator writes it, on the real binary: a server.properties
file, BROOK_* environment variables and --override, with precedence override > env > file;
invalid values refuse to start naming the key; and the size limits Kafka enforces
(`message.max.bytes` → MESSAGE_TOO_LARGE, nothing written).
"""

import json
import os
import socket
import subprocess
import time

import pytest

from harness import drivers, paths
from harness.broker import HOST, free_port, _accepts_tcp


def start_brook(tmp_path, props: str, env: dict, overrides: list):
    port = free_port()
    conf = tmp_path / "server.properties"
    conf.write_text(props)
    argv = [str(paths.brook_bin()), "--config", str(conf)]
    for o in overrides + [
        f"listeners=PLAINTEXT://{HOST}:{port}",
        f"advertised.listeners=PLAINTEXT://{HOST}:{port}",
        f"metrics.listener={HOST}:{free_port()}",
    ]:
        argv += ["--override", o]
    log = open(tmp_path / "brook.log", "wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env})
    deadline = time.monotonic() + 30
    while not _accepts_tcp(port):
        assert proc.poll() is None, (tmp_path / "brook.log").read_text()[-3000:]
        assert time.monotonic() < deadline, "brook did not start"
        time.sleep(0.05)
    return proc, f"{HOST}:{port}"


def refused_start(tmp_path, override: str) -> subprocess.CompletedProcess:
    """brook with one `--override` that should stop it, until it exits (or 30 s)."""
    return subprocess.run(
        [str(paths.brook_bin()), "--override", override, "--override", f"log.dirs={tmp_path}"],
        capture_output=True,
        text=True,
        timeout=30,
    )


if paths.target() != "kafka":

    def test_override_beats_environment_beats_file(tmp_path, topic):
        data = tmp_path / "data"
        props = f"# operator's file\nlog.dirs={data}\nnum.partitions=2\ndefault.replication.factor=1\n"
        proc, bootstrap = start_brook(tmp_path, props, {"BROOK_NUM_PARTITIONS": "3"}, [])
        try:
            # auto-created topics take num.partitions: the environment (3) beats the file (2)
            drivers.run("confluent", "produce", bootstrap, "--topic", topic, records=[{"key": "k", "value": "v"}])
            described = drivers.run("confluent", "describe-topic", bootstrap, "--topic", topic)
            assert len(described["partitions"]) == 3
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        proc, bootstrap = start_brook(
            tmp_path, props, {"BROOK_NUM_PARTITIONS": "3"}, ["num.partitions=5"]
        )
        try:
            drivers.run("confluent", "produce", bootstrap, "--topic", topic + "-b", records=[{"key": "k", "value": "v"}])
            described = drivers.run("confluent", "describe-topic", bootstrap, "--topic", topic + "-b")
            assert len(described["partitions"]) == 5
            # the first topic survived the restart with its data
            consumed = drivers.run("confluent", "consume", bootstrap, "--topic", topic, "--count", "1", "--from", "earliest")
            assert [(r["key"], r["value"]) for r in consumed] == [("k", "v")]
        finally:
            proc.terminate()
            proc.wait(timeout=30)

    def test_an_invalid_value_refuses_to_start_naming_the_key(tmp_path):
        result = refused_start(tmp_path, "num.partitions=lots")
        assert result.returncode != 0
        assert "num.partitions" in result.stderr and "lots" in result.stderr

    def test_a_misspelt_brook_key_refuses_to_start_naming_it(tmp_path):
        # Kafka's own names that Brook lacks are ignored with a warning, as Kafka ignores
        # names it does not know; a misspelt key of Brook's own namespace would silently
        # leave the default in force.
        result = refused_start(tmp_path, "brook.log.open.files.maximum=100")
        assert result.returncode == 2, result.stderr[-2000:]
        assert "Unknown broker config name: brook.log.open.files.maximum" in result.stderr, result.stderr[-2000:]

    def test_a_taken_listener_port_stops_the_node_naming_the_address(tmp_path):
        # Kafka exits when its listener cannot bind; a node left running without its port
        # would hold its node.id and partitions while serving nobody.
        taken = socket.socket()
        taken.bind((HOST, 0))
        taken.listen()
        addr = f"{HOST}:{taken.getsockname()[1]}"
        try:
            result = subprocess.run(
                [str(paths.brook_bin()), "--override", f"log.dirs={tmp_path}",
                 "--override", f"listeners=PLAINTEXT://{addr}", "--override", f"advertised.listeners=PLAINTEXT://{addr}",
                 "--override", f"metrics.listener={HOST}:{free_port()}"],
                capture_output=True, text=True, timeout=30,
            )
        finally:
            taken.close()
        assert result.returncode != 0
        assert f"cannot bind listener {addr}" in result.stderr, result.stderr[-2000:]


def test_a_message_over_max_message_bytes_is_refused_and_nothing_is_written(broker, topic):
    drivers.run("java", "create-topic", broker.bootstrap, "--topic", topic, "--partitions", "1",
                "--config", "max.message.bytes=100000")
    small = [{"key": "k0", "value": "x" * 1000}]
    assert drivers.run("java", "produce", broker.bootstrap, "--topic", topic, records=small)[0]["offset"] == 0
    big = [{"key": "k1", "value": "y" * 200_000}]
    # The client's own limit (max.request.size 1 MB) lets the 200 KB record go: the refusal must be
    # the broker's MESSAGE_TOO_LARGE, which the Java client reports with this message (its own
    # refusal would say "...when serialized which is larger than...").
    with pytest.raises(drivers.DriverError) as refused:
        drivers.run("java", "produce", broker.bootstrap, "--topic", topic, "--codec", "none",
                    "--max-request-size", "1000000", records=big)
    errors = [json.loads(line) for line in refused.value.stdout.splitlines() if line.startswith("{")]
    assert [e.get("error") for e in errors] == ["RecordTooLargeException"], refused.value
    assert "larger than the max message size the server will accept" in errors[0]["message"], errors
    latest = drivers.run("java", "offsets", broker.bootstrap, "--topic", topic, "--spec", "latest")
    assert latest["0"]["offset"] == 1


def test_client_connections_get_the_configured_socket_buffer_sizes(broker_factory):
    """`socket.send.buffer.bytes` / `socket.receive.buffer.bytes` size the broker's end of a
    client connection (SO_SNDBUF / SO_RCVBUF; Linux reports twice the size set, socket(7))."""
    b = broker_factory({"socket.send.buffer.bytes": "131072", "socket.receive.buffer.bytes": "65536"})
    with socket.create_connection((b.host, b.port), timeout=10) as client:
        client_port = client.getsockname()[1]
        # The broker's end: from the broker's port to this client's.
        query = f"( sport = :{b.port} and dport = :{client_port} )"
        deadline = time.monotonic() + 10
        while True:
            shown = subprocess.run(["ss", "-tnmH", "state", "established", query],
                                   capture_output=True, text=True, check=True).stdout  # fmt: skip
            if "skmem" in shown or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    assert "tb262144" in shown and "rb131072" in shown, shown
