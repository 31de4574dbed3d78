// The offsets command: per partition offset (and timestamp, when the broker
// returns one) for earliest, latest, max-timestamp or a timestamp in ms,
// through kadm's ListOffsets helpers.
//
// Client quirk the harness must know: for a timestamp spec, kadm re-asks for
// the end offset of any partition whose broker answer is -1 ("no record at or
// after this time"), so such a partition prints {"offset": <log end>,
// "timestamp": -1} where the raw protocol answer is offset -1. max-timestamp
// (ListOffsets timestamp -3, KIP-734) prints the broker's answer as is.
package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func offsetsCmd(fs *flag.FlagSet) func(context.Context, string) error {
	topic := fs.String("topic", "", "topic name")
	spec := fs.String("spec", "", "earliest|latest|max-timestamp|TIMESTAMP_MS")
	return func(ctx context.Context, bootstrap string) error {
		if *topic == "" || *spec == "" {
			return usageError{"--topic and --spec are required"}
		}
		var list func(ctx context.Context, adm *kadm.Client) (kadm.ListedOffsets, error)
		switch *spec {
		case "earliest":
			list = func(ctx context.Context, adm *kadm.Client) (kadm.ListedOffsets, error) {
				return adm.ListStartOffsets(ctx, *topic)
			}
		case "latest":
			list = func(ctx context.Context, adm *kadm.Client) (kadm.ListedOffsets, error) {
				return adm.ListEndOffsets(ctx, *topic)
			}
		case "max-timestamp":
			list = func(ctx context.Context, adm *kadm.Client) (kadm.ListedOffsets, error) {
				return adm.ListMaxTimestampOffsets(ctx, *topic)
			}
		default:
			ts, err := strconv.ParseInt(*spec, 10, 64)
			if err != nil || ts < 0 {
				return usageError{fmt.Sprintf("bad --spec %q", *spec)}
			}
			list = func(ctx context.Context, adm *kadm.Client) (kadm.ListedOffsets, error) {
				return adm.ListOffsetsAfterMilli(ctx, ts, *topic)
			}
		}
		return withAdmin(ctx, bootstrap, func(ctx context.Context, adm *kadm.Client, _ *kgo.Client) error {
			listed, err := list(ctx, adm)
			if err != nil {
				return err
			}
			out := map[string]any{}
			for p, lo := range listed[*topic] {
				if lo.Err != nil {
					if p < 0 {
						return lo.Err // kadm's marker for an unknown topic
					}
					return fmt.Errorf("partition %d: %w", p, lo.Err)
				}
				out[strconv.Itoa(int(p))] = map[string]any{"offset": lo.Offset, "timestamp": lo.Timestamp}
			}
			if len(out) == 0 {
				return fmt.Errorf("no offsets listed for topic %s", *topic)
			}
			printJSON(out)
			return nil
		})
	}
}
