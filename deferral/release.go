package deferral

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2"
)

// A Lane is one class whose deferred messages a Releaser releases, to
// its topic's publisher.
type Lane struct {
	Class     string
	Publisher *pubsub.Publisher
}

// Releaser releases every lane's due messages, in every process: each
// pass claims pages of due ids (Claim), republishes them, waits for
// Pub/Sub's confirmations, and only then removes them.
type Releaser struct {
	Store  *Store
	Lanes  []Lane
	Token  string // the process's name, unique across processes
	Logger *slog.Logger
	// Every is the pause between passes (default 1 s, jittered).
	Every time.Duration
	// Batch is the ids claimed at a time (default 500).
	Batch int
	// Released counts the messages republished (nil: not counted).
	Released func(class string, n int)

	stats     atomic.Pointer[[]Stats] // the lanes' last stats
	statsRead time.Time               // when stats were last read; Run's own
}

// StatsEvery is how often a releaser reads its lanes' stats for the
// gauges (sms_deferred, sms_deferred_overdue).
const StatsEvery = 10 * time.Second

// Stats returns the lanes' stats as last read (none before the first).
func (r *Releaser) Stats() []Stats {
	if p := r.stats.Load(); p != nil {
		return *p
	}
	return nil
}

// readStats reads every lane's stats, at most every StatsEvery.
func (r *Releaser) readStats(ctx context.Context) {
	if time.Since(r.statsRead) < StatsEvery {
		return
	}
	r.statsRead = time.Now()
	var all []Stats
	for _, l := range r.Lanes {
		st, err := r.Store.StatsOf(ctx, l.Class, 0)
		if err != nil {
			return // kept as last read: the next pass tries again
		}
		all = append(all, st)
	}
	r.stats.Store(&all)
}

// Run releases until ctx ends.
func (r *Releaser) Run(ctx context.Context) {
	every := r.Every
	if every <= 0 {
		every = time.Second
	}
	for {
		r.readStats(ctx)
		for _, l := range r.Lanes {
			for ctx.Err() == nil {
				n, err := r.Pass(ctx, l)
				if err != nil {
					r.Logger.Warn("deferred messages not released; trying again", "class", l.Class, "err", err)
					break
				}
				if n < r.batch() {
					break
				}
			}
		}
		t := time.NewTimer(every/2 + rand.N(every))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (r *Releaser) batch() int {
	if r.Batch > 0 {
		return r.Batch
	}
	return 500
}

// Pass claims one page of l's due messages and releases it; it returns
// how many it claimed. It removes the page's ids once Pub/Sub confirmed
// their republish, a call per way they ended (Store.RemoveAll; usually
// all released), and ends their traces.
func (r *Releaser) Pass(ctx context.Context, l Lane) (int, error) {
	claimed, err := r.Store.Claim(ctx, l.Class, r.batch(), r.Token)
	if err != nil {
		return 0, err
	}
	type pending struct {
		c   Claimed
		res *pubsub.PublishResult
	}
	var (
		out        []pending
		expired    []string // ids past their deadline
		unreadable []string // nothing to send
		released   []string // published, confirmed
	)
	now := r.Store.now()
	for _, c := range claimed {
		switch {
		case len(c.Data) == 0:
			r.Logger.Error("a deferred message's envelope is unreadable; dropped", "class", l.Class, "id", c.ID)
			unreadable = append(unreadable, c.ID)
		case !c.Deadline.IsZero() && !now.Before(c.Deadline):
			expired = append(expired, c.ID)
		default:
			res := l.Publisher.Publish(ctx, &pubsub.Message{Data: c.Data, Attributes: c.Attributes})
			out = append(out, pending{c, res})
		}
	}
	for _, p := range out {
		if _, err := p.res.Get(ctx); err != nil {
			// Left claimed: due again at the claim's end.
			r.Logger.Warn("a deferred message's release was not confirmed; it is released again later",
				"class", l.Class, "id", p.c.ID, "err", err)
			continue
		}
		released = append(released, p.c.ID)
	}
	for _, g := range []struct {
		how string
		ids []string
	}{{EndExpired, expired}, {EndDropped, unreadable}, {EndReleased, released}} {
		if len(g.ids) == 0 {
			continue
		}
		removed, err := r.Store.removeEnded(ctx, l.Class, r.Token, g.how, g.ids)
		switch {
		case err != nil && len(removed) == len(g.ids):
			// Removed; only their traces' end failed.
			r.Logger.Warn("released messages were removed, but their traces not ended: dispatcher message does not tell these deferrals",
				"class", l.Class, "messages", len(g.ids), "err", err)
		case err != nil:
			// Released twice at worst: their send-once records hold.
			r.Logger.Warn("released messages could not be removed; they are released again later",
				"class", l.Class, "messages", len(g.ids)-len(removed), "err", err)
		}
		if g.how != EndExpired {
			continue
		}
		for i, ok := range removed {
			if ok {
				r.Store.expired(ctx, Message{Class: l.Class, ID: g.ids[i]})
			}
		}
	}
	if r.Released != nil && len(released) > 0 {
		r.Released(l.Class, len(released))
	}
	return len(claimed), nil
}
