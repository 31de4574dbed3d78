// tlsperf: the second client of bench/tls.py (issue 25, "Measure"), a franz-go producer and
// consumer whose own CPU per GB is far below the JVM perf tools', so on the 2 cores it shares
// with the broker more of the brokers' own difference shows in MB/s.
//
//	tlsperf produce -bootstrap HOST:PORT -topic T -records N [-size 1024] [-acks 1] [-config FILE]
//	tlsperf fetch   -bootstrap HOST:PORT -topic T -records N [-config FILE]
//
// produce: N records of -size bytes (one payload of random capital letters, as
// kafka-producer-perf-test makes), sent asynchronously as fast as the client takes them, then
// flushed; batching like the Java producer's defaults (batch.size 16384, linger.ms 5,
// buffer.memory 32 MiB, no compression, max.in.flight 5, idempotence only with acks=all: the
// Java producer turns it off for other acks when it is not set). fetch: the first N records of
// every partition of the topic from offset 0, no group, as fast as possible.
//
// -config is the perf tools' --command-config file (bench/tls.py's client_config): SASL_SSL,
// SCRAM-SHA-512, the PEM trust store, ssl.enabled.protocols. Go cannot choose TLS 1.3 cipher
// suites (its own order: AES-128-GCM first on AES hardware), so ssl.cipher.suites is checked
// instead: a connection that negotiates a suite outside it fails the run (exit 3).
//
// Prints one JSON line: records, bytes, elapsed_s, mb_per_s (2^20 bytes of keys + values per
// second, as the perf tools count), records_per_s, and the TLS version, suites and key exchange
// of the connections made. Exit 1 on any failed record or a timeout (-timeout).
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"net"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

const mib = 1 << 20

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "produce" && os.Args[1] != "fetch") {
		fail(2, "usage: tlsperf produce|fetch -bootstrap HOST:PORT -topic T -records N [flags]")
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	bootstrap := fs.String("bootstrap", "", "host:port")
	topic := fs.String("topic", "", "topic")
	records := fs.Int64("records", 0, "records to produce or fetch")
	size := fs.Int("size", 1024, "record value bytes (produce)")
	acks := fs.String("acks", "1", "0, 1 or all (produce)")
	config := fs.String("config", "", "the perf tools' --command-config file (security settings)")
	linger := fs.Duration("linger", 5*time.Millisecond, "producer linger (Java linger.ms default: 5)")
	batch := fs.Int("batch-bytes", 16384, "producer batch bytes (Java batch.size default: 16384)")
	timeout := fs.Duration("timeout", 10*time.Minute, "wall-clock limit of the run")
	_ = fs.Parse(os.Args[2:])
	if *bootstrap == "" || *topic == "" || *records <= 0 {
		fail(2, "-bootstrap, -topic and a positive -records are required")
	}
	conns := &connLog{suites: map[string]int{}, versions: map[string]int{}, groups: map[string]int{}}
	opts := []kgo.Opt{kgo.SeedBrokers(*bootstrap)}
	if *config != "" {
		sec, err := securityOpts(*config, conns)
		if err != nil {
			fail(2, err.Error())
		}
		opts = append(opts, sec...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var result map[string]any
	var err error
	if mode == "produce" {
		result, err = produce(ctx, opts, *topic, *records, *size, *acks, *linger, *batch)
	} else {
		result, err = fetch(ctx, opts, *topic, *records)
	}
	if err != nil {
		fail(1, err.Error())
	}
	conns.addTo(result)
	out, _ := json.Marshal(result)
	fmt.Println(string(out))
}

func fail(code int, msg string) {
	fmt.Fprintln(os.Stderr, "tlsperf: "+msg)
	os.Exit(code)
}

func figures(records, bytes int64, elapsed time.Duration) map[string]any {
	s := elapsed.Seconds()
	return map[string]any{
		"records": records, "bytes": bytes, "elapsed_s": s,
		"mb_per_s": float64(bytes) / mib / s, "records_per_s": float64(records) / s,
	}
}

func produce(ctx context.Context, opts []kgo.Opt, topic string, n int64, size int, acks string,
	linger time.Duration, batch int) (map[string]any, error) {
	opts = append(opts,
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(linger),
		kgo.ProducerBatchMaxBytes(int32(batch)),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		// The Java partitioner's sticky switch comes after batch.size bytes; franz-go's after 64 KiB.
		kgo.RecordPartitioner(kgo.UniformBytesPartitioner(batch, true, true, nil)),
		kgo.MaxBufferedBytes(32*mib), // buffer.memory
		kgo.MaxBufferedRecords(1<<30),
	)
	switch acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks())) // idempotent, 5 in flight
	case "1", "0":
		ack := kgo.LeaderAck()
		if acks == "0" {
			ack = kgo.NoAck()
		}
		opts = append(opts, kgo.RequiredAcks(ack), kgo.DisableIdempotentWrite(),
			kgo.MaxProduceRequestsInflightPerBroker(5))
	default:
		return nil, fmt.Errorf("-acks %q: 0, 1 or all", acks)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte('A' + rand.Intn(26))
	}
	var failed atomic.Int64
	var firstErr atomic.Value
	done := func(_ *kgo.Record, err error) {
		if err != nil && failed.Add(1) == 1 {
			firstErr.Store(err)
		}
	}
	start := time.Now()
	for i := int64(0); i < n && ctx.Err() == nil; i++ {
		cl.Produce(ctx, &kgo.Record{Value: payload}, done)
	}
	if err := cl.Flush(ctx); err != nil {
		return nil, fmt.Errorf("flush: %w", err)
	}
	elapsed := time.Since(start)
	if f := failed.Load(); f > 0 {
		return nil, fmt.Errorf("%d of %d records failed, the first: %v", f, n, firstErr.Load())
	}
	return figures(n, n*int64(size), elapsed), nil
}

func fetch(ctx context.Context, opts []kgo.Opt, topic string, n int64) (map[string]any, error) {
	opts = append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var got, bytes int64
	start := time.Now()
	var firstRecord time.Duration
	for got < n {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%d of %d records fetched before the timeout", got, n)
		}
		for _, e := range fetches.Errors() {
			return nil, fmt.Errorf("fetch %s[%d]: %w", e.Topic, e.Partition, e.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if got >= n { // the rest of the last batch: not counted, as the perf consumer stops at n
				return
			}
			if got == 0 {
				firstRecord = time.Since(start)
			}
			got++
			bytes += int64(len(r.Key) + len(r.Value))
		})
	}
	result := figures(got, bytes, time.Since(start))
	result["first_record_s"] = firstRecord.Seconds()
	return result, nil
}

// connLog counts the TLS version, cipher suite and key exchange of every connection made.
type connLog struct {
	mu                       sync.Mutex
	suites, versions, groups map[string]int
}

func (c *connLog) add(st tls.ConnectionState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.suites[tls.CipherSuiteName(st.CipherSuite)]++
	c.versions[tls.VersionName(st.Version)]++
	c.groups[st.CurveID.String()]++
}

func (c *connLog) addTo(result map[string]any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.suites) == 0 {
		return
	}
	result["tls_versions"], result["tls_cipher_suites"], result["tls_key_exchange"] = c.versions, c.suites, c.groups
}

var jaasOption = regexp.MustCompile(`(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"`)

// securityOpts maps the properties file (the keys bench/tls.py writes) to franz-go options; a
// key it does not know fails the run, so a run never goes unsecured or unpinned by mistake.
func securityOpts(path string, conns *connLog) ([]kgo.Opt, error) {
	props, err := loadProperties(path)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	useTLS, verifyHost := false, true
	var mechanism, user, pass string
	var suites []string
	for key, value := range props {
		switch key {
		case "security.protocol":
			if value != "SASL_SSL" && value != "SSL" && value != "PLAINTEXT" && value != "SASL_PLAINTEXT" {
				return nil, fmt.Errorf("%s=%s unknown", key, value)
			}
			useTLS = strings.HasSuffix(value, "SSL")
		case "ssl.truststore.type":
			if value != "PEM" {
				return nil, fmt.Errorf("%s=%s: only PEM is mapped", key, value)
			}
		case "ssl.truststore.location":
			pem, err := os.ReadFile(value)
			if err != nil {
				return nil, err
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("no certificate in %s", value)
			}
		case "ssl.endpoint.identification.algorithm":
			verifyHost = value != ""
		case "ssl.protocol": // the SSLContext's protocol; ssl.enabled.protocols is what is offered
		case "ssl.enabled.protocols":
			if value != "TLSv1.3" {
				return nil, fmt.Errorf("%s=%s: only TLSv1.3 is mapped", key, value)
			}
			cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS13, tls.VersionTLS13
		case "ssl.cipher.suites":
			suites = strings.Split(value, ",")
		case "sasl.mechanism":
			mechanism = value
		case "sasl.jaas.config":
			for _, m := range jaasOption.FindAllStringSubmatch(value, -1) {
				v := strings.ReplaceAll(m[2], `\"`, `"`)
				switch m[1] {
				case "username":
					user = v
				case "password":
					pass = v
				}
			}
		default:
			return nil, fmt.Errorf("%s: %s has no mapping in tlsperf", path, key)
		}
	}
	if !verifyHost {
		return nil, fmt.Errorf("an empty ssl.endpoint.identification.algorithm is not mapped")
	}
	var opts []kgo.Opt
	if useTLS {
		dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: cfg}
		opts = append(opts, kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, host) // handshake done
			if err != nil {
				return nil, err
			}
			st := conn.(*tls.Conn).ConnectionState()
			conns.add(st)
			if name := tls.CipherSuiteName(st.CipherSuite); len(suites) > 0 && !contains(suites, name) {
				fail(3, fmt.Sprintf("%s negotiated %s, not one of ssl.cipher.suites %v", host, name, suites))
			}
			return conn, nil
		}))
	}
	switch mechanism {
	case "":
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
	default:
		return nil, fmt.Errorf("sasl.mechanism=%s is not mapped", mechanism)
	}
	return opts, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if strings.TrimSpace(v) == s {
			return true
		}
	}
	return false
}

// loadProperties reads k=v lines (# comments), as bench/tls.py writes them.
func loadProperties(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	props := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		props[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return props, sc.Err()
}
