/*
 * `consume`: a KafkaConsumer with no group.id, assigned (assign + seek, no group coordinator)
 * to the topic's partitions or to --partitions, positioned at --from (earliest: seekToBeginning,
 * latest: seekToEnd, or an absolute offset), printing each record as one JSON line in the order
 * poll() returns them. It stops after --count records or at --timeout-ms (then exits 0 with
 * what it has): the tests, not the driver, decide whether that is enough.
 * --fetch-max-wait-ms sets fetch.max.wait.ms. --idle-before-close-ms MS: after the records,
 * wait MS without polling (so the fetch the consumer left parked at the broker is answered
 * and no fetch is in flight), then time close() (which closes the fetch session with an
 * empty Fetch) and print {"close_ms":N} as the last line.
 */
package dev.brook.driver;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

final class ConsumeCommand {
    private ConsumeCommand() {}

    static int run(Properties base, Args args) throws Exception {
        String topic = args.required("topic");
        int count = args.requiredInt("count");
        String from = args.get("from").orElse("earliest");
        long deadline = System.nanoTime() + Duration.ofMillis(args.intValue("timeout-ms", 20000)).toNanos();
        Properties props = new Properties();
        props.putAll(base);
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        // --isolation read_committed|read_uncommitted (default: the client's, read_uncommitted).
        args.get("isolation").ifPresent(isolation -> props.put("isolation.level", isolation));
        args.get("fetch-max-wait-ms").ifPresent(ms -> props.put("fetch.max.wait.ms", ms));
        if (args.get("max-bytes").isPresent()) {
            String maxBytes = args.required("max-bytes");
            props.put("fetch.max.bytes", maxBytes);
            props.put("max.partition.fetch.bytes", maxBytes);
        }
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> partitions = partitions(consumer, topic, args, deadline);
            consumer.assign(partitions);
            seek(consumer, partitions, from);
            int printed = 0;
            while (printed < count) {
                long remainingMs = (deadline - System.nanoTime()) / 1_000_000;
                if (remainingMs <= 0) {
                    break;
                }
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(Math.min(remainingMs, 500)))) {
                    if (printed >= count) {
                        break;
                    }
                    Json.println(toJson(record));
                    printed++;
                }
            }
            if (args.get("idle-before-close-ms").isPresent()) {
                Thread.sleep(args.intValue("idle-before-close-ms", 0));
                long start = System.nanoTime();
                consumer.close();
                Json.println(Json.object().put("close_ms", (System.nanoTime() - start) / 1_000_000));
            }
        }
        return 0;
    }

    private static List<TopicPartition> partitions(
            KafkaConsumer<byte[], byte[]> consumer, String topic, Args args, long deadline) throws Exception {
        List<TopicPartition> partitions = new ArrayList<>();
        if (args.get("partitions").isPresent()) {
            for (String p : args.required("partitions").split(",")) {
                try {
                    partitions.add(new TopicPartition(topic, Integer.parseInt(p.trim())));
                } catch (NumberFormatException e) {
                    throw new Args.UsageException("--partitions expects a list like 0,1,2");
                }
            }
            return partitions;
        }
        // A topic created a moment ago may not be in the metadata yet: ask until the deadline.
        while (true) {
            List<PartitionInfo> infos = consumer.partitionsFor(topic, Duration.ofMillis(
                    Math.max(1, Math.min(5000, (deadline - System.nanoTime()) / 1_000_000))));
            if (infos != null && !infos.isEmpty()) {
                for (PartitionInfo info : infos) {
                    partitions.add(new TopicPartition(topic, info.partition()));
                }
                partitions.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
                return partitions;
            }
            if (System.nanoTime() >= deadline) {
                throw new IllegalStateException("topic " + topic + " has no partitions in the metadata");
            }
            Thread.sleep(100);
        }
    }

    private static void seek(KafkaConsumer<byte[], byte[]> consumer, List<TopicPartition> partitions, String from)
            throws Args.UsageException {
        switch (from) {
            case "earliest":
                consumer.seekToBeginning(partitions);
                break;
            case "latest":
                consumer.seekToEnd(partitions);
                break;
            default:
                long offset;
                try {
                    offset = Long.parseLong(from);
                } catch (NumberFormatException e) {
                    throw new Args.UsageException("--from expects earliest|latest|OFFSET, got '" + from + "'");
                }
                for (TopicPartition tp : partitions) {
                    consumer.seek(tp, offset);
                }
        }
    }

    private static ObjectNode toJson(ConsumerRecord<byte[], byte[]> record) {
        ObjectNode out = Json.object()
                .put("partition", record.partition())
                .put("offset", record.offset())
                .put("key", text(record.key()))
                .put("value", text(record.value()));
        ArrayNode headers = out.putArray("headers");
        for (Header header : record.headers()) {
            headers.addArray().add(header.key()).add(text(header.value()));
        }
        out.put("timestamp", record.timestamp());
        return out;
    }

    private static String text(byte[] bytes) {
        return bytes == null ? null : new String(bytes, StandardCharsets.UTF_8);
    }
}
