"""A standalone offset commit (AlterConsumerGroupOffsets: an OffsetCommit with generation -1)
through confluent-kafka's AdminClient, checked partition by partition.

The AdminClient's future succeeds when the request was answered, even if every partition was
refused: the per-partition errors are on the returned `ConsumerGroupTopicPartitions`. A
coordinator may refuse a partition with COORDINATOR_LOAD_IN_PROGRESS (14) while it loads
`__consumer_offsets` (Kafka's coordinator runtime, and Brook's, right after the topic is created
or a broker starts), COORDINATOR_NOT_AVAILABLE (15) or NOT_COORDINATOR (16); clients retry
those. `alter_offsets` raises a partition's error as a `KafkaException`, so the caller's retry
loop sees it as it sees a request-level one.
"""

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException


def alter_offsets(admin, group: str, partitions: list, timeout: float = 30) -> ConsumerGroupTopicPartitions:
    """AlterConsumerGroupOffsets for `partitions` (TopicPartitions with offsets); raises the
    first refused partition's error."""
    result = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, partitions)])[group].result(timeout=timeout)
    for tp in result.topic_partitions:
        if tp.error is not None:
            raise KafkaException(tp.error)
    return result
