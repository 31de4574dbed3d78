// The produce command: reads JSON-lines records from --input, sends them all
// with one ProduceSync, and prints one {"partition","offset"} line per input
// record, in input order.
//
// franz-go defaults kept on purpose (the point is to test the client as
// shipped): idempotent writes with acks=all, snappy compression when --codec
// is absent, the KIP-794 uniform sticky partitioner with murmur2 for keyed
// records (the Java client's hash), linger 0. --acks 1|0 must turn off
// idempotence (Kafka requires acks=all for an idempotent producer).
//
// Invariant: a record with an explicit "partition" goes exactly there; the
// others are placed by the default partitioner.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produceTimeout bounds the whole produce command.
const produceTimeout = 60 * time.Second

// inputRecord is one line of --input. Pointers tell absent/null from empty.
type inputRecord struct {
	Key       *string     `json:"key"`
	Value     *string     `json:"value"`
	Headers   [][]*string `json:"headers"`
	Timestamp *int64      `json:"timestamp"`
	Partition *int32      `json:"partition"`
}

func produceCmd(fs *flag.FlagSet) func(context.Context, string) error {
	topic := fs.String("topic", "", "topic name")
	input := fs.String("input", "", "JSON-lines file of records")
	codec := fs.String("codec", "", "none|gzip|snappy|lz4|zstd (absent: franz-go default, snappy)")
	acks := fs.String("acks", "all", "all|1|0")
	// franz-go is idempotent by default; the flag is accepted for the
	// protocol and changes nothing.
	fs.Bool("idempotent", false, "idempotent producer (franz-go default)")
	maxRequest := fs.Int("max-request-size", 0, "largest record batch, bytes (ProducerBatchMaxBytes)")
	return func(ctx context.Context, bootstrap string) error {
		if *topic == "" || *input == "" {
			return usageError{"--topic and --input are required"}
		}
		opts, err := producerOpts(*codec, *acks, *maxRequest)
		if err != nil {
			return err
		}
		inputs, err := readInput(*input)
		if err != nil {
			return err
		}
		explicit := &explicitPartitions{}
		records := make([]*kgo.Record, 0, len(inputs))
		for i, in := range inputs {
			r, err := toRecord(*topic, in)
			if err != nil {
				return fmt.Errorf("input record %d: %w", i, err)
			}
			if in.Partition != nil {
				explicit.set(r, *in.Partition)
			}
			records = append(records, r)
		}
		opts = append(opts, kgo.RecordPartitioner(&mixedPartitioner{
			inner:    kgo.UniformBytesPartitioner(64<<10, true, true, nil), // franz-go's default
			explicit: explicit,
		}))
		cl, err := newClient(bootstrap, opts...)
		if err != nil {
			return err
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(ctx, produceTimeout)
		defer cancel()
		// ProduceSync lists results in completion order, not input order:
		// index them by record to print in input order.
		errs := map[*kgo.Record]error{}
		for _, res := range cl.ProduceSync(ctx, records...) {
			errs[res.Record] = res.Err
		}
		var firstErr error
		for _, r := range records {
			line := map[string]any{"partition": r.Partition, "offset": r.Offset}
			if *acks == "0" {
				// No response, no offset (the protocol's -1).
				line["offset"] = -1
			}
			if err, done := errs[r]; !done || err != nil {
				if !done {
					err = errors.New("no produce result for record")
				}
				// An error line's partition may never have been chosen.
				line["partition"] = -1
				line["offset"] = -1
				line["error"] = errorDoc(err)["error"]
				if firstErr == nil {
					firstErr = err
				}
			}
			printJSON(line)
		}
		return firstErr
	}
}

func producerOpts(codec, acks string, maxRequest int) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	switch codec {
	case "":
	case "none":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
	case "gzip":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.GzipCompression()))
	case "snappy":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	case "lz4":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	case "zstd":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	default:
		return nil, usageError{fmt.Sprintf("unknown codec %q", codec)}
	}
	switch acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return nil, usageError{fmt.Sprintf("unknown acks %q", acks)}
	}
	if maxRequest > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(int32(maxRequest)))
		// The client refuses a batch limit above its write limit (default
		// 100 MiB); raise the latter only when needed.
		if maxRequest > 100<<20 {
			opts = append(opts, kgo.BrokerMaxWriteBytes(int32(maxRequest)+(1<<20)))
		}
	}
	return opts, nil
}

func readInput(path string) ([]inputRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []inputRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 256<<20) // values may be megabytes
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var in inputRecord
		if err := json.Unmarshal(line, &in); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, n, err)
		}
		out = append(out, in)
	}
	return out, sc.Err()
}

func toRecord(topic string, in inputRecord) (*kgo.Record, error) {
	r := &kgo.Record{Topic: topic}
	if in.Key != nil {
		r.Key = []byte(*in.Key)
	}
	if in.Value != nil {
		r.Value = []byte(*in.Value)
	}
	for _, h := range in.Headers {
		if len(h) != 2 || h[0] == nil {
			return nil, errors.New(`a header must be ["key", "value"|null]`)
		}
		hdr := kgo.RecordHeader{Key: *h[0]}
		if h[1] != nil {
			hdr.Value = []byte(*h[1])
		}
		r.Headers = append(r.Headers, hdr)
	}
	if in.Timestamp != nil {
		// A non-zero Timestamp is sent as is (CreateTime); zero means "now".
		r.Timestamp = time.UnixMilli(*in.Timestamp)
	}
	return r, nil
}

// explicitPartitions remembers which records named their own partition.
type explicitPartitions struct{ m sync.Map }

func (e *explicitPartitions) set(r *kgo.Record, p int32) { e.m.Store(r, p) }

func (e *explicitPartitions) get(r *kgo.Record) (int32, bool) {
	v, ok := e.m.Load(r)
	if !ok {
		return 0, false
	}
	p, ok := v.(int32)
	return p, ok
}

// mixedPartitioner sends records with an explicit partition there and
// leaves the rest to the client's default partitioner.
type mixedPartitioner struct {
	inner    kgo.Partitioner
	explicit *explicitPartitions
}

func (m *mixedPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return &mixedTopicPartitioner{inner: m.inner.ForTopic(topic), explicit: m.explicit}
}

type mixedTopicPartitioner struct {
	inner    kgo.TopicPartitioner
	explicit *explicitPartitions
}

func (m *mixedTopicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	if _, ok := m.explicit.get(r); ok {
		return true
	}
	return m.inner.RequiresConsistency(r)
}

func (m *mixedTopicPartitioner) Partition(r *kgo.Record, n int) int {
	if p, ok := m.explicit.get(r); ok {
		return int(p)
	}
	return m.inner.Partition(r, n)
}

// OnNewBatch and PartitionByBackup forward the default partitioner's
// optional extensions, so the sticky/adaptive behaviour stays the default's.
func (m *mixedTopicPartitioner) OnNewBatch() {
	if nb, ok := m.inner.(kgo.TopicPartitionerOnNewBatch); ok {
		nb.OnNewBatch()
	}
}

func (m *mixedTopicPartitioner) PartitionByBackup(r *kgo.Record, n int, it kgo.TopicBackupIter) int {
	if p, ok := m.explicit.get(r); ok {
		return int(p)
	}
	if bp, ok := m.inner.(kgo.TopicBackupPartitioner); ok {
		return bp.PartitionByBackup(r, n, it)
	}
	return m.inner.Partition(r, n)
}
