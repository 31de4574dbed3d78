/*
 * `produce-stream`: one KafkaProducer writing sequence-numbered values continuously at a fixed
 * rate, the workload of the fault-injection run (integration-tests/scripts/chaos.py).
 *
 *   produce-stream --bootstrap B --topic T --partitions N --prefix P [--rate 200] [--acks all]
 *                  [--idempotent] [--duration-ms D] [--max-count C] [--request-timeout-ms 5000]
 *                  [--delivery-timeout-ms 60000] [--close-timeout-ms 30000]
 *
 * Record i (from 0) has no key, the value "P-<i>" (i zero-padded to 9 digits) and goes to
 * partition i % N. Prints one JSON line per record as soon as its send completes (the callback,
 * so per partition in offset order):
 *   {"value":"P-000000012","seq":12,"partition":0,"offset":40,"ok":true,"t_send":ms,"t_ack":ms}
 *   {"value":..,"seq":..,"partition":0,"offset":-1,"ok":false,"error":"TimeoutException","message":"..","t_send":ms,"t_ack":ms}
 * t_send is taken just before send(), t_ack in the callback (wall-clock epoch ms). Runs until
 * --duration-ms, --max-count or SIGTERM; then stops sending, flushes for up to
 * --close-timeout-ms (records still pending fail and are printed as errors), and prints
 * {"done":true,"sent":n,"acked":a,"failed":f} last. A send is never retried by the driver (the
 * client retries internally), so every value is sent at most once by the application.
 */
package dev.brook.driver;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

final class ProduceStreamCommand {
    private ProduceStreamCommand() {}

    static int run(Properties base, Args args) throws Exception {
        String topic = args.required("topic");
        int partitions = args.requiredInt("partitions");
        String prefix = args.required("prefix");
        double rate = Double.parseDouble(args.get("rate").orElse("200"));
        long durationMs = Long.parseLong(args.get("duration-ms").orElse(Long.toString(Long.MAX_VALUE / 4)));
        long maxCount = Long.parseLong(args.get("max-count").orElse(Long.toString(Long.MAX_VALUE)));
        int closeTimeoutMs = args.intValue("close-timeout-ms", 30000);
        if (partitions <= 0 || rate <= 0) {
            throw new Args.UsageException("--partitions and --rate must be positive");
        }
        Properties props = new Properties();
        props.putAll(base);
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        props.put("acks", args.get("acks").orElse("all"));
        if (args.flag("idempotent")) {
            props.put("enable.idempotence", "true");
        }
        // A request to a frozen or isolated leader must not hold a batch for the default 30 s.
        props.put("request.timeout.ms", Integer.toString(args.intValue("request-timeout-ms", 5000)));
        props.put("delivery.timeout.ms", Integer.toString(args.intValue("delivery-timeout-ms", 60000)));
        props.put("reconnect.backoff.max.ms", "500");
        props.put("retry.backoff.max.ms", "500");
        props.put("linger.ms", "5");

        AtomicBoolean stopping = new AtomicBoolean(false);
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopping.set(true);
            try {
                closed.await(closeTimeoutMs + 5000L, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        AtomicLong acked = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        long sent = 0;
        try {
            KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
            try {
                long start = System.nanoTime();
                long end = durationMs >= Long.MAX_VALUE / 8 ? Long.MAX_VALUE
                        : System.currentTimeMillis() + durationMs;
                while (!stopping.get() && sent < maxCount && System.currentTimeMillis() < end) {
                    long due = start + (long) (sent * 1e9 / rate);
                    long waitNs = due - System.nanoTime();
                    if (waitNs > 0) {
                        Thread.sleep(waitNs / 1_000_000, (int) (waitNs % 1_000_000));
                        continue;
                    }
                    final long seq = sent;
                    final int partition = (int) (seq % partitions);
                    final String value = String.format("%s-%09d", prefix, seq);
                    final long tSend = System.currentTimeMillis();
                    producer.send(new ProducerRecord<>(topic, partition, null, value.getBytes(StandardCharsets.UTF_8)),
                            (metadata, exception) -> {
                                long tAck = System.currentTimeMillis();
                                var line = Json.object().put("value", value).put("seq", seq).put("partition", partition);
                                if (exception == null) {
                                    line.put("offset", metadata.offset()).put("ok", true);
                                    acked.incrementAndGet();
                                } else {
                                    line.put("offset", -1).put("ok", false)
                                            .put("error", exception.getClass().getSimpleName())
                                            .put("message", String.valueOf(exception.getMessage()));
                                    failed.incrementAndGet();
                                }
                                line.put("t_send", tSend).put("t_ack", tAck);
                                try {
                                    Json.println(line);
                                } catch (Exception e) {
                                    System.err.println("print: " + e);
                                }
                            });
                    sent++;
                }
            } finally {
                // Anything still pending after the close timeout is failed through its callback.
                producer.close(Duration.ofMillis(closeTimeoutMs));
            }
            Json.println(Json.object().put("done", true).put("sent", sent)
                    .put("acked", acked.get()).put("failed", failed.get()));
        } finally {
            closed.countDown();
        }
        return 0;
    }
}
