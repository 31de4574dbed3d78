// The produce-stream command: one franz-go client writing sequence-numbered
// values continuously at a fixed rate, the workload of the fault-injection run
// (integration-tests/scripts/chaos.py).
//
//	produce-stream --bootstrap B --topic T --partitions N --prefix P [--rate 200]
//	               [--acks all] [--idempotent] [--duration-ms D] [--max-count C]
//	               [--request-timeout-ms 5000] [--delivery-timeout-ms 60000]
//	               [--close-timeout-ms 30000] [--keyed]
//
// Record i (from 0) has no key (--keyed: the key "K-<i>", also printed as
// "key"), the value "P-<i>" (i zero-padded to 9 digits) and goes to
// partition i % N. One JSON line per record as soon as its
// produce completes (the promise; franz-go calls promises of one partition in
// order):
//
//	{"value":"P-000000012","seq":12,"partition":0,"offset":40,"ok":true,"t_send":ms,"t_ack":ms}
//	{"value":..,"seq":..,"partition":0,"offset":-1,"ok":false,"error":"..","t_send":ms,"t_ack":ms}
//
// Runs until --duration-ms, --max-count or SIGTERM/SIGINT; then stops sending,
// flushes for up to --close-timeout-ms (what is still pending is failed and
// printed as an error) and prints {"done":true,"sent":n,"acked":a,"failed":f}.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	commands["produce-stream"] = command{flags: produceStreamCmd}
}

func produceStreamCmd(fs *flag.FlagSet) func(context.Context, string) error {
	topic := fs.String("topic", "", "topic name")
	partitions := fs.Int("partitions", 0, "records go to partition seq % N")
	prefix := fs.String("prefix", "", "value prefix")
	rate := fs.Float64("rate", 200, "records per second")
	acks := fs.String("acks", "all", "all|1|0")
	fs.Bool("idempotent", false, "idempotent producer (franz-go default)")
	durationMs := fs.Int64("duration-ms", 0, "stop after this long (0: until SIGTERM)")
	maxCount := fs.Int64("max-count", 0, "stop after this many records (0: no limit)")
	requestTimeoutMs := fs.Int("request-timeout-ms", 5000, "ProduceRequestTimeout")
	deliveryTimeoutMs := fs.Int("delivery-timeout-ms", 60000, "RecordDeliveryTimeout")
	closeTimeoutMs := fs.Int("close-timeout-ms", 30000, "flush deadline at the end")
	keyed := fs.Bool("keyed", false, "give record i the key K-<i>")
	return func(ctx context.Context, bootstrap string) error {
		if *topic == "" || *prefix == "" || *partitions <= 0 || *rate <= 0 {
			return usageError{"--topic, --prefix, --partitions (> 0) and --rate (> 0) are required"}
		}
		opts, err := producerOpts("", *acks, 0)
		if err != nil {
			return err
		}
		opts = append(opts,
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProduceRequestTimeout(time.Duration(*requestTimeoutMs)*time.Millisecond),
			kgo.RecordDeliveryTimeout(time.Duration(*deliveryTimeoutMs)*time.Millisecond),
			kgo.RetryBackoffFn(func(int) time.Duration { return 200 * time.Millisecond }),
			kgo.ProducerLinger(5*time.Millisecond),
			kgo.MaxBufferedRecords(1<<20),
		)
		cl, err := newClient(bootstrap, opts...)
		if err != nil {
			return err
		}
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		var end <-chan time.Time
		if *durationMs > 0 {
			end = time.After(time.Duration(*durationMs) * time.Millisecond)
		}
		var out sync.Mutex
		var acked, failed atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		var sent int64
	loop:
		for *maxCount == 0 || sent < *maxCount {
			due := start.Add(time.Duration(float64(sent) * float64(time.Second) / *rate))
			if wait := time.Until(due); wait > 0 {
				select {
				case <-stop:
					break loop
				case <-end:
					break loop
				case <-time.After(wait):
				}
			} else {
				select {
				case <-stop:
					break loop
				case <-end:
					break loop
				default:
				}
			}
			seq := sent
			value := fmt.Sprintf("%s-%09d", *prefix, seq)
			r := &kgo.Record{Topic: *topic, Partition: int32(seq % int64(*partitions)), Value: []byte(value)}
			if *keyed {
				r.Key = []byte(fmt.Sprintf("K-%09d", seq))
			}
			tSend := time.Now().UnixMilli()
			wg.Add(1)
			cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
				defer wg.Done()
				line := map[string]any{"value": value, "seq": seq, "partition": r.Partition, "offset": r.Offset,
					"ok": err == nil, "t_send": tSend, "t_ack": time.Now().UnixMilli()}
				if r.Key != nil {
					line["key"] = string(r.Key)
				}
				if err != nil {
					line["offset"] = -1
					line["error"] = errorDoc(err)["error"]
					failed.Add(1)
				} else {
					acked.Add(1)
				}
				out.Lock()
				printJSON(line)
				out.Unlock()
			})
			sent++
		}
		flushCtx, cancel := context.WithTimeout(context.Background(), time.Duration(*closeTimeoutMs)*time.Millisecond)
		if err := cl.Flush(flushCtx); err != nil {
			fmt.Fprintf(os.Stderr, "flush: %v (failing what is pending)\n", err)
		}
		cancel()
		cl.Close() // fails every record still buffered; their promises run
		wg.Wait()
		printJSON(map[string]any{"done": true, "sent": sent, "acked": acked.Load(), "failed": failed.Load()})
		return nil
	}
}
