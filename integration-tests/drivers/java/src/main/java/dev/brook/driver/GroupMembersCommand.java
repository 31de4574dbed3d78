/*
 * `group-members`: N KafkaConsumer instances in one JVM, each on its own thread, all subscribed
 * to --topic in --group; the rebalance benchmark (bench/rebalance.py) drives them, so a
 * 100-member group fits on a 2-core machine (one JVM, not 100).
 *
 *   group-members --bootstrap B --topic T --group G --members N
 *                 [--group-protocol classic|consumer] [--assignor cooperative-sticky|range]
 *                 [--remote-assignor uniform|range] [--heartbeat-interval-ms MS] [--late-ms 500]
 *
 * Members are numbered from 0 in start order. Client defaults otherwise (auto commit on,
 * auto.offset.reset latest). Classic: --assignor (default cooperative-sticky) and, when given,
 * the client's heartbeat.interval.ms; consumer (KIP-848): group.remote.assignor, the broker
 * sets the heartbeat interval. Commands on stdin, one per line:
 *   add [K]       start K more members (default 1)
 *   leave M       member M closes gracefully (its consumer's close(): a LeaveGroup or a
 *                 leave heartbeat)
 *   status        one "status" line per running member
 *   quit (or EOF) every member closes; then {"event":"done"} and exit
 * JSON lines on stdout, "t" in ms (3 decimals) since the command started, one monotonic clock
 * for every member:
 *   {"t","member","event":"start"}                     just before subscribe()
 *   {"t","member","event":"assigned"|"revoked"|"lost","partitions":[..]}   rebalance listener
 *                                                      (incremental: only what changed)
 *   {"t","member","event":"first-record","partition"}  the first record a poll returns for a
 *                                                      partition after it was assigned
 *   {"t","member","event":"late","partition","late_ms","since"}  a poll returned records of the
 *                                                      partition produced >= --late-ms earlier (its
 *                                                      oldest: now - CreateTime, wall clock of this
 *                                                      machine; "since": then, on the command's
 *                                                      clock): how long the partition went unread.
 *                                                      Lateness, not the gap between arrivals, so
 *                                                      a producer that stalls is not a pause
 *   {"t","member","event":"closing"} / {"t","member","event":"closed"}   around close()
 *   {"t","member","event":"status","owned":[..],"last_record":{"p":t}}
 *   {"t","member","event":"error","error","message"}   the member's thread failed
 * A partition's timestamps are taken when poll() returns its records; "last_record" is the latest
 * such time per owned partition.
 */
package dev.brook.driver;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

final class GroupMembersCommand {
    private static final long ORIGIN_NS = System.nanoTime();
    private static final long JOIN_TIMEOUT_MS = 60_000;

    private GroupMembersCommand() {}

    static int run(Properties base, Args args) throws Exception {
        String topic = args.required("topic");
        Properties props = consumerProps(base, args);
        long lateMs = args.intValue("late-ms", 500);
        Map<Integer, Member> members = new ConcurrentHashMap<>();
        List<Member> left = new ArrayList<>();
        int next = 0;
        for (int i = args.requiredInt("members"); i > 0; i--, next++) {
            members.put(next, Member.start(next, props, topic, lateMs));
        }
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = stdin.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            if (words[0].equals("quit")) {
                break;
            }
            switch (words[0]) {
                case "add":
                    for (int k = words.length > 1 ? Integer.parseInt(words[1]) : 1; k > 0; k--, next++) {
                        members.put(next, Member.start(next, props, topic, lateMs));
                    }
                    break;
                case "leave":
                    Member leaving = members.remove(Integer.parseInt(words[1]));
                    if (leaving != null) {
                        leaving.stopping = true;
                        left.add(leaving);
                    }
                    break;
                case "status":
                    for (Member m : members.values()) {
                        m.printStatus();
                    }
                    break;
                default:
                    System.err.println("group-members: unknown command '" + line + "'");
            }
        }
        // Close every member at once (each closes on its own thread), then wait for them all.
        List<Member> all = new ArrayList<>(members.values());
        all.forEach(m -> m.stopping = true);
        all.addAll(left);
        for (Member m : all) {
            m.thread.join(JOIN_TIMEOUT_MS);
        }
        Json.println(Json.object().put("t", now()).put("event", "done"));
        return 0;
    }

    private static Properties consumerProps(Properties base, Args args) throws Args.UsageException {
        Properties props = new Properties();
        props.putAll(base);
        props.put("group.id", args.required("group"));
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        String protocol = args.get("group-protocol").orElse("classic");
        switch (protocol) {
            case "consumer":
                props.put("group.protocol", "consumer");
                props.put("group.remote.assignor", args.get("remote-assignor").orElse("uniform"));
                break;
            case "classic":
                String assignor = args.get("assignor").orElse("cooperative-sticky");
                if (assignor.equals("cooperative-sticky")) {
                    props.put("partition.assignment.strategy", CooperativeStickyAssignor.class.getName());
                } else if (assignor.equals("range")) {
                    props.put("partition.assignment.strategy", RangeAssignor.class.getName());
                } else {
                    throw new Args.UsageException("--assignor expects cooperative-sticky|range, got '" + assignor + "'");
                }
                args.get("heartbeat-interval-ms").ifPresent(ms -> props.put("heartbeat.interval.ms", ms));
                break;
            default:
                throw new Args.UsageException("--group-protocol expects classic|consumer, got '" + protocol + "'");
        }
        return props;
    }

    /** Milliseconds since the command started, to the microsecond. */
    private static double now() {
        return ms(System.nanoTime());
    }

    private static double ms(long nanos) {
        return Math.round((nanos - ORIGIN_NS) / 1_000.0) / 1_000.0;
    }

    /** One consumer and the thread that owns it (a KafkaConsumer is single-threaded). */
    private static final class Member implements ConsumerRebalanceListener {
        final int id;
        final Thread thread;
        volatile boolean stopping;
        private final Properties props;
        private final String topic;
        private final long lateMs;
        // Written by the member's thread (poll and the listener it runs), read by `status`.
        private final Map<Integer, Long> lastRecordNs = new ConcurrentHashMap<>();
        private final Set<Integer> owned = ConcurrentHashMap.newKeySet();
        private final Set<Integer> awaitingFirst = new HashSet<>();

        private Member(int id, Properties props, String topic, long lateMs) {
            this.id = id;
            this.props = new Properties();
            this.props.putAll(props);
            this.props.put("client.id", "rebalance-member-" + id);
            this.topic = topic;
            this.lateMs = lateMs;
            this.thread = new Thread(this::run, "member-" + id);
        }

        static Member start(int id, Properties props, String topic, long lateMs) {
            Member m = new Member(id, props, topic, lateMs);
            m.thread.start();
            return m;
        }

        private void run() {
            try {
                try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
                    emit(Json.object().put("event", "start"));
                    consumer.subscribe(List.of(topic), this);
                    while (!stopping) {
                        ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                        long at = System.nanoTime();
                        long wall = System.currentTimeMillis();
                        for (TopicPartition tp : records.partitions()) {
                            long oldest = Long.MAX_VALUE;
                            for (var r : records.records(tp)) {
                                oldest = Math.min(oldest, r.timestamp());
                            }
                            received(tp.partition(), at, wall - oldest);
                        }
                    }
                    emit(Json.object().put("event", "closing"));
                }
                emit(Json.object().put("event", "closed"));
            } catch (Exception e) {
                emit(Json.object().put("event", "error").put("error", e.getClass().getSimpleName())
                        .put("message", String.valueOf(e.getMessage())));
            }
        }

        private void received(int partition, long at, long lateness) {
            if (awaitingFirst.remove(partition)) {
                emit(Json.object().put("event", "first-record").put("partition", partition));
            }
            lastRecordNs.put(partition, at);
            if (lateness >= lateMs) {
                emit(Json.object().put("event", "late").put("partition", partition)
                        .put("late_ms", lateness).put("since", ms(at) - lateness));
            }
        }

        void printStatus() {
            var owns = Json.array();
            new TreeSet<>(owned).forEach(owns::add);
            var last = Json.object();
            lastRecordNs.forEach((p, at) -> last.put(Integer.toString(p), ms(at)));
            var doc = Json.object().put("event", "status");
            doc.set("owned", owns);
            doc.set("last_record", last);
            emit(doc);
        }

        private void changed(String kind, Collection<TopicPartition> partitions) {
            var list = Json.array();
            partitions.stream().map(TopicPartition::partition).sorted().forEach(list::add);
            var doc = Json.object().put("event", kind);
            doc.set("partitions", list);
            emit(doc);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            for (TopicPartition tp : partitions) {
                owned.add(tp.partition());
                awaitingFirst.add(tp.partition());
                lastRecordNs.remove(tp.partition());
            }
            changed("assigned", partitions);
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            dropped(partitions);
            changed("revoked", partitions);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            dropped(partitions);
            changed("lost", partitions);
        }

        private void dropped(Collection<TopicPartition> partitions) {
            for (TopicPartition tp : partitions) {
                owned.remove(tp.partition());
                awaitingFirst.remove(tp.partition());
                lastRecordNs.remove(tp.partition());
            }
        }

        /** Prints one event line stamped with the time and this member's number. */
        private void emit(com.fasterxml.jackson.databind.node.ObjectNode doc) {
            var line = Json.object().put("t", now()).put("member", id);
            line.setAll(doc);
            try {
                Json.println(line);
            } catch (Exception e) {
                System.err.println("group-members: print: " + e);
            }
        }
    }
}
