/*
 * `produce-paced` for the replication tests (test_replication_*.py, harness/replication.py): its
 * own entry point, so Main's dispatch stays untouched:
 *   java -cp target/brook-driver.jar dev.brook.driver.ReplicationProduce produce-paced \
 *     --bootstrap B --topic T --input FILE [--acks all|1|0] [--idempotent] [--interval-ms 10]
 *     [--retries N] [--request-timeout-ms MS] [--delivery-timeout-ms MS]
 * Sends the input records (driver-protocol JSON lines) one by one, `interval-ms` apart, with one
 * KafkaProducer, and prints a JSON line per record AS ITS RESULT ARRIVES (completion order):
 * {"index":I,"partition":P,"offset":O} or {"index":I,"error":"NOT_ENOUGH_REPLICAS","message":..}
 * (the Kafka error name, else the exception's class name). Failed sends are data, not a driver
 * error: the exit code is 0 once every record has its line.
 */
package dev.brook.driver;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class ReplicationProduce {
    private ReplicationProduce() {}

    public static void main(String[] argv) throws Exception {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel",
                System.getenv("BROOK_DRIVER_LOG") == null ? "warn" : System.getenv("BROOK_DRIVER_LOG"));
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
        Args args = Args.parse(argv);
        Properties props = new Properties();
        props.put("bootstrap.servers", args.required("bootstrap"));
        props.put("client.id", "brook-driver-java-paced");
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        props.put("acks", args.get("acks").orElse("all"));
        props.put("enable.idempotence", String.valueOf(args.flag("idempotent")));
        args.get("retries").ifPresent(v -> props.put("retries", v));
        args.get("request-timeout-ms").ifPresent(v -> props.put("request.timeout.ms", v));
        args.get("delivery-timeout-ms").ifPresent(v -> props.put("delivery.timeout.ms", v));
        if (args.get("retries").map("0"::equals).orElse(false)) {
            props.put("max.in.flight.requests.per.connection", "1");
        }
        long interval = Long.parseLong(args.get("interval-ms").orElse("10"));
        String topic = args.required("topic");
        var lines = Files.readAllLines(Path.of(args.required("input")), StandardCharsets.UTF_8);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            int index = 0;
            for (String line : lines) {
                if (line.isBlank()) {
                    continue;
                }
                JsonNode node = Json.MAPPER.readTree(line);
                Integer partition = node.hasNonNull("partition") ? node.get("partition").asInt() : null;
                byte[] key = node.hasNonNull("key") ? node.get("key").asText().getBytes(StandardCharsets.UTF_8) : null;
                byte[] value = node.hasNonNull("value") ? node.get("value").asText().getBytes(StandardCharsets.UTF_8) : null;
                final int i = index++;
                producer.send(new ProducerRecord<>(topic, partition, key, value), (md, e) -> {
                    try {
                        if (e == null) {
                            Json.println(Json.object().put("index", i).put("partition", md.partition())
                                    .put("offset", md.hasOffset() ? md.offset() : -1));
                        } else {
                            String name = e instanceof ApiException && Errors.forException(e) != Errors.UNKNOWN_SERVER_ERROR
                                    ? Errors.forException(e).name() : e.getClass().getSimpleName();
                            Json.println(Json.object().put("index", i).put("error", name)
                                    .put("message", String.valueOf(e.getMessage())));
                        }
                    } catch (Exception printError) {
                        System.err.println(printError);
                    }
                });
                if (interval > 0) {
                    Thread.sleep(interval);
                }
            }
            producer.flush();
        }
        System.exit(0);
    }
}
