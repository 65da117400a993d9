package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"smsdispatcher/config"
	"smsdispatcher/guard"
	"smsdispatcher/internal/operator"
)

// runGuard is `dispatcher guard list|block|unblock`: the pumping guard's
// blocks of a class, and an operator's block or release of a range, for
// every process within a second (docs/guard.md).
func runGuard(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || !slices.Contains([]string{"list", "block", "unblock"}, args[0]) {
		return fmt.Errorf("guard: want list, block or unblock")
	}
	verb := args[0]
	fs := newFlagSet("guard "+verb, stderr)
	// Topics: the classes, and their guards, are read with them.
	load := config.Flags(fs, config.Redis|config.Accounts|config.Topics, environ)
	class := fs.String("class", "", "the guarded class whose blocks to read or change (default: list reads every guarded class; block and unblock the first)")
	prefix := fs.String("prefix", "", "the range to block or unblock, as an E.164 prefix such as +447700")
	forD := fs.Duration("for", operator.DefaultBlock, "how long an operator's block holds")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if verb != "list" && *prefix == "" {
		return fmt.Errorf("guard %s: --prefix is required (such as +447700)", verb)
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	guarded, err := operator.GuardTargets(cfg.ClassList(), *class, verb != "list")
	if err != nil {
		return fmt.Errorf("guard %s: %w", verb, err)
	}
	rdb, _, err := operatorRedis(cfg, "the guard's blocks live in the limiter's Redis", operatorTimeout)
	if err != nil {
		return err
	}
	defer rdb.Close()
	now := time.Now()
	name := guarded[0]
	switch verb {
	case "block":
		if err := guard.BlockRange(ctx, rdb, name, *prefix, *forD, now); err != nil {
			return fmt.Errorf("guard block: %w", err)
		}
		fmt.Fprintf(stdout, "%s: %s blocked (operator) until %s\n", name, *prefix, now.Add(*forD).UTC().Format(time.RFC3339))
	case "unblock":
		removed, err := guard.UnblockRange(ctx, rdb, name, *prefix)
		if err != nil {
			return fmt.Errorf("guard unblock: %w", err)
		}
		what := "no block; its counts forgotten"
		if removed {
			what = "unblocked; its counts forgotten"
		}
		fmt.Fprintf(stdout, "%s: %s %s\n", name, *prefix, what)
	default:
		for _, name := range guarded {
			blocks, err := guard.List(ctx, rdb, name, now)
			if err != nil {
				return err
			}
			writeBlocks(stdout, name, blocks, now)
		}
	}
	return nil
}

// writeBlocks prints class's blocks, a line each: the range, why, its end
// and its figures.
func writeBlocks(w io.Writer, class string, blocks []guard.Block, now time.Time) {
	if len(blocks) == 0 {
		fmt.Fprintf(w, "%s: no range blocked\n", class)
		return
	}
	for _, b := range blocks {
		fmt.Fprintf(w, "%s: +%-15s %-11s until %s (%v left)  sends %d  verified %d\n", class, b.Range, b.Reason,
			b.Until.UTC().Format(time.RFC3339), b.Until.Sub(now).Round(time.Second), b.Sends, b.Verified)
	}
}

// writeGuardBlocks prints, after the status report, the blocks of each
// guarded class of classes; nothing when none is guarded.
func writeGuardBlocks(ctx context.Context, w io.Writer, rdb guard.Redis, classes []config.Class) error {
	now := time.Now()
	for _, c := range classes {
		if !c.Guard.On() {
			continue
		}
		blocks, err := guard.List(ctx, rdb, c.Name.String(), now)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, "guard:")
		writeBlocks(w, c.Name.String(), blocks, now)
	}
	return nil
}

// writeBlockedNote prints why the guard blocked the message id, when one
// of classes' guards did (within a day), and reports whether it did.
func writeBlockedNote(ctx context.Context, w io.Writer, rdb guard.Redis, classes []config.Class, id string) (bool, error) {
	note, ok, err := operator.BlockedNote(ctx, rdb, classes, id)
	if err != nil || !ok {
		return false, err
	}
	fmt.Fprintln(w, note)
	return true, nil
}
