/*
 * The driver's admin commands, each one AdminClient call (or two) whose result is printed as
 * one JSON document: metadata, create-topic, delete-topic, create-partitions, describe-topic,
 * list-topics, describe-configs, alter-configs (incremental, KIP-339) and offsets (ListOffsets,
 * including max-timestamp from KIP-734). Every call waits for its future, so a broker error
 * surfaces as an ExecutionException and the driver exits 1. Output keys are sorted (topics,
 * configs) or in partition order so that runs are comparable.
 */
package dev.brook.driver;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;

final class AdminCommands {
    private AdminCommands() {}

    static int run(Properties base, Args args) throws Exception {
        try (Admin admin = Admin.create(base)) {
            ObjectNode out;
            switch (args.command) {
                case "metadata":
                    out = metadata(admin);
                    break;
                case "create-topic":
                    out = createTopic(admin, args);
                    break;
                case "delete-topic":
                    // --topic-id deletes by id (DeleteTopics v6+), as Kafka's tools can.
                    Optional<String> topicId = args.get("topic-id");
                    if (topicId.isPresent()) {
                        admin.deleteTopics(TopicCollection.ofTopicIds(List.of(Uuid.fromString(topicId.get()))))
                                .all().get();
                    } else {
                        admin.deleteTopics(List.of(args.required("topic"))).all().get();
                    }
                    out = Json.ok();
                    break;
                case "create-partitions":
                    admin.createPartitions(Map.of(args.required("topic"),
                            NewPartitions.increaseTo(args.requiredInt("total")))).all().get();
                    out = Json.ok();
                    break;
                case "describe-topic":
                    out = describeTopic(admin, args.required("topic"));
                    break;
                case "list-topics":
                    out = listTopics(admin);
                    break;
                case "describe-configs":
                    out = describeConfigs(admin, args);
                    break;
                case "alter-configs":
                    out = alterConfigs(admin, args);
                    break;
                case "offsets":
                    out = offsets(admin, args);
                    break;
                default:
                    throw new Args.UsageException("not an admin command: " + args.command);
            }
            Json.println(out);
            return 0;
        }
    }

    private static ObjectNode metadata(Admin admin) throws Exception {
        DescribeClusterResult cluster = admin.describeCluster();
        ObjectNode out = Json.object();
        ArrayNode brokers = out.putArray("brokers");
        List<Node> nodes = new ArrayList<>(cluster.nodes().get());
        nodes.sort(Comparator.comparingInt(Node::id));
        for (Node node : nodes) {
            brokers.addObject().put("id", node.id()).put("host", node.host()).put("port", node.port());
        }
        Node controller = cluster.controller().get();
        out.put("controller_id", controller == null ? -1 : controller.id());
        ObjectNode topics = out.putObject("topics");
        Set<String> names = new TreeSet<>(admin.listTopics().names().get());
        if (!names.isEmpty()) {
            Map<String, TopicDescription> described = admin.describeTopics(names).allTopicNames().get();
            for (String name : names) {
                TopicDescription description = described.get(name);
                if (description != null) {
                    topics.putObject(name).put("partitions", description.partitions().size());
                }
            }
        }
        return out;
    }

    private static ObjectNode createTopic(Admin admin, Args args) throws Exception {
        Map<String, String> configs = new HashMap<>();
        for (String raw : args.all("config")) {
            Map.Entry<String, String> kv = Args.keyValue("config", raw);
            configs.put(kv.getKey(), kv.getValue());
        }
        NewTopic topic = new NewTopic(args.required("topic"), Optional.of(args.requiredInt("partitions")),
                Optional.of((short) args.intValue("replication-factor", 1)));
        topic.configs(configs);
        admin.createTopics(List.of(topic)).all().get();
        return Json.ok();
    }

    private static ObjectNode describeTopic(Admin admin, String name) throws Exception {
        TopicDescription description = admin.describeTopics(List.of(name)).allTopicNames().get().get(name);
        if (description == null) {
            throw new IllegalStateException("no description returned for topic " + name);
        }
        ObjectNode out = Json.object().put("name", description.name());
        out.put("topic_id", description.topicId() == null ? null : description.topicId().toString());
        ArrayNode partitions = out.putArray("partitions");
        List<TopicPartitionInfo> infos = new ArrayList<>(description.partitions());
        infos.sort(Comparator.comparingInt(TopicPartitionInfo::partition));
        for (TopicPartitionInfo info : infos) {
            ObjectNode p = partitions.addObject().put("partition", info.partition());
            p.put("leader", info.leader() == null ? -1 : info.leader().id());
            nodeIds(p.putArray("replicas"), info.replicas());
            nodeIds(p.putArray("isr"), info.isr());
        }
        return out;
    }

    private static void nodeIds(ArrayNode into, Collection<Node> nodes) {
        for (Node node : nodes) {
            into.add(node.id());
        }
    }

    private static ObjectNode listTopics(Admin admin) throws Exception {
        // ListTopicsOptions defaults to listInternal=false: __consumer_offsets etc. are left out.
        ObjectNode out = Json.object();
        ArrayNode topics = out.putArray("topics");
        new TreeSet<>(admin.listTopics().names().get()).forEach(topics::add);
        return out;
    }

    private static ConfigResource resource(Args args) throws Args.UsageException {
        Optional<String> topic = args.get("topic");
        if (topic.isPresent()) {
            return new ConfigResource(ConfigResource.Type.TOPIC, topic.get());
        }
        return new ConfigResource(ConfigResource.Type.BROKER, args.required("broker"));
    }

    private static ObjectNode describeConfigs(Admin admin, Args args) throws Exception {
        ConfigResource resource = resource(args);
        Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
        if (config == null) {
            throw new IllegalStateException("no configs returned for " + resource);
        }
        Map<String, ConfigEntry> sorted = new TreeMap<>();
        for (ConfigEntry entry : config.entries()) {
            sorted.put(entry.name(), entry);
        }
        ObjectNode out = Json.object();
        ObjectNode configs = out.putObject("configs");
        for (ConfigEntry entry : sorted.values()) {
            configs.putObject(entry.name())
                    .put("value", entry.value())
                    .put("source", entry.source().name())
                    .put("read_only", entry.isReadOnly());
        }
        return out;
    }

    private static ObjectNode alterConfigs(Admin admin, Args args) throws Exception {
        List<AlterConfigOp> ops = new ArrayList<>();
        for (String raw : args.all("set")) {
            Map.Entry<String, String> kv = Args.keyValue("set", raw);
            ops.add(new AlterConfigOp(new ConfigEntry(kv.getKey(), kv.getValue()), AlterConfigOp.OpType.SET));
        }
        for (String key : args.all("delete")) {
            ops.add(new AlterConfigOp(new ConfigEntry(key, null), AlterConfigOp.OpType.DELETE));
        }
        ConfigResource resource = resource(args);
        admin.incrementalAlterConfigs(Map.of(resource, ops)).all().get();
        return Json.ok();
    }

    private static OffsetSpec offsetSpec(String spec) throws Args.UsageException {
        switch (spec) {
            case "earliest":
                return OffsetSpec.earliest();
            case "latest":
                return OffsetSpec.latest();
            case "max-timestamp":
                return OffsetSpec.maxTimestamp();
            default:
                try {
                    return OffsetSpec.forTimestamp(Long.parseLong(spec));
                } catch (NumberFormatException e) {
                    throw new Args.UsageException("--spec expects earliest|latest|max-timestamp|TIMESTAMP_MS");
                }
        }
    }

    private static ObjectNode offsets(Admin admin, Args args) throws Exception {
        String topic = args.required("topic");
        OffsetSpec spec = offsetSpec(args.required("spec"));
        TopicDescription description = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        if (description == null) {
            throw new IllegalStateException("no description returned for topic " + topic);
        }
        Map<TopicPartition, OffsetSpec> request = new HashMap<>();
        for (TopicPartitionInfo info : description.partitions()) {
            request.put(new TopicPartition(topic, info.partition()), spec);
        }
        Map<TopicPartition, ListOffsetsResultInfo> result = admin.listOffsets(request).all().get();
        Map<Integer, ListOffsetsResultInfo> byPartition = new TreeMap<>();
        result.forEach((tp, info) -> byPartition.put(tp.partition(), info));
        ObjectNode out = Json.object();
        byPartition.forEach((partition, info) -> out.putObject(Integer.toString(partition))
                .put("offset", info.offset())
                .put("timestamp", info.timestamp()));
        return out;
    }
}
