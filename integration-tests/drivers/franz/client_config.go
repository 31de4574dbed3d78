package main

// --client-config FILE (harness/client_config.py): Kafka's Java client settings in a
// properties file, mapped to franz-go options. A key franz-go cannot take here fails the
// driver, naming it, so a test never runs unsecured by mistake. TLS takes Kafka's PEM
// stores (harness/client_config.py): the trust store verifies the broker (host name
// checked, as kgo sets ServerName from each broker address, unless
// ssl.endpoint.identification.algorithm is empty); the key store file holds the client's
// key and certificate chain for mTLS.

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// clientConfigOpts are added to every client newClient makes.
var clientConfigOpts []kgo.Opt

var jaasOption = regexp.MustCompile(`(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"`)

// loadProperties reads k=v / k: v lines, # and ! comments, \ continuations.
func loadProperties(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	props := map[string]string{}
	pending := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if pending != "" {
			line = pending + line
		}
		if strings.HasSuffix(line, `\`) && !strings.HasSuffix(line, `\\`) {
			pending = strings.TrimSuffix(line, `\`)
			continue
		}
		pending = ""
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i < 0 {
			props[line] = ""
			continue
		}
		props[strings.TrimSpace(line[:i])] = strings.TrimSpace(line[i+1:])
	}
	return props, sc.Err()
}

// clientConfig maps the file's settings to franz-go options.
func clientConfig(path string) ([]kgo.Opt, error) {
	props, err := loadProperties(path)
	if err != nil {
		return nil, err
	}
	var mechanism, user, pass string
	var opts []kgo.Opt
	useTLS := false
	verifyHost := true
	var caFile, keystoreFile string
	for key, value := range props {
		switch key {
		case "security.protocol":
			useTLS = value == "SSL" || value == "SASL_SSL"
		case "ssl.truststore.type", "ssl.keystore.type":
			if value != "PEM" {
				return nil, fmt.Errorf("--client-config: %s=%s has no mapping for franz-go: use PEM", key, value)
			}
		case "ssl.truststore.location":
			caFile = value
		case "ssl.keystore.location":
			keystoreFile = value
		case "ssl.endpoint.identification.algorithm":
			verifyHost = value != ""
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
			return nil, fmt.Errorf("--client-config: %s has no mapping for franz-go (client_config.go)", key)
		}
	}
	if useTLS {
		dial, err := tlsDialer(caFile, keystoreFile, verifyHost)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.Dialer(dial))
	}
	switch mechanism {
	case "":
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
	default:
		return nil, fmt.Errorf("--client-config: sasl.mechanism=%s is not mapped for franz-go", mechanism)
	}
	return opts, nil
}

// tlsDialer dials TLS 1.2+ with the trust store's CAs (the system's when none is given)
// and, for mTLS, the key store's key and chain (both in one PEM file).
func tlsDialer(caFile, keystoreFile string, verifyHost bool) (func(ctx context.Context, network, host string) (net.Conn, error), error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--client-config: no certificate in %s", caFile)
		}
		cfg.RootCAs = pool
	}
	if keystoreFile != "" {
		pair, err := tls.LoadX509KeyPair(keystoreFile, keystoreFile)
		if err != nil {
			return nil, fmt.Errorf("--client-config: ssl.keystore.location %s: %w", keystoreFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if !verifyHost {
		// Kafka's empty ssl.endpoint.identification.algorithm: the chain is still
		// verified against the CAs, only the host name is not.
		cfg.InsecureSkipVerify = true
		cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			return verifyChainOnly(raw, cfg.RootCAs)
		}
	}
	dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: cfg}
	return dialer.DialContext, nil
}

func verifyChainOnly(raw [][]byte, roots *x509.CertPool) error {
	if len(raw) == 0 {
		return fmt.Errorf("the broker sent no certificate")
	}
	certs := make([]*x509.Certificate, 0, len(raw))
	for _, der := range raw {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return err
		}
		certs = append(certs, c)
	}
	intermediates := x509.NewCertPool()
	for _, c := range certs[1:] {
		intermediates.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates})
	return err
}
