// scaleperf: the franz-go client of bench/scale_spread.py (issue 24, "Measure"): records spread
// over every partition of many topics, so the broker's per-partition costs show in MB/s.
//
//	scaleperf first   -bootstrap B -prefix scale -topics N [-partitions 1000]
//	scaleperf produce -bootstrap B -prefix scale -topics N [-partitions 1000] -per-partition K [-burst 15]
//	scaleperf fetch   -bootstrap B -prefix scale -topics N [-partitions 1000] -per-partition K
//
// The topics are PREFIX0 .. PREFIX(N-1), each of -partitions partitions (records go to a
// partition by number: franz-go's manual partitioner).
//
// first: one 5-byte record to every partition, partition after partition, as fast as the client
// takes them (linger 5 ms); figures as produce, plus partitions_per_s.
//
// produce: -per-partition records of -size bytes to every partition, in passes: each pass gives
// every partition -burst consecutive records, so a partition's records arrive together and fill
// a batch (as a keyed producer's do) instead of one record per batch. Batching: -batch-bytes
// (16384, the Java producer's batch.size) caps a batch, -linger (5 ms, its linger.ms) closes one
// that is not full; with 1 KB records a 16384-byte batch holds 15, so -burst 15 sends full
// batches. -buffer-bytes (32 MiB, buffer.memory) bounds what is queued; acks (-acks all:
// idempotent, 5 requests in flight per broker), no compression.
//
// fetch: every partition from offset 0, no group (franz-go's defaults: fetch.max.bytes 50 MB,
// 1 MB per partition, max wait 5 s), until each partition has given its -per-partition records;
// fails if a partition gives more or an error.
//
// Prints one JSON line: records, bytes (record values), elapsed_s, mb_per_s (10^6 bytes of values
// per second), records_per_s, batches and records_per_batch (produce: as the client wrote them;
// fetch: as it read them), and client_warnings (with the first five): the client's own warnings
// and errors (retried broker errors, timeouts), so a figure that includes retries says so.
// -metadata-min-age is franz-go's least time between metadata refreshes (default 5 s), which
// paces its retries of a partition the broker does not host yet. Exit 1 on a failed record, a
// fetch error, or the -timeout (the message then says how far the run got).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const mib = 1 << 20

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "first" && os.Args[1] != "produce" && os.Args[1] != "fetch") {
		fail(2, "usage: scaleperf first|produce|fetch -bootstrap HOST:PORT -prefix P -topics N [flags]")
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	bootstrap := fs.String("bootstrap", "", "host:port[,host:port...]")
	prefix := fs.String("prefix", "scale", "topic name prefix")
	topics := fs.Int("topics", 0, "number of topics PREFIX0..PREFIX(N-1)")
	partitions := fs.Int("partitions", 1000, "partitions per topic")
	perPartition := fs.Int("per-partition", 1, "records per partition (produce, fetch)")
	burst := fs.Int("burst", 15, "consecutive records to one partition in a pass (produce)")
	size := fs.Int("size", 1024, "record value bytes (produce)")
	acks := fs.String("acks", "all", "1 or all")
	linger := fs.Duration("linger", 5*time.Millisecond, "producer linger (Java linger.ms default: 5)")
	batch := fs.Int("batch-bytes", 16384, "producer batch bytes (Java batch.size default: 16384)")
	buffer := fs.Int("buffer-bytes", 32*mib, "producer buffered bytes (Java buffer.memory default)")
	timeout := fs.Duration("timeout", 15*time.Minute, "wall-clock limit of the run")
	metaMinAge := fs.Duration("metadata-min-age", 5*time.Second, "least time between metadata refreshes (franz-go default: 5 s)")
	_ = fs.Parse(os.Args[2:])
	if *bootstrap == "" || *topics <= 0 || *partitions <= 0 || *perPartition <= 0 || *burst <= 0 {
		fail(2, "-bootstrap and positive -topics, -partitions, -per-partition, -burst are required")
	}
	names := make([]string, *topics)
	for i := range names {
		names[i] = fmt.Sprintf("%s%d", *prefix, i)
	}
	warnings := &warnLog{}
	seeds := []kgo.Opt{kgo.SeedBrokers(splitComma(*bootstrap)...), kgo.WithLogger(warnings),
		kgo.MetadataMinAge(*metaMinAge)}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var result map[string]any
	var err error
	switch mode {
	case "first":
		p := producer{names: names, partitions: *partitions, perPartition: 1, burst: 1, acks: *acks,
			linger: *linger, batch: *batch, buffer: *buffer, value: []byte("first")}
		result, err = p.run(ctx, seeds)
		if err == nil {
			result["partitions_per_s"] = float64(len(names)**partitions) / result["elapsed_s"].(float64)
		}
	case "produce":
		payload := make([]byte, *size)
		for i := range payload {
			payload[i] = byte('A' + rand.Intn(26))
		}
		p := producer{names: names, partitions: *partitions, perPartition: *perPartition, burst: *burst, acks: *acks,
			linger: *linger, batch: *batch, buffer: *buffer, value: payload}
		result, err = p.run(ctx, seeds)
	case "fetch":
		result, err = fetch(ctx, seeds, names, *partitions, int64(*perPartition))
	}
	if err != nil {
		fail(1, fmt.Sprintf("%v (client warnings: %d, the first: %q)", err, warnings.count.Load(), warnings.firstFew()))
	}
	result["client_warnings"], result["client_warnings_first"] = warnings.count.Load(), warnings.firstFew()
	out, _ := json.Marshal(result)
	fmt.Println(string(out))
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

func fail(code int, msg string) {
	fmt.Fprintln(os.Stderr, "scaleperf: "+msg)
	os.Exit(code)
}

func figures(records, bytes, batches int64, elapsed time.Duration) map[string]any {
	s := elapsed.Seconds()
	perBatch := 0.0
	if batches > 0 {
		perBatch = float64(records) / float64(batches)
	}
	return map[string]any{
		"records": records, "bytes": bytes, "elapsed_s": s,
		"mb_per_s": float64(bytes) / 1e6 / s, "records_per_s": float64(records) / s,
		"batches": batches, "records_per_batch": perBatch,
	}
}

// warnLog counts the client's warnings and errors (retries, backoffs, broker errors) and keeps the
// first few, so a figure that includes retries says so.
type warnLog struct {
	count atomic.Int64
	mu    sync.Mutex
	first []string
}

func (w *warnLog) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (w *warnLog) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if level > kgo.LogLevelWarn {
		return
	}
	if w.count.Add(1) <= 5 {
		w.mu.Lock()
		w.first = append(w.first, fmt.Sprint(append([]any{msg}, keyvals...)...))
		w.mu.Unlock()
	}
}

func (w *warnLog) firstFew() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.first...)
}

// batchCounter counts the record batches the client wrote (produce) or read (fetch).
type batchCounter struct{ batches, records atomic.Int64 }

func (c *batchCounter) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	c.batches.Add(1)
	c.records.Add(int64(m.NumRecords))
}

func (c *batchCounter) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	c.batches.Add(1)
	c.records.Add(int64(m.NumRecords))
}

type producer struct {
	names                           []string
	partitions, perPartition, burst int
	acks                            string
	linger                          time.Duration
	batch, buffer                   int
	value                           []byte
}

func (p producer) run(ctx context.Context, seeds []kgo.Opt) (map[string]any, error) {
	counter := &batchCounter{}
	opts := append(seeds, kgo.WithHooks(counter),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(p.linger),
		kgo.ProducerBatchMaxBytes(int32(p.batch)),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedBytes(p.buffer),
		kgo.MaxBufferedRecords(1<<30),
		kgo.RecordDeliveryTimeout(10*time.Minute),
		// A partition its leader does not host yet (Kafka right after a large CreateTopics)
		// is retried until the delivery timeout, as the Java producer does, not failed
		// after franz-go's default 4 UNKNOWN_TOPIC_OR_PARTITION answers.
		kgo.UnknownTopicRetries(-1),
	)
	switch p.acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks())) // idempotent, 5 in flight
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
			kgo.MaxProduceRequestsInflightPerBroker(5))
	default:
		return nil, fmt.Errorf("-acks %q: 1 or all", p.acks)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var failed, acked atomic.Int64
	var firstErr atomic.Value
	done := func(_ *kgo.Record, err error) {
		if err == nil {
			acked.Add(1)
		} else if failed.Add(1) == 1 {
			firstErr.Store(err)
		}
	}
	var n int64
	start := time.Now()
	for sent := 0; sent < p.perPartition && ctx.Err() == nil; sent += p.burst {
		burst := min(p.burst, p.perPartition-sent)
		for _, topic := range p.names {
			for part := 0; part < p.partitions; part++ {
				for i := 0; i < burst; i++ {
					cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(part), Value: p.value}, done)
					n++
				}
			}
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return nil, fmt.Errorf("flush after %d records produced, %d acknowledged in %.0f s: %w", n, acked.Load(),
			time.Since(start).Seconds(), err)
	}
	elapsed := time.Since(start)
	if f := failed.Load(); f > 0 {
		return nil, fmt.Errorf("%d of %d records failed, the first: %v", f, n, firstErr.Load())
	}
	return figures(n, n*int64(len(p.value)), counter.batches.Load(), elapsed), nil
}

func fetch(ctx context.Context, seeds []kgo.Opt, names []string, partitions int, perPartition int64) (map[string]any, error) {
	counter := &batchCounter{}
	cl, err := kgo.NewClient(append(seeds, kgo.WithHooks(counter), kgo.ConsumeTopics(names...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	counts := make(map[string][]int64, len(names))
	for _, t := range names {
		counts[t] = make([]int64, partitions)
	}
	want := int64(len(names)*partitions) * perPartition
	var got, bytes int64
	var overflow error
	start := time.Now()
	for got < want && overflow == nil {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%d of %d records (%d bytes) fetched in %.0f s, then the timeout", got, want, bytes,
				time.Since(start).Seconds())
		}
		for _, e := range fetches.Errors() {
			return nil, fmt.Errorf("fetch %s[%d]: %w", e.Topic, e.Partition, e.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			c := counts[r.Topic]
			if c == nil || int(r.Partition) >= len(c) {
				overflow = fmt.Errorf("record from unexpected %s[%d]", r.Topic, r.Partition)
				return
			}
			c[r.Partition]++
			if c[r.Partition] > perPartition {
				overflow = fmt.Errorf("%s[%d] gave more than %d records", r.Topic, r.Partition, perPartition)
			}
			got++
			bytes += int64(len(r.Value))
		})
	}
	elapsed := time.Since(start)
	if overflow != nil {
		return nil, overflow
	}
	return figures(got, bytes, counter.batches.Load(), elapsed), nil
}
