// The group-consume command: joins consumer group --group, by default with
// the classic protocol (JoinGroup/SyncGroup; a client-side --assignor, range
// or cooperative-sticky), prints each record it is given as one JSON line, and
// after every poll commits the offset after the last record it printed per
// partition (so a later member resumes exactly there). It stops after
// --count records, or once it has printed something and then seen nothing
// for --idle-ms, or at --timeout-ms; then it prints
// {"assigned":[..],"generation":G,"member_id":".."} and closes.
//
// --session-timeout-ms sets session.timeout.ms (default 30000). SIGTERM or
// SIGINT ends the run like --timeout-ms does: the final line, then a graceful
// close (LeaveGroup), so a scenario can tell a member that leaves from one
// that is killed (SIGKILL: no LeaveGroup, no commit of what it printed last).
// --events also prints {"event":"assigned"|"revoked"|"lost","partitions":[..],
// "generation":G} lines as the group changes (the soak counts rebalances
// from them); without it, stdout carries records and the final line only.
// --commit-delay-ms MS waits MS between printing a poll's records and
// committing them (franz-go heartbeats in the background meanwhile), so a
// scenario can freeze the member (SIGSTOP) with a commit pending and resume
// it once the group has moved on (a "zombie").
// --group-protocol consumer joins with KIP-848's protocol instead
// (kgo.ServerSideBalancer: ConsumerGroupHeartbeat, the broker assigns), as
// the Java driver's flag does: --remote-assignor uniform|range (default
// uniform, the broker's default) names the server-side assignor, the
// classic-only --assignor and --session-timeout-ms are ignored, and the
// final line's "generation" is the member epoch. franz-go falls back to the
// classic protocol by itself when the broker does not serve
// ConsumerGroupHeartbeat v1, so a scenario asserts the group's type from the
// broker's side.
//
// Invariant: a record beyond --count is neither printed nor committed, so
// the group's next member receives it; a record is printed before its
// offset is committed, so a killed member can cause re-delivery, never loss.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// pollSlice bounds one PollFetches so idle and deadline checks run often.
const pollSlice = 200 * time.Millisecond

func groupConsumeCmd(fs *flag.FlagSet) func(context.Context, string) error {
	topic := fs.String("topic", "", "topic name")
	group := fs.String("group", "", "consumer group id")
	count := fs.Int("count", 1<<30, "stop after this many records")
	assignor := fs.String("assignor", "range", "range|cooperative-sticky")
	instanceID := fs.String("instance-id", "", "group.instance.id (static membership, KIP-345)")
	from := fs.String("from", "earliest", "auto.offset.reset: earliest|latest")
	idleMs := fs.Int("idle-ms", 0, "stop when nothing arrived for this long after the first record")
	timeoutMs := fs.Int("timeout-ms", 30000, "give up after this long")
	sessionMs := fs.Int("session-timeout-ms", 30000, "session.timeout.ms")
	events := fs.Bool("events", false, "also print assignment changes as JSON lines")
	commitDelayMs := fs.Int("commit-delay-ms", 0, "wait this long between printing records and committing them")
	protocol := fs.String("group-protocol", "classic", "classic|consumer (KIP-848)")
	remoteAssignor := fs.String("remote-assignor", "uniform", "with --group-protocol consumer: the server-side assignor, uniform|range")
	return func(ctx context.Context, bootstrap string) error {
		if *topic == "" || *group == "" {
			return usageError{"--topic and --group are required"}
		}
		var balancer kgo.GroupBalancer
		switch *assignor {
		case "range":
			balancer = kgo.RangeBalancer()
		case "cooperative-sticky":
			balancer = kgo.CooperativeStickyBalancer()
		default:
			return usageError{fmt.Sprintf("--assignor must be range or cooperative-sticky, got %q", *assignor)}
		}
		switch *protocol {
		case "classic":
		case "consumer":
			// franz-go names the server-side assignor after the balancer:
			// sticky (cooperative or not) -> uniform, range -> range.
			switch *remoteAssignor {
			case "uniform":
				balancer = kgo.CooperativeStickyBalancer()
			case "range":
				balancer = kgo.RangeBalancer()
			default:
				return usageError{fmt.Sprintf("--remote-assignor must be uniform or range, got %q", *remoteAssignor)}
			}
		default:
			return usageError{fmt.Sprintf("--group-protocol must be classic or consumer, got %q", *protocol)}
		}
		reset := kgo.NewOffset().AtStart()
		if *from == "latest" {
			reset = kgo.NewOffset().AtEnd()
		} else if *from != "earliest" {
			return usageError{fmt.Sprintf("--from must be earliest or latest, got %q", *from)}
		}
		ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		var mu sync.Mutex
		owned := map[int32]bool{}
		// event prints an assignment change; called from franz-go's group
		// callbacks, which hold the group's generation at that point.
		event := func(cl *kgo.Client, kind string, ps []int32) {
			if !*events {
				return
			}
			_, generation := cl.GroupMetadata()
			if ps == nil {
				ps = []int32{} // a change that did not touch the topic: [], not null
			}
			printJSON(map[string]any{"event": kind, "partitions": ps, "generation": generation})
		}
		opts := []kgo.Opt{
			kgo.ConsumerGroup(*group),
			kgo.ConsumeTopics(*topic),
			kgo.Balancers(balancer),
			kgo.DisableAutoCommit(),
			// No rebalance between a poll and the commit of what it returned
			// (AllowRebalance below): the commit always carries the
			// generation the records were fetched under.
			kgo.BlockRebalanceOnPoll(),
			kgo.ConsumeResetOffset(reset),
			kgo.SessionTimeout(time.Duration(*sessionMs) * time.Millisecond),
			kgo.HeartbeatInterval(time.Second),
			kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				event(cl, "assigned", m[*topic])
				for _, p := range m[*topic] {
					owned[p] = true
				}
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				event(cl, "revoked", m[*topic])
				for _, p := range m[*topic] {
					delete(owned, p)
				}
			}),
			kgo.OnPartitionsLost(func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				event(cl, "lost", m[*topic])
				for _, p := range m[*topic] {
					delete(owned, p)
				}
			}),
		}
		if *protocol == "consumer" {
			opts = append(opts, kgo.ServerSideBalancer())
		}
		if *instanceID != "" {
			opts = append(opts, kgo.InstanceID(*instanceID))
		}
		cl, err := newClient(bootstrap, opts...)
		if err != nil {
			return err
		}
		defer cl.Close()
		deadline := time.Now().Add(time.Duration(*timeoutMs) * time.Millisecond)
		idle := time.Duration(*idleMs) * time.Millisecond
		printed := 0
		var lastRecord time.Time
		for printed < *count && time.Now().Before(deadline) && ctx.Err() == nil {
			if idle > 0 && printed > 0 && time.Since(lastRecord) >= idle {
				break
			}
			pollCtx, cancel := context.WithTimeout(ctx, pollSlice)
			fetches := cl.PollFetches(pollCtx)
			cancel()
			fetches.EachError(func(t string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					fmt.Fprintf(os.Stderr, "fetch %s[%d]: %v\n", t, p, err)
				}
			})
			var done []*kgo.Record
			fetches.EachRecord(func(r *kgo.Record) {
				if printed >= *count {
					return
				}
				printJSON(map[string]any{
					"partition": r.Partition,
					"offset":    r.Offset,
					"key":       bytesOrNull(r.Key),
					"value":     bytesOrNull(r.Value),
				})
				done = append(done, r)
				printed++
				lastRecord = time.Now()
			})
			if len(done) > 0 {
				time.Sleep(time.Duration(*commitDelayMs) * time.Millisecond)
				// Not ctx: a SIGTERM right after the poll still commits what
				// was printed, as a graceful close should.
				commitCtx, cancel := context.WithTimeout(context.Background(), adminTimeout)
				err := cl.CommitRecords(commitCtx, done...)
				cancel()
				if err != nil && !*events {
					return fmt.Errorf("commit: %w", err)
				}
				if err != nil {
					// The soak keeps going: the records are re-delivered
					// (counted as duplicates there), never lost.
					fmt.Fprintf(os.Stderr, "commit: %v\n", err)
					printJSON(map[string]any{"event": "commit-failed", "error": err.Error()})
				}
			}
			cl.AllowRebalance()
		}
		mu.Lock()
		assigned := make([]int, 0, len(owned))
		for p := range owned {
			assigned = append(assigned, int(p))
		}
		mu.Unlock()
		sort.Ints(assigned)
		member, generation := cl.GroupMetadata()
		printJSON(map[string]any{"assigned": assigned, "generation": generation, "member_id": member})
		return nil
	}
}
