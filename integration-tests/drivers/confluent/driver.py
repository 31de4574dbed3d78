#!/usr/bin/env python3
"""Driver for confluent-kafka-python (librdkafka), speaking integration-tests/README.md's protocol.

Every command goes through the client's public API: admin commands via AdminClient, produce
via Producer with delivery callbacks (so offsets are the broker's), consume via Consumer
assign + seek (librdkafka still requires a group.id, which is never joined or committed),
group-consume via subscribe (a real group member, in its own process so it can be killed).
No checking here: the pytest scenarios assert on what this prints.
"""

import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # integration-tests/, for harness

from harness import driver_cli as cli  # noqa: E402  (first: it installs the SIGTERM handler)
from harness import client_config  # noqa: E402
from confluent_kafka import (  # noqa: E402
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    IsolationLevel,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)


TIMEOUT_S = 30.0


_ADMIN = []


def client_conf(args) -> dict:
    """`--client-config` in librdkafka's names (security settings), empty without it."""
    if not args.client_config:
        return {}
    return client_config.librdkafka(client_config.load(args.client_config))


def admin(args):
    """One AdminClient per process, kept referenced: librdkafka destroys the handle (failing
    its pending futures with _DESTROY) as soon as the Python object is collected."""
    if not _ADMIN:
        _ADMIN.append(AdminClient({"bootstrap.servers": args.bootstrap, **client_conf(args)}))
    return _ADMIN[0]


def _wait(futures: dict) -> None:
    for fut in futures.values():
        fut.result(timeout=TIMEOUT_S)


def metadata(args):
    md = admin(args).list_topics(timeout=TIMEOUT_S)
    cli.emit(
        {
            "brokers": [{"id": b.id, "host": b.host, "port": b.port} for b in sorted(md.brokers.values(), key=lambda b: b.id)],
            "controller_id": md.controller_id,
            "topics": {name: {"partitions": len(t.partitions)} for name, t in md.topics.items() if not name.startswith("__")},
        }
    )


def create_topic(args):
    topic = NewTopic(
        args.topic,
        num_partitions=int(args.partitions or 1),
        replication_factor=args.replication_factor,
        config=cli.key_values(args.config),
    )
    _wait(admin(args).create_topics([topic], operation_timeout=TIMEOUT_S))
    cli.emit({"ok": True})


def delete_topic(args):
    _wait(admin(args).delete_topics([args.topic], operation_timeout=TIMEOUT_S))
    cli.emit({"ok": True})


def create_partitions(args):
    _wait(admin(args).create_partitions([NewPartitions(args.topic, args.total)], operation_timeout=TIMEOUT_S))
    cli.emit({"ok": True})


def describe_topic(args):
    futures = admin(args).describe_topics(TopicCollection([args.topic]), request_timeout=TIMEOUT_S)
    desc = futures[args.topic].result(timeout=TIMEOUT_S)
    cli.emit(
        {
            "name": desc.name,
            "topic_id": str(desc.topic_id),
            "partitions": [
                {
                    "partition": p.id,
                    "leader": p.leader.id if p.leader is not None else -1,
                    "replicas": [n.id for n in p.replicas],
                    "isr": [n.id for n in p.isr],
                }
                for p in sorted(desc.partitions, key=lambda p: p.id)
            ],
        }
    )


def list_topics(args):
    md = admin(args).list_topics(timeout=TIMEOUT_S)
    cli.emit({"topics": sorted(name for name in md.topics if not name.startswith("__"))})


def _config_resource(args):
    if args.topic is not None:
        return ConfigResource(ResourceType.TOPIC, args.topic)
    if args.broker is not None:
        return ConfigResource(ResourceType.BROKER, str(args.broker))
    raise ValueError("need --topic or --broker")


def describe_configs(args):
    resource = _config_resource(args)
    entries = admin(args).describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result(timeout=TIMEOUT_S)
    cli.emit(
        {
            "configs": {
                name: {"value": e.value, "source": _source(e), "read_only": e.is_read_only}
                for name, e in sorted(entries.items())
            }
        }
    )


def _source(entry) -> str:
    source = entry.source
    return source.name if isinstance(source, ConfigSource) else ConfigSource(source).name


def alter_configs(args):
    resource = _config_resource(args)
    for key, value in cli.key_values(args.set).items():
        resource.add_incremental_config(ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET))
    for key in args.delete:
        resource.add_incremental_config(ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE))
    _wait(admin(args).incremental_alter_configs([resource], request_timeout=TIMEOUT_S))
    cli.emit({"ok": True})


def produce(args):
    records = cli.read_records(args.input)
    conf = {
        "bootstrap.servers": args.bootstrap,
        **client_conf(args),
        "acks": "all" if args.acks in ("all", "-1") else args.acks,
        "compression.type": args.codec,
        "enable.idempotence": args.idempotent,
        "linger.ms": 5,
    }
    if args.max_request_size is not None:
        conf["message.max.bytes"] = args.max_request_size
    producer = Producer(conf)
    results = [None] * len(records)
    errors = []

    def on_delivery(index):
        def callback(err, msg):
            if err is not None:
                errors.append(f"record {index}: {err}")
                return
            # acks=0: librdkafka reports no offset (OFFSET_INVALID); the protocol says -1.
            offset = msg.offset() if msg.offset() >= 0 else -1
            results[index] = {"partition": msg.partition(), "offset": offset}

        return callback

    for index, record in enumerate(records):
        kwargs = {"value": cli.encode(record.get("value")), "key": cli.encode(record.get("key")), "on_delivery": on_delivery(index)}
        if record.get("headers"):
            kwargs["headers"] = [(h, cli.encode(v)) for h, v in record["headers"]]
        if record.get("timestamp") is not None:
            kwargs["timestamp"] = int(record["timestamp"])
        if record.get("partition") is not None:
            kwargs["partition"] = int(record["partition"])
        while True:
            try:
                producer.produce(args.topic, **kwargs)
                break
            except BufferError:  # local queue full: serve delivery reports, then retry
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(TIMEOUT_S * 4)
    if remaining:
        raise RuntimeError(f"{remaining} records not delivered before the flush timeout")
    if errors:
        raise RuntimeError("delivery failed: " + "; ".join(errors[:10]))
    cli.emit_lines(results)


def txn_produce(args):
    """README.md's txn-produce: each input record's "txn" numbers its transaction; transactions
    run one after another in input order, each committed unless --abort lists it. Prints each
    record's {"txn","partition","offset"} in input order (offsets of aborted records included:
    they are in the log)."""
    records = cli.read_records(args.input)
    aborts = set(cli.partition_list(args.abort) or [])
    producer = Producer({
        "bootstrap.servers": args.bootstrap,
        **client_conf(args),
        "transactional.id": args.transactional_id,
        "linger.ms": 5,
    })
    producer.init_transactions(TIMEOUT_S)
    results = [None] * len(records)
    errors = []

    def on_delivery(index, txn):
        def callback(err, msg):
            if err is not None:
                errors.append(f"record {index}: {err}")
                return
            results[index] = {"txn": txn, "partition": msg.partition(), "offset": msg.offset()}

        return callback

    order = []
    for record in records:
        if record["txn"] not in order:
            order.append(record["txn"])
    for txn in order:
        producer.begin_transaction()
        for index, record in enumerate(records):
            if record["txn"] != txn:
                continue
            kwargs = {"value": cli.encode(record.get("value")), "key": cli.encode(record.get("key")),
                      "on_delivery": on_delivery(index, txn)}
            if record.get("headers"):
                kwargs["headers"] = [(h, cli.encode(v)) for h, v in record["headers"]]
            if record.get("partition") is not None:
                kwargs["partition"] = int(record["partition"])
            producer.produce(args.topic, **kwargs)
            producer.poll(0)
        # Delivery reports first, so that aborted records report their offsets too.
        if producer.flush(TIMEOUT_S):
            raise RuntimeError(f"transaction {txn}: records not delivered before the flush timeout")
        if errors:
            raise RuntimeError("delivery failed: " + "; ".join(errors[:10]))
        if txn in aborts:
            producer.abort_transaction(TIMEOUT_S)
        else:
            producer.commit_transaction(TIMEOUT_S)
    cli.emit_lines(results)


def txn_copy(args):
    """README.md's txn-copy: consume-transform-produce as librdkafka documents it. A group member
    (read_committed, no auto commit) copies each poll's records (key, value, headers, same
    partition) to --output-topic in one transaction with its consumed positions
    (send_offsets_to_transaction with the consumer's group metadata); transactions 1, 1+N, ...
    (--abort-every N) are aborted and the consumer goes back to the committed offsets, as an
    application does after an abort. Stops once --count records are committed."""
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap,
        **client_conf(args),
        "group.id": args.group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
    })
    producer = Producer({
        "bootstrap.servers": args.bootstrap,
        **client_conf(args),
        "transactional.id": args.transactional_id,
        "linger.ms": 5,
    })
    producer.init_transactions(TIMEOUT_S)
    consumer.subscribe([args.topic])
    deadline = time.monotonic() + args.timeout_ms / 1000
    copied = txn = aborted = 0
    while copied < args.count and time.monotonic() < deadline:
        msgs = []
        for msg in consumer.consume(num_messages=100, timeout=0.5):
            if msg.error() is not None:
                if msg.error().fatal():
                    raise KafkaException(msg.error())
                print(f"consume: {msg.error()}", file=sys.stderr)
                continue
            msgs.append(msg)
        if not msgs:
            continue
        producer.begin_transaction()
        for msg in msgs:
            producer.produce(args.output_topic, key=msg.key(), value=msg.value(), headers=msg.headers(),
                             partition=msg.partition())
            producer.poll(0)
        # Delivered before the transaction ends, so that an aborted one leaves its records in the log.
        if producer.flush(TIMEOUT_S):
            raise RuntimeError(f"transaction {txn}: records not delivered before the flush timeout")
        positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), TIMEOUT_S)
        commit = not (args.abort_every and txn % args.abort_every == 1)
        if commit:
            producer.commit_transaction(TIMEOUT_S)
            copied += len(msgs)
        else:
            producer.abort_transaction(TIMEOUT_S)
            aborted += 1
            committed = consumer.committed(consumer.assignment(), timeout=TIMEOUT_S)
            for tp in committed:
                start = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                consumer.seek(TopicPartition(tp.topic, tp.partition, start))
        cli.emit_now({"txn": txn, "records": len(msgs), "committed": commit})
        txn += 1
    consumer.close()
    cli.emit_now({"copied": copied, "transactions": txn, "aborted": aborted})


def _partitions_of(args) -> list:
    md = admin(args).list_topics(topic=args.topic, timeout=TIMEOUT_S)
    topic = md.topics.get(args.topic)
    if topic is None or topic.error is not None:
        raise RuntimeError(f"topic {args.topic}: {None if topic is None else topic.error}")
    return sorted(topic.partitions)


def consume(args):
    partitions = cli.partition_list(args.partitions) or _partitions_of(args)
    start = {"earliest": OFFSET_BEGINNING, "latest": OFFSET_END}.get(args.from_)
    if start is None:
        start = int(args.from_)
    conf = {
        "bootstrap.servers": args.bootstrap,
        **client_conf(args),
        "group.id": f"brook-driver-{uuid.uuid4()}",  # required by librdkafka; never joined
        "enable.auto.commit": False,
        "enable.partition.eof": False,
    }
    if args.isolation is not None:
        conf["isolation.level"] = args.isolation
    if args.max_bytes is not None:
        conf["max.partition.fetch.bytes"] = args.max_bytes
        conf["fetch.max.bytes"] = max(args.max_bytes, 1024 * 1024)
    consumer = Consumer(conf)
    consumer.assign([TopicPartition(args.topic, p, start) for p in partitions])
    wanted = args.count if args.count is not None else sys.maxsize
    deadline = time.monotonic() + args.timeout_ms / 1000
    got = 0
    while got < wanted and time.monotonic() < deadline:
        msg = consumer.poll(min(0.5, max(0.0, deadline - time.monotonic())))
        if msg is None:
            continue
        if msg.error() is not None:
            raise KafkaException(msg.error())
        _ts_type, ts = msg.timestamp()
        cli.emit(
            {
                "partition": msg.partition(),
                "offset": msg.offset(),
                "key": cli.decode(msg.key()),
                "value": cli.decode(msg.value()),
                "headers": [[h, cli.decode(v)] for h, v in (msg.headers() or [])],
                "timestamp": ts,
            }
        )
        got += 1
    consumer.close()


def group_consume(args):
    """README.md's group-consume with librdkafka's classic-protocol consumer."""
    conf = {
        "bootstrap.servers": args.bootstrap,
        **client_conf(args),
        "group.id": args.group,
        "enable.auto.commit": False,
        "auto.offset.reset": args.from_,
        "session.timeout.ms": args.session_timeout_ms,
        "heartbeat.interval.ms": 1000,
        "partition.assignment.strategy": args.assignor,
    }
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    consumer = Consumer(conf)
    if args.events:
        # librdkafka does not expose the classic generation id: printed as null.
        def event(kind):
            return lambda _c, tps: cli.emit_now(
                {"event": kind, "partitions": sorted(tp.partition for tp in tps), "generation": None})

        consumer.subscribe([args.topic], on_assign=event("assigned"), on_revoke=event("revoked"),
                           on_lost=event("lost"))
    else:
        consumer.subscribe([args.topic])

    def poll(timeout_s, max_records):
        out = []
        for msg in consumer.consume(num_messages=min(max_records, 500), timeout=timeout_s):
            if msg.error() is not None:
                if msg.error().retriable() or not msg.error().fatal():
                    print(f"consume: {msg.error()}", file=sys.stderr)
                    continue
                raise KafkaException(msg.error())
            out.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
        return out

    def commit(done):
        offsets = [TopicPartition(args.topic, p, o) for p, o in done.items()]
        consumer.commit(offsets=offsets, asynchronous=False)

    cli.group_loop(args, poll, commit)
    assigned = sorted(tp.partition for tp in consumer.assignment())
    member_id = consumer.memberid()
    consumer.close()  # LeaveGroup
    # librdkafka does not expose the classic generation id.
    cli.emit_now({"assigned": assigned, "generation": None, "member_id": member_id})


def offsets(args):
    spec = args.spec
    if spec == "earliest":
        offset_spec = OffsetSpec.earliest()
    elif spec == "latest":
        offset_spec = OffsetSpec.latest()
    elif spec == "max-timestamp":
        offset_spec = OffsetSpec.max_timestamp()
    else:
        offset_spec = OffsetSpec.for_timestamp(int(spec))
    request = {TopicPartition(args.topic, p): offset_spec for p in _partitions_of(args)}
    futures = admin(args).list_offsets(request, isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=TIMEOUT_S)
    out = {}
    for tp, fut in futures.items():
        info = fut.result(timeout=TIMEOUT_S)
        out[str(tp.partition)] = {"offset": info.offset, "timestamp": info.timestamp}
    cli.emit(dict(sorted(out.items(), key=lambda kv: int(kv[0]))))


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
            "txn-produce": txn_produce,
            "txn-copy": txn_copy,
        }
    )
