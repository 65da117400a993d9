package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/config"
	"smsdispatcher/dispatch"
	"smsdispatcher/internal/topology"
	"smsdispatcher/telemetry"
)

// runPublish is `dispatcher publish`: what a producer does.
func runPublish(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("publish", stderr)
	load := config.Flags(fs, config.Pubsub|config.Topics, environ)
	class := fs.String("class", "", "the message's class: otp, marketing, or another of ACCOUNTS_FILE's classes (required)")
	to := fs.String("to", "", "E.164 phone number")
	body := fs.String("body", "", "message text")
	id := fs.String("id", "", "idempotency key (default: the Pub/Sub message ID)")
	deadline := fs.String("deadline", "", "RFC 3339 time after which the message must not be sent")
	file := fs.String("file", "", "publish each line of this file (JSON messages, '-' for stdin) instead")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	k, err := classOf(cfg, *class)
	if err != nil {
		return err
	}
	topic := k.Topic

	var lines [][]byte
	if *file != "" {
		if lines, err = readLines(*file); err != nil {
			return err
		}
	} else {
		m := map[string]string{"to": *to, "body": *body}
		if *id != "" {
			m["id"] = *id
		}
		if *deadline != "" {
			m["deadline"] = *deadline
		}
		b, _ := json.Marshal(m)
		lines = [][]byte{b}
	}
	// Refuse what the dispatcher would dead-letter: a producer learns now.
	for i, l := range lines {
		if _, err := dispatch.Decode(l, "-"); err != nil {
			return fmt.Errorf("message %d: %w", i+1, err)
		}
	}

	tr, err := telemetry.SetupTracing(ctx, environ)
	if err != nil {
		return err
	}
	defer tr.Shutdown(context.WithoutCancel(ctx))
	ps, err := topology.NewClient(ctx, cfg.ProjectID, "")
	if err != nil {
		return err
	}
	defer ps.Close()
	pub := ps.Publisher(topic)
	defer pub.Stop()
	return publishLines(ctx, tr, pub, topic, lines, stdout)
}

// publishLines publishes every line, each in a producer span whose W3C
// trace context travels in the message's attributes, and prints each
// server ID; it waits for all of them.
func publishLines(ctx context.Context, tr *telemetry.Tracing, pub *pubsub.Publisher, topic string, lines [][]byte, stdout io.Writer) error {
	results := make([]*pubsub.PublishResult, len(lines))
	for i, l := range lines {
		sctx, span := tr.StartPublish(ctx, topic)
		attrs := map[string]string{}
		tr.Inject(sctx, attrs)
		results[i] = pub.Publish(sctx, &pubsub.Message{Data: l, Attributes: attrs})
		span.End()
	}
	for i, r := range results {
		id, err := r.Get(ctx)
		if err != nil {
			return fmt.Errorf("publish message %d: %w", i+1, err)
		}
		fmt.Fprintln(stdout, id)
	}
	return nil
}

func readLines(name string) ([][]byte, error) {
	f := os.Stdin
	if name != "-" {
		var err error
		if f, err = os.Open(name); err != nil {
			return nil, err
		}
		defer f.Close()
	}
	var lines [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), dispatch.MaxDataBytes+1)
	for sc.Scan() {
		if len(sc.Bytes()) > 0 {
			lines = append(lines, append([]byte(nil), sc.Bytes()...))
		}
	}
	return lines, sc.Err()
}

// classOf is the class of cfg named by --class.
func classOf(cfg config.Settings, name string) (config.Class, error) {
	classes := cfg.ClassList()
	for _, c := range classes {
		if c.Name.String() == name {
			return c, nil
		}
	}
	names := make([]string, len(classes))
	for i, c := range classes {
		names[i] = c.Name.String()
	}
	return config.Class{}, fmt.Errorf("--class: want one of the classes %s, got %q", strings.Join(names, ", "), name)
}

// runSetup is `dispatcher setup`.
func runSetup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("setup", stderr)
	load := config.Flags(fs, config.Pubsub|config.Topics|config.Subscriptions|config.DeadLetters|config.Waits, environ)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	ps, err := topology.NewClient(ctx, cfg.ProjectID, "")
	if err != nil {
		return err
	}
	defer ps.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return topology.Setup(ctx, ps, cfg.Topology(), func(kind, name, state string) {
		fmt.Fprintf(stdout, "%-12s %-28s %s\n", kind, name, state)
	})
}
