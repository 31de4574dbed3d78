// The produce-paced command of the replication tests (test_replication_*.py,
// harness/replication.py): records from --input are sent one by one,
// --interval-ms apart, by one client, and each result is printed as a JSON
// line as soon as it arrives (completion order):
// {"index":I,"partition":P,"offset":O} or {"index":I,"error":"NAME","message":".."}.
// Failed sends are data: the command exits 0 once every record has its line.
// franz-go's defaults (idempotent, acks=all) unless --acks 1|0; --retries
// bounds RecordRetries, --delivery-timeout-ms sets RecordDeliveryTimeout.
package main

import (
	"context"
	"flag"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	commands["produce-paced"] = command{flags: producePacedCmd}
}

func producePacedCmd(fs *flag.FlagSet) func(context.Context, string) error {
	topic := fs.String("topic", "", "topic name")
	input := fs.String("input", "", "JSON-lines file of records")
	acks := fs.String("acks", "all", "all|1|0")
	fs.Bool("idempotent", false, "idempotent producer (franz-go default)")
	interval := fs.Int("interval-ms", 10, "pause between two sends")
	retries := fs.Int("retries", -1, "record retries (-1: franz-go default)")
	fs.Int("request-timeout-ms", 0, "accepted for the protocol")
	delivery := fs.Int("delivery-timeout-ms", 0, "record delivery timeout (0: none, franz-go default)")
	return func(ctx context.Context, bootstrap string) error {
		if *topic == "" || *input == "" {
			return usageError{"--topic and --input are required"}
		}
		opts, err := producerOpts("none", *acks, 0)
		if err != nil {
			return err
		}
		if *retries >= 0 {
			opts = append(opts, kgo.RecordRetries(*retries))
		}
		if *delivery > 0 {
			opts = append(opts, kgo.RecordDeliveryTimeout(time.Duration(*delivery)*time.Millisecond))
		}
		inputs, err := readInput(*input)
		if err != nil {
			return err
		}
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		cl, err := newClient(bootstrap, opts...)
		if err != nil {
			return err
		}
		defer cl.Close()
		var out sync.Mutex
		var wg sync.WaitGroup
		for i, in := range inputs {
			r, err := toRecord(*topic, in)
			if err != nil {
				return err
			}
			if in.Partition != nil {
				r.Partition = *in.Partition
			}
			index := i
			wg.Add(1)
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				defer wg.Done()
				out.Lock()
				defer out.Unlock()
				if err != nil {
					doc := errorDoc(err)
					printJSON(map[string]any{"index": index, "error": doc["error"], "message": err.Error()})
					return
				}
				offset := r.Offset
				if *acks == "0" {
					offset = -1
				}
				printJSON(map[string]any{"index": index, "partition": r.Partition, "offset": offset})
			})
			time.Sleep(time.Duration(*interval) * time.Millisecond)
		}
		wg.Wait()
		return nil
	}
}
