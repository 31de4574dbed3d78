#!/usr/bin/env python3
"""Builds the fuzz seed corpus (fuzz/corpus/<target>/) from a real broker run.

A `brook` broker is started behind a recording TCP proxy (the broker advertises the proxy's
address, so every connection of every client goes through it); the suite's client drivers
(integration-tests/drivers: Java, librdkafka via confluent-kafka and kcat, franz-go, kafkajs,
kafka-python) create topics, produce with every codec, idempotently and in transactions,
consume in groups and list offsets. Every request frame they send becomes a `request` seed
(and the start of each connection's stream a `frame` seed); the broker's data directory then
gives the storage seeds: segment batches (`batch`, `compressed`), whole partition directories
(`log_dir`), checkpoints (`checkpoint`), producer snapshots (`producer_snapshot`), and the
metadata quorum's commands read from its RocksDB write-ahead log as `Propose` frames
(`raft_rpc`). Seeds are deduplicated and capped so the corpus stays small.

  python3 fuzz/seeds/capture.py [--brook target/debug/brook] [--drivers integration-tests]

Not part of `make test`: run it when the protocol or the formats change, and commit the result.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FUZZ = HERE.parent
REPO = FUZZ.parent
CORPUS = FUZZ / "corpus"
MAX_SEED = 64 * 1024  # bigger frames are mostly record payload: no new decoder paths
PER_API_VERSION = 3  # seeds kept per (api key, api version)


def free_port() -> int:
    # Below the ephemeral range, as the suite's ports are.
    for port in range(23000, 24000):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port")


class Recorder:
    """A proxy that keeps each client connection's bytes towards the broker."""

    def __init__(self, listen_port: int, broker_port: int):
        self.broker_port = broker_port
        self.streams = []
        self.lock = threading.Lock()
        self.server = socket.create_server(("127.0.0.1", listen_port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.broker_port))
            stream = bytearray()
            with self.lock:
                self.streams.append(stream)
            threading.Thread(target=self._pump, args=(client, upstream, stream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, None), daemon=True).start()

    @staticmethod
    def _pump(src, dst, record):
        try:
            while data := src.recv(65536):
                if record is not None:
                    record.extend(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def frames(stream: bytes):
    pos = 0
    while pos + 4 <= len(stream):
        (size,) = struct.unpack(">i", stream[pos:pos + 4])
        if size < 0 or pos + 4 + size > len(stream):
            return
        yield stream[pos + 4:pos + 4 + size]
        pos += 4 + size


def save(target: str, data: bytes) -> bool:
    if not data or len(data) > MAX_SEED:
        return False
    out = CORPUS / target
    out.mkdir(parents=True, exist_ok=True)
    path = out / hashlib.sha1(data).hexdigest()
    if path.exists():
        return False
    path.write_bytes(data)
    return True


def run_clients(drivers_dir: Path, bootstrap: str):
    sys.path.insert(0, str(drivers_dir))
    from harness import drivers  # noqa: E402 (the suite's driver runner)

    records = [{"key": f"k{i % 7}", "value": f"value-{i}" * (1 + i % 5),
                "headers": [["h", "v"]]} for i in range(40)]
    tombstones = [{"key": f"k{i}", "value": None} for i in range(3)]
    clients = ["java", "confluent", "kcat", "franz", "kafkajs", "kafka_python"]
    for client in clients:
        topic = f"seed-{client}"
        try:
            if client != "kcat":
                drivers.run(client, "create-topic", bootstrap, "--topic", topic, "--partitions", "2",
                            "--config", "cleanup.policy=compact")
                drivers.run(client, "describe-configs", bootstrap, "--topic", topic)
                drivers.run(client, "describe-topic", bootstrap, "--topic", topic)
            drivers.run(client, "metadata", bootstrap)
            for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
                drivers.run(client, "produce", bootstrap, "--topic", topic, "--codec", codec,
                            "--acks", "all", *(["--idempotent"] if codec == "zstd" else []),
                            records=records + tombstones)
            drivers.run(client, "consume", bootstrap, "--topic", topic, "--count", "10",
                        "--from", "earliest", "--timeout-ms", "5000")
            if client != "kcat":
                drivers.run(client, "offsets", bootstrap, "--topic", topic, "--spec", "earliest")
            if client in ("java", "franz", "confluent", "kafkajs", "kafka_python"):
                drivers.run(client, "group-consume", bootstrap, "--group", f"g-{client}", "--topic", topic,
                            "--count", "20", "--from", "earliest", "--timeout-ms", "20000")
            if client in ("confluent", "franz", "kafkajs"):
                txn = [{"key": "t", "value": f"v{i}", "txn": i // 3, "partition": 0} for i in range(9)]
                drivers.run(client, "txn-produce", bootstrap, "--topic", topic, "--transactional-id",
                            f"tx-{client}", "--abort", "1", records=txn)
        except Exception as e:  # a client that fails still leaves its frames
            print(f"capture: {client}: {e}".splitlines()[0], file=sys.stderr)


def storage_seeds(data_dir: Path):
    def partition_dirs():
        for d in sorted(data_dir.rglob("*-[0-9]*")):
            if d.is_dir() and list(d.glob("*.log")):
                yield d

    sys.path.insert(0, str(HERE))
    for d in partition_dirs():
        logs = sorted(d.glob("*.log"))
        log = logs[0].read_bytes()
        pos = 0
        while pos + 61 <= len(log):
            (length,) = struct.unpack(">i", log[pos + 8:pos + 12])
            batch = log[pos:pos + 12 + length]
            save("batch", batch)
            attributes = struct.unpack(">h", batch[21:23])[0]
            save("compressed", bytes([attributes & 7]) + batch[61:])
            pos += 12 + length
        save("batch", log[:MAX_SEED])
        read = lambda ext, base=logs[0]: (base.with_suffix(ext).read_bytes() if base.with_suffix(ext).exists() else b"")
        epochs = (d / "leader-epoch-checkpoint").read_bytes() if (d / "leader-epoch-checkpoint").exists() else b""
        snapshots = sorted(d.glob("*.snapshot"))
        snapshot = snapshots[-1].read_bytes() if snapshots else b""
        snapshot_offset = int(snapshots[-1].stem) if snapshots else 0
        second = logs[1] if len(logs) > 1 else None
        parts = [log[:16384], read(".index"), read(".timeindex"), read(".txnindex"),
                 second.read_bytes()[:16384] if second else b"", read(".index", second) if second else b"",
                 read(".timeindex", second) if second else b"", epochs, snapshot]
        head = bytes([0]) + struct.pack(">qIq", 0, int(second.stem) if second else 0, snapshot_offset)
        body = b"".join(struct.pack(">H", len(p)) + p for p in parts[:-1]) + parts[-1]
        save("log_dir", head + body)
        if epochs:
            save("checkpoint", b"\x01" + epochs)
        for s in snapshots:
            save("producer_snapshot", s.read_bytes())
        txn = read(".txnindex")
        if txn:
            save("checkpoint", b"\x02" + struct.pack(">qq", 0, 1 << 40) + txn)
    for ckpt in data_dir.rglob("*-checkpoint"):
        if ckpt.name != "leader-epoch-checkpoint":
            save("checkpoint", b"\x00" + ckpt.read_bytes())


def raft_seeds(data_dir: Path):
    """The raft log's entries, read from its RocksDB write-ahead log (values are serde_json),
    as the peer RPCs that carry them: one AppendEntries of them all, and each command as a
    forwarded Propose. A snapshot file, if the run made one, is a `raft_snapshot` seed;
    otherwise a minimal one is (`SNAPSHOT_MINIMAL`)."""
    decoder = json.JSONDecoder()
    entries = []
    for wal in sorted(data_dir.rglob("raft-log/*.log")):
        text = wal.read_bytes().decode("latin-1")
        for m in re.finditer(r'\{"log_id":', text):
            try:
                entry, _ = decoder.raw_decode(text, m.start())
            except ValueError:
                continue
            entries.append(entry)
    frame = lambda obj: (lambda b: struct.pack(">I", len(b)) + b)(json.dumps(obj, separators=(",", ":")).encode())
    vote = {"leader_id": {"term": 1, "node_id": 1}, "committed": True}
    append = {"AppendEntries": {"vote": vote, "prev_log_id": None, "entries": entries[:40],
                                "leader_commit": entries[-1]["log_id"] if entries else None}}
    save("raft_rpc", frame(append))
    proposes = b"".join(frame({"Propose": e["payload"]["Normal"]}) for e in entries
                        if isinstance(e.get("payload"), dict) and "Normal" in e["payload"])
    save("raft_rpc", proposes[:MAX_SEED])
    for other in ({"Vote": {"vote": vote, "last_log_id": None}}, "LeaderMetrics",
                  {"AddLearner": {"node_id": 4, "addr": "127.0.0.1:9093"}},
                  {"Attach": {"broker_id": 1, "broker_epoch": 3}}):
        save("raft_rpc", frame(other))
    snapshots = list(data_dir.rglob("metadata-snapshot/snapshot.json"))
    for snap in snapshots:
        save("raft_snapshot", snap.read_bytes()[:MAX_SEED])
    if not snapshots:
        save("raft_snapshot", SNAPSHOT_MINIMAL.encode())


# A snapshot of an empty image, as raft/FORMAT.md describes the file.
SNAPSHOT_MINIMAL = json.dumps({
    "format_version": 1,
    "meta": {"last_log_id": None,
             "last_membership": {"log_id": None, "membership": {"configs": [[1]], "nodes": {"1": {"addr": ""}}}},
             "snapshot_id": "1-1-1"},
    "image": {"topics": [], "brokers": [], "broker_configs": [], "cluster_id": "fuzz", "applied": None},
})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--brook", default=str(REPO / "target/debug/brook"))
    ap.add_argument("--drivers", default=str(REPO / "integration-tests"))
    ap.add_argument("--data", default=None, help="data directory (default: a temporary one)")
    args = ap.parse_args()
    data_dir = Path(args.data or tempfile.mkdtemp(prefix="brook-fuzz-seeds-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    broker_port, proxy_port = free_port(), None
    recorder = None
    proxy_port = broker_port + 1
    recorder = Recorder(proxy_port, broker_port)
    bootstrap = f"127.0.0.1:{proxy_port}"
    settings = {
        "listeners": f"PLAINTEXT://127.0.0.1:{broker_port}",
        "advertised.listeners": f"PLAINTEXT://{bootstrap}",
        "log.dirs": str(data_dir / "logs"),
        "node.id": "1",
        "metrics.listener": f"127.0.0.1:{broker_port + 2}",
        "group.initial.rebalance.delay.ms": "0",
        "log.cleaner.enable": "false",
    }
    argv = [args.brook] + [a for k, v in settings.items() for a in ("--override", f"{k}={v}")]
    log = open(data_dir / "brook.log", "w")
    broker = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", broker_port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        run_clients(Path(args.drivers), bootstrap)
    finally:
        broker.terminate()
        broker.wait(timeout=60)
    kept = {}
    per_api = {}
    for stream in recorder.streams:
        save("frame", bytes([7]) + bytes(stream[:4096]))
        for frame in frames(bytes(stream)):
            if len(frame) < 4:
                continue
            key = frame[:4]
            if per_api.get(key, 0) >= PER_API_VERSION:
                continue
            if save("request", frame):
                per_api[key] = per_api.get(key, 0) + 1
    storage_seeds(data_dir / "logs")
    raft_seeds(data_dir)
    for target in sorted(p.name for p in CORPUS.iterdir()):
        files = list((CORPUS / target).iterdir())
        kept[target] = (len(files), sum(f.stat().st_size for f in files))
    print(json.dumps(kept))
    if not args.data:
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
