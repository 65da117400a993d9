// Command dispatcher is the SMS send service: the only thing that talks to
// the provider. See README.md for the commands.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"smsdispatcher/internal/cli"
)

// version is stamped by the build (-ldflags "-X main.version=...").
var version = "dev"

func main() { cli.Main("dispatcher", run) }

// A command is one of the dispatcher's commands: its line in the usage
// (continued on further lines) and what runs it.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands are the dispatcher's commands, in the usage's order; the first
// runs when none is named.
var commands = []command{
	{"serve", "pull both subscriptions and send (the default)",
		func(ctx context.Context, args []string, _, stderr io.Writer) error {
			return runServe(ctx, args, stderr)
		}},
	{"publish", "publish a message, or JSON lines with --file, as a producer does", runPublish},
	{"setup", "create the topics, subscriptions and dead-letter topic if missing", runSetup},
	{"override", "lower the account's rates for every pod at once (--set-target-rps,\n--set-marketing-rps, --ttl, --clear): an incident lever", runOverride},
	{"status", "each account's state from Redis: rates, sends in the last\n1/10/60 s, penalty, leases, processes (--json, --watch)", runStatus},
	{"message", "a message's story from Redis: its account, attempts, provider ids and\ndelivery receipt (--json)", runMessage},
	{"deadletters", "list dead letters without consuming them, or replay them", runDeadletters},
	{"suppressions", "the suppression list: add, remove, check, list, export, import", runSuppressions},
	{"deferred", "list the messages held outside their send windows or over their caps,\nrelease them early or drop them (--class, --id, --dry-run)", runDeferred},
	{"guard", "the pumping guard's blocked ranges: list, block or unblock --prefix P\n[--for D] (--class)", runGuard},
	{"console", "serve the web console on CONSOLE_ADDR (default 127.0.0.1:8090): accounts live,\na message's story, dead letters and their replay (docs/console.md)", runConsole},
	{"demo", "run the whole pipeline on one machine: in-process Pub/Sub, Redis\nand provider simulator, several dispatchers, a campaign and OTPs", runDemo},
}

// usage lists the commands, a line each.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: dispatcher [command] [flags]\n\ncommands:\n")
	width := 0
	for _, c := range commands {
		width = max(width, len(c.name))
	}
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-*s %s\n", width, c.name, strings.ReplaceAll(c.summary, "\n", "\n"+strings.Repeat(" ", width+3)))
	}
	b.WriteString(`
Run 'dispatcher <command> -h' for its flags. Every flag has an environment
variable of the same meaning (shown in brackets).
`)
	return b.String()
}

// run is the whole program; main only maps its error to an exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	name := commands[0].name
	if len(args) > 0 {
		switch args[0] {
		case "version", "--version":
			fmt.Fprintln(stdout, version)
			return nil
		case "help", "-h", "-help", "--help":
			fmt.Fprint(stdout, usage())
			return nil
		}
		if len(args[0]) > 0 && args[0][0] != '-' {
			name, args = args[0], args[1:]
		}
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(ctx, args, stdout, stderr)
		}
	}
	fmt.Fprint(stderr, usage())
	return fmt.Errorf("unknown command %q", name)
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("dispatcher "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// environ is os.Getenv, replaced in tests.
var environ = os.Getenv
