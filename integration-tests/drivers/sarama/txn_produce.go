// The txn-produce command (integration-tests/README.md): every --input record
// carries "txn", the number of its transaction; the transactions run one after
// another in input order with one sarama transactional producer
// (Producer.Transaction.ID, which sarama runs idempotent with acks=all and one
// request in flight), each committed unless --abort lists it. Prints one
// {"txn","partition","offset"} line per input record, in input order.
package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/IBM/sarama"
)

func txnProduceCmd(fs *flag.FlagSet) func([]string) error {
	topic := fs.String("topic", "", "topic name")
	input := fs.String("input", "", "JSON-lines file of records, each with \"txn\"")
	tid := fs.String("transactional-id", "", "transactional.id")
	abort := fs.String("abort", "", "comma list of the transactions to abort")
	return func(bootstrap []string) error {
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
		inputs, err := readInput(*input)
		if err != nil {
			return err
		}
		msgs, err := toMessages(*topic, inputs)
		if err != nil {
			return err
		}
		conf, err := producerConfig("", "all", true)
		if err != nil {
			return err
		}
		conf.Producer.Transaction.ID = *tid
		producer, err := sarama.NewSyncProducer(bootstrap, conf)
		if err != nil {
			return err
		}
		defer producer.Close()
		var order []int
		seen := map[int]bool{}
		for _, in := range inputs {
			if !seen[in.Txn] {
				seen[in.Txn] = true
				order = append(order, in.Txn)
			}
		}
		for _, txn := range order {
			if err := producer.BeginTxn(); err != nil {
				return fmt.Errorf("transaction %d: begin: %w", txn, err)
			}
			var batch []*sarama.ProducerMessage
			for i, in := range inputs {
				if in.Txn == txn {
					batch = append(batch, msgs[i])
				}
			}
			if err := producer.SendMessages(batch); err != nil {
				return fmt.Errorf("transaction %d: produce: %w", txn, err)
			}
			end := producer.CommitTxn
			if aborts[txn] {
				end = producer.AbortTxn
			}
			if err := end(); err != nil {
				return fmt.Errorf("transaction %d: end: %w", txn, err)
			}
		}
		for i, m := range msgs {
			printJSON(map[string]any{"txn": inputs[i].Txn, "partition": m.Partition, "offset": m.Offset})
		}
		return nil
	}
}
