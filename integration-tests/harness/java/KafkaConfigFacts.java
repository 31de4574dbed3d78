/*
 * Facts about Kafka's configuration, read at test time from the Kafka 4.4 jars in
 * .cache/kafka/libs (run as a single-file program: java -cp "<libs>/*" KafkaConfigFacts.java),
 * so that no test carries a hand-copied list of Kafka's config names.
 *
 *   defs                          the topic (LogConfig) and broker (AbstractKafkaConfig.CONFIG_DEF)
 *                                 keys: {"topic"|"broker": {name: {type, default, internal, mode}}};
 *                                 default is ConfigDef.convertToString of Kafka's default (null for
 *                                 none); mode is DynamicBrokerConfig's update mode (brokers only)
 *   describe BOOTSTRAP TYPE NAME  DescribeConfigs through the Java AdminClient (TYPE topic|broker):
 *                                 {name: {value, source, read_only, sensitive, type}}
 */
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.server.config.AbstractKafkaConfig;
import org.apache.kafka.server.config.DynamicBrokerConfig;
import org.apache.kafka.storage.internals.log.LogConfig;

public class KafkaConfigFacts {
    private static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        ObjectNode out = JSON.createObjectNode();
        if (args.length == 1 && args[0].equals("defs")) {
            keys(out.putObject("topic"), LogConfig.configKeys(), null);
            keys(out.putObject("broker"), AbstractKafkaConfig.CONFIG_DEF.configKeys(),
                    DynamicBrokerConfig.dynamicConfigUpdateModes());
        } else if (args.length == 4 && args[0].equals("describe")) {
            describe(out, args[1], args[2], args[3]);
        } else {
            System.err.println("usage: defs | describe BOOTSTRAP topic|broker NAME");
            System.exit(2);
        }
        System.out.println(JSON.writeValueAsString(out));
    }

    private static void keys(ObjectNode out, Map<String, ConfigDef.ConfigKey> keys, Map<String, String> modes) {
        for (ConfigDef.ConfigKey key : new TreeMap<>(keys).values()) {
            ObjectNode entry = out.putObject(key.name);
            entry.put("type", key.type.name());
            boolean none = key.defaultValue == null || key.defaultValue == ConfigDef.NO_DEFAULT_VALUE;
            entry.put("default", none ? null : ConfigDef.convertToString(key.defaultValue, key.type));
            entry.put("internal", key.internalConfig);
            if (modes != null) {
                entry.put("mode", modes.getOrDefault(key.name, "read-only"));
            }
        }
    }

    private static void describe(ObjectNode out, String bootstrap, String type, String name) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        ConfigResource resource = new ConfigResource(
                type.equals("topic") ? ConfigResource.Type.TOPIC : ConfigResource.Type.BROKER, name);
        try (Admin admin = Admin.create(props)) {
            Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
            for (ConfigEntry e : config.entries()) {
                ObjectNode entry = out.putObject(e.name());
                entry.put("value", e.value());
                entry.put("source", e.source().name());
                entry.put("read_only", e.isReadOnly());
                entry.put("sensitive", e.isSensitive());
                entry.put("type", e.type().name());
            }
        }
    }
}
