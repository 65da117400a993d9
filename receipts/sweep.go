package receipts

import (
	"cmp"
	"context"
	"sync"
	"time"

	"smsdispatcher/ledger"
)

// The sweep: every sweepEvery, the events owed for longer than owedAge
// (their receipt's own publish failed, or its process ended before it
// could) are published again, in batches of sweepBatch, at most
// sweepBatches a sweep per account; Config.SweepEvery and OwedAge replace
// the first two. The events marked published are cleared in Redis every
// flushEvery when there are some.
const (
	sweepEvery   = 10 * time.Second
	owedAge      = 30 * time.Second
	sweepBatch   = 100
	sweepBatches = 10
	flushEvery   = 2 * time.Second
)

// retryEvery is how often a process publishes again the events it holds
// (their publish at the receipt failed), and maxHeld the most it holds
// per account: past that, the sweep publishes them once owed for owedAge.
const (
	retryEvery = time.Second
	maxHeld    = 10000
)

// sweepLoop sweeps, publishes the held events again and flushes until ctx
// ends.
func (s *Server) sweepLoop(ctx context.Context) {
	sweep := time.NewTicker(s.cfg.SweepEvery)
	defer sweep.Stop()
	retry := time.NewTicker(retryEvery)
	defer retry.Stop()
	flush := time.NewTicker(flushEvery)
	defer flush.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweep.C:
			for _, a := range s.order {
				s.sweep(ctx, a)
			}
		case <-retry.C:
			s.publishHeld(ctx, false)
		case <-flush.C:
			s.flush(ctx, false)
		}
	}
}

// hold keeps f, whose event could not be published, for publishHeld; a
// newer fold of its message replaces it. f holds no resend: publishOwed
// took it out once it was out, and a resend that is not out went back to
// the ledger, for the sweep to hand out with the event.
func (a *account) hold(f ledger.Fold) {
	a.heldMu.Lock()
	defer a.heldMu.Unlock()
	if _, ok := a.held[f.ID]; ok || len(a.held) < maxHeld {
		a.held[f.ID] = &f
	}
}

// release forgets the held fold of id once its event is out: f, or any
// when f is nil (its receipt published it).
func (a *account) release(id string, f *ledger.Fold) {
	a.heldMu.Lock()
	defer a.heldMu.Unlock()
	if h, ok := a.held[id]; ok && (f == nil || h == f) {
		delete(a.held, id)
	}
}

// publishHeld publishes the events every account holds, sweepBatch at a
// time, each within publishBound, until they are out or a batch has one
// that is not (Pub/Sub is likely down: the next round tries again), and
// releases those published. stopping says it is the last round.
func (s *Server) publishHeld(ctx context.Context, stopping bool) {
	for _, a := range s.order {
		a.heldMu.Lock()
		held := make([]*ledger.Fold, 0, len(a.held))
		for _, f := range a.held {
			held = append(held, f)
		}
		a.heldMu.Unlock()
		var left int
		var first error
		for len(held) > 0 && first == nil {
			batch := held[:min(len(held), sweepBatch)]
			held = held[len(batch):]
			var wg sync.WaitGroup
			var mu sync.Mutex
			for _, f := range batch {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(ctx, s.publishBound)
					defer cancel()
					if err := s.publishOwed(ctx, a, f); err != nil {
						mu.Lock()
						left++
						first = cmp.Or(first, err)
						mu.Unlock()
						return
					}
					a.release(f.ID, f)
				})
			}
			wg.Wait()
		}
		left += len(held)
		if first == nil {
			continue
		}
		msg := "receipts: held status events not published: they stay owed, tried again in a second"
		if stopping {
			msg = "receipts: held status events not published before the stop: they stay owed for another process's sweep"
		}
		if n, ok := a.publishErr.allow(time.Now()); ok || stopping {
			s.logger.Warn(msg, "account", a.Name, "events", left, "err", first, "unlogged", n)
		}
	}
}

// sweep publishes a's owed events, a batch at a time, until a batch is
// not full or one of its events could not be published (Pub/Sub is
// likely down: the next sweep tries again).
func (s *Server) sweep(ctx context.Context, a *account) {
	for range sweepBatches {
		owed, err := a.Ledger.Owed(ctx, s.cfg.OwedAge, sweepBatch)
		if err != nil {
			if held, ok := a.ledgerErr.allow(time.Now()); ok {
				s.logger.Warn("receipts: the owed status events could not be read", "account", a.Name, "err", err, "unlogged", held)
			}
			return
		}
		if len(owed) == 0 {
			return
		}
		failed := s.publishAll(ctx, a, owed)
		// The next batch would hold this one again until it is cleared.
		s.flushAccount(ctx, a, false)
		if failed || len(owed) < sweepBatch {
			return
		}
	}
}

// publishAll publishes the events of owed at once, each within
// publishBound, and reports whether one failed.
func (s *Server) publishAll(ctx context.Context, a *account, owed []ledger.Fold) (failed bool) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error // guarded by mu
	for _, f := range owed {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, s.publishBound)
			defer cancel()
			if err := s.publishOwed(ctx, a, &f); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
				return
			}
			// The event Redis owes is out: a fold this process holds of
			// the message is no newer, and publishing it again would
			// repeat the event.
			a.release(f.ID, nil)
		})
	}
	wg.Wait()
	if first != nil {
		if held, ok := a.publishErr.allow(time.Now()); ok {
			s.logger.Warn("receipts: an owed status event was not published: the next sweep tries again", "account", a.Name, "err", first, "unlogged", held)
		}
	}
	return first != nil
}

// flush clears in Redis the events marked published on every account;
// stopping, it also writes what the ledgers kept to write later (the
// delivery counts of their last second).
func (s *Server) flush(ctx context.Context, stopping bool) {
	for _, a := range s.order {
		s.flushAccount(ctx, a, stopping)
	}
}

// flushAccount clears in Redis the events marked published on a, if any,
// or, stopping, flushes a's ledger whatever it holds.
func (s *Server) flushAccount(ctx context.Context, a *account, stopping bool) {
	if !a.pending.Swap(false) && !stopping {
		return
	}
	if err := a.Ledger.FlushPublished(ctx); err != nil {
		a.pending.Store(true)
		if held, ok := a.ledgerErr.allow(time.Now()); ok {
			s.logger.Warn("receipts: the published status events could not be cleared", "account", a.Name, "err", err, "unlogged", held)
		}
	}
}
