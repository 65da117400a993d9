package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"smsdispatcher/config"
	"smsdispatcher/internal/operator"
	"smsdispatcher/provider"
	"smsdispatcher/status"
	"smsdispatcher/suppress"
)

// runMessage is `dispatcher message <id>`: the id's story on every
// account, as Redis holds it. It only reads.
func runMessage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("message", stderr)
	load := config.Flags(fs, config.Redis|config.Accounts, environ)
	asJSON := fs.Bool("json", false, `print one JSON object {"id", "accounts": [...], "suppressed", "deferrals": [...]} (docs/configuring.md, "Receipts"; docs/windows.md)`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	// The id may come before the flags: dispatcher message <id> --json.
	id := fs.Arg(0)
	if err := fs.Parse(fs.Args()[min(1, fs.NArg()):]); err != nil {
		return err
	}
	if id == "" || fs.NArg() > 0 {
		return errors.New("message: want one message id: dispatcher message <id> [--json]")
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	const timeout = 2 * time.Second
	rdb, routing, err := operatorRedis(cfg, "message reads the limiter's Redis", timeout)
	if err != nil {
		return err
	}
	defer rdb.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	setups, err := operator.Setups(rdb, cfg, routing.Accounts, timeout, quiet)
	if err != nil {
		return err
	}
	m, err := status.ReadMessage(ctx, setups, id)
	if err != nil {
		return fmt.Errorf("message: %v", err) // the URL is not printed: it may hold a password
	}
	at, e, stopped, err := suppress.NewStore(rdb, "", nil).Refusal(ctx, id)
	if err != nil {
		return fmt.Errorf("message: the suppression list: %v", err)
	}
	deferrals, err := operator.Deferrals(ctx, rdb, cfg, id)
	if err != nil {
		return fmt.Errorf("message: %v", err)
	}
	if *asJSON {
		out := messageJSON{Message: m, Deferrals: deferrals}
		if stopped {
			masked := e
			masked.Number = provider.MaskNumber(e.Number)
			out.Suppressed = &suppressedJSON{At: at.UTC(), By: masked}
		}
		if err := json.NewEncoder(stdout).Encode(out); err != nil {
			return err
		}
	}
	if !m.Found() && !stopped && len(deferrals) == 0 {
		if !*asJSON {
			if blocked, err := writeBlockedNote(ctx, stdout, rdb, routing.Classes, id); err != nil || blocked {
				return err
			}
		}
		// Exit status 1: a script can tell an unknown id.
		return fmt.Errorf("no record of %s on any account", id)
	}
	if !*asJSON {
		if m.Found() {
			m.WriteText(stdout)
		}
		if stopped {
			fmt.Fprintln(stdout, operator.SuppressedNote(at, e))
		}
		for _, d := range deferrals {
			fmt.Fprintln(stdout, d.Note())
		}
	}
	return nil
}

// messageJSON is message --json's object: the id's story, when the
// suppression list stopped it, and its deferrals by send windows or caps
// (held now, or ended within a day).
type messageJSON struct {
	status.Message
	Suppressed *suppressedJSON     `json:"suppressed,omitempty"`
	Deferrals  []operator.Deferral `json:"deferrals,omitempty"`
}

// suppressedJSON says when the list stopped a message, and the change
// (the number's entry) that did.
type suppressedJSON struct {
	At time.Time      `json:"at"`
	By suppress.Entry `json:"by"`
}
