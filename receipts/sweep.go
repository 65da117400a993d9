package receipts

import (
	"context"
	"sync"
	"time"

	"smsdispatcher/admission"
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

// sweepLoop sweeps and flushes until ctx ends.
func (s *Server) sweepLoop(ctx context.Context) {
	sweep := time.NewTicker(s.cfg.SweepEvery)
	defer sweep.Stop()
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
		case <-flush.C:
			s.flush(ctx)
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
		s.flushAccount(ctx, a)
		if failed || len(owed) < sweepBatch {
			return
		}
	}
}

// publishAll publishes the events of owed at once, each within
// publishBound, and reports whether one failed.
func (s *Server) publishAll(ctx context.Context, a *account, owed []admission.Fold) (failed bool) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error // guarded by mu
	for _, f := range owed {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, s.publishBound)
			defer cancel()
			if err := s.publishOwed(ctx, a, f); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
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

// flush clears in Redis the events marked published on every account.
func (s *Server) flush(ctx context.Context) {
	for _, a := range s.order {
		s.flushAccount(ctx, a)
	}
}

// flushAccount clears in Redis the events marked published on a, if any.
func (s *Server) flushAccount(ctx context.Context, a *account) {
	if !a.pending.Swap(false) {
		return
	}
	if err := a.Ledger.FlushPublished(ctx); err != nil {
		a.pending.Store(true)
		if held, ok := a.ledgerErr.allow(time.Now()); ok {
			s.logger.Warn("receipts: the published status events could not be cleared", "account", a.Name, "err", err, "unlogged", held)
		}
	}
}
