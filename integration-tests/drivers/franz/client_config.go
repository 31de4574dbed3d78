package main

// --client-config FILE (harness/client_config.py): Kafka's Java client settings in a
// properties file, mapped to franz-go options. A key franz-go cannot take here fails the
// driver, naming it, so a test never runs unsecured by mistake.

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"

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
	for key, value := range props {
		switch key {
		case "security.protocol":
			if value == "SSL" || value == "SASL_SSL" {
				return nil, fmt.Errorf("--client-config: security.protocol=%s needs TLS settings this driver does not map yet", value)
			}
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
	switch mechanism {
	case "":
		return nil, nil
	case "PLAIN":
		return []kgo.Opt{kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism())}, nil
	case "SCRAM-SHA-256":
		return []kgo.Opt{kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism())}, nil
	case "SCRAM-SHA-512":
		return []kgo.Opt{kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())}, nil
	default:
		return nil, fmt.Errorf("--client-config: sasl.mechanism=%s is not mapped for franz-go", mechanism)
	}
}
