// Command dispatcher is the SMS send service: the only thing that talks to
// the provider. See README.md for the commands.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"smsdispatcher/config"
	"syscall"
)

// version is stamped by the build (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	var ce *config.Error
	switch {
	case err == nil:
	case errors.As(err, &ce):
		fmt.Fprintln(os.Stderr, "dispatcher:", ce)
		os.Exit(2)
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "dispatcher:", err)
		os.Exit(1)
	}
}

const usage = `usage: dispatcher [command] [flags]

commands:
  serve     pull both subscriptions and send (the default)
  publish   publish a message, or JSON lines with --file, as a producer does
  setup     create the topics, subscriptions and dead-letter topic if missing
  override  lower the account's rates for every pod at once (--set-target-rps,
            --set-marketing-rps, --ttl, --clear): an incident lever
  status    each account's state from Redis: rates, sends in the last
            1/10/60 s, penalty, leases, processes (--json, --watch)
  deadletters list dead letters without consuming them, or replay them
  demo      run the whole pipeline on one machine: in-process Pub/Sub, Redis
            and provider simulator, several dispatchers, a campaign and OTPs

Run 'dispatcher <command> -h' for its flags. Every flag has an environment
variable of the same meaning (shown in brackets).
`

// run is the whole program; main only maps its error to an exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return runServe(ctx, args, stderr)
	case "publish":
		return runPublish(ctx, args, stdout, stderr)
	case "setup":
		return runSetup(ctx, args, stdout, stderr)
	case "demo":
		return runDemo(ctx, args, stdout, stderr)
	case "override":
		return runOverride(ctx, args, stdout, stderr)
	case "status":
		return runStatus(ctx, args, stdout, stderr)
	case "deadletters":
		return runDeadletters(ctx, args, stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("dispatcher "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// configFlags registers the flags of the settings in groups on fs
// (config.Flags), REDIS_URL checked as redisOptions reads it.
func configFlags(fs *flag.FlagSet, groups config.Group, getenv func(string) string) func() (config.Settings, error) {
	return config.Flags(fs, groups, getenv, func(url string) (*tls.Config, error) {
		o, err := redisOptions(url)
		if err != nil {
			return nil, err
		}
		return o.TLSConfig, nil
	})
}

// environ is os.Getenv, replaced in tests.
var environ = os.Getenv
