// The consume command: one sarama PartitionConsumer per partition (all of the
// topic's, or --partitions), from --from, printing each record as a JSON line
// in the order received; stops after --count records or at --timeout-ms (then
// prints what it has and exits 0, as the protocol says).
package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

func consumeCmd(fs *flag.FlagSet) func([]string) error {
	topic := fs.String("topic", "", "topic name")
	count := fs.Int("count", 0, "records to read")
	partitionList := fs.String("partitions", "", "comma list of partitions (absent: all)")
	from := fs.String("from", "earliest", "earliest|latest|OFFSET")
	timeoutMs := fs.Int("timeout-ms", 20000, "give up after this long")
	isolation := fs.String("isolation", "", "read_committed|read_uncommitted (absent: sarama's default, read_uncommitted)")
	return func(bootstrap []string) error {
		if *topic == "" || *count <= 0 {
			return usageError{"--topic and --count are required"}
		}
		start, err := startOffset(*from)
		if err != nil {
			return err
		}
		conf := newConfig()
		switch *isolation {
		case "", "read_uncommitted":
		case "read_committed":
			conf.Consumer.IsolationLevel = sarama.ReadCommitted
		default:
			return usageError{fmt.Sprintf("unknown isolation %q", *isolation)}
		}
		consumer, err := sarama.NewConsumer(bootstrap, conf)
		if err != nil {
			return err
		}
		defer consumer.Close()
		partitions, err := choosePartitions(consumer, *topic, *partitionList)
		if err != nil {
			return err
		}
		merged := make(chan *sarama.ConsumerMessage)
		done := make(chan struct{})
		defer close(done)
		for _, p := range partitions {
			pc, err := consumer.ConsumePartition(*topic, p, start)
			if err != nil {
				return fmt.Errorf("partition %d: %w", p, err)
			}
			defer pc.Close()
			go func() {
				for m := range pc.Messages() {
					select {
					case merged <- m:
					case <-done:
						return
					}
				}
			}()
		}
		deadline := time.After(time.Duration(*timeoutMs) * time.Millisecond)
		for n := 0; n < *count; n++ {
			select {
			case m := <-merged:
				printJSON(recordDoc(m))
			case <-deadline:
				return nil
			}
		}
		return nil
	}
}

func startOffset(from string) (int64, error) {
	switch from {
	case "earliest":
		return sarama.OffsetOldest, nil
	case "latest":
		return sarama.OffsetNewest, nil
	}
	o, err := strconv.ParseInt(from, 10, 64)
	if err != nil || o < 0 {
		return 0, usageError{fmt.Sprintf("--from expects earliest, latest or an offset, got %q", from)}
	}
	return o, nil
}

func choosePartitions(consumer sarama.Consumer, topic, list string) ([]int32, error) {
	if list == "" {
		return consumer.Partitions(topic)
	}
	var out []int32
	for _, s := range strings.Split(list, ",") {
		p, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil {
			return nil, usageError{fmt.Sprintf("--partitions expects a comma list of numbers, got %q", list)}
		}
		out = append(out, int32(p))
	}
	return out, nil
}

// recordDoc is the protocol's record line; a null key or value stays null.
func recordDoc(m *sarama.ConsumerMessage) map[string]any {
	headers := make([][]any, 0, len(m.Headers))
	for _, h := range m.Headers {
		var v any
		if h.Value != nil {
			v = string(h.Value)
		}
		headers = append(headers, []any{string(h.Key), v})
	}
	return map[string]any{
		"partition": m.Partition, "offset": m.Offset, "key": nullable(m.Key), "value": nullable(m.Value),
		"headers": headers, "timestamp": m.Timestamp.UnixMilli(),
	}
}

func nullable(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}
