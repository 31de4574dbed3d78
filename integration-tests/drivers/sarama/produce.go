// The produce command: reads JSON-lines records from --input, sends them all
// with one SyncProducer.SendMessages, and prints one {"partition","offset"}
// line per input record, in input order (a failed record: partition and
// offset -1 and "error", sarama's error string).
//
// sarama's defaults are kept except where the protocol's options say
// otherwise: acks=all (the protocol's default; sarama's own is acks=1),
// --idempotent (Producer.Idempotent, which sarama requires to run with one
// request in flight), --codec. Records naming a "partition" go exactly there,
// the others through sarama's default hash partitioner.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/IBM/sarama"
)

// inputRecord is one line of --input. Pointers tell absent/null from empty.
type inputRecord struct {
	Key       *string     `json:"key"`
	Value     *string     `json:"value"`
	Headers   [][]*string `json:"headers"`
	Timestamp *int64      `json:"timestamp"`
	Partition *int32      `json:"partition"`
	Txn       int         `json:"txn"` // txn-produce only
}

// explicit marks a message whose partition the input named (ProducerMessage.Metadata).
type explicit struct{}

// mixedPartitioner sends marked messages to their own partition and the rest
// through sarama's default (hash) partitioner.
type mixedPartitioner struct{ inner sarama.Partitioner }

func newMixedPartitioner(topic string) sarama.Partitioner {
	return mixedPartitioner{inner: sarama.NewHashPartitioner(topic)}
}

func (m mixedPartitioner) Partition(msg *sarama.ProducerMessage, n int32) (int32, error) {
	if _, ok := msg.Metadata.(explicit); ok {
		return msg.Partition, nil
	}
	return m.inner.Partition(msg, n)
}

// RequiresConsistency: a marked message must not move, and keyed ones keep
// the hash partitioner's promise.
func (m mixedPartitioner) RequiresConsistency() bool { return true }

func produceCmd(fs *flag.FlagSet) func([]string) error {
	topic := fs.String("topic", "", "topic name")
	input := fs.String("input", "", "JSON-lines file of records")
	codec := fs.String("codec", "", "none|gzip|snappy|lz4|zstd (absent: sarama's default, none)")
	acks := fs.String("acks", "all", "all|1|0")
	idempotent := fs.Bool("idempotent", false, "idempotent producer (Producer.Idempotent)")
	return func(bootstrap []string) error {
		if *topic == "" || *input == "" {
			return usageError{"--topic and --input are required"}
		}
		conf, err := producerConfig(*codec, *acks, *idempotent)
		if err != nil {
			return err
		}
		inputs, err := readInput(*input)
		if err != nil {
			return err
		}
		msgs, err := toMessages(*topic, inputs)
		if err != nil {
			return err
		}
		producer, err := sarama.NewSyncProducer(bootstrap, conf)
		if err != nil {
			return err
		}
		defer producer.Close()
		sendErr := producer.SendMessages(msgs)
		failed := map[*sarama.ProducerMessage]error{}
		var pes sarama.ProducerErrors
		if errors.As(sendErr, &pes) {
			for _, pe := range pes {
				failed[pe.Msg] = pe.Err
			}
		} else if sendErr != nil {
			return sendErr
		}
		var firstErr error
		for _, m := range msgs {
			line := map[string]any{"partition": m.Partition, "offset": m.Offset}
			if *acks == "0" {
				line["offset"] = -1 // no response, no offset
			}
			if err, bad := failed[m]; bad {
				line = map[string]any{"partition": -1, "offset": -1, "error": err.Error()}
				if code, ok := kafkaCode(err); ok {
					line["code"] = code
				}
				if firstErr == nil {
					firstErr = err
				}
			}
			printJSON(line)
		}
		return firstErr
	}
}

func producerConfig(codec, acks string, idempotent bool) (*sarama.Config, error) {
	conf := newConfig()
	conf.Producer.Return.Successes = true // SyncProducer needs both
	conf.Producer.Return.Errors = true
	conf.Producer.Partitioner = newMixedPartitioner
	conf.Producer.Timeout = commandTimeout
	codecs := map[string]sarama.CompressionCodec{
		"": sarama.CompressionNone, "none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP,
		"snappy": sarama.CompressionSnappy, "lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD,
	}
	c, ok := codecs[codec]
	if !ok {
		return nil, usageError{fmt.Sprintf("unknown codec %q", codec)}
	}
	conf.Producer.Compression = c
	switch acks {
	case "all", "-1":
		conf.Producer.RequiredAcks = sarama.WaitForAll
	case "1":
		conf.Producer.RequiredAcks = sarama.WaitForLocal
	case "0":
		conf.Producer.RequiredAcks = sarama.NoResponse
	default:
		return nil, usageError{fmt.Sprintf("unknown acks %q", acks)}
	}
	if idempotent {
		conf.Producer.Idempotent = true
		conf.Net.MaxOpenRequests = 1 // sarama's rule for an idempotent producer
	}
	return conf, nil
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

func toMessages(topic string, inputs []inputRecord) ([]*sarama.ProducerMessage, error) {
	msgs := make([]*sarama.ProducerMessage, 0, len(inputs))
	for i, in := range inputs {
		m := &sarama.ProducerMessage{Topic: topic}
		if in.Key != nil {
			m.Key = sarama.StringEncoder(*in.Key)
		}
		if in.Value != nil {
			m.Value = sarama.StringEncoder(*in.Value)
		}
		for _, h := range in.Headers {
			if len(h) != 2 || h[0] == nil {
				return nil, fmt.Errorf(`input record %d: a header must be ["key", "value"|null]`, i)
			}
			hdr := sarama.RecordHeader{Key: []byte(*h[0])}
			if h[1] != nil {
				hdr.Value = []byte(*h[1])
			}
			m.Headers = append(m.Headers, hdr)
		}
		if in.Timestamp != nil {
			m.Timestamp = time.UnixMilli(*in.Timestamp)
		}
		if in.Partition != nil {
			m.Partition = *in.Partition
			m.Metadata = explicit{}
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}
