// Command alertrecord records the fault runs whose /metrics the alert
// rules' unit tests replay (package tools/internal/alertrecord says what a run
// and a recording are): real dispatcher processes, built from this module
// with `go build`, so it runs from the source tree with the Go toolchain.
// All the runs take about 85 min.
//
//	go -C tools run ./cmd/alertrecord --record-alerts ../k8s/monitoring/testdata/recordings
//	go -C tools run ./cmd/alertrecord --record-alerts DIR --record-runs provider-429,redis-down
//
// Without --redis-url (or REDIS_URL) it starts redis-server from PATH.
// Progress goes to stderr; the exit status is 1 on an error, 2 for -h.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/cli"
	"smsdispatcher/tools/internal/alertrecord"
	"smsdispatcher/tools/internal/redisserver"
)

func main() { cli.Main("alertrecord", run) }

// options are the command line.
type options struct {
	redisURL string
	dir      string   // --record-alerts
	runs     []string // --record-runs; all if empty
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("alertrecord", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	var runs string
	fs.StringVar(&o.redisURL, "redis-url", os.Getenv("REDIS_URL"),
		"redis:// URL of a Redis to use [REDIS_URL]; if empty, start redis-server from PATH on a free loopback port")
	fs.StringVar(&o.dir, "record-alerts", "", "write one recording per run into this directory (k8s/monitoring/testdata/recordings)")
	fs.StringVar(&runs, "record-runs", "", "only these runs (comma list): "+strings.Join(alertrecord.Names(), ", "))
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.dir == "" && runs != "":
		return nil, errors.New("--record-runs needs --record-alerts")
	case o.dir == "":
		return nil, errors.New("--record-alerts DIR is required")
	}
	if runs != "" {
		o.runs = strings.Split(runs, ",")
	}
	return o, nil
}

func run(ctx context.Context, args []string, _, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	return redisserver.With(ctx, o.redisURL, stderr, func(redisOpts *redis.Options) error {
		return alertrecord.Record(ctx, o.dir, o.runs, redisOpts, stderr)
	})
}
