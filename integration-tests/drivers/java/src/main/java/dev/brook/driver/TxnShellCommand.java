/*
 * `txn-shell`: an interactive session of Java 4.4 producers, consumers and an AdminClient for
 * the transaction scenarios (test_transactions.py, harness/txn_shell.py). A transaction test
 * interleaves steps of several clients (begin, send, look at the end offsets while it is open,
 * start a second producer with the same transactional.id, commit, ...), so instead of one
 * process per step the scenario drives one JVM: it writes one JSON request per line on stdin
 * and reads exactly one JSON line back per request on stdout, in order:
 *   {"ok":true, ...results}   or   {"ok":false,"error":"ProducerFencedException","causes":[..],"message":".."}
 * A client error is an answer, never the end of the session: the scenario asserts on it.
 * The session ends at EOF or {"op":"exit"}; everything still open is closed then.
 *
 * Requests ("name" names a producer or consumer of this session):
 *   producer      name, [transactional_id], [config {k:v}], [init true]  KafkaProducer (byte[] keys/values);
 *                 init: initTransactions() right away
 *   init|begin|commit|abort|flush  name                                  the producer call of that name
 *   send          name, topic, records [{key,value,headers,partition}], [wait true]
 *                 send every record; wait: flush and return each {"partition","offset"} or {"error",..}
 *   send-offsets  name (producer), consumer                              sendOffsetsToTransaction(the
 *                 consumer's positions, consumer.groupMetadata()); returns {"offsets":{"P":O}}
 *   close         name                                                   close a producer or consumer
 *   consumer      name, group, topic, [isolation], [config {k:v}]        a subscribed group member,
 *                 auto commit off, auto.offset.reset earliest
 *   poll          name, count, [timeout_ms 20000]                        poll until count records (or the
 *                 deadline): {"records":[..],"positions":{"P":O}}
 *   rewind        name                                                   seek each assigned partition to
 *                 its committed offset, or to the beginning without one (as after an abort)
 *   end-offsets   topic, isolation                                       consumer.endOffsets (read_committed:
 *                 the last stable offset, read_uncommitted: the high watermark): {"offsets":{"P":O}}
 *   read          topic, isolation, [timeout_ms 30000]                   a group-less consumer reads every
 *                 partition from the beginning up to the end offsets of its isolation level (taken
 *                 first): {"records":[..],"end":{"P":O},"complete":bool}
 *   create-topic  topic, partitions                                      AdminClient createTopics
 *   group-offsets group, [require_stable false]                          listConsumerGroupOffsets:
 *                 {"offsets":{"topic":{"P":O}}}
 * Records print as {"partition","offset","key","value","headers":[[k,v]]}, as `consume` does.
 */
package dev.brook.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

final class TxnShellCommand {
    private final Properties base;
    private final Map<String, KafkaProducer<byte[], byte[]>> producers = new HashMap<>();
    private final Map<String, KafkaConsumer<byte[], byte[]>> consumers = new HashMap<>();
    private final Map<String, KafkaConsumer<byte[], byte[]>> offsetReaders = new HashMap<>();
    private Admin admin;

    private TxnShellCommand(Properties base) {
        this.base = base;
    }

    static int run(Properties base, Args args) throws Exception {
        TxnShellCommand shell = new TxnShellCommand(base);
        try {
            shell.loop();
        } finally {
            shell.closeAll();
        }
        return 0;
    }

    private void loop() throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode request = Json.MAPPER.readTree(line);
            String op = request.path("op").asText();
            if (op.equals("exit")) {
                Json.println(Json.ok());
                return;
            }
            ObjectNode answer;
            try {
                answer = handle(op, request);
            } catch (Exception e) {
                answer = error(e);
            }
            Json.println(answer);
        }
    }

    private ObjectNode handle(String op, JsonNode r) throws Exception {
        switch (op) {
            case "producer":
                return newProducer(r);
            case "init":
                producer(r).initTransactions();
                return Json.ok();
            case "begin":
                producer(r).beginTransaction();
                return Json.ok();
            case "commit":
                producer(r).commitTransaction();
                return Json.ok();
            case "abort":
                producer(r).abortTransaction();
                return Json.ok();
            case "flush":
                producer(r).flush();
                return Json.ok();
            case "send":
                return send(r);
            case "send-offsets":
                return sendOffsets(r);
            case "close":
                return close(r.path("name").asText());
            case "consumer":
                return newConsumer(r);
            case "poll":
                return poll(r);
            case "rewind":
                return rewind(r);
            case "end-offsets":
                return endOffsets(r);
            case "read":
                return read(r);
            case "create-topic":
                admin().createTopics(List.of(new NewTopic(r.path("topic").asText(),
                        r.path("partitions").asInt(1), (short) 1))).all().get();
                return Json.ok();
            case "group-offsets":
                return groupOffsets(r);
            default:
                throw new IllegalArgumentException("unknown op '" + op + "'");
        }
    }

    private ObjectNode newProducer(JsonNode r) {
        String name = r.path("name").asText();
        Properties props = new Properties();
        props.putAll(base);
        props.put("client.id", "brook-txn-shell-" + name);
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        if (r.hasNonNull("transactional_id")) {
            props.put("transactional.id", r.get("transactional_id").asText());
        }
        // initTransactions/commit/abort block at most this long (default 60 s): a broker that
        // never answers fails a scenario in half the time; the first InitProducerId, which
        // creates __transaction_state, still has ample time.
        props.put("max.block.ms", "30000");
        r.path("config").fields().forEachRemaining(e -> props.put(e.getKey(), e.getValue().asText()));
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
        KafkaProducer<byte[], byte[]> previous = producers.put(name, producer);
        if (previous != null) {
            previous.close(Duration.ofSeconds(5));
        }
        if (r.path("init").asBoolean(false)) {
            producer.initTransactions();
        }
        return Json.ok();
    }

    private ObjectNode send(JsonNode r) throws Exception {
        KafkaProducer<byte[], byte[]> producer = producer(r);
        String topic = r.path("topic").asText();
        List<Object> pending = new ArrayList<>();
        for (JsonNode record : r.path("records")) {
            try {
                pending.add(producer.send(toRecord(topic, record)));
            } catch (Exception e) {
                // send() throws rather than failing the future once the producer is in a fatal
                // state (fenced) or the transaction in an abortable error.
                pending.add(e);
            }
        }
        ObjectNode out = Json.ok();
        if (!r.path("wait").asBoolean(true)) {
            return out;
        }
        producer.flush();
        ArrayNode results = out.putArray("results");
        for (Object p : pending) {
            if (p instanceof Exception) {
                results.add(error((Exception) p));
                continue;
            }
            @SuppressWarnings("unchecked")
            Future<RecordMetadata> future = (Future<RecordMetadata>) p;
            try {
                RecordMetadata metadata = future.get();
                results.addObject().put("partition", metadata.partition()).put("offset", metadata.offset());
            } catch (ExecutionException e) {
                results.add(error(e));
            }
        }
        return out;
    }

    private ObjectNode sendOffsets(JsonNode r) throws Exception {
        KafkaProducer<byte[], byte[]> producer = producer(r);
        KafkaConsumer<byte[], byte[]> consumer = consumer(r.path("consumer").asText());
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (TopicPartition tp : consumer.assignment()) {
            offsets.put(tp, new OffsetAndMetadata(consumer.position(tp)));
        }
        producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
        ObjectNode out = Json.ok();
        ObjectNode sent = out.putObject("offsets");
        new TreeMap<>(offsets.entrySet().stream().collect(java.util.stream.Collectors.toMap(
                e -> e.getKey().partition(), e -> e.getValue().offset())))
                .forEach((p, o) -> sent.put(String.valueOf(p), o));
        return out;
    }

    private ObjectNode newConsumer(JsonNode r) {
        String name = r.path("name").asText();
        Properties props = consumerProps(r.path("isolation").asText("read_committed"));
        props.put("group.id", r.path("group").asText());
        props.put("client.id", "brook-txn-shell-" + name);
        props.put("auto.offset.reset", "earliest");
        props.put("heartbeat.interval.ms", "1000");
        r.path("config").fields().forEachRemaining(e -> props.put(e.getKey(), e.getValue().asText()));
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
        consumer.subscribe(List.of(r.path("topic").asText()));
        KafkaConsumer<byte[], byte[]> previous = consumers.put(name, consumer);
        if (previous != null) {
            previous.close(Duration.ofSeconds(5));
        }
        return Json.ok();
    }

    private ObjectNode poll(JsonNode r) {
        KafkaConsumer<byte[], byte[]> consumer = consumer(r.path("name").asText());
        int count = r.path("count").asInt();
        long deadline = System.nanoTime() + Duration.ofMillis(r.path("timeout_ms").asLong(20000)).toNanos();
        ObjectNode out = Json.ok();
        ArrayNode records = out.putArray("records");
        while (records.size() < count) {
            long remainingMs = (deadline - System.nanoTime()) / 1_000_000;
            if (remainingMs <= 0) {
                break;
            }
            for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(Math.min(remainingMs, 200)))) {
                records.add(toJson(record));
            }
        }
        ObjectNode positions = out.putObject("positions");
        new TreeMap<Integer, TopicPartition>(assignmentByPartition(consumer))
                .forEach((p, tp) -> positions.put(String.valueOf(p), consumer.position(tp)));
        return out;
    }

    private ObjectNode rewind(JsonNode r) {
        KafkaConsumer<byte[], byte[]> consumer = consumer(r.path("name").asText());
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(consumer.assignment());
        for (TopicPartition tp : consumer.assignment()) {
            OffsetAndMetadata offset = committed.get(tp);
            if (offset != null) {
                consumer.seek(tp, offset.offset());
            } else {
                consumer.seekToBeginning(List.of(tp));
            }
        }
        return Json.ok();
    }

    private ObjectNode endOffsets(JsonNode r) throws Exception {
        String isolation = r.path("isolation").asText();
        KafkaConsumer<byte[], byte[]> reader = offsetReaders.computeIfAbsent(isolation, this::groupless);
        List<TopicPartition> partitions = partitionsOf(reader, r.path("topic").asText());
        ObjectNode out = Json.ok();
        ObjectNode offsets = out.putObject("offsets");
        new TreeMap<>(byPartition(reader.endOffsets(partitions)))
                .forEach((p, o) -> offsets.put(String.valueOf(p), o));
        return out;
    }

    private ObjectNode read(JsonNode r) throws Exception {
        String topic = r.path("topic").asText();
        long deadline = System.nanoTime() + Duration.ofMillis(r.path("timeout_ms").asLong(30000)).toNanos();
        ObjectNode out = Json.ok();
        try (KafkaConsumer<byte[], byte[]> consumer = groupless(r.path("isolation").asText())) {
            List<TopicPartition> partitions = partitionsOf(consumer, topic);
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
            ArrayNode records = out.putArray("records");
            boolean complete = false;
            while (true) {
                complete = true;
                for (TopicPartition tp : partitions) {
                    complete &= consumer.position(tp) >= end.get(tp);
                }
                long remainingMs = (deadline - System.nanoTime()) / 1_000_000;
                if (complete || remainingMs <= 0) {
                    break;
                }
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(Math.min(remainingMs, 200)))) {
                    records.add(toJson(record));
                }
            }
            out.put("complete", complete);
            ObjectNode endOut = out.putObject("end");
            new TreeMap<>(byPartition(end)).forEach((p, o) -> endOut.put(String.valueOf(p), o));
        }
        return out;
    }

    private ObjectNode groupOffsets(JsonNode r) throws Exception {
        ListConsumerGroupOffsetsOptions options = new ListConsumerGroupOffsetsOptions()
                .requireStable(r.path("require_stable").asBoolean(false));
        Map<TopicPartition, OffsetAndMetadata> offsets = admin()
                .listConsumerGroupOffsets(r.path("group").asText(), options)
                .partitionsToOffsetAndMetadata().get();
        ObjectNode out = Json.ok();
        ObjectNode byTopic = out.putObject("offsets");
        Map<String, TreeMap<Integer, Long>> sorted = new TreeMap<>();
        offsets.forEach((tp, om) -> {
            if (om != null) {
                sorted.computeIfAbsent(tp.topic(), t -> new TreeMap<>()).put(tp.partition(), om.offset());
            }
        });
        sorted.forEach((topic, parts) -> {
            ObjectNode node = byTopic.putObject(topic);
            parts.forEach((p, o) -> node.put(String.valueOf(p), o));
        });
        return out;
    }

    private ObjectNode close(String name) {
        KafkaProducer<byte[], byte[]> producer = producers.remove(name);
        if (producer != null) {
            producer.close(Duration.ofSeconds(5));
        }
        KafkaConsumer<byte[], byte[]> consumer = consumers.remove(name);
        if (consumer != null) {
            consumer.close(Duration.ofSeconds(5));
        }
        return Json.ok();
    }

    private void closeAll() {
        for (String name : new ArrayList<>(producers.keySet())) {
            close(name);
        }
        for (String name : new ArrayList<>(consumers.keySet())) {
            close(name);
        }
        offsetReaders.values().forEach(c -> c.close(Duration.ofSeconds(5)));
        if (admin != null) {
            admin.close(Duration.ofSeconds(5));
        }
    }

    private KafkaProducer<byte[], byte[]> producer(JsonNode r) {
        String name = r.path("name").asText();
        KafkaProducer<byte[], byte[]> producer = producers.get(name);
        if (producer == null) {
            throw new IllegalArgumentException("no producer named '" + name + "'");
        }
        return producer;
    }

    private KafkaConsumer<byte[], byte[]> consumer(String name) {
        KafkaConsumer<byte[], byte[]> consumer = consumers.get(name);
        if (consumer == null) {
            throw new IllegalArgumentException("no consumer named '" + name + "'");
        }
        return consumer;
    }

    private Admin admin() {
        if (admin == null) {
            admin = Admin.create(base);
        }
        return admin;
    }

    private Properties consumerProps(String isolation) {
        Properties props = new Properties();
        props.putAll(base);
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.put("enable.auto.commit", "false");
        props.put("isolation.level", isolation);
        return props;
    }

    private KafkaConsumer<byte[], byte[]> groupless(String isolation) {
        return new KafkaConsumer<>(consumerProps(isolation));
    }

    private static List<TopicPartition> partitionsOf(KafkaConsumer<byte[], byte[]> consumer, String topic)
            throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
        while (true) {
            List<PartitionInfo> infos = consumer.partitionsFor(topic, Duration.ofSeconds(5));
            if (infos != null && !infos.isEmpty()) {
                List<TopicPartition> partitions = new ArrayList<>();
                infos.forEach(i -> partitions.add(new TopicPartition(topic, i.partition())));
                partitions.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
                return partitions;
            }
            if (System.nanoTime() >= deadline) {
                throw new IllegalStateException("topic " + topic + " has no partitions in the metadata");
            }
            Thread.sleep(100);
        }
    }

    private static Map<Integer, TopicPartition> assignmentByPartition(KafkaConsumer<byte[], byte[]> consumer) {
        Map<Integer, TopicPartition> out = new HashMap<>();
        consumer.assignment().forEach(tp -> out.put(tp.partition(), tp));
        return out;
    }

    private static Map<Integer, Long> byPartition(Map<TopicPartition, Long> offsets) {
        Map<Integer, Long> out = new HashMap<>();
        offsets.forEach((tp, o) -> out.put(tp.partition(), o));
        return out;
    }

    private static ProducerRecord<byte[], byte[]> toRecord(String topic, JsonNode node) {
        Integer partition = node.hasNonNull("partition") ? node.get("partition").asInt() : null;
        ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(
                topic, partition, null, bytes(node.get("key")), bytes(node.get("value")));
        for (JsonNode header : node.path("headers")) {
            record.headers().add(new RecordHeader(header.path(0).asText(), bytes(header.get(1))));
        }
        return record;
    }

    private static byte[] bytes(JsonNode value) {
        return value == null || value.isNull() ? null : value.asText().getBytes(StandardCharsets.UTF_8);
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
        return out;
    }

    private static String text(byte[] bytes) {
        return bytes == null ? null : new String(bytes, StandardCharsets.UTF_8);
    }

    /** {"ok":false,"error":<outermost non-wrapper class>,"causes":[every class in the chain],"message"}. */
    private static ObjectNode error(Exception e) {
        Throwable cause = e;
        while (cause instanceof ExecutionException && cause.getCause() != null) {
            cause = cause.getCause();
        }
        ObjectNode out = Json.object().put("ok", false)
                .put("error", cause.getClass().getSimpleName())
                .put("message", String.valueOf(cause.getMessage()));
        ArrayNode causes = out.putArray("causes");
        for (Throwable t = cause; t != null && causes.size() < 8; t = t.getCause()) {
            causes.add(t.getClass().getSimpleName());
        }
        return out;
    }
}
