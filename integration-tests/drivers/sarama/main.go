// Command sarama-driver is Brook's integration-test driver for sarama
// (github.com/IBM/sarama), the Go client the README names as supported.
//
// It speaks the driver protocol of integration-tests/README.md for the
// commands test_sarama.py uses:
//
//	sarama-driver <command> --bootstrap HOST:PORT [options]
//
// and prints one JSON document (or JSON lines where the protocol says so) to
// stdout, diagnostics to stderr. It does no checking of its own: the pytest
// scenarios assert on what it prints. Exit codes: 0 success, 1 client or
// broker error (a JSON {"error":...} document is printed to stdout first:
// sarama's own error string, and "code" when it is a Kafka error code),
// 2 bad command line.
//
// The client runs as shipped: sarama's default protocol version (its
// DefaultVersion, V2_8_0_0) and defaults, except where an option asks.
//
// Invariants: stdout carries only protocol JSON; every client call is
// bounded by a deadline so a misbehaving broker makes the driver fail, never
// hang.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

// commandTimeout bounds each request-and-answer command (admin, produce).
const commandTimeout = 60 * time.Second

// command registers its flags on fs and returns the function that runs it.
type command func(fs *flag.FlagSet) func(bootstrap []string) error

var commands = map[string]command{
	"create-topic":     createTopicCmd,
	"delete-topic":     deleteTopicCmd,
	"describe-topic":   describeTopicCmd,
	"describe-configs": describeConfigsCmd,
	"produce":          produceCmd,
	"consume":          consumeCmd,
	"group-consume":    groupConsumeCmd,
	"txn-produce":      txnProduceCmd,
}

// usageError is a bad command line: exit code 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: sarama-driver <command> --bootstrap HOST:PORT [options]")
		return 2
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown command %q\n", args[0])
		return 2
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	bootstrap := fs.String("bootstrap", "", "HOST:PORT of a broker")
	runFn := cmd(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *bootstrap == "" || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "--bootstrap is required and no positional arguments are taken")
		return 2
	}
	// BROOK_DRIVER_LOG=1 sends sarama's own log to stderr, for diagnosing a
	// failing scenario (stdout stays protocol JSON).
	if os.Getenv("BROOK_DRIVER_LOG") != "" {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags|log.Lmicroseconds)
	}
	err := runFn(strings.Split(*bootstrap, ","))
	if err == nil {
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(os.Stderr, ue.msg)
		return 2
	}
	fmt.Fprintf(os.Stderr, "sarama-driver %s: %v\n", args[0], err)
	printJSON(errorDoc(err))
	return 1
}

// errorDoc describes a failure for the harness: sarama's error string, and
// the Kafka error code when the failure is one (sarama.KError).
func errorDoc(err error) map[string]any {
	doc := map[string]any{"error": err.Error()}
	if code, ok := kafkaCode(err); ok {
		doc["code"] = code
	}
	return doc
}

// kafkaCode finds a Kafka error code in err: a KError, or the first one in
// sarama's ProducerErrors.
func kafkaCode(err error) (int16, bool) {
	var ke sarama.KError
	if errors.As(err, &ke) {
		return int16(ke), true
	}
	var te *sarama.TopicError
	if errors.As(err, &te) && te.Err != sarama.ErrNoError {
		return int16(te.Err), true
	}
	var pes sarama.ProducerErrors
	if errors.As(err, &pes) && len(pes) > 0 {
		return kafkaCode(pes[0].Err)
	}
	return 0, false
}

// printJSON writes one JSON document and a newline to stdout.
func printJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own plain maps are marshalled; if it fails, stderr says
		// why and stdout stays parseable.
		fmt.Fprintf(os.Stderr, "marshal output: %v\n", err)
		return
	}
	os.Stdout.Write(append(b, '\n'))
}

// newConfig is sarama's default configuration with the driver's client id.
func newConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = "brook-sarama-driver"
	return c
}

// multiFlag collects a repeatable option such as --config k=v.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
