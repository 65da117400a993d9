// Package operator is what an operator's tools (the dispatcher's status,
// message, deadletters, suppressions, deferred, guard and override
// commands, and the console) read and act through: each account's limiter
// on the operator's Redis client, the dead-letter replay's options for the
// configured classes, an account's override (override.go), and the lists
// (lists.go: the suppression list, the deferred messages, the guard's
// blocks) with their actions. One place, so that the console and the
// commands read the same state the same way and change it by the same
// change.
//
// Invariant: nothing here writes to Redis or Pub/Sub but a List's Act and
// the changes it shares with the commands (ChangeSuppression,
// ActOnDeferred, guard's BlockRange and UnblockRange, ChangeOverride),
// each an operator's action; the limiters' reads and the replay (package deadletter) do what
// they document.
package operator

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/deadletter"
	"smsdispatcher/dispatch"
	"smsdispatcher/status"
	"smsdispatcher/suppress"
)

// Limiter is account s's limiter for an operator's tool, on its client
// rdb, its calls waiting up to timeout.
func Limiter(rdb redis.UniversalClient, cfg config.Settings, s config.Account, timeout time.Duration, logger *slog.Logger) (*admission.Limiter, error) {
	lc := cfg.Limiter(s)
	lc.Logger, lc.RedisTimeout = logger, timeout
	return admission.New(rdb, lc)
}

// Setups are accounts with their limiters (Limiter), as package status
// reads them.
func Setups(rdb redis.UniversalClient, cfg config.Settings, accounts []config.Account, timeout time.Duration, logger *slog.Logger) ([]status.Setup, error) {
	setups := make([]status.Setup, 0, len(accounts))
	for _, s := range accounts {
		lim, err := Limiter(rdb, cfg, s, timeout, logger)
		if err != nil {
			return nil, err
		}
		setups = append(setups, status.Setup{Account: s, Limiter: lim})
	}
	return setups, nil
}

// Inspect is what reading the dead letters of cfg reads: its inspect
// subscription, each class's subscription naming its letters' class.
func Inspect(cfg config.Settings, wait time.Duration, limit int) deadletter.Inspect {
	in := deadletter.Inspect{Subscription: cfg.DeadLetterInspect, Wait: wait, Limit: limit}
	for _, c := range cfg.ClassList() {
		in.Sources = append(in.Sources, deadletter.Source{Subscription: c.Subscription, Class: c.Name})
	}
	return in
}

// Replay is the part of deadletter.ReplayOptions that cfg decides: each
// class's topic, the dispatcher's message format, and the send-once
// records of an id on rdb, whose calls wait up to timeout. The caller
// sets the selection, Inspect and the limits.
func Replay(rdb redis.UniversalClient, cfg config.Settings, routing config.Routing, timeout time.Duration, logger *slog.Logger) deadletter.ReplayOptions {
	opts := deadletter.ReplayOptions{Topics: topicsOf(cfg.ClassList()),
		Decode: func(data []byte, standInID string) (string, string, error) {
			m, err := dispatch.Decode(data, standInID)
			return m.ID, m.To, err
		},
		WithID: func(data []byte, id string) []byte { return dispatch.WithID(data, id, time.Time{}) },
	}
	// An id keeps its record on the home of its class and destination:
	// the first account of the routing table's route. Data that is no
	// valid message (replayed with --force) has no destination: the first
	// account serving the class.
	opts.Suppressed = replaySuppressed(suppress.NewStore(rdb, "", nil), cfg.Process)
	setups, table := routing.Accounts, routing.Table()
	lims := map[int]*admission.Limiter{}
	opts.Records = func(ctx context.Context, class admission.Class, to string) (deadletter.Records, error) {
		home := config.Home(setups, class)
		if to != "" {
			route := table.Route(class, to)
			if len(route) == 0 {
				return nil, fmt.Errorf("no account sends %s to +%s…: give one of them the destination (ACCOUNTS_FILE)", class, dispatch.CountryCode(to))
			}
			home = route[0]
		}
		if lims[home] == nil {
			lim, err := Limiter(rdb, cfg, setups[home], timeout, logger)
			if err != nil {
				return nil, err
			}
			lims[home] = lim
		}
		return lims[home].Claims(), nil
	}
	return opts
}

// replaySuppressed is a replay's check of the suppression list: the
// entry in Redis of the number, for a class the list stops (config's
// policy).
func replaySuppressed(store *suppress.Store, p config.Process) func(ctx context.Context, class admission.Class, to string) (string, bool, error) {
	return func(ctx context.Context, class admission.Class, to string) (string, bool, error) {
		if !p.Policy(class).Suppressed {
			return "", false, nil
		}
		e, ok, err := store.Get(ctx, to)
		return e.Source, ok, err
	}
}

// topicsOf is the topic of each of classes, by name.
func topicsOf(classes []config.Class) map[admission.Class]string {
	out := make(map[admission.Class]string, len(classes))
	for _, c := range classes {
		out[c.Name] = c.Topic
	}
	return out
}
