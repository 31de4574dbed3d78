// The txn-copy command (integration-tests/README.md): consume-transform-produce
// with franz-go's GroupTransactSession, the client's own exactly-once helper.
// A group member (read_committed, KIP-447 stable offsets) copies each poll's
// records (at most 100; key, value, headers, same partition) to
// --output-topic in one transaction that also commits its consumed offsets;
// transactions 1, 1+N, ... (--abort-every N) are aborted, after which the
// session itself rewinds to the committed offsets. Stops once --count records
// are committed. Prints {"txn","records","committed"} per transaction, then
// {"copied","transactions","aborted"}.
package main

import (
	"context"
	"errors"
	"flag"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func txnCopyCmd(fs *flag.FlagSet) func(context.Context, string) error {
	topic := fs.String("topic", "", "input topic")
	output := fs.String("output-topic", "", "output topic")
	group := fs.String("group", "", "consumer group")
	tid := fs.String("transactional-id", "", "transactional.id")
	count := fs.Int("count", 0, "records to copy (committed)")
	abortEvery := fs.Int("abort-every", 0, "abort transactions 1, 1+N, 1+2N, ... (0: none)")
	timeoutMs := fs.Int("timeout-ms", 60000, "give up after this long")
	return func(ctx context.Context, bootstrap string) error {
		if *topic == "" || *output == "" || *group == "" || *tid == "" || *count <= 0 {
			return usageError{"--topic, --output-topic, --group, --transactional-id and --count are required"}
		}
		sess, err := kgo.NewGroupTransactSession(
			kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
			kgo.ClientID("brook-franz-driver"),
			kgo.TransactionalID(*tid),
			kgo.ConsumerGroup(*group),
			kgo.ConsumeTopics(*topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
		)
		if err != nil {
			return err
		}
		defer sess.Close()
		ctx, cancel := context.WithTimeout(ctx, time.Duration(*timeoutMs)*time.Millisecond)
		defer cancel()
		copied, txn, aborted := 0, 0, 0
		for copied < *count {
			if ctx.Err() != nil {
				break
			}
			pollCtx, pollCancel := context.WithTimeout(ctx, 500*time.Millisecond)
			fetches := sess.PollRecords(pollCtx, 100)
			pollCancel()
			for _, fe := range fetches.Errors() {
				if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
					return fe.Err
				}
			}
			in := fetches.Records()
			if len(in) == 0 {
				continue
			}
			if err := sess.Begin(); err != nil {
				return err
			}
			out := make([]*kgo.Record, 0, len(in))
			for _, r := range in {
				out = append(out, &kgo.Record{Topic: *output, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers})
			}
			produceErr := sess.ProduceSync(ctx, out...).FirstErr()
			commit := produceErr == nil && !(*abortEvery > 0 && txn%*abortEvery == 1)
			committed, err := sess.End(ctx, kgo.TransactionEndTry(commit))
			if err != nil {
				return err
			}
			if produceErr != nil {
				return produceErr
			}
			if committed {
				copied += len(in)
			} else if !commit {
				aborted++
			}
			printJSON(map[string]any{"txn": txn, "records": len(in), "committed": committed})
			txn++
		}
		printJSON(map[string]any{"copied": copied, "transactions": txn, "aborted": aborted})
		return nil
	}
}
