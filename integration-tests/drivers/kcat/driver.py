#!/usr/bin/env python3
"""Driver for the `kcat` CLI (Debian's kcat 1.7.1, linking librdkafka 2.0.2): an old librdkafka
client, so the matrix also covers what a two-year-old client sends.

This wraps kcat's own modes, speaking integration-tests/README.md's protocol:
  metadata / list-topics / describe-topic  `kcat -L -J` (topic_id: kcat does not show it, null)
  produce   one `kcat -P` per record: key/value on stdin (-K/-D with ASCII separators), -H per
            header, -p for an explicit partition, -X for acks/codec/idempotence/size. kcat has
            no offset output, but at verbosity 3 its delivery-report callback logs
            "Message delivered to partition P (offset O)", which we parse; one record per run
            keeps that report unambiguous. kcat cannot set a record timestamp: exit 3.
            -E: kcat's CLI would otherwise exit on the first error its error callback sees,
            even one librdkafka retries (a dropped connection to the only broker: "all broker
            connections are down"); a record that is not delivered still fails the driver, as
            its delivery report then says "Delivery failed".
  consume   `kcat -C -J -u -o ...` (one -p or all partitions), read until N records or timeout
  offsets   `kcat -Q -J -t T:P:TS` (-2 earliest, -1 latest). max-timestamp (-3) needs
            ListOffsets v7, which librdkafka 2.0.2 lacks: exit 3.
  admin (create/delete topic, partitions, configs): kcat has none: exit 3.
"""

import json
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # integration-tests/, for harness

from harness import driver_cli as cli  # noqa: E402
from harness import client_config  # noqa: E402

KCAT = "kcat"
KEY_SEP, MSG_SEP = "\x1f", "\x1e"  # ASCII unit / record separators: never in test data
METADATA_TIMEOUT_S = "15"
DELIVERED = re.compile(r"Message delivered to partition (-?\d+) \(offset (-?\d+)\)")
CODEC = {"none": "none", "gzip": "gzip", "snappy": "snappy", "lz4": "lz4", "zstd": "zstd"}


def client_x(args) -> list:
    """`--client-config` as kcat `-X k=v` arguments, in librdkafka's names."""
    if not args.client_config:
        return []
    conf = client_config.librdkafka(client_config.load(args.client_config))
    return [arg for key, value in conf.items() for arg in ("-X", f"{key}={value}")]


def _kcat(args, *argv, stdin: bytes = b"", timeout: float = 60) -> subprocess.CompletedProcess:
    cmd = [KCAT, "-b", args.bootstrap, "-m", METADATA_TIMEOUT_S, *client_x(args), *argv]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.decode(errors='replace')}")
    return proc


def _metadata(args, topic=None) -> dict:
    argv = ["-L", "-J"] + (["-t", topic] if topic else [])
    return json.loads(_kcat(args, *argv).stdout)


def _split_host_port(name: str):
    host, _, port = name.rpartition(":")
    return host, int(port)


def _topic_meta(args, topic: str) -> dict:
    for t in _metadata(args, topic)["topics"]:
        if t["topic"] == topic:
            if t.get("error"):
                raise RuntimeError(f"topic {topic}: {t['error']}")
            return t
    raise RuntimeError(f"topic {topic} not in metadata")


def metadata(args):
    md = _metadata(args)
    brokers = []
    for b in md["brokers"]:
        host, port = _split_host_port(b["name"])
        brokers.append({"id": b["id"], "host": host, "port": port})
    topics = {t["topic"]: {"partitions": len(t["partitions"])} for t in md["topics"] if not t["topic"].startswith("__") and not t.get("error")}
    cli.emit({"brokers": sorted(brokers, key=lambda b: b["id"]), "controller_id": md.get("controllerid"), "topics": topics})


def list_topics(args):
    md = _metadata(args)
    cli.emit({"topics": sorted(t["topic"] for t in md["topics"] if not t["topic"].startswith("__") and not t.get("error"))})


def describe_topic(args):
    t = _topic_meta(args, args.topic)
    cli.emit(
        {
            "name": t["topic"],
            "topic_id": None,
            "partitions": [
                {"partition": p["partition"], "leader": p["leader"], "replicas": [r["id"] for r in p["replicas"]], "isr": [r["id"] for r in p["isrs"]]}
                for p in sorted(t["partitions"], key=lambda p: p["partition"])
            ],
        }
    )


def _produce_argv(args) -> list:
    acks = "all" if args.acks in ("all", "-1") else args.acks
    argv = ["-P", "-E", "-t", args.topic, "-D", "\\x1e", "-Z", "-v", "-v", "-v"]
    argv += ["-X", f"acks={acks}", "-X", f"compression.codec={CODEC[args.codec]}"]
    if args.idempotent:
        argv += ["-X", "enable.idempotence=true"]
    if args.max_request_size is not None:
        argv += ["-X", f"message.max.bytes={args.max_request_size}"]
    return argv


def produce(args):
    records = cli.read_records(args.input)
    if any(r.get("timestamp") is not None for r in records):
        raise cli.UnsupportedCommand("kcat -P cannot set a record timestamp")
    base = _produce_argv(args)
    results = []
    for index, record in enumerate(records):
        argv = list(base)
        for name, value in record.get("headers") or []:
            argv += ["-H", f"{name}={value}"]
        if record.get("partition") is not None:
            argv += ["-p", str(record["partition"])]
        value = record.get("value") or ""
        if record.get("key") is not None:
            argv += ["-K", "\\x1f"]
            payload = record["key"] + KEY_SEP + value
        else:
            payload = value
        proc = _kcat(args, *argv, stdin=(payload + MSG_SEP).encode("utf-8"))
        found = DELIVERED.findall(proc.stderr.decode(errors="replace"))
        if len(found) != 1:
            raise RuntimeError(f"record {index}: expected one delivery report, kcat said: {proc.stderr.decode(errors='replace')}")
        partition, offset = int(found[0][0]), int(found[0][1])
        results.append({"partition": partition, "offset": offset if offset >= 0 else -1})
    cli.emit_lines(results)


def _reader(stream, lines: "queue.Queue"):
    for line in stream:
        lines.put(line)
    lines.put(None)


def consume(args):
    wanted_partitions = cli.partition_list(args.partitions)
    start = {"earliest": "beginning", "latest": "end"}.get(args.from_, args.from_)
    argv = [KCAT, "-b", args.bootstrap, "-m", METADATA_TIMEOUT_S, *client_x(args), "-C", "-J", "-u", "-q", "-t", args.topic, "-o", start]
    if wanted_partitions is not None and len(wanted_partitions) == 1:
        argv += ["-p", str(wanted_partitions[0])]
    if args.max_bytes is not None:
        argv += ["-X", f"max.partition.fetch.bytes={args.max_bytes}", "-X", f"fetch.max.bytes={max(args.max_bytes, 1 << 20)}"]
    if args.isolation is not None:
        argv += ["-X", f"isolation.level={args.isolation}"]
    wanted = args.count if args.count is not None else sys.maxsize
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=sys.stderr, stdin=subprocess.DEVNULL)
    lines: "queue.Queue" = queue.Queue()
    threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
    deadline = time.monotonic() + args.timeout_ms / 1000
    got = 0
    try:
        while got < wanted:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                line = lines.get(timeout=remaining)
            except queue.Empty:
                break
            if line is None:
                if proc.wait() != 0:
                    raise RuntimeError(f"kcat consumer exited {proc.returncode}")
                break
            msg = json.loads(line)
            if wanted_partitions is not None and msg["partition"] not in wanted_partitions:
                continue
            flat = msg.get("headers") or []
            cli.emit(
                {
                    "partition": msg["partition"],
                    "offset": msg["offset"],
                    "key": msg.get("key"),
                    "value": msg.get("payload"),
                    "headers": [[flat[i], flat[i + 1]] for i in range(0, len(flat) - 1, 2)],
                    "timestamp": msg.get("ts"),
                }
            )
            got += 1
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    sys.stdout.flush()


def offsets(args):
    special = {"earliest": "-2", "latest": "-1"}
    if args.spec == "max-timestamp":
        raise cli.UnsupportedCommand("librdkafka 2.0.2 has no ListOffsets v7 (max-timestamp, KIP-734)")
    ts = special[args.spec] if args.spec in special else str(int(args.spec))
    partitions = sorted(p["partition"] for p in _topic_meta(args, args.topic)["partitions"])
    argv = ["-Q", "-J"]
    for p in partitions:
        argv += ["-t", f"{args.topic}:{p}:{ts}"]
    result = json.loads(_kcat(args, *argv).stdout)[args.topic]
    out = {}
    for p in partitions:
        entry = result[str(p)]
        if entry.get("error"):
            raise RuntimeError(f"partition {p}: {entry['error']}")
        out[str(p)] = {"offset": entry["offset"], "timestamp": -1}
    cli.emit(out)


def no_admin(args):
    raise cli.UnsupportedCommand(f"kcat has no admin API ({args.command})")


if __name__ == "__main__":
    cli.main(
        {
            "create-topic": no_admin,
            "delete-topic": no_admin,
            "create-partitions": no_admin,
            "describe-configs": no_admin,
            "alter-configs": no_admin,
            "metadata": metadata,
            "list-topics": list_topics,
            "describe-topic": describe_topic,
            "produce": produce,
            "consume": consume,
            "offsets": offsets,
        }
    )
