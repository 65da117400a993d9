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
	read := func() (status.Report, error) { return status.Read(ctx, r, accounts, routing, time.Now()) }
	if !*watch {
		r, err := read()
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(r)
		}
		r.WriteText(stdout)
		return nil
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
