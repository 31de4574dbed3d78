// The group-consume command: one member of --group through sarama's
// ConsumerGroup (classic protocol) with the balance strategy --assignor
// (range, roundrobin or sticky). Records are printed as JSON lines as they
// arrive, and the offset after the last printed record of a partition is
// committed synchronously whenever that partition's claim has nothing more
// buffered (sarama has no poll: an empty buffer ends a "poll"), and at every
// session end. Stops after --count records, after --idle-ms without records
// once something arrived, at --timeout-ms, or on SIGTERM; then leaves the
// group (Close) and prints {"assigned","generation","member_id"} of the last
// session.
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

	"github.com/IBM/sarama"
)

func groupConsumeCmd(fs *flag.FlagSet) func([]string) error {
	group := fs.String("group", "", "group id")
	topic := fs.String("topic", "", "topic name")
	count := fs.Int("count", 0, "stop after this many records (0: no limit)")
	assignor := fs.String("assignor", "range", "range|roundrobin|sticky")
	from := fs.String("from", "earliest", "earliest|latest (Consumer.Offsets.Initial)")
	idleMs := fs.Int("idle-ms", 0, "stop after this long without records once something arrived (0: never)")
	timeoutMs := fs.Int("timeout-ms", 30000, "stop after this long")
	sessionMs := fs.Int("session-timeout-ms", 30000, "session.timeout.ms")
	return func(bootstrap []string) error {
		if *group == "" || *topic == "" {
			return usageError{"--group and --topic are required"}
		}
		conf := newConfig()
		strategies := map[string]func() sarama.BalanceStrategy{
			"range":      sarama.NewBalanceStrategyRange,
			"roundrobin": sarama.NewBalanceStrategyRoundRobin,
			"sticky":     sarama.NewBalanceStrategySticky,
		}
		strategy, ok := strategies[*assignor]
		if !ok {
			return usageError{fmt.Sprintf("unknown assignor %q", *assignor)}
		}
		conf.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{strategy()}
		switch *from {
		case "earliest":
			conf.Consumer.Offsets.Initial = sarama.OffsetOldest
		case "latest":
			conf.Consumer.Offsets.Initial = sarama.OffsetNewest
		default:
			return usageError{fmt.Sprintf("unknown --from %q", *from)}
		}
		// Commits are the driver's own (synchronous, after each "poll").
		conf.Consumer.Offsets.AutoCommit.Enable = false
		conf.Consumer.Group.Session.Timeout = time.Duration(*sessionMs) * time.Millisecond
		conf.Consumer.Return.Errors = true

		cg, err := sarama.NewConsumerGroup(bootstrap, *group, conf)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*timeoutMs)*time.Millisecond)
		defer cancel()
		sigterm := make(chan os.Signal, 1)
		signal.Notify(sigterm, syscall.SIGTERM)
		go func() {
			select {
			case <-sigterm:
				cancel()
			case <-ctx.Done():
			}
		}()
		h := &member{limit: *count, stop: cancel, lastRecord: time.Now()}
		go h.watchIdle(ctx, time.Duration(*idleMs)*time.Millisecond)
		var groupErr error
		go func() {
			for err := range cg.Errors() {
				fmt.Fprintf(os.Stderr, "consumer group error: %v\n", err)
			}
		}()
		for ctx.Err() == nil {
			// Consume returns at each rebalance; join again until told to stop.
			if err := cg.Consume(ctx, []string{*topic}, h); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
				if ctx.Err() == nil {
					groupErr = err
				}
				break
			}
		}
		closeErr := cg.Close() // LeaveGroup
		if groupErr != nil {
			return groupErr
		}
		if closeErr != nil {
			return closeErr
		}
		printJSON(h.final())
		return nil
	}
}

// member is the ConsumerGroupHandler; its fields are shared by the claims'
// goroutines, hence the mutex.
type member struct {
	limit int
	stop  context.CancelFunc

	mu         sync.Mutex
	printed    int
	lastRecord time.Time
	anyRecord  bool
	assigned   []int32
	generation int32
	memberID   string
}

func (h *member) Setup(s sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.assigned = nil
	for _, ps := range s.Claims() {
		h.assigned = append(h.assigned, ps...)
	}
	sort.Slice(h.assigned, func(i, j int) bool { return h.assigned[i] < h.assigned[j] })
	h.generation, h.memberID = s.GenerationID(), s.MemberID()
	return nil
}

// Cleanup commits what was marked and not yet committed (the session is
// ending: a rebalance, or the stop).
func (h *member) Cleanup(s sarama.ConsumerGroupSession) error {
	h.commit(s)
	return nil
}

func (h *member) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.mu.Lock()
		if h.limit > 0 && h.printed >= h.limit {
			h.mu.Unlock()
			return nil
		}
		printJSON(recordDoc(m))
		h.printed++
		h.anyRecord, h.lastRecord = true, time.Now()
		reached := h.limit > 0 && h.printed >= h.limit
		h.mu.Unlock()
		s.MarkMessage(m, "") // commits offset+1, the next record to read
		if reached || len(claim.Messages()) == 0 {
			h.commit(s)
		}
		if reached {
			h.stop()
			return nil
		}
	}
	return nil
}

// commit sends the marked offsets synchronously. sarama reports a failed
// commit on Errors() (logged to stderr) and keeps the offsets marked for the
// next commit; the tests check what the group committed through the broker.
func (h *member) commit(s sarama.ConsumerGroupSession) {
	s.Commit()
}

func (h *member) watchIdle(ctx context.Context, idle time.Duration) {
	if idle <= 0 {
		return
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			h.mu.Lock()
			quiet := h.anyRecord && time.Since(h.lastRecord) >= idle
			h.mu.Unlock()
			if quiet {
				h.stop()
				return
			}
		}
	}
}

func (h *member) final() map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	assigned := h.assigned
	if assigned == nil {
		assigned = []int32{}
	}
	return map[string]any{"assigned": assigned, "generation": h.generation, "member_id": h.memberID}
}
