/*
 * `group-consume`: a KafkaConsumer that joins consumer group --group (subscribe, so the group
 * coordinator assigns the partitions) and prints each record it is given as one JSON line
 * {"partition","offset","key","value"}; after every poll it commits, synchronously, the offset
 * after the last record it printed per partition (so a later member resumes exactly there).
 * It stops after --count records, or once it has printed something and then seen nothing for
 * --idle-ms, or at --timeout-ms; then prints {"assigned":[..],"generation":G,"member_id":".."}
 * (its assignment and the classic-protocol generation it holds) and closes. A static member
 * (--instance-id, KIP-345) closes without LeaveGroup, as Kafka's client does for static members.
 * Options: --assignor range|cooperative-sticky, --from earliest|latest (auto.offset.reset),
 * --session-timeout-ms (session.timeout.ms). --group-protocol consumer joins with KIP-848's
 * protocol (group.protocol=consumer; the broker assigns, --remote-assignor uniform|range
 * sets group.remote.assignor; the classic-only options are then ignored, and the final
 * line's "generation" is the member epoch). SIGTERM ends the run like --timeout-ms (final line,
 * graceful close with LeaveGroup), so a scenario can tell a member that leaves from one that is
 * killed (SIGKILL: no LeaveGroup, the session timeout evicts it).
 * --commit-delay-ms MS waits MS between printing a poll's records and committing them (the
 * heartbeat thread keeps the session alive meanwhile), so a scenario can freeze the member
 * (SIGSTOP) with a commit pending and resume it once the group has moved on (a "zombie").
 * --events also prints {"event":"assigned"|"revoked"|"lost","partitions":[..],"generation":G}
 * from the rebalance listener, and turns a failed commit into
 * {"event":"commit-failed","error":".."} (the run goes on; without --events it is an error).
 * Instead of --topic, --pattern REGEX subscribes with a java.util.regex.Pattern (the client
 * matches it against the topics it knows) and --subscription-pattern REGEX with a
 * SubscriptionPattern (KIP-848, --group-protocol consumer only: the broker resolves the RE2/J
 * pattern, so a bad one fails in poll with InvalidRegularExpression). A pattern member's record
 * lines also carry "topic", and every event lists "topic_partitions" as "topic:partition".
 */
package dev.brook.driver;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

final class GroupConsumeCommand {
    private GroupConsumeCommand() {}

    static int run(Properties base, Args args) throws Exception {
        var pattern = args.get("pattern");
        var subscriptionPattern = args.get("subscription-pattern");
        boolean byPattern = pattern.isPresent() || subscriptionPattern.isPresent();
        String topic = byPattern ? null : args.required("topic");
        String group = args.required("group");
        int count = args.intValue("count", Integer.MAX_VALUE);
        long idleMs = args.intValue("idle-ms", 0);
        long commitDelayMs = args.intValue("commit-delay-ms", 0);
        boolean events = args.flag("events");
        long deadline = System.nanoTime() + Duration.ofMillis(args.intValue("timeout-ms", 30000)).toNanos();
        Properties props = new Properties();
        props.putAll(base);
        props.put("group.id", group);
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", args.get("from").orElse("earliest"));
        String protocol = args.get("group-protocol").orElse("classic");
        if (protocol.equals("consumer")) {
            // KIP-848: the broker assigns and times sessions; the classic-only settings
            // are refused by the client in this mode.
            props.put("group.protocol", "consumer");
            args.get("remote-assignor").ifPresent(a -> props.put("group.remote.assignor", a));
        } else {
            props.put("session.timeout.ms", args.get("session-timeout-ms").orElse("30000"));
            props.put("heartbeat.interval.ms", "1000");
            props.put("partition.assignment.strategy", assignor(args.get("assignor").orElse("range")));
        }
        args.get("instance-id").ifPresent(id -> props.put("group.instance.id", id));
        if (pattern.isPresent()) {
            // The client matches a java.util.regex.Pattern against the topics of its metadata,
            // which it refreshes every metadata.max.age.ms (5 minutes by default): a topic
            // created later is seen within a second.
            props.put("metadata.max.age.ms", "1000");
        }
        // SIGTERM runs shutdown hooks, then halts: the hook asks the loop to stop and waits
        // until the consumer is closed (LeaveGroup sent), bounded so a stuck close cannot hang.
        AtomicBoolean stopping = new AtomicBoolean(false);
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopping.set(true);
            try {
                closed.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            EventListener listener = new EventListener(consumer, events);
            if (pattern.isPresent()) {
                consumer.subscribe(Pattern.compile(pattern.get()), listener);
            } else if (subscriptionPattern.isPresent()) {
                consumer.subscribe(new SubscriptionPattern(subscriptionPattern.get()), listener);
            } else {
                consumer.subscribe(List.of(topic), listener);
            }
            int printed = 0;
            long lastRecordAt = 0;
            while (printed < count && !stopping.get()) {
                long now = System.nanoTime();
                long remainingMs = (deadline - now) / 1_000_000;
                if (remainingMs <= 0) {
                    break;
                }
                if (idleMs > 0 && printed > 0 && (now - lastRecordAt) / 1_000_000 >= idleMs) {
                    break;
                }
                Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(Math.min(remainingMs, 200)))) {
                    if (printed >= count) {
                        // Not printed, so not committed: the next member of the group gets it.
                        continue;
                    }
                    var line = Json.object()
                            .put("partition", record.partition())
                            .put("offset", record.offset())
                            .put("key", text(record.key()))
                            .put("value", text(record.value()));
                    if (byPattern) {
                        line.put("topic", record.topic());
                    }
                    Json.println(line);
                    commit.put(new TopicPartition(record.topic(), record.partition()),
                            new OffsetAndMetadata(record.offset() + 1));
                    printed++;
                    lastRecordAt = System.nanoTime();
                }
                if (!commit.isEmpty()) {
                    if (commitDelayMs > 0) {
                        Thread.sleep(commitDelayMs);
                    }
                    try {
                        consumer.commitSync(commit);
                    } catch (KafkaException e) {
                        // CommitFailedException, RebalanceInProgressException, ...: the group
                        // moved on; the records come again to their next owner.
                        if (!events) {
                            throw e;
                        }
                        System.err.println("commit: " + e);
                        Json.println(Json.object().put("event", "commit-failed")
                                .put("error", e.getClass().getSimpleName() + ": " + e.getMessage()));
                    }
                }
            }
            var assigned = Json.array();
            TreeSet<Integer> partitions = new TreeSet<>();
            for (TopicPartition tp : consumer.assignment()) {
                partitions.add(tp.partition());
            }
            partitions.forEach(assigned::add);
            ConsumerGroupMetadata meta = consumer.groupMetadata();
            var last = Json.object();
            last.set("assigned", assigned);
            last.put("generation", meta.generationId()).put("member_id", meta.memberId());
            Json.println(last);
        } finally {
            closed.countDown();
        }
        return 0;
    }

    /** Prints assignment changes (--events) with the generation the consumer holds then. */
    private static final class EventListener implements ConsumerRebalanceListener {
        private final KafkaConsumer<byte[], byte[]> consumer;
        private final boolean events;

        EventListener(KafkaConsumer<byte[], byte[]> consumer, boolean events) {
            this.consumer = consumer;
            this.events = events;
        }

        private void print(String kind, Collection<TopicPartition> partitions) {
            if (!events) {
                return;
            }
            var list = Json.array();
            partitions.stream().map(TopicPartition::partition).sorted().forEach(list::add);
            var doc = Json.object().put("event", kind);
            doc.set("partitions", list);
            var named = Json.array();
            partitions.stream().map(tp -> tp.topic() + ":" + tp.partition()).sorted().forEach(named::add);
            doc.set("topic_partitions", named);
            doc.put("generation", consumer.groupMetadata().generationId());
            try {
                Json.println(doc);
            } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
                throw new IllegalStateException(e);
            }
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            print("assigned", partitions);
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            print("revoked", partitions);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            print("lost", partitions);
        }
    }

    private static String assignor(String name) throws Args.UsageException {
        switch (name) {
            case "range":
                return RangeAssignor.class.getName();
            case "cooperative-sticky":
                return CooperativeStickyAssignor.class.getName();
            default:
                throw new Args.UsageException("--assignor expects range|cooperative-sticky, got '" + name + "'");
        }
    }

    private static String text(byte[] bytes) {
        return bytes == null ? null : new String(bytes, StandardCharsets.UTF_8);
    }
}
