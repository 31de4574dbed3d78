// The consume command: assigns partitions directly (kgo.ConsumePartitions,
// no consumer group) at exact offsets and prints each record as one JSON
// line in the order received, stopping after --count records or at
// --timeout-ms, whichever is first (a timeout is not an error: the harness
// compares what was printed).
//
// Invariant: at most --count lines are printed; fetch errors go to stderr and
// the driver keeps polling until the deadline, as a client application would
// (franz-go retries retriable errors itself).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func consumeCmd(fs *flag.FlagSet) func(context.Context, string) error {
	topic := fs.String("topic", "", "topic name")
	count := fs.Int("count", 0, "records to read")
	partitionsArg := fs.String("partitions", "", "comma-separated partitions (absent: all)")
	from := fs.String("from", "earliest", "earliest|latest|OFFSET")
	timeoutMs := fs.Int("timeout-ms", 20000, "give up after this long")
	maxBytes := fs.Int("max-bytes", 0, "fetch.max.bytes and max.partition.fetch.bytes")
	isolation := fs.String("isolation", "", "read_committed|read_uncommitted (absent: franz-go's, read_uncommitted)")
	return func(ctx context.Context, bootstrap string) error {
		if *topic == "" || *count <= 0 {
			return usageError{"--topic and --count (> 0) are required"}
		}
		start, err := parseFrom(*from)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, time.Duration(*timeoutMs)*time.Millisecond)
		defer cancel()
		partitions, err := parsePartitions(*partitionsArg)
		if err != nil {
			return err
		}
		if partitions == nil {
			if partitions, err = allPartitions(ctx, bootstrap, *topic); err != nil {
				return err
			}
		}
		assign := map[int32]kgo.Offset{}
		for _, p := range partitions {
			assign[p] = start
		}
		opts := []kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{*topic: assign})}
		switch *isolation {
		case "", "read_uncommitted":
		case "read_committed":
			opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		default:
			return usageError{fmt.Sprintf("--isolation expects read_committed|read_uncommitted, got %q", *isolation)}
		}
		if *maxBytes > 0 {
			opts = append(opts, kgo.FetchMaxBytes(int32(*maxBytes)), kgo.FetchMaxPartitionBytes(int32(*maxBytes)))
		}
		cl, err := newClient(bootstrap, opts...)
		if err != nil {
			return err
		}
		defer cl.Close()
		printed := 0
		for printed < *count {
			fetches := cl.PollFetches(ctx)
			fetches.EachError(func(t string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					fmt.Fprintf(os.Stderr, "fetch %s[%d]: %v\n", t, p, err)
				}
			})
			fetches.EachRecord(func(r *kgo.Record) {
				if printed >= *count {
					return
				}
				printJSON(recordJSON(r))
				printed++
			})
			if ctx.Err() != nil {
				break
			}
		}
		return nil
	}
}

// recordJSON is one consumed record in the protocol's shape.
func recordJSON(r *kgo.Record) map[string]any {
	headers := [][]any{}
	for _, h := range r.Headers {
		var v any
		if h.Value != nil {
			v = string(h.Value)
		}
		headers = append(headers, []any{h.Key, v})
	}
	return map[string]any{
		"partition": r.Partition,
		"offset":    r.Offset,
		"key":       bytesOrNull(r.Key),
		"value":     bytesOrNull(r.Value),
		"headers":   headers,
		"timestamp": r.Timestamp.UnixMilli(),
	}
}

// bytesOrNull maps a null key/value to JSON null and bytes to a string.
func bytesOrNull(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

func parseFrom(from string) (kgo.Offset, error) {
	switch from {
	case "earliest":
		return kgo.NewOffset().AtStart(), nil
	case "latest":
		return kgo.NewOffset().AtEnd(), nil
	}
	n, err := strconv.ParseInt(from, 10, 64)
	if err != nil || n < 0 {
		return kgo.Offset{}, usageError{fmt.Sprintf("--from must be earliest, latest or an offset, got %q", from)}
	}
	return kgo.NewOffset().At(n), nil
}

// parsePartitions parses "0,1,2"; empty means all partitions (nil).
func parsePartitions(s string) ([]int32, error) {
	if s == "" {
		return nil, nil
	}
	var out []int32
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(part), 10, 32)
		if err != nil || n < 0 {
			return nil, usageError{fmt.Sprintf("bad partition %q", part)}
		}
		out = append(out, int32(n))
	}
	return out, nil
}

// allPartitions asks the cluster for the topic's partition numbers.
func allPartitions(ctx context.Context, bootstrap, topic string) ([]int32, error) {
	var out []int32
	err := withAdmin(ctx, bootstrap, func(ctx context.Context, adm *kadm.Client, _ *kgo.Client) error {
		tds, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return err
		}
		td, ok := tds[topic]
		if !ok {
			return fmt.Errorf("topic %s not in metadata", topic)
		}
		if td.Err != nil {
			return td.Err
		}
		out = td.Partitions.Numbers()
		return nil
	})
	return out, err
}
