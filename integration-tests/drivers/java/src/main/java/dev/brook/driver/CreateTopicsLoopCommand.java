/*
 * `create-topics-loop`: one AdminClient creates topics one after another, as fast as the
 * cluster lets it (plus --interval-ms between attempts), until --max-count attempts,
 * --duration-ms, or SIGTERM. The controller-failover test (scripts/controller-failover.py) kills
 * the metadata quorum's leader meanwhile and measures the time from the kill to the first
 * creation that succeeds again.
 *
 *   create-topics-loop --bootstrap B --prefix P [--partitions 1] [--replication-factor 1]
 *                      [--interval-ms 100] [--timeout-ms 15000] [--max-count N] [--duration-ms D]
 *
 * Prints one JSON line per attempt, in order, as soon as it ends:
 *   {"topic":"P-000001","start_ms":..,"end_ms":..,"ok":true}                  created
 *   {"topic":..,"start_ms":..,"end_ms":..,"ok":true,"exists":true}            an internal retry found
 *                                                                             its own first try done
 *   {"topic":..,"start_ms":..,"end_ms":..,"ok":false,"error":"TimeoutException","message":".."}
 * Times are wall-clock epoch milliseconds (the test's clock). A failed attempt is not retried
 * under the same name: the next attempt takes the next name. Exit 0 at the end of the loop.
 */
package dev.brook.driver;

import java.util.List;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.errors.TopicExistsException;

final class CreateTopicsLoopCommand {
    private CreateTopicsLoopCommand() {}

    static int run(Properties base, Args args) throws Exception {
        String prefix = args.required("prefix");
        int partitions = args.intValue("partitions", 1);
        short replicationFactor = (short) args.intValue("replication-factor", 1);
        int intervalMs = args.intValue("interval-ms", 100);
        int timeoutMs = args.intValue("timeout-ms", 15000);
        int maxCount = args.intValue("max-count", Integer.MAX_VALUE);
        long durationMs = args.intValue("duration-ms", Integer.MAX_VALUE);
        Properties props = new Properties();
        props.putAll(base);
        // A connection to a killed node must not hold a call for the default 30 s.
        props.put("request.timeout.ms", Integer.toString(Math.min(timeoutMs, 5000)));
        props.put("default.api.timeout.ms", Integer.toString(timeoutMs));
        props.put("reconnect.backoff.max.ms", "500");
        props.put("retry.backoff.max.ms", "500");
        long end = System.currentTimeMillis() + durationMs;
        try (Admin admin = Admin.create(props)) {
            for (int i = 1; i <= maxCount && System.currentTimeMillis() < end; i++) {
                String topic = String.format("%s-%06d", prefix, i);
                NewTopic newTopic = new NewTopic(topic, Optional.of(partitions), Optional.of(replicationFactor));
                long start = System.currentTimeMillis();
                var line = Json.object().put("topic", topic).put("start_ms", start);
                try {
                    admin.createTopics(List.of(newTopic), new CreateTopicsOptions().timeoutMs(timeoutMs)).all().get();
                    line.put("end_ms", System.currentTimeMillis()).put("ok", true);
                } catch (ExecutionException e) {
                    Throwable cause = e.getCause() == null ? e : e.getCause();
                    line.put("end_ms", System.currentTimeMillis());
                    if (cause instanceof TopicExistsException) {
                        line.put("ok", true).put("exists", true);
                    } else {
                        line.put("ok", false).put("error", cause.getClass().getSimpleName())
                                .put("message", String.valueOf(cause.getMessage()));
                    }
                }
                Json.println(line);
                if (intervalMs > 0) {
                    Thread.sleep(intervalMs);
                }
            }
        }
        return 0;
    }
}
