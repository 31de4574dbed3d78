"""Set-up and waiting shared by the group scenario tests (test_group_failover.py,
test_group_kcat.py, test_group_zombie.py): fresh group names, topics, records numbered per
partition, and "everything sent so far is read and committed"."""

import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness.members import committed, poll_until

DEADLINE_S = 60


def new_group() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, prefix: str) -> list:
    """`per_partition` records to each partition; returns the values sent (`prefix-partition-i`)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    sent = []
    for p in range(partitions):
        for i in range(per_partition):
            value = f"{prefix}-{p}-{i}"
            producer.produce(topic, value=value.encode(), partition=p)
            sent.append(value)
    assert producer.flush(30) == 0
    return sent


def values(members) -> list:
    return [r["value"] for m in members for r in m.snapshot()]


def wait_read_and_committed(bootstrap, group, topic, partitions, members, sent) -> None:
    """Until the members have printed every value in `sent` and the group's committed offset
    of each partition is its end (everything produced so far is `sent`)."""
    end = len(sent) // partitions

    def done():
        return set(sent) <= set(values(members)) and committed(bootstrap, group, topic, partitions) == {
            p: end for p in range(partitions)
        }

    poll_until(done, DEADLINE_S, lambda: f"read/committed {len(set(values(members)) & set(sent))} of {len(sent)}, "
               f"committed {committed(bootstrap, group, topic, partitions)}, members {members}, "
               f"stderr {[m.stderr_tail(5) for m in members]}")
