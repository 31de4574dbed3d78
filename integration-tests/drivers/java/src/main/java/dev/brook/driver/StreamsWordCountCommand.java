/*
 * `streams-wordcount`: a Kafka Streams word count with processing.guarantee=exactly_once_v2
 * (issue #12, test_streams_eos.py). The topology is the Streams DSL's classic one:
 *   input (String lines) -> flatMapValues(split on spaces) -> groupBy(word) -> count()
 *   -> toStream() -> to(output) (String word -> Long count)
 * with the record cache off, so every count update reaches the output. Next to the Streams app
 * the same JVM runs a read_committed KafkaConsumer (assign + seekToBeginning, no group) on the
 * output topic and prints every committed update as one JSON line
 *   {"word":"w","count":3,"partition":0,"offset":12}
 * plus {"event":"state","state":"RUNNING"} on each Streams state change and
 * {"event":"thread-replaced","error":".."} when a stream thread died and was replaced.
 * It stops once the sum of the latest counts per word reaches --expect-records (the number of
 * words in the input) or at --timeout-ms, closes Streams and prints a last line
 *   {"done":true,"complete":true|false,"words":W,"total":T,"updates":U,"thread_replacements":R}.
 * The driver checks nothing: the test asserts on the counts.
 */
package dev.brook.driver;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Produced;

final class StreamsWordCountCommand {
    private StreamsWordCountCommand() {}

    static int run(Properties base, Args args) throws Exception {
        String bootstrap = args.required("bootstrap");
        String input = args.required("input");
        String output = args.required("output");
        long expect = args.requiredInt("expect-records");
        long deadline = System.nanoTime() + Duration.ofMillis(args.intValue("timeout-ms", 60000)).toNanos();

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.split(" +")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
                .count()
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args.required("app-id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args.required("state-dir"));
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, args.get("commit-interval-ms").orElse("100"));
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
        // The classic consumer-group protocol (not KIP-1071's streams groups), on Kafka and Brook alike.
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "classic");
        props.put(StreamsConfig.consumerPrefix("max.poll.records"), args.get("max-poll-records").orElse("100"));
        props.put(StreamsConfig.consumerPrefix("session.timeout.ms"), "10000");

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        AtomicInteger replaced = new AtomicInteger();
        streams.setStateListener((now, before) -> event(Json.object().put("event", "state").put("state", now.name())
                .put("from", before.name())));
        streams.setUncaughtExceptionHandler(e -> {
            replaced.incrementAndGet();
            event(Json.object().put("event", "thread-replaced").put("error", String.valueOf(e)));
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        streams.start();

        Map<String, Long> latest = new HashMap<>();
        long total = 0;
        long updates = 0;
        Properties cprops = new Properties();
        cprops.putAll(base);
        cprops.put("client.id", "brook-driver-java-wordcount-reader");
        cprops.put("isolation.level", "read_committed");
        // Never skip: an out-of-range position is an error, not a silent jump to the end.
        cprops.put("auto.offset.reset", "none");
        cprops.put("key.deserializer", StringDeserializer.class.getName());
        cprops.put("value.deserializer", LongDeserializer.class.getName());
        try (KafkaConsumer<String, Long> consumer = new KafkaConsumer<>(cprops)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo p : consumer.partitionsFor(output, Duration.ofSeconds(30))) {
                partitions.add(new TopicPartition(output, p.partition()));
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            while (total < expect && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, Long> r : consumer.poll(Duration.ofMillis(200))) {
                    Long previous = latest.put(r.key(), r.value());
                    total += r.value() - (previous == null ? 0 : previous);
                    updates++;
                    Json.println(Json.object().put("word", r.key()).put("count", r.value())
                            .put("partition", r.partition()).put("offset", r.offset()));
                }
            }
            if (total < expect) {
                // Where the reader stopped: its positions against the read_committed end offsets.
                var positions = Json.object();
                var ends = Json.object();
                for (var e : consumer.endOffsets(partitions).entrySet()) {
                    ends.put(String.valueOf(e.getKey().partition()), e.getValue());
                    positions.put(String.valueOf(e.getKey().partition()), consumer.position(e.getKey()));
                }
                event(Json.object().put("event", "reader-incomplete").set("positions", positions));
                event(Json.object().put("event", "reader-end-offsets").set("end_offsets", ends));
            }
        } finally {
            streams.close(Duration.ofSeconds(20));
        }
        Json.println(Json.object().put("done", true).put("complete", total >= expect).put("words", latest.size())
                .put("total", total).put("updates", updates).put("thread_replacements", replaced.get()));
        return 0;
    }

    private static synchronized void event(Object document) {
        try {
            Json.println(document);
        } catch (Exception e) {
            System.err.println(document);
        }
    }
}
