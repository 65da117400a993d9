package main

// `dispatcher deadletters`: list the dead letters people inspect
// (docs/contract.md section 1) without consuming them, and replay the ones
// whose cause is fixed. The reading, the selection and the replay policy
// are package deadletter's; these commands parse flags and print.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"smsdispatcher/config"
	"smsdispatcher/deadletter"
	"smsdispatcher/internal/operator"
	"smsdispatcher/internal/topology"
)

const deadlettersUsage = `usage: dispatcher deadletters list|replay [flags]

  list    print the dead letters of the inspect subscription, consuming none
  replay  republish selected dead letters to their class's topic, once their
          cause is fixed (--reason R, --id ID or --all)

Run 'dispatcher deadletters <list|replay> -h' for the flags.
`

// afterRepublish is deadletter.ReplayOptions.AfterRepublish of `deadletters
// replay`: nil, but in a test that stops the process there.
var afterRepublish func(n int)

// runDeadletters is `dispatcher deadletters`.
func runDeadletters(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub := ""
	if len(args) > 0 {
		sub, args = args[0], args[1:]
	}
	switch sub {
	case "list":
		return runDeadlettersList(ctx, args, stdout, stderr)
	case "replay":
		return runDeadlettersReplay(ctx, args, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, deadlettersUsage)
		return nil
	}
	fmt.Fprint(stderr, deadlettersUsage)
	if sub == "" {
		return errors.New("deadletters: give list or replay")
	}
	return fmt.Errorf("deadletters: unknown command %q", sub)
}

// readFlags declares the flags both commands read by; the function it
// returns checks them and says what to read, and the class to select.
func readFlags(fs *flag.FlagSet, limit int) func(cfg config.Settings) (deadletter.Inspect, string, error) {
	class := fs.String("class", "", "only this class: otp, marketing, or another of ACCOUNTS_FILE's classes")
	wait := fs.Duration("wait", 2*time.Second, "stop reading once no new dead letter arrived for this long")
	fs.IntVar(&limit, "limit", limit, "read at most this many dead letters (0: all)")
	return func(cfg config.Settings) (deadletter.Inspect, string, error) {
		in := operator.Inspect(cfg, *wait, limit)
		switch {
		case limit < 0:
			return in, "", errors.New("--limit: must not be negative")
		case *wait <= 0:
			return in, "", errors.New("--wait: must be positive")
		case *class == "":
			return in, "", nil
		}
		c, err := classOf(cfg, *class)
		if err != nil {
			return in, "", err
		}
		return in, c.Name.String(), nil
	}
}

// noteLimited says on stderr that reading stopped at --limit.
func noteLimited(stderr io.Writer, limited bool, in deadletter.Inspect) {
	if limited {
		fmt.Fprintf(stderr, "read the first %d dead letters (--limit); there may be more\n", in.Limit)
	}
}

// runDeadlettersList is `dispatcher deadletters list`.
func runDeadlettersList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("deadletters list", stderr)
	load := config.Flags(fs, config.Pubsub|config.Subscriptions, environ)
	reading := readFlags(fs, 1000)
	reason := fs.String("reason", "", "only dead letters whose reject_reason starts with this (provider, invalid: bad_to, max_attempts, ...)")
	since := fs.Duration("since", 0, "only dead letters published within this long (such as 1h)")
	asJSON := fs.Bool("json", false, "print one JSON object per dead letter (docs/levers.md, \"Dead letters\")")
	showBody := fs.Bool("show-body", false, "print the message bodies too (they may hold codes and personal data)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("deadletters list: unexpected argument %q", fs.Arg(0))
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	f := deadletter.Filter{Reason: *reason, Since: *since}
	in, class, err := reading(cfg)
	if err != nil {
		return err
	}
	if f.Class = class; *since < 0 {
		return errors.New("--since: must not be negative")
	}

	ps, err := topology.NewClient(ctx, cfg.ProjectID, "")
	if err != nil {
		return err
	}
	defer ps.Close()
	ls, err := deadletter.List(ctx, ps, in, f)
	if err != nil {
		return err
	}
	noteLimited(stderr, ls.Limited, in)
	if len(ls.Letters) == 0 {
		note := stdout
		if *asJSON {
			note = stderr // stdout stays JSON lines
		}
		if ls.Read == 0 {
			fmt.Fprintln(note, "no dead letters")
		} else {
			fmt.Fprintf(note, "no dead letters match (%d read)\n", ls.Read)
		}
		return nil
	}
	if *asJSON {
		return deadletter.WriteJSON(stdout, ls.Letters, *showBody)
	}
	return deadletter.WriteTable(stdout, ls.Letters, *showBody)
}

// idList is --id: given again or comma-separated.
type idList []string

func (l *idList) String() string { return strings.Join(*l, ",") }

func (l *idList) Set(v string) error {
	for _, id := range strings.Split(v, ",") {
		if id = strings.TrimSpace(id); id != "" {
			*l = append(*l, id)
		}
	}
	return nil
}

// runDeadlettersReplay is `dispatcher deadletters replay`.
func runDeadlettersReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("deadletters replay", stderr)
	load := config.Flags(fs, config.Pubsub|config.Topics|config.Subscriptions|config.Redis|config.Accounts, environ)
	reading := readFlags(fs, 0)
	reason := fs.String("reason", "", "replay the dead letters whose reject_reason starts with this (provider, max_attempts, ...)")
	var ids idList
	fs.Var(&ids, "id", "replay the dead letter of this id (the message's id, or a Pub/Sub message ID); repeat it or separate by commas")
	all := fs.Bool("all", false, "replay every dead letter")
	dryRun := fs.Bool("dry-run", false, "print what would be done; change nothing (every dead letter is left listed)")
	maxReplays := fs.Int("max-replays", 3, "skip a dead letter replayed this many times already")
	force := fs.Bool("force", false, "replay also what replay cannot vouch for: malformed dead letters (reject_reason invalid: ...; they come back unless the data was fixed), and those whose send-once record cannot be checked (no id, or older than the records' 24 h)")
	quiet := fs.Bool("quiet", false, "print only the summary")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("deadletters replay: unexpected argument %q", fs.Arg(0))
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	given := 0
	for _, g := range []bool{*reason != "", len(ids) > 0, *all} {
		if g {
			given++
		}
	}
	switch {
	case given != 1:
		return errors.New("deadletters replay: give exactly one of --reason, --id and --all")
	case *maxReplays < 1:
		return errors.New("--max-replays: must be at least 1")
	}
	in, class, err := reading(cfg)
	if err != nil {
		return err
	}
	rdb, routing, err := operatorRedis(cfg, "replay reads and clears the send-once records in the limiter's Redis", operatorTimeout)
	if err != nil {
		return err
	}
	defer rdb.Close()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := operator.Replay(rdb, cfg, routing, operatorTimeout, logger)
	opts.Inspect, opts.Filter = in, deadletter.Filter{Reason: *reason, Class: class, IDs: ids}
	opts.MaxReplays, opts.Force, opts.DryRun, opts.AfterRepublish = *maxReplays, *force, *dryRun, afterRepublish

	ps, err := topology.NewClient(ctx, cfg.ProjectID, "")
	if err != nil {
		return err
	}
	defer ps.Close()
	sum, readErr := deadletter.Replay(ctx, ps, opts, func(r deadletter.Result) {
		if !*quiet {
			fmt.Fprintln(stdout, r)
		}
	})
	fmt.Fprintln(stdout, sum)
	noteLimited(stderr, sum.Limited, in)
	if readErr != nil {
		return readErr
	}
	if sum.Failed > 0 {
		return fmt.Errorf("deadletters replay: %d failed; they are left listed: run replay again", sum.Failed)
	}
	return nil
}
