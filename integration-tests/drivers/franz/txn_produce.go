// The txn-produce command (integration-tests/README.md): every --input record
// carries "txn", the number of its transaction; the transactions run one after
// another in input order with one transactional producer (--transactional-id),
// each committed unless --abort lists it. Prints one
// {"txn","partition","offset"} line per input record, in input order (aborted
// records included: they are in the log, only never visible to read_committed).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// txnTimeout bounds the whole txn-produce command.
const txnTimeout = 90 * time.Second

type txnInputRecord struct {
	inputRecord
	Txn int `json:"txn"`
}

func txnProduceCmd(fs *flag.FlagSet) func(context.Context, string) error {
	topic := fs.String("topic", "", "topic name")
	input := fs.String("input", "", "JSON-lines file of records, each with \"txn\"")
	tid := fs.String("transactional-id", "", "transactional.id")
	abort := fs.String("abort", "", "comma list of the transactions to abort")
	return func(ctx context.Context, bootstrap string) error {
		if *topic == "" || *input == "" || *tid == "" {
			return usageError{"--topic, --input and --transactional-id are required"}
		}
		aborts := map[int]bool{}
		for _, s := range strings.Split(*abort, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			n, err := strconv.Atoi(s)
			if err != nil {
				return usageError{fmt.Sprintf("--abort expects a comma list of numbers, got %q", *abort)}
			}
			aborts[n] = true
		}
		inputs, err := readTxnInput(*input)
		if err != nil {
			return err
		}
		explicit := &explicitPartitions{}
		records := make([]*kgo.Record, len(inputs))
		var order []int
		seen := map[int]bool{}
		for i, in := range inputs {
			r, err := toRecord(*topic, in.inputRecord)
			if err != nil {
				return fmt.Errorf("input record %d: %w", i, err)
			}
			if in.Partition != nil {
				explicit.set(r, *in.Partition)
			}
			records[i] = r
			if !seen[in.Txn] {
				seen[in.Txn] = true
				order = append(order, in.Txn)
			}
		}
		cl, err := newClient(bootstrap,
			kgo.TransactionalID(*tid),
			kgo.RecordPartitioner(&mixedPartitioner{
				inner:    kgo.UniformBytesPartitioner(64<<10, true, true, nil),
				explicit: explicit,
			}))
		if err != nil {
			return err
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(ctx, txnTimeout)
		defer cancel()
		for _, txn := range order {
			if err := cl.BeginTransaction(); err != nil {
				return fmt.Errorf("transaction %d: begin: %w", txn, err)
			}
			var batch []*kgo.Record
			for i, in := range inputs {
				if in.Txn == txn {
					batch = append(batch, records[i])
				}
			}
			// Every record acknowledged before EndTransaction (nothing left buffered to abort).
			if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
				return fmt.Errorf("transaction %d: produce: %w", txn, err)
			}
			commit := kgo.TryCommit
			if aborts[txn] {
				commit = kgo.TryAbort
			}
			if err := cl.EndTransaction(ctx, commit); err != nil {
				return fmt.Errorf("transaction %d: end: %w", txn, err)
			}
		}
		for i, r := range records {
			printJSON(map[string]any{"txn": inputs[i].Txn, "partition": r.Partition, "offset": r.Offset})
		}
		return nil
	}
}

func readTxnInput(path string) ([]txnInputRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []txnInputRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 256<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var in txnInputRecord
		if err := json.Unmarshal(line, &in); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, n, err)
		}
		out = append(out, in)
	}
	return out, sc.Err()
}
