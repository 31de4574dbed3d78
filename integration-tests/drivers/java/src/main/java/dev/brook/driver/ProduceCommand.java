/*
 * `produce`: sends every record of the input file (JSON lines, see the driver protocol) with a
 * KafkaProducer and prints one JSON line per input record, in input order, with the
 * RecordMetadata the broker returned: {"partition":P,"offset":O}. With acks=0 the client does
 * not learn offsets, so it reports -1. The producer keeps the client's defaults
 * (enable.idempotence=true, acks=all) unless an option overrides them; when --acks is not
 * "all" and --idempotent is not given, the client itself turns idempotence off (KIP-679).
 * A record that fails prints {"error":..,"message":..} in its place and the driver exits 1.
 */
package dev.brook.driver;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.BufferedReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;

final class ProduceCommand {
    private ProduceCommand() {}

    static int run(Properties base, Args args) throws Exception {
        String topic = args.required("topic");
        List<ProducerRecord<byte[], byte[]>> records = readRecords(topic, Path.of(args.required("input")));
        Properties props = new Properties();
        props.putAll(base);
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        args.get("codec").ifPresent(codec -> props.put("compression.type", codec));
        args.get("acks").ifPresent(acks -> props.put("acks", acks));
        if (args.flag("idempotent")) {
            props.put("enable.idempotence", "true");
        }
        args.get("max-request-size").ifPresent(size -> props.put("max.request.size", size));

        List<Future<RecordMetadata>> pending = new ArrayList<>(records.size());
        int failures = 0;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (ProducerRecord<byte[], byte[]> record : records) {
                pending.add(producer.send(record));
            }
            producer.flush();
            for (Future<RecordMetadata> future : pending) {
                try {
                    RecordMetadata metadata = future.get();
                    // hasOffset() is false with acks=0: the client reports -1, as the protocol says.
                    Json.println(Json.object()
                            .put("partition", metadata.partition())
                            .put("offset", metadata.hasOffset() ? metadata.offset() : -1));
                } catch (ExecutionException e) {
                    Throwable cause = e.getCause() == null ? e : e.getCause();
                    Json.println(Json.object()
                            .put("error", cause.getClass().getSimpleName())
                            .put("message", String.valueOf(cause.getMessage())));
                    failures++;
                }
            }
        }
        if (failures > 0) {
            System.err.println(failures + " of " + records.size() + " records failed");
            return 1;
        }
        return 0;
    }

    private static List<ProducerRecord<byte[], byte[]>> readRecords(String topic, Path input) throws Exception {
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        try (BufferedReader reader = Files.newBufferedReader(input, StandardCharsets.UTF_8)) {
            String line;
            int lineNumber = 0;
            while ((line = reader.readLine()) != null) {
                lineNumber++;
                if (line.isBlank()) {
                    continue;
                }
                JsonNode node = Json.MAPPER.readTree(line);
                if (node == null || !node.isObject()) {
                    throw new Args.UsageException(input + ":" + lineNumber + ": expected a JSON object");
                }
                records.add(toRecord(topic, node));
            }
        }
        return records;
    }

    private static ProducerRecord<byte[], byte[]> toRecord(String topic, JsonNode node) {
        Integer partition = present(node, "partition") ? node.get("partition").asInt() : null;
        Long timestamp = present(node, "timestamp") ? node.get("timestamp").asLong() : null;
        ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(
                topic, partition, timestamp, bytes(node, "key"), bytes(node, "value"));
        JsonNode headers = node.get("headers");
        if (headers != null && headers.isArray()) {
            for (JsonNode header : headers) {
                JsonNode value = header.get(1);
                byte[] valueBytes = value == null || value.isNull()
                        ? null : value.asText().getBytes(StandardCharsets.UTF_8);
                record.headers().add(new RecordHeader(header.path(0).asText(), valueBytes));
            }
        }
        return record;
    }

    private static boolean present(JsonNode node, String field) {
        JsonNode value = node.get(field);
        return value != null && !value.isNull();
    }

    private static byte[] bytes(JsonNode node, String field) {
        return present(node, field) ? node.get(field).asText().getBytes(StandardCharsets.UTF_8) : null;
    }
}
