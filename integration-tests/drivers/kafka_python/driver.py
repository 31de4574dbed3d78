#!/usr/bin/env python3
"""Driver for kafka-python 2.x (pure Python), speaking integration-tests/README.md's protocol.

Admin commands use KafkaAdminClient; produce uses KafkaProducer futures (offsets are the
broker's); consume uses KafkaConsumer with assign + seek and no group; group-consume
subscribes as a real group member. Limits of this
client, mirrored in harness/drivers.py's capability table:
  * ListOffsets only up to v5, so `offsets --spec max-timestamp` (v7, KIP-734) exits 3;
  * no IncrementalAlterConfigs, so `alter-configs` does what pre-KIP-339 tools did: read the
    topic's dynamic configs, apply the sets/deletes, and write the whole set with AlterConfigs.
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # integration-tests/, for harness

from harness import driver_cli as cli  # noqa: E402  (first: it installs the SIGTERM handler)
from harness import client_config  # noqa: E402
from kafka import (  # noqa: E402
    ConsumerRebalanceListener, KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition,
)
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions, NewTopic  # noqa: E402
from kafka.errors import for_code  # noqa: E402


TIMEOUT_MS = 30000
# DescribeConfigs config_source codes (KIP-226) -> the names the Java admin client prints.
CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}


def client_conf(args) -> dict:
    """`--client-config` as kafka-python keyword arguments (security settings)."""
    if not args.client_config:
        return {}
    return client_config.kafka_python(client_config.load(args.client_config))


def admin(args) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=args.bootstrap, request_timeout_ms=TIMEOUT_MS, **client_conf(args))


def _check(response, field: str) -> None:
    """Raise the Kafka error of any entry in a create/delete/partitions response."""
    for entry in getattr(response, field):
        code = entry[1]
        if code != 0:
            message = entry[2] if len(entry) > 2 and isinstance(entry[2], str) else ""
            raise for_code(code)(f"{entry[0]}: {message}")


def metadata(args):
    client = admin(args)
    cluster = client.describe_cluster()
    topics = client.describe_topics()
    cli.emit(
        {
            "brokers": sorted(({"id": b["node_id"], "host": b["host"], "port": b["port"]} for b in cluster["brokers"]), key=lambda b: b["id"]),
            "controller_id": cluster["controller_id"],
            "topics": {t["topic"]: {"partitions": len(t["partitions"])} for t in topics if not t.get("is_internal") and not t["topic"].startswith("__")},
        }
    )


def create_topic(args):
    topic = NewTopic(args.topic, int(args.partitions or 1), args.replication_factor, topic_configs=cli.key_values(args.config))
    _check(admin(args).create_topics([topic], timeout_ms=TIMEOUT_MS), "topic_errors")
    cli.emit({"ok": True})


def delete_topic(args):
    _check(admin(args).delete_topics([args.topic], timeout_ms=TIMEOUT_MS), "topic_error_codes")
    cli.emit({"ok": True})


def create_partitions(args):
    response = admin(args).create_partitions({args.topic: NewPartitions(args.total)}, timeout_ms=TIMEOUT_MS)
    _check(response, "topic_errors")
    cli.emit({"ok": True})


def describe_topic(args):
    (topic,) = admin(args).describe_topics([args.topic])
    if topic["error_code"] != 0:
        raise for_code(topic["error_code"])(args.topic)
    topic_id = topic.get("topic_id")
    cli.emit(
        {
            "name": topic["topic"],
            "topic_id": None if topic_id is None else str(topic_id),
            "partitions": [
                {"partition": p["partition"], "leader": p["leader"], "replicas": list(p["replicas"]), "isr": list(p["isr"])}
                for p in sorted(topic["partitions"], key=lambda p: p["partition"])
            ],
        }
    )


def list_topics(args):
    cli.emit({"topics": sorted(t for t in admin(args).list_topics() if not t.startswith("__"))})


def _resource(args, configs=None) -> ConfigResource:
    if args.topic is not None:
        return ConfigResource(ConfigResourceType.TOPIC, args.topic, configs)
    if args.broker is not None:
        return ConfigResource(ConfigResourceType.BROKER, str(args.broker), configs)
    raise ValueError("need --topic or --broker")


def _describe(args) -> dict:
    out = {}
    for response in admin(args).describe_configs([_resource(args)]):
        for resource in response.resources:
            code, message, entries = resource[0], resource[1], resource[4]
            if code != 0:
                raise for_code(code)(message)
            for entry in entries:
                # v1+: (name, value, read_only, config_source, is_sensitive, synonyms)
                name, value, read_only, source = entry[0], entry[1], entry[2], entry[3]
                out[name] = {"value": value, "source": CONFIG_SOURCES.get(source, str(source)), "read_only": read_only}
    return dict(sorted(out.items()))


def describe_configs(args):
    cli.emit({"configs": _describe(args)})


def alter_configs(args):
    if args.topic is None:
        raise cli.UnsupportedCommand("kafka-python's AlterConfigs cannot target one broker (it picks any node)")
    current = {k: v["value"] for k, v in _describe(args).items() if v["source"] == "DYNAMIC_TOPIC_CONFIG"}
    current.update(cli.key_values(args.set))
    for key in args.delete:
        current.pop(key, None)
    response = admin(args).alter_configs([_resource(args, current)])
    for code, message, *_rest in response.resources:
        if code != 0:
            raise for_code(code)(message)
    cli.emit({"ok": True})


def produce(args):
    records = cli.read_records(args.input)
    acks = {"all": "all", "-1": "all", "1": 1, "0": 0}[args.acks]
    conf = {
        "bootstrap_servers": args.bootstrap,
        **client_conf(args),
        "acks": acks,
        "compression_type": None if args.codec == "none" else args.codec,
        "linger_ms": 5,
        "enable_idempotence": args.idempotent,
    }
    if args.max_request_size is not None:
        conf["max_request_size"] = args.max_request_size
    producer = KafkaProducer(**conf)
    futures = []
    for record in records:
        futures.append(
            producer.send(
                args.topic,
                value=cli.encode(record.get("value")),
                key=cli.encode(record.get("key")),
                headers=[(h, cli.encode(v)) for h, v in record.get("headers") or []],
                partition=record.get("partition"),
                timestamp_ms=record.get("timestamp"),
            )
        )
    producer.flush(timeout=TIMEOUT_MS / 1000 * 4)
    results = []
    for fut in futures:
        meta = fut.get(timeout=TIMEOUT_MS / 1000)
        results.append({"partition": meta.partition, "offset": meta.offset if meta.offset >= 0 else -1})
    producer.close(timeout=10)
    cli.emit_lines(results)


def _consumer(args, **extra) -> KafkaConsumer:
    conf = {"bootstrap_servers": args.bootstrap, "enable_auto_commit": False, "group_id": None, **client_conf(args), **extra}
    return KafkaConsumer(**conf)


def _partitions_of(consumer: KafkaConsumer, topic: str) -> list:
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while time.monotonic() < deadline:
        partitions = consumer.partitions_for_topic(topic)
        if partitions:
            return sorted(partitions)
        time.sleep(0.2)
    raise RuntimeError(f"no metadata for topic {topic}")


def consume(args):
    extra = {}
    if args.isolation is not None:
        extra["isolation_level"] = args.isolation
    if args.max_bytes is not None:
        extra["max_partition_fetch_bytes"] = args.max_bytes
        extra["fetch_max_bytes"] = max(args.max_bytes, 50 * 1024 * 1024)
    consumer = _consumer(args, **extra)
    partitions = cli.partition_list(args.partitions) or _partitions_of(consumer, args.topic)
    tps = [TopicPartition(args.topic, p) for p in partitions]
    consumer.assign(tps)
    if args.from_ == "earliest":
        consumer.seek_to_beginning(*tps)
    elif args.from_ == "latest":
        consumer.seek_to_end(*tps)
    else:
        for tp in tps:
            consumer.seek(tp, int(args.from_))
    wanted = args.count if args.count is not None else sys.maxsize
    deadline = time.monotonic() + args.timeout_ms / 1000
    got = 0
    while got < wanted and time.monotonic() < deadline:
        batches = consumer.poll(timeout_ms=500, max_records=wanted - got)
        for tp, records in batches.items():
            for r in records:
                cli.emit(
                    {
                        "partition": r.partition,
                        "offset": r.offset,
                        "key": cli.decode(r.key),
                        "value": cli.decode(r.value),
                        "headers": [[h, cli.decode(v)] for h, v in (r.headers or [])],
                        "timestamp": r.timestamp,
                    }
                )
                got += 1
    consumer.close()


def group_consume(args):
    """README.md's group-consume with kafka-python's group consumer (range or, as kafka-python
    names it, sticky; kafka-python has no cooperative protocol, so cooperative-sticky exits 3)."""
    if args.assignor != "range":
        raise cli.UnsupportedCommand("kafka-python has no cooperative-sticky assignor")
    extra = {"group_instance_id": args.instance_id} if args.instance_id else {}
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap, group_id=args.group, enable_auto_commit=False, **client_conf(args),
        auto_offset_reset=args.from_, session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=1000, **extra,
    )
    if args.events:
        consumer.subscribe([args.topic], listener=_EventListener(consumer))
    else:
        consumer.subscribe([args.topic])

    def poll(timeout_s, max_records):
        batches = consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=max_records)
        return [(r.partition, r.offset, r.key, r.value) for records in batches.values() for r in records]

    def commit(done):
        consumer.commit({TopicPartition(args.topic, p): OffsetAndMetadata(o, None, -1) for p, o in done.items()})

    cli.group_loop(args, poll, commit)
    assigned = sorted(tp.partition for tp in consumer.assignment())
    generation, member_id = _group_identity(consumer)
    consumer.close()  # LeaveGroup
    cli.emit_now({"assigned": assigned, "generation": generation, "member_id": member_id})


class _EventListener(ConsumerRebalanceListener):
    """--events: assignment changes as {"event","partitions","generation"} lines."""

    def __init__(self, consumer: KafkaConsumer):
        self.consumer = consumer

    def _emit(self, kind, tps):
        generation, _ = _group_identity(self.consumer)
        cli.emit_now({"event": kind, "partitions": sorted(tp.partition for tp in tps), "generation": generation})

    def on_partitions_revoked(self, revoked):
        self._emit("revoked", revoked)

    def on_partitions_assigned(self, assigned):
        self._emit("assigned", assigned)


def _group_identity(consumer: KafkaConsumer):
    """(generation, member id) from kafka-python's coordinator (no public accessor)."""
    gen = getattr(getattr(consumer, "_coordinator", None), "_generation", None)
    return getattr(gen, "generation_id", None), getattr(gen, "member_id", None)


def offsets(args):
    if args.spec == "max-timestamp":
        raise cli.UnsupportedCommand("kafka-python 2.x speaks ListOffsets up to v5; max-timestamp needs v7 (KIP-734)")
    consumer = _consumer(args)
    tps = [TopicPartition(args.topic, p) for p in _partitions_of(consumer, args.topic)]
    out = {}
    if args.spec == "earliest":
        found = consumer.beginning_offsets(tps)
        out = {tp.partition: {"offset": o, "timestamp": -1} for tp, o in found.items()}
    elif args.spec == "latest":
        found = consumer.end_offsets(tps)
        out = {tp.partition: {"offset": o, "timestamp": -1} for tp, o in found.items()}
    else:
        found = consumer.offsets_for_times({tp: int(args.spec) for tp in tps})
        # kafka-python maps Kafka's "no such record" (-1) to None.
        out = {tp.partition: {"offset": -1, "timestamp": -1} if ot is None else {"offset": ot.offset, "timestamp": ot.timestamp} for tp, ot in found.items()}
    consumer.close()
    cli.emit({str(p): v for p, v in sorted(out.items())})


if __name__ == "__main__":
    cli.main(
        {
            "metadata": metadata,
            "create-topic": create_topic,
            "delete-topic": delete_topic,
            "create-partitions": create_partitions,
            "describe-topic": describe_topic,
            "list-topics": list_topics,
            "describe-configs": describe_configs,
            "alter-configs": alter_configs,
            "produce": produce,
            "consume": consume,
            "group-consume": group_consume,
            "offsets": offsets,
        }
    )
