"""Small confluent-kafka (librdkafka) helpers for scenarios that check a third-party program's
effect on a broker (test_connect.py, test_mirror_maker.py): create a topic, read or alter its
configs, read a partition exactly from its log start to its high watermark, read a group's
committed offsets. Every call is bounded; a client error raises. `produce_once` (the disk-fault
tests) returns the error a record got instead.
"""

import time
from typing import Dict, List, Optional

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewTopic, ResourceType)

TIMEOUT_S = 30


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, name: str, partitions: int, configs: Optional[Dict[str, str]] = None) -> None:
    client = admin(bootstrap)  # held: a collected AdminClient fails its pending futures
    client.create_topics([NewTopic(name, partitions, 1, config=dict(configs or {}))])[name].result(TIMEOUT_S)


def produce_once(bootstrap: str, topic: str, value: bytes, partition: Optional[int] = None):
    """One acks=all record (to `partition`, or where the partitioner puts it), no retries: its
    offset, or the KafkaError it failed with; None without an answer within 10 s."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0, "enable.idempotence": False,
                         "message.timeout.ms": 5000})
    out = []
    where = {} if partition is None else {"partition": partition}
    producer.produce(topic, value=value, on_delivery=lambda err, msg: out.append(err or msg.offset()), **where)
    producer.flush(10)
    return out[0] if out else None


def partition_count(bootstrap: str, name: str) -> int:
    topic = admin(bootstrap).list_topics(name, timeout=TIMEOUT_S).topics[name]
    if topic.error is not None:
        raise RuntimeError(f"metadata of {name}: {topic.error}")
    return len(topic.partitions)


def topic_configs(bootstrap: str, name: str) -> Dict[str, ConfigEntry]:
    """DescribeConfigs of a topic: name -> ConfigEntry (.value, .source, .is_default)."""
    resource = ConfigResource(ResourceType.TOPIC, name)
    client = admin(bootstrap)
    return client.describe_configs([resource])[resource].result(TIMEOUT_S)


def set_topic_config(bootstrap: str, name: str, key: str, value: str) -> None:
    """IncrementalAlterConfigs SET of one topic config."""
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
    client = admin(bootstrap)
    client.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)


def read_partition(bootstrap: str, topic: str, partition: int, timeout_s: float = TIMEOUT_S) -> List[Dict]:
    """Every record of one partition from its log start to its high watermark (taken once, at
    the start), in order: {"offset", "key", "value", "headers", "timestamp"} with str/None
    key and value and headers as [name, value] pairs."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "brook-records-reader",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT_S)
        records: List[Dict] = []
        if high <= low:
            return records
        consumer.assign([TopicPartition(topic, partition, low)])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise RuntimeError(f"reading {topic}/{partition}: {msg.error()}")
            records.append({
                "offset": msg.offset(),
                "key": None if msg.key() is None else msg.key().decode(),
                "value": None if msg.value() is None else msg.value().decode(),
                "headers": [[k, None if v is None else v.decode()] for k, v in (msg.headers() or [])],
                "timestamp": msg.timestamp()[1],
            })
            if msg.offset() >= high - 1:
                return records
        raise RuntimeError(f"{topic}/{partition}: read {len(records)} of offsets {low}..{high - 1} in {timeout_s} s")
    finally:
        consumer.close()


def end_offset(bootstrap: str, topic: str, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "brook-records-reader"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT_S)[1]
    finally:
        consumer.close()


def committed_offsets(bootstrap: str, group: str) -> Dict[tuple, int]:
    """A group's committed offsets (OffsetFetch through the admin API): {(topic, partition): offset}."""
    client = admin(bootstrap)
    result = client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(TIMEOUT_S)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}
