package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"smsdispatcher/config"
	"smsdispatcher/deferral"
	"smsdispatcher/internal/operator"
	"smsdispatcher/internal/topology"
)

// runDeferred is `dispatcher deferred list|release|drop`: the deferral
// store of each class with send windows or a cap (docs/windows.md).
func runDeferred(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const use = "deferred: want list, release or drop: dispatcher deferred list|release|drop [--class C] [--id ID] [--dry-run]"
	if len(args) == 0 || !slices.Contains([]string{"list", "release", "drop"}, args[0]) {
		return errors.New(use)
	}
	verb := args[0]
	fs := newFlagSet("deferred "+verb, stderr)
	load := config.Flags(fs, config.Pubsub|config.Topics|config.Redis|config.Accounts, environ)
	class := fs.String("class", "", "only this class (default: every class with send windows or a cap)")
	id := fs.String("id", "", "only this message id")
	dryRun := fs.Bool("dry-run", false, "change nothing: say what would be released or dropped")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errors.New(use)
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	classes, err := operator.DeferringClasses(cfg, *class)
	if err != nil {
		return err
	}
	if len(classes) == 0 {
		return fmt.Errorf("deferred: no class %s", orAny(*class, "has send windows or a cap"))
	}
	rdb, _, err := operatorRedis(cfg, "deferred reads the deferral store in Redis", 2*time.Second)
	if err != nil {
		return err
	}
	defer rdb.Close()
	var (
		events deferral.Events // none but a drop's
		drops  *operator.DropEvents
	)
	if verb == "drop" && !*dryRun {
		ps, err := topology.NewClient(ctx, cfg.ProjectID, "")
		if err != nil {
			return fmt.Errorf("deferred: %v", err)
		}
		defer ps.Close()
		drops = &operator.DropEvents{Publisher: ps.Publisher(cfg.StatusTopic)}
		defer drops.Publisher.Stop()
		events = drops
	}
	store := deferral.New(rdb, nil, events)
	for _, c := range classes {
		entries, err := operator.DeferredOf(ctx, store, c, *id)
		if err != nil {
			return fmt.Errorf("deferred: %v", err) // the URL is not printed: it may hold a password
		}
		for _, e := range entries {
			if err := deferredAct(ctx, store, verb, c, e, *dryRun, stdout); err != nil {
				return fmt.Errorf("deferred: %s %s: %v", verb, e.ID, err)
			}
		}
	}
	if drops != nil {
		if failed, err := drops.Err(); failed > 0 {
			return fmt.Errorf("deferred: dropped, but the status events of %d messages were not published to %s: %v", failed, cfg.StatusTopic, err)
		}
	}
	return nil
}

func orAny(class, otherwise string) string {
	if class != "" {
		return class + " with send windows or a cap"
	}
	return otherwise
}

// deferredAct lists, releases or drops e, one line each; never the
// number or the body.
func deferredAct(ctx context.Context, store *deferral.Store, verb, class string, e deferral.Entry, dryRun bool, w io.Writer) error {
	line := fmt.Sprintf("%s %s due %s deferred %s for its %s", class, e.ID, e.Due.UTC().Format(time.RFC3339), e.DeferredAt.UTC().Format(time.RFC3339), e.Reason)
	if !e.Deadline.IsZero() {
		line += " deadline " + e.Deadline.UTC().Format(time.RFC3339)
	}
	switch {
	case verb == "list":
	case dryRun:
		line = "would " + verb + " " + line
	default:
		if _, err := operator.ActOnDeferred(ctx, store, verb, class, e.ID); err != nil {
			return err
		}
		line = map[string]string{"release": "released ", "drop": "dropped "}[verb] + line
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

// writeDeferred writes, for each class with send windows or a cap, how
// many messages are deferred, how many are overdue (SMSDeferredStuck),
// and the next releases.
func writeDeferred(ctx context.Context, rdb deferral.Redis, cfg config.Settings, w io.Writer) error {
	classes, err := operator.DeferringClasses(cfg, "")
	if err != nil {
		return err
	}
	store := deferral.New(rdb, nil, nil)
	for _, c := range classes {
		st, err := store.StatsOf(ctx, c, 3)
		if err != nil {
			return fmt.Errorf("status: %v", err)
		}
		fmt.Fprintf(w, "deferred %s: %d, overdue by %v: %d", c, st.Deferred, deferral.Overdue, st.Overdue)
		for i, e := range st.Next {
			if i == 0 {
				fmt.Fprint(w, "; next releases")
			}
			fmt.Fprintf(w, " %s", e.Due.UTC().Format(time.RFC3339))
		}
		fmt.Fprintln(w)
	}
	return nil
}
