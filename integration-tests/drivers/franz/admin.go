// Admin commands of the driver protocol (metadata, topics, partitions,
// configs), all through kadm except describe-configs, which uses the raw
// DescribeConfigs request because kadm.Config drops the read_only flag the
// protocol prints.
//
// Invariants: internal topics (__consumer_offsets, __transaction_state) are
// left out of metadata and list-topics so that scenario assertions do not
// depend on whether a group was used before; topic ids print in Kafka's own
// Uuid.toString form (URL-safe base64, no padding) so every client agrees.
package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaUUID renders a topic id as org.apache.kafka.common.Uuid#toString does.
func kafkaUUID(id kadm.TopicID) string {
	return base64.RawURLEncoding.EncodeToString(id[:])
}

func metadataCmd(fs *flag.FlagSet) func(context.Context, string) error {
	return func(ctx context.Context, bootstrap string) error {
		return withAdmin(ctx, bootstrap, func(ctx context.Context, adm *kadm.Client, cl *kgo.Client) error {
			md, err := adm.Metadata(ctx)
			if err != nil {
				return err
			}
			brokers := []map[string]any{}
			for _, b := range md.Brokers {
				brokers = append(brokers, map[string]any{"id": b.NodeID, "host": b.Host, "port": b.Port})
			}
			topics := map[string]any{}
			for _, t := range md.Topics.Sorted() {
				if t.IsInternal {
					continue
				}
				if t.Err != nil {
					return fmt.Errorf("topic %s: %w", t.Topic, t.Err)
				}
				topics[t.Topic] = map[string]any{"partitions": len(t.Partitions)}
			}
			printJSON(map[string]any{"brokers": brokers, "controller_id": md.Controller, "topics": topics})
			return nil
		})
	}
}

func createTopicCmd(fs *flag.FlagSet) func(context.Context, string) error {
	topic := fs.String("topic", "", "topic name")
	partitions := fs.Int("partitions", -1, "partition count (-1: broker default)")
	rf := fs.Int("replication-factor", 1, "replication factor")
	var configs multiFlag
	fs.Var(&configs, "config", "topic config k=v (repeatable)")
	return func(ctx context.Context, bootstrap string) error {
		if *topic == "" {
			return usageError{"--topic is required"}
		}
		cfg := map[string]*string{}
		for _, kv := range configs {
			k, v, err := splitKV(kv)
			if err != nil {
				return err
			}
			cfg[k] = kadm.StringPtr(v)
		}
		return withAdmin(ctx, bootstrap, func(ctx context.Context, adm *kadm.Client, cl *kgo.Client) error {
			resps, err := adm.CreateTopics(ctx, int32(*partitions), int16(*rf), cfg, *topic)
			if err != nil {
				return err
			}
			r, ok := resps[*topic]
			if !ok {
				return errors.New("topic missing from CreateTopics response")
			}
			if err := withMessage(r.Err, r.ErrMessage); err != nil {
				return err
			}
			printJSON(map[string]any{"ok": true})
			return nil
		})
	}
}

func deleteTopicCmd(fs *flag.FlagSet) func(context.Context, string) error {
	topic := fs.String("topic", "", "topic name")
	return func(ctx context.Context, bootstrap string) error {
		if *topic == "" {
			return usageError{"--topic is required"}
		}
		return withAdmin(ctx, bootstrap, func(ctx context.Context, adm *kadm.Client, cl *kgo.Client) error {
			resps, err := adm.DeleteTopics(ctx, *topic)
			if err != nil {
				return err
			}
			r, ok := resps[*topic]
			if !ok {
				return errors.New("topic missing from DeleteTopics response")
			}
			if err := withMessage(r.Err, r.ErrMessage); err != nil {
				return err
			}
			printJSON(map[string]any{"ok": true})
			return nil
		})
	}
}

func createPartitionsCmd(fs *flag.FlagSet) func(context.Context, string) error {
	topic := fs.String("topic", "", "topic name")
	total := fs.Int("total", 0, "new total partition count")
	return func(ctx context.Context, bootstrap string) error {
		if *topic == "" || *total <= 0 {
			return usageError{"--topic and --total (> 0) are required"}
		}
		return withAdmin(ctx, bootstrap, func(ctx context.Context, adm *kadm.Client, cl *kgo.Client) error {
			// UpdatePartitions sets the total count, as CreatePartitions'
			// wire field "Count" means (KIP-195).
			resps, err := adm.UpdatePartitions(ctx, *total, *topic)
			if err != nil {
				return err
			}
			r, ok := resps[*topic]
			if !ok {
				return errors.New("topic missing from CreatePartitions response")
			}
			if err := withMessage(r.Err, r.ErrMessage); err != nil {
				return err
			}
			printJSON(map[string]any{"ok": true})
			return nil
		})
	}
}

func describeTopicCmd(fs *flag.FlagSet) func(context.Context, string) error {
	topic := fs.String("topic", "", "topic name")
	return func(ctx context.Context, bootstrap string) error {
		if *topic == "" {
			return usageError{"--topic is required"}
		}
		return withAdmin(ctx, bootstrap, func(ctx context.Context, adm *kadm.Client, cl *kgo.Client) error {
			tds, err := adm.ListTopics(ctx, *topic)
			if err != nil {
				return err
			}
			td, ok := tds[*topic]
			if !ok {
				return kerr.UnknownTopicOrPartition
			}
			if td.Err != nil {
				return td.Err
			}
			parts := []map[string]any{}
			for _, p := range td.Partitions.Sorted() {
				if p.Err != nil && !errors.Is(p.Err, kerr.LeaderNotAvailable) {
					return fmt.Errorf("partition %d: %w", p.Partition, p.Err)
				}
				parts = append(parts, map[string]any{
					"partition": p.Partition,
					"leader":    p.Leader,
					"replicas":  nonNil(p.Replicas),
					"isr":       nonNil(p.ISR),
				})
			}
			printJSON(map[string]any{"name": td.Topic, "topic_id": kafkaUUID(td.ID), "partitions": parts})
			return nil
		})
	}
}

// nonNil makes an absent list print as [] rather than null.
func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}

func listTopicsCmd(fs *flag.FlagSet) func(context.Context, string) error {
	return func(ctx context.Context, bootstrap string) error {
		return withAdmin(ctx, bootstrap, func(ctx context.Context, adm *kadm.Client, cl *kgo.Client) error {
			// ListTopics (not ListTopicsWithInternal) already leaves out
			// internal topics.
			tds, err := adm.ListTopics(ctx)
			if err != nil {
				return err
			}
			names := tds.Names()
			if names == nil {
				names = []string{}
			}
			printJSON(map[string]any{"topics": names})
			return nil
		})
	}
}

func describeConfigsCmd(fs *flag.FlagSet) func(context.Context, string) error {
	topic := fs.String("topic", "", "topic name")
	broker := fs.Int("broker", -1, "broker id")
	return func(ctx context.Context, bootstrap string) error {
		res := kmsg.NewDescribeConfigsRequestResource()
		switch {
		case *topic != "" && *broker < 0:
			res.ResourceType = kmsg.ConfigResourceTypeTopic
			res.ResourceName = *topic
		case *topic == "" && *broker >= 0:
			res.ResourceType = kmsg.ConfigResourceTypeBroker
			res.ResourceName = strconv.Itoa(*broker)
		default:
			return usageError{"exactly one of --topic or --broker is required"}
		}
		return withAdmin(ctx, bootstrap, func(ctx context.Context, adm *kadm.Client, cl *kgo.Client) error {
			req := kmsg.NewPtrDescribeConfigsRequest()
			req.Resources = append(req.Resources, res) // nil ConfigNames: all configs
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return err
			}
			if len(resp.Resources) != 1 {
				return fmt.Errorf("DescribeConfigs returned %d resources, want 1", len(resp.Resources))
			}
			r := resp.Resources[0]
			msg := ""
			if r.ErrorMessage != nil {
				msg = *r.ErrorMessage
			}
			if err := withMessage(kerr.ErrorForCode(r.ErrorCode), msg); err != nil {
				return err
			}
			configs := map[string]any{}
			sort.Slice(r.Configs, func(i, j int) bool { return r.Configs[i].Name < r.Configs[j].Name })
			for _, c := range r.Configs {
				configs[c.Name] = map[string]any{
					"value":     c.Value, // null when sensitive or unset
					"source":    c.Source.String(),
					"read_only": c.ReadOnly,
				}
			}
			printJSON(map[string]any{"configs": configs})
			return nil
		})
	}
}

func alterConfigsCmd(fs *flag.FlagSet) func(context.Context, string) error {
	topic := fs.String("topic", "", "topic name")
	broker := fs.Int("broker", -1, "broker id")
	var sets, deletes multiFlag
	fs.Var(&sets, "set", "config k=v to set (repeatable)")
	fs.Var(&deletes, "delete", "config key to delete, back to its default (repeatable)")
	return func(ctx context.Context, bootstrap string) error {
		if (*topic == "") == (*broker < 0) {
			return usageError{"exactly one of --topic or --broker is required"}
		}
		var alters []kadm.AlterConfig
		for _, kv := range sets {
			k, v, err := splitKV(kv)
			if err != nil {
				return err
			}
			alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(v)})
		}
		for _, k := range deletes {
			alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
		}
		return withAdmin(ctx, bootstrap, func(ctx context.Context, adm *kadm.Client, cl *kgo.Client) error {
			// IncrementalAlterConfigs (KIP-339): only the named keys change.
			var resps kadm.AlterConfigsResponses
			var err error
			if *topic != "" {
				resps, err = adm.AlterTopicConfigs(ctx, alters, *topic)
			} else {
				resps, err = adm.AlterBrokerConfigs(ctx, alters, int32(*broker))
			}
			if err != nil {
				return err
			}
			if len(resps) != 1 {
				return fmt.Errorf("IncrementalAlterConfigs returned %d resources, want 1", len(resps))
			}
			if err := withMessage(resps[0].Err, resps[0].ErrMessage); err != nil {
				return err
			}
			printJSON(map[string]any{"ok": true})
			return nil
		})
	}
}
