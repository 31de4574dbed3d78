/*
 * The benchmark's own Java-client driver, for the two figures Kafka's perf tools do not give, and
 * the ACL set-up of bench/tls.py.
 *
 *   java -cp bench/.build:.cache/kafka/libs/* BenchDriver e2e BOOTSTRAP TOPIC RATE WARMUP_S DURATION_S ACKS SIZE [CLIENT_CONFIG]
 *   java -cp ... BenchDriver scale BOOTSTRAP PREFIX TOPICS PARTITIONS RATE DURATION_S SIZE
 *
 * CLIENT_CONFIG: a properties file of client settings (security: SASL_SSL for bench/tls.py) that
 * both the producer and the consumer take on top of their own.
 *
 * e2e: one producer sends SIZE-byte values at RATE msg/s (client defaults apart from acks) to
 * every partition of TOPIC; a consumer in the same JVM (System.nanoTime is only comparable within
 * one JVM) assigned to all of them, with its default fetch.min.bytes and fetch.max.wait.ms (it
 * long-polls, as users' consumers do), measures receive - send per record. A value carries its
 * *scheduled* send time, so a producer that falls behind its schedule is charged for it (no
 * coordinated omission). Only records scheduled after the warm-up are counted; after DURATION_S
 * the consumer drains for at most DRAIN_S. The producer callback gives the ack latency (also
 * from the scheduled time). receive_rate_msg_per_s is the measured records received over the
 * time from the first to the last of them being received: at a steady latency that is RATE, a
 * broker falling behind stretches it (its backlog arrives late), and one still draining a
 * warm-up backlog shortens it (it then delivers faster than RATE for a while). An overloaded
 * run still prints its figures (with what was not received), so a caller can chart it.
 *
 * scale: creates TOPICS topics x PARTITIONS partitions with the Admin client (timed: create_s), then
 * sends one record to every partition and waits for the acks (writable_s, from the same start),
 * prints {"phase":"producing"}, then sends SIZE-byte values round robin over every
 * partition at RATE msg/s for DURATION_S and reports throughput and ack latency.
 *
 * acls: ACL set-up for `make bench-tls` (bench/tls.py), through the Admin client of the bootstrap's
 * PLAINTEXT listener (a super user there), in batches of ACL_BATCH bindings per CreateAcls (one
 * request per binding, as kafka-acls sends them, costs a controller commit each: minutes for
 * 10,000 on Kafka). Then it waits until DescribeAcls lists them all: Kafka's authorizer learns
 * new ACLs from its metadata log a moment after CreateAcls answers, and a measurement must not
 * start before they are in force.
 *   acls BOOTSTRAP grant PRINCIPAL TOPIC_PREFIX GROUP_PREFIX   what a producer and a consumer need:
 *       WRITE, READ, DESCRIBE on topics starting TOPIC_PREFIX, READ on groups starting GROUP_PREFIX,
 *       IDEMPOTENT_WRITE on the cluster (prefixed patterns, as kafka-acls --producer --consumer)
 *   acls BOOTSTRAP unrelated COUNT NAME                     COUNT ACLs that match nothing the bench
 *       uses: half LITERAL, half PREFIXED topic patterns (NAME-lit-00042, NAME-pre-00043-), for
 *       100 principals (User:NAME-user-NN), ALLOW READ / WRITE / DESCRIBE in turn
 *   acls BOOTSTRAP remove NAME                              deletes those again (one filter per
 *       principal, one DeleteAcls) and waits until DescribeAcls lists none of them
 *
 * Output: the last stdout line is one JSON object of figures (milliseconds, messages/s).
 * Invariants: every loop is bounded by a deadline; the JVM exits when done (exit 1 on error).
 */

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class BenchDriver {
    static final long DRAIN_S = 15;
    static final long METADATA_WAIT_S = 60;
    static final long CLOSE_S = 5;

    public static void main(String[] args) throws Exception {
        if ((args.length == 8 || args.length == 9) && args[0].equals("e2e")) {
            if (args.length == 9) {
                loadClientConfig(args[8]);
            }
            e2e(args[1], args[2], Double.parseDouble(args[3]), Double.parseDouble(args[4]),
                    Double.parseDouble(args[5]), args[6], Integer.parseInt(args[7]));
        } else if (args.length == 8 && args[0].equals("scale")) {
            scale(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]),
                    Double.parseDouble(args[5]), Double.parseDouble(args[6]), Integer.parseInt(args[7]));
        } else if (args.length == 5 && args[0].equals("acls") && args[2].equals("unrelated")) {
            createAcls(args[1], unrelatedAcls(Integer.parseInt(args[3]), args[4]));
        } else if (args.length == 4 && args[0].equals("acls") && args[2].equals("remove")) {
            removeAcls(args[1], args[3]);
        } else if (args.length == 6 && args[0].equals("acls") && args[2].equals("grant")) {
            createAcls(args[1], grantAcls(args[3], args[4], args[5]));
        } else {
            System.err.println("usage: BenchDriver e2e BOOTSTRAP TOPIC RATE WARMUP_S DURATION_S ACKS SIZE [CLIENT_CONFIG]\n"
                    + "       BenchDriver scale BOOTSTRAP PREFIX TOPICS PARTITIONS RATE DURATION_S SIZE\n"
                    + "       BenchDriver acls BOOTSTRAP unrelated COUNT NAME\n"
                    + "       BenchDriver acls BOOTSTRAP remove NAME\n"
                    + "       BenchDriver acls BOOTSTRAP grant PRINCIPAL TOPIC_PREFIX GROUP_PREFIX");
            System.exit(2);
        }
        System.exit(0);
    }

    /** A growable array of latencies in nanoseconds, shared by a callback thread and main. */
    static final class Samples {
        private long[] v = new long[1 << 16];
        private int n;

        synchronized void add(long nanos) {
            if (n == v.length) {
                v = Arrays.copyOf(v, n * 2);
            }
            v[n++] = nanos;
        }

        synchronized long[] sorted() {
            long[] out = Arrays.copyOf(v, n);
            Arrays.sort(out);
            return out;
        }
    }

    static String percentiles(String prefix, long[] sorted) {
        if (sorted.length == 0) {
            return String.format(Locale.ROOT, "\"%s_p50_ms\":null,\"%s_p99_ms\":null,\"%s_p999_ms\":null,\"%s_max_ms\":null",
                    prefix, prefix, prefix, prefix);
        }
        return String.format(Locale.ROOT, "\"%s_p50_ms\":%.3f,\"%s_p99_ms\":%.3f,\"%s_p999_ms\":%.3f,\"%s_max_ms\":%.3f",
                prefix, ms(at(sorted, 0.50)), prefix, ms(at(sorted, 0.99)), prefix, ms(at(sorted, 0.999)),
                prefix, ms(sorted[sorted.length - 1]));
    }

    /** Nearest-rank percentile. */
    static long at(long[] sorted, double q) {
        int i = (int) Math.ceil(q * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, i))];
    }

    static double ms(long nanos) {
        return nanos / 1e6;
    }

    /** Settings from e2e's CLIENT_CONFIG file, given to its producer and consumer. */
    static final Properties CLIENT_CONFIG = new Properties();

    static void loadClientConfig(String path) throws java.io.IOException {
        try (java.io.Reader r = java.nio.file.Files.newBufferedReader(java.nio.file.Path.of(path))) {
            CLIENT_CONFIG.load(r);
        }
    }

    static Properties producerProps(String bootstrap, String acks) {
        Properties p = new Properties();
        p.putAll(CLIENT_CONFIG);
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", acks);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        return p;
    }

    static List<TopicPartition> partitionsOf(KafkaProducer<byte[], byte[]> producer, String topic) {
        List<TopicPartition> out = new ArrayList<>();
        for (PartitionInfo p : producer.partitionsFor(topic)) {
            out.add(new TopicPartition(topic, p.partition()));
        }
        out.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
        return out;
    }

    /**
     * Paces sends to RATE msg/s from t0: record i is due at t0 + i/RATE. Sleeping per record would
     * cost a wake-up per 50-100 us, so the loop sends every record already due, then parks.
     */
    interface Sender {
        void send(long seq, long scheduledNanos);
    }

    static long paced(double rate, long t0, long endNanos, Sender sender) {
        double intervalNanos = 1e9 / rate;
        long seq = 0;
        while (true) {
            long due = t0 + (long) (seq * intervalNanos);
            if (due >= endNanos) {
                return seq;
            }
            long now = System.nanoTime();
            if (due > now) {
                LockSupport.parkNanos(due - now);
                continue;
            }
            sender.send(seq++, due);
        }
    }

    static void e2e(String bootstrap, String topic, double rate, double warmupS, double durationS, String acks,
                    int size) throws Exception {
        Properties cp = new Properties();
        cp.putAll(CLIENT_CONFIG);
        cp.put("bootstrap.servers", bootstrap);
        cp.put("key.deserializer", ByteArrayDeserializer.class.getName());
        cp.put("value.deserializer", ByteArrayDeserializer.class.getName());
        cp.put("enable.auto.commit", "false");
        Samples e2e = new Samples();
        Samples ack = new Samples();
        AtomicLong errors = new AtomicLong();
        AtomicLong acked = new AtomicLong();
        // Closed explicitly with a timeout below: close() without one waits for every queued send,
        // which after an overloaded run can outlast the caller's deadline and lose the figures.
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(bootstrap, acks));
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
            List<TopicPartition> parts = partitionsOf(producer, topic);
            consumer.assign(parts);
            consumer.seekToBeginning(parts);
            for (TopicPartition tp : parts) {
                consumer.position(tp); // resolve positions before the clock starts
            }
            long t0 = System.nanoTime() + 100_000_000L;
            long measureFrom = t0 + (long) (warmupS * 1e9);
            long end = measureFrom + (long) (durationS * 1e9);
            AtomicLong sentTotal = new AtomicLong();
            AtomicLong measuredSent = new AtomicLong();
            Thread producerThread = new Thread(() -> {
                paced(rate, t0, end, (seq, scheduled) -> {
                    byte[] value = new byte[size];
                    ByteBuffer.wrap(value).putLong(scheduled).putLong(seq);
                    boolean measured = scheduled >= measureFrom;
                    if (measured) {
                        measuredSent.incrementAndGet();
                    }
                    sentTotal.incrementAndGet();
                    producer.send(new ProducerRecord<>(topic, null, value), (md, e) -> {
                        if (e != null) {
                            errors.incrementAndGet();
                        } else {
                            acked.incrementAndGet();
                            if (measured) {
                                ack.add(System.nanoTime() - scheduled);
                            }
                        }
                    });
                });
                producer.flush();
            }, "paced-producer");
            producerThread.start();
            long drainDeadline = end + DRAIN_S * 1_000_000_000L;
            long received = 0;
            long firstReceive = 0;
            long lastReceive = 0;
            while (System.nanoTime() < drainDeadline) {
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(100));
                long now = System.nanoTime();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    ByteBuffer b = ByteBuffer.wrap(r.value());
                    long scheduled = b.getLong();
                    if (scheduled >= measureFrom && scheduled < end) {
                        e2e.add(now - scheduled);
                        if (received++ == 0) {
                            firstReceive = now;
                        }
                        lastReceive = now;
                    }
                }
                if (now > end && !producerThread.isAlive() && received >= measuredSent.get()) {
                    break;
                }
            }
            producerThread.join(TimeUnit.SECONDS.toMillis(DRAIN_S));
            double windowS = (lastReceive - firstReceive) / 1e9;
            String receiveRate = received > 1 && windowS > 0
                    ? String.format(Locale.ROOT, "%.1f", (received - 1) / windowS) : "null";
            System.out.println(String.format(Locale.ROOT,
                    "{\"rate\":%.1f,\"warmup_s\":%.1f,\"duration_s\":%.1f,\"acks\":\"%s\",\"record_size\":%d,"
                    + "\"partitions\":%d,\"sent\":%d,\"acked\":%d,\"errors\":%d,\"measured_sent\":%d,"
                    + "\"measured_received\":%d,\"receive_window_s\":%.3f,\"receive_rate_msg_per_s\":%s,%s,%s}",
                    rate, warmupS, durationS, acks, size, parts.size(), sentTotal.get(), acked.get(), errors.get(),
                    measuredSent.get(), received, windowS, receiveRate, percentiles("e2e", e2e.sorted()),
                    percentiles("ack", ack.sorted())));
            System.out.flush();
        } finally {
            producer.close(Duration.ofSeconds(CLOSE_S));
        }
    }

    static void scale(String bootstrap, String prefix, int topics, int partitions, double rate, double durationS,
                      int size) throws Exception {
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        List<String> names = new ArrayList<>();
        for (int i = 0; i < topics; i++) {
            names.add(String.format(Locale.ROOT, "%s-%03d", prefix, i));
        }
        long c0 = System.nanoTime();
        try (Admin admin = Admin.create(ap)) {
            List<NewTopic> news = new ArrayList<>();
            for (String n : names) {
                news.add(new NewTopic(n, partitions, (short) 1));
            }
            admin.createTopics(news).all().get(METADATA_WAIT_S, TimeUnit.SECONDS);
        }
        double createS = (System.nanoTime() - c0) / 1e9;
        Samples ack = new Samples();
        AtomicLong errors = new AtomicLong();
        AtomicLong acked = new AtomicLong();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(bootstrap, "1"))) {
            List<TopicPartition> all = new ArrayList<>();
            long deadline = System.nanoTime() + METADATA_WAIT_S * 1_000_000_000L;
            for (String n : names) {
                // partitionsFor blocks up to max.block.ms for a topic the client has not seen yet.
                List<TopicPartition> ps = partitionsOf(producer, n);
                while (ps.size() < partitions && System.nanoTime() < deadline) {
                    Thread.sleep(100);
                    ps = partitionsOf(producer, n);
                }
                all.addAll(ps);
            }
            // CreateTopics returns once the controller committed the topics; Kafka then creates
            // the partition logs in the background (fsyncing a checkpoint per partition). One
            // acked record per partition marks "all 1,000 writable", so the timed window below
            // measures steady state, and writable_s reports how long creation really took.
            for (TopicPartition tp : all) {
                producer.send(new ProducerRecord<>(tp.topic(), tp.partition(), null, new byte[size]), (md, e) -> {
                    if (e != null) {
                        errors.incrementAndGet();
                    }
                });
            }
            producer.flush();
            double writableS = (System.nanoTime() - c0) / 1e9;
            if (errors.get() > 0) {
                throw new IllegalStateException(errors.get() + " partitions did not accept their first record");
            }
            System.out.println("{\"phase\":\"producing\"}");
            System.out.flush();
            byte[] value = new byte[size];
            long t0 = System.nanoTime();
            long end = t0 + (long) (durationS * 1e9);
            long sent = paced(rate, t0, end, (seq, scheduled) -> {
                TopicPartition tp = all.get((int) (seq % all.size()));
                producer.send(new ProducerRecord<>(tp.topic(), tp.partition(), null, value), (md, e) -> {
                    if (e != null) {
                        errors.incrementAndGet();
                    } else {
                        acked.incrementAndGet();
                        ack.add(System.nanoTime() - scheduled);
                    }
                });
            });
            producer.flush();
            double elapsedS = (System.nanoTime() - t0) / 1e9;
            System.out.println(String.format(Locale.ROOT,
                    "{\"topics\":%d,\"partitions_per_topic\":%d,\"partitions_total\":%d,\"create_s\":%.3f,\"writable_s\":%.3f,"
                    + "\"rate\":%.1f,\"duration_s\":%.1f,\"record_size\":%d,\"sent\":%d,\"acked\":%d,\"errors\":%d,"
                    + "\"achieved_msg_per_s\":%.1f,%s}",
                    topics, partitions, all.size(), createS, writableS, rate, durationS, size, sent, acked.get(), errors.get(),
                    acked.get() / elapsedS, percentiles("ack", ack.sorted())));
        }
    }

    static final int ACL_BATCH = 500;
    static final long ACL_WAIT_S = 120;

    static AclBinding allow(ResourceType type, String name, PatternType pattern, String principal, AclOperation op) {
        return new AclBinding(new ResourcePattern(type, name, pattern),
                new AccessControlEntry(principal, "*", op, AclPermissionType.ALLOW));
    }

    static List<AclBinding> grantAcls(String principal, String topicPrefix, String groupPrefix) {
        List<AclBinding> acls = new ArrayList<>();
        for (AclOperation op : new AclOperation[] {AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE}) {
            acls.add(allow(ResourceType.TOPIC, topicPrefix, PatternType.PREFIXED, principal, op));
        }
        acls.add(allow(ResourceType.GROUP, groupPrefix, PatternType.PREFIXED, principal, AclOperation.READ));
        acls.add(allow(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, principal, AclOperation.IDEMPOTENT_WRITE));
        return acls;
    }

    static String unrelatedPrincipal(String name, int i) {
        return String.format(Locale.ROOT, "User:%s-user-%02d", name, i % 100);
    }

    static List<AclBinding> unrelatedAcls(int count, String name) {
        AclOperation[] ops = {AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE};
        List<AclBinding> acls = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            String principal = unrelatedPrincipal(name, i);
            boolean literal = i % 2 == 0;
            String resource = String.format(Locale.ROOT, literal ? "%s-lit-%05d" : "%s-pre-%05d-", name, i);
            acls.add(allow(ResourceType.TOPIC, resource, literal ? PatternType.LITERAL : PatternType.PREFIXED,
                    principal, ops[i % ops.length]));
        }
        return acls;
    }

    /** Creates `acls` in batches, then waits until DescribeAcls lists every one of them. */
    static void createAcls(String bootstrap, List<AclBinding> acls) throws Exception {
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        long t0 = System.nanoTime();
        try (Admin admin = Admin.create(ap)) {
            for (int i = 0; i < acls.size(); i += ACL_BATCH) {
                admin.createAcls(acls.subList(i, Math.min(acls.size(), i + ACL_BATCH))).all()
                        .get(METADATA_WAIT_S, TimeUnit.SECONDS);
            }
            double createS = (System.nanoTime() - t0) / 1e9;
            java.util.Set<AclBinding> wanted = new java.util.HashSet<>(acls);
            long deadline = System.nanoTime() + ACL_WAIT_S * 1_000_000_000L;
            int listed = 0;
            while (true) {
                java.util.Collection<AclBinding> now = admin.describeAcls(AclBindingFilter.ANY).values()
                        .get(METADATA_WAIT_S, TimeUnit.SECONDS);
                listed = now.size();
                java.util.Set<AclBinding> missing = new java.util.HashSet<>(wanted);
                missing.removeAll(now);
                if (missing.isEmpty()) {
                    break;
                }
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException(missing.size() + " of " + wanted.size()
                            + " ACLs still not listed after " + ACL_WAIT_S + " s");
                }
                Thread.sleep(200);
            }
            System.out.println(String.format(Locale.ROOT,
                    "{\"created\":%d,\"create_s\":%.3f,\"listed_s\":%.3f,\"listed_total\":%d}",
                    acls.size(), createS, (System.nanoTime() - t0) / 1e9, listed));
        }
    }

    /** Deletes every ACL of the `unrelated` principals of NAME, then waits until none is listed. */
    static void removeAcls(String bootstrap, String name) throws Exception {
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        java.util.Set<String> principals = new java.util.HashSet<>();
        List<AclBindingFilter> filters = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            principals.add(unrelatedPrincipal(name, i));
            filters.add(new AclBindingFilter(org.apache.kafka.common.resource.ResourcePatternFilter.ANY,
                    new org.apache.kafka.common.acl.AccessControlEntryFilter(unrelatedPrincipal(name, i), null,
                            AclOperation.ANY, AclPermissionType.ANY)));
        }
        long t0 = System.nanoTime();
        try (Admin admin = Admin.create(ap)) {
            int deleted = admin.deleteAcls(filters).all().get(METADATA_WAIT_S, TimeUnit.SECONDS).size();
            long deadline = System.nanoTime() + ACL_WAIT_S * 1_000_000_000L;
            while (true) {
                long left = admin.describeAcls(AclBindingFilter.ANY).values().get(METADATA_WAIT_S, TimeUnit.SECONDS)
                        .stream().filter(b -> principals.contains(b.entry().principal())).count();
                if (left == 0) {
                    break;
                }
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException(left + " ACLs still listed after " + ACL_WAIT_S + " s");
                }
                Thread.sleep(200);
            }
            System.out.println(String.format(Locale.ROOT, "{\"deleted\":%d,\"removed_s\":%.3f}",
                    deleted, (System.nanoTime() - t0) / 1e9));
        }
    }
}
