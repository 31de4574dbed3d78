// Command franz-driver is Brook's integration-test driver for franz-go
// (github.com/twmb/franz-go, with its kadm admin package).
//
// It speaks the driver protocol of integration-tests/README.md:
//
//	franz-driver <command> --bootstrap HOST:PORT [options]
//
// and prints one JSON document (or JSON lines where the protocol says so) to
// stdout, diagnostics to stderr. It does no checking of its own: the pytest
// scenarios assert on what it prints. Exit codes: 0 success, 1 client or
// broker error (a JSON {"error":...} document is printed to stdout first),
// 2 bad command line. franz-go implements every command, so 3 (unsupported)
// is never used.
//
// Invariants: stdout carries only protocol JSON; every client call is
// bounded by a deadline so a misbehaving broker makes the driver fail, never
// hang.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// adminTimeout bounds every admin command; a broker that does not answer in
// this time is a failure, not a hang.
const adminTimeout = 30 * time.Second

// command is one driver-protocol command: it registers its flags, then runs.
type command struct {
	flags func(fs *flag.FlagSet) func(ctx context.Context, bootstrap string) error
}

var commands = map[string]command{
	"metadata":          {flags: metadataCmd},
	"create-topic":      {flags: createTopicCmd},
	"delete-topic":      {flags: deleteTopicCmd},
	"create-partitions": {flags: createPartitionsCmd},
	"describe-topic":    {flags: describeTopicCmd},
	"list-topics":       {flags: listTopicsCmd},
	"describe-configs":  {flags: describeConfigsCmd},
	"alter-configs":     {flags: alterConfigsCmd},
	"produce":           {flags: produceCmd},
	"consume":           {flags: consumeCmd},
	"group-consume":     {flags: groupConsumeCmd},
	"offsets":           {flags: offsetsCmd},
	"txn-produce":       {flags: txnProduceCmd},
	"txn-copy":          {flags: txnCopyCmd},
}

// usageError is a bad command line: exit code 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: franz-driver <command> --bootstrap HOST:PORT [options]")
		return 2
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown command %q\n", args[0])
		return 2
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	bootstrap := fs.String("bootstrap", "", "HOST:PORT of a broker")
	clientConfigPath := fs.String("client-config", "", "a properties file of client settings (harness/client_config.py)")
	runFn := cmd.flags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *clientConfigPath != "" {
		opts, err := clientConfig(*clientConfigPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		clientConfigOpts = opts
	}
	if *bootstrap == "" {
		fmt.Fprintln(os.Stderr, "--bootstrap is required")
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unexpected arguments: %v\n", fs.Args())
		return 2
	}
	err := runFn(context.Background(), *bootstrap)
	if err == nil {
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(os.Stderr, ue.msg)
		return 2
	}
	fmt.Fprintf(os.Stderr, "franz-driver %s: %v\n", args[0], err)
	printJSON(errorDoc(err))
	return 1
}

// errorDoc describes a failure for the harness: the Kafka error name (e.g.
// TOPIC_ALREADY_EXISTS) when the failure is a Kafka error code, so that
// scenarios can assert on the broker's answer across clients.
func errorDoc(err error) map[string]any {
	doc := map[string]any{"error": err.Error()}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		doc["error"] = ke.Message
		doc["code"] = ke.Code
	}
	var msg *messageError
	if errors.As(err, &msg) && msg.message != "" {
		doc["message"] = msg.message
	}
	return doc
}

// messageError keeps the broker's free-text error message beside the code.
type messageError struct {
	err     error
	message string
}

func (e *messageError) Error() string {
	if e.message == "" {
		return e.err.Error()
	}
	return e.err.Error() + ": " + e.message
}

func (e *messageError) Unwrap() error { return e.err }

// withMessage wraps a kadm per-resource error with its broker message; nil
// stays nil.
func withMessage(err error, message string) error {
	if err == nil {
		return nil
	}
	return &messageError{err: err, message: message}
}

// printJSON writes one JSON document and a newline to stdout.
func printJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own plain maps and structs are marshalled; this cannot
		// fail, but if it does, stderr says why and stdout stays parseable.
		fmt.Fprintf(os.Stderr, "marshal output: %v\n", err)
		return
	}
	os.Stdout.Write(append(b, '\n'))
}

// newClient builds a franz-go client with the client's defaults plus opts.
// BROOK_DRIVER_LOG=debug|info|warn|error sends franz-go's own log to stderr
// (as the Java driver does), for diagnosing a failing scenario.
func newClient(bootstrap string, opts ...kgo.Opt) (*kgo.Client, error) {
	all := append([]kgo.Opt{
		kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
		kgo.ClientID("brook-franz-driver"),
	}, append(append([]kgo.Opt{}, clientConfigOpts...), opts...)...)
	levels := map[string]kgo.LogLevel{
		"debug": kgo.LogLevelDebug, "info": kgo.LogLevelInfo, "warn": kgo.LogLevelWarn, "error": kgo.LogLevelError,
	}
	if level, ok := levels[os.Getenv("BROOK_DRIVER_LOG")]; ok {
		all = append(all, kgo.WithLogger(kgo.BasicLogger(os.Stderr, level, nil)))
	}
	return kgo.NewClient(all...)
}

// withAdmin runs fn with a kadm client and a bounded context.
func withAdmin(ctx context.Context, bootstrap string, fn func(ctx context.Context, adm *kadm.Client, cl *kgo.Client) error) error {
	cl, err := newClient(bootstrap)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	return fn(ctx, kadm.NewClient(cl), cl)
}

// multiFlag collects a repeatable string option such as --config k=v.
type multiFlag []string

func (m *multiFlag) String() string { return strings.Join(*m, ",") }

func (m *multiFlag) Set(v string) error {
	*m = append(*m, v)
	return nil
}

// splitKV parses k=v; the value may itself contain '='.
func splitKV(s string) (string, string, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return "", "", usageError{fmt.Sprintf("expected key=value, got %q", s)}
	}
	return k, v, nil
}
