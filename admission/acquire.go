package admission

import (
	"context"
	"math/rand/v2"
	"time"
)

// minWait keeps a malformed zero wait from turning Acquire into a busy loop.
const minWait = 100 * time.Microsecond

// Acquire waits up to maxWait for a send slot of class. It sleeps exactly as
// long as the last denial says (never on a fixed tick) and gives up at once
// when the slot would open after maxWait, returning that denial: the caller
// nacks instead of holding the message.
//
// Within one process only one caller per class talks to Redis at a time; the
// others queue behind it, so a backlog costs about one script call per
// admission instead of one per waiter per slot. The error is non-nil only
// when ctx ends first.
//
// Acquire times its own wait on the monotonic clock (real timers), not on
// the Limiter's Clock.
func (l *Limiter) Acquire(ctx context.Context, class Class, maxWait time.Duration) (Decision, error) {
	if maxWait <= 0 {
		return l.lastDenialOf(class), nil
	}
	start := time.Now()
	expire := time.NewTimer(maxWait)
	defer expire.Stop()

	select {
	case l.turns[class] <- 1:
		defer func() { <-l.turns[class] }()
	case <-ctx.Done():
		return l.lastDenialOf(class), ctx.Err()
	case <-expire.C:
		return l.lastDenialOf(class), nil
	}

	var timer *time.Timer
	for tries := 1; ; tries++ {
		d, err := l.TryAcquire(ctx, class)
		d.Tries = tries
		if err != nil || d.Allowed {
			return d, err
		}
		l.mu.Lock()
		l.lastDenial[class] = d
		l.mu.Unlock()

		// Waiters of other processes were told the same instant; a jitter
		// of up to one global interval spreads them over the slots.
		wait := max(d.RetryAfter, minWait) + rand.N(l.intervalGl)
		if time.Since(start)+wait > maxWait {
			return d, nil
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return d, ctx.Err()
		case <-timer.C:
		}
	}
}

func (l *Limiter) lastDenialOf(class Class) Decision {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.lastDenial[class]
	if d.Source == "" {
		d = Decision{RetryAfter: l.intervalGl, Source: SourceRedis, Reason: ReasonGlobal}
	}
	return d
}
