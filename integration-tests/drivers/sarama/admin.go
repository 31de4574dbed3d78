// Admin commands on sarama's ClusterAdmin: create-topic (with configs),
// delete-topic, describe-topic, describe-configs. Each prints the protocol's
// document; a per-topic error is returned as the command's error.
package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/IBM/sarama"
)

// withAdmin runs fn with a ClusterAdmin built from the default config.
func withAdmin(bootstrap []string, fn func(adm sarama.ClusterAdmin) error) error {
	conf := newConfig()
	conf.Admin.Timeout = commandTimeout
	adm, err := sarama.NewClusterAdmin(bootstrap, conf)
	if err != nil {
		return err
	}
	defer adm.Close()
	return fn(adm)
}

func createTopicCmd(fs *flag.FlagSet) func([]string) error {
	topic := fs.String("topic", "", "topic name")
	partitions := fs.Int("partitions", 1, "partition count")
	rf := fs.Int("replication-factor", 1, "replication factor")
	var configs multiFlag
	fs.Var(&configs, "config", "k=v topic config (repeatable)")
	return func(bootstrap []string) error {
		if *topic == "" {
			return usageError{"--topic is required"}
		}
		entries := map[string]*string{}
		for _, kv := range configs {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return usageError{fmt.Sprintf("--config expects k=v, got %q", kv)}
			}
			entries[k] = &v
		}
		return withAdmin(bootstrap, func(adm sarama.ClusterAdmin) error {
			detail := &sarama.TopicDetail{
				NumPartitions:     int32(*partitions),
				ReplicationFactor: int16(*rf),
				ConfigEntries:     entries,
			}
			if err := adm.CreateTopic(*topic, detail, false); err != nil {
				return err
			}
			printJSON(map[string]any{"ok": true})
			return nil
		})
	}
}

func deleteTopicCmd(fs *flag.FlagSet) func([]string) error {
	topic := fs.String("topic", "", "topic name")
	return func(bootstrap []string) error {
		return withAdmin(bootstrap, func(adm sarama.ClusterAdmin) error {
			if err := adm.DeleteTopic(*topic); err != nil {
				return err
			}
			printJSON(map[string]any{"ok": true})
			return nil
		})
	}
}

func describeTopicCmd(fs *flag.FlagSet) func([]string) error {
	topic := fs.String("topic", "", "topic name")
	return func(bootstrap []string) error {
		return withAdmin(bootstrap, func(adm sarama.ClusterAdmin) error {
			metas, err := adm.DescribeTopics([]string{*topic})
			if err != nil {
				return err
			}
			if len(metas) != 1 {
				return fmt.Errorf("asked for 1 topic, got %d", len(metas))
			}
			m := metas[0]
			if m.Err != sarama.ErrNoError {
				return m.Err
			}
			parts := make([]map[string]any, 0, len(m.Partitions))
			for _, p := range m.Partitions {
				parts = append(parts, map[string]any{
					"partition": p.ID, "leader": p.Leader, "replicas": p.Replicas, "isr": p.Isr,
				})
			}
			printJSON(map[string]any{"name": m.Name, "topic_id": m.Uuid.String(), "partitions": parts})
			return nil
		})
	}
}

// kafkaSource is the name Kafka's DescribeConfigs gives each sarama ConfigSource.
var kafkaSource = map[sarama.ConfigSource]string{
	sarama.SourceUnknown:              "UNKNOWN",
	sarama.SourceTopic:                "DYNAMIC_TOPIC_CONFIG",
	sarama.SourceDynamicBroker:        "DYNAMIC_BROKER_CONFIG",
	sarama.SourceDynamicDefaultBroker: "DYNAMIC_DEFAULT_BROKER_CONFIG",
	sarama.SourceStaticBroker:         "STATIC_BROKER_CONFIG",
	sarama.SourceDefault:              "DEFAULT_CONFIG",
	sarama.SourceDynamicBrokerLogger:  "DYNAMIC_BROKER_LOGGER_CONFIG",
}

func describeConfigsCmd(fs *flag.FlagSet) func([]string) error {
	topic := fs.String("topic", "", "topic name")
	return func(bootstrap []string) error {
		if *topic == "" {
			return usageError{"--topic is required (broker configs are not needed by the tests)"}
		}
		return withAdmin(bootstrap, func(adm sarama.ClusterAdmin) error {
			entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: *topic})
			if err != nil {
				return err
			}
			configs := map[string]any{}
			for _, e := range entries {
				configs[e.Name] = map[string]any{"value": e.Value, "source": kafkaSource[e.Source], "read_only": e.ReadOnly}
			}
			printJSON(map[string]any{"configs": configs})
			return nil
		})
	}
}
