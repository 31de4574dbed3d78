// The txn-copy command (integration-tests/README.md): consume-transform-produce
// with franz-go's GroupTransactSession, the client's own exactly-once helper.
// A group member (read_committed, KIP-447 stable offsets) copies each poll's
// records (at most 100; key, value, headers, same partition) to
// --output-topic in one transaction that also commits its consumed offsets;
// transactions 1, 1+N, ... (--abort-every N) are aborted, after which the
// session itself rewinds to the committed offsets. Stops once --count records
// are committed, at --timeout-ms, or on SIGTERM/SIGINT: the transaction in
// progress is still ended (committed), then the session closes (LeaveGroup),
// so a scenario can take a member out of a group mid-run. Prints
// {"txn","records","committed","want_commit","partitions","offsets"} per
// transaction ("offsets": {"<partition>":[first, last]} of the input records
// it copied), then {"copied","transactions","aborted"}.
//
// For groups of several members: --assignor picks the balancer (default: the
// client's, cooperative-sticky); --events prints {"event":"assigned"|
// "revoked"|"lost","partitions":[..],"generation":G} as the group changes.
// A transaction the session aborted because of a rebalance is a line with
// "want_commit":true and "committed":false.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
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
	assignor := fs.String("assignor", "", "range|cooperative-sticky (default: the client's)")
	events := fs.Bool("events", false, "also print assignment changes as JSON lines")
	return func(ctx context.Context, bootstrap string) error {
		if *topic == "" || *output == "" || *group == "" || *tid == "" || *count <= 0 {
			return usageError{"--topic, --output-topic, --group, --transactional-id and --count are required"}
		}
		opts := []kgo.Opt{
			kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
			kgo.ClientID("brook-franz-driver"),
			kgo.TransactionalID(*tid),
			kgo.ConsumerGroup(*group),
			kgo.ConsumeTopics(*topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			// As group-consume: a member learns of a rebalance within a second
			// (the client's default is 3 s), so a scenario's group changes settle fast.
			kgo.HeartbeatInterval(time.Second),
		}
		switch *assignor {
		case "":
		case "range":
			opts = append(opts, kgo.Balancers(kgo.RangeBalancer()))
		case "cooperative-sticky":
			opts = append(opts, kgo.Balancers(kgo.CooperativeStickyBalancer()))
		default:
			return usageError{fmt.Sprintf("--assignor must be range or cooperative-sticky, got %q", *assignor)}
		}
		if *events {
			// The session wraps these callbacks with its own (abort on
			// revoke/lost) and calls ours after them.
			event := func(kind string) func(context.Context, *kgo.Client, map[string][]int32) {
				return func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
					_, generation := cl.GroupMetadata()
					ps := append([]int32{}, m[*topic]...)
					sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
					printJSON(map[string]any{"event": kind, "partitions": ps, "generation": generation})
				}
			}
			opts = append(opts,
				kgo.OnPartitionsAssigned(event("assigned")),
				kgo.OnPartitionsRevoked(event("revoked")),
				kgo.OnPartitionsLost(event("lost")))
		}
		levels := map[string]kgo.LogLevel{
			"debug": kgo.LogLevelDebug, "info": kgo.LogLevelInfo, "warn": kgo.LogLevelWarn, "error": kgo.LogLevelError,
		}
		if level, ok := levels[os.Getenv("BROOK_DRIVER_LOG")]; ok {
			// Wall-clock stamps, to line the client's log up with the brokers'.
			stamp := func() string { return time.Now().UTC().Format("15:04:05.000000 ") }
			opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, level, stamp)))
		}
		sess, err := kgo.NewGroupTransactSession(opts...)
		if err != nil {
			return err
		}
		defer sess.Close()
		ctx, cancel := context.WithTimeout(ctx, time.Duration(*timeoutMs)*time.Millisecond)
		defer cancel()
		// A stop signal ends polling only: the transaction in progress is
		// ended under ctx, so a stopped member leaves nothing open.
		stopCtx, stopSignals := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
		defer stopSignals()
		copied, txn, aborted := 0, 0, 0
		for copied < *count && stopCtx.Err() == nil {
			pollCtx, pollCancel := context.WithTimeout(stopCtx, 500*time.Millisecond)
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
			ranges := map[int32][2]int64{} // partition -> first, last input offset copied
			for _, r := range in {
				out = append(out, &kgo.Record{Topic: *output, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers})
				if rg, ok := ranges[r.Partition]; ok {
					ranges[r.Partition] = [2]int64{rg[0], r.Offset}
				} else {
					ranges[r.Partition] = [2]int64{r.Offset, r.Offset}
				}
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
			partitions := make([]int32, 0, len(ranges))
			offsets := make(map[string][2]int64, len(ranges))
			for p, rg := range ranges {
				partitions = append(partitions, p)
				offsets[fmt.Sprint(p)] = rg
			}
			sort.Slice(partitions, func(i, j int) bool { return partitions[i] < partitions[j] })
			printJSON(map[string]any{"txn": txn, "records": len(in), "committed": committed, "want_commit": commit,
				"partitions": partitions, "offsets": offsets})
			txn++
		}
		printJSON(map[string]any{"copied": copied, "transactions": txn, "aborted": aborted})
		return nil
	}
}
