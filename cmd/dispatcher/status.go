package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"smsdispatcher/config"
	"smsdispatcher/internal/operator"
	"smsdispatcher/status"
	"smsdispatcher/suppress"
)

// runStatus is `dispatcher status`: each account's state as Redis holds it,
// once, or every second with --watch. It only reads.
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", stderr)
	load := config.Flags(fs, config.Redis|config.Accounts, environ)
	asJSON := fs.Bool("json", false, "print one JSON object (docs/observing.md, \"Status\"); with --watch, one a second")
	watch := fs.Bool("watch", false, "redraw every second, with the last 60 s of sends per class against the contract; one line a second when stdout is not a terminal")
	name := fs.String("on", "", "show only this account")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	const timeout = 2 * time.Second
	rdb, routing, err := operatorRedis(cfg, "status reads the limiter's Redis", timeout)
	if err != nil {
		return err
	}
	setups := routing.Accounts
	defer rdb.Close()
	if *name != "" {
		s, err := pickAccount(setups, *name)
		if err != nil {
			return err
		}
		setups = []config.Account{s}
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	err = rdb.Ping(pctx).Err()
	cancel()
	if err != nil {
		return fmt.Errorf("status: redis unreachable: %v", err) // the URL is not printed: it may hold a password
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	accounts, err := operator.Setups(rdb, cfg, setups, timeout, quiet)
	if err != nil {
		return err
	}
	r := status.Redis{Client: rdb, Timeout: timeout}
	list := suppress.NewStore(rdb, "", nil)
	read := func() (status.Report, error) {
		rep, err := status.Read(ctx, r, accounts, routing, time.Now())
		if err != nil {
			return rep, err
		}
		rep.Suppressions, err = suppressionsOf(ctx, list, rep.Time)
		return rep, err
	}
	if !*watch {
		r, err := read()
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(r)
		}
		r.WriteText(stdout)
		if err := writeDeferred(ctx, rdb, cfg, stdout); err != nil {
			return err
		}
		return writeGuardBlocks(ctx, stdout, rdb, routing.Classes)
	}
	return status.Watch(ctx, stdout, *asJSON, isTerminal(stdout), read)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// suppressionsOf is the suppression list's size and its changes in the
// hour before now, for the status report.
func suppressionsOf(ctx context.Context, list *suppress.Store, now time.Time) (*status.Suppressions, error) {
	n, err := list.Len(ctx)
	if err != nil {
		return nil, fmt.Errorf("suppression list: %w", err)
	}
	recent, err := list.Recent(ctx, now.Add(-time.Hour))
	if err != nil {
		return nil, fmt.Errorf("suppression list: %w", err)
	}
	return &status.Suppressions{Numbers: n, LastHour: recent}, nil
}
