package admission

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"
)

// ErrRedisDown is returned, without asking Redis, by a call made while the
// Circuit is open: Redis failed less than its retry interval ago.
var ErrRedisDown = errors.New("admission: redis unavailable, not asked")

// A Circuit is one process's view of Redis's health. After a Redis call
// fails, every caller that shares the Circuit leaves Redis alone for the
// retry interval instead of paying a timeout per message; then one call,
// the probe, asks Redis while the others still do not, until it answers or
// its timeout passes. The Limiter and the Claims of a process share one
// (WithCircuit), so that a Redis that hangs costs one timeout per
// interval, not two per message.
//
// The zero value is not usable; use NewCircuit. It is safe for concurrent
// use.
type Circuit struct {
	retryAfter time.Duration
	clock      Clock
	logger     *slog.Logger

	mu sync.Mutex
	// Guarded by mu.
	openUntil time.Time // no call until then
	down      bool      // a call failed and none succeeded since
	lastLog   time.Time
}

// NewCircuit returns a closed Circuit that stays open for retryAfter after
// a failure (zero means DefaultRedisRetryAfter). logger receives at most
// one line per retryAfter about Redis; if nil, slog.Default().
func NewCircuit(retryAfter time.Duration, logger *slog.Logger) *Circuit {
	return newCircuit(retryAfter, logger, systemClock{})
}

func newCircuit(retryAfter time.Duration, logger *slog.Logger, clock Clock) *Circuit {
	if retryAfter <= 0 {
		retryAfter = DefaultRedisRetryAfter
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Circuit{retryAfter: retryAfter, clock: clock, logger: logger}
}

// Allow reports whether a Redis call may be made now.
func (c *Circuit) Allow() bool {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	return !now.Before(c.openUntil)
}

// probe is Allow for a call bounded by timeout: after a failure, the
// caller it allows is the only one until the call is over.
func (c *Circuit) probe(timeout time.Duration) bool {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Before(c.openUntil) {
		return false
	}
	if c.down {
		c.openUntil = now.Add(timeout)
	}
	return true
}

// Failed records that a Redis call failed with err: the circuit opens for
// the retry interval. It reports whether this failure began an outage (no
// failure was known before it).
func (c *Circuit) Failed(err error) (began bool) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.openUntil = now.Add(c.retryAfter)
	began = !c.down
	c.down = true
	if now.Sub(c.lastLog) >= c.retryAfter {
		c.lastLog = now
		c.logger.Warn("admission: redis unavailable; not asked again for a while", "retry_in", c.retryAfter, "err", err)
	}
	return began
}

// Succeeded records that a Redis call answered: the circuit closes.
func (c *Circuit) Succeeded() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		c.down = false
		c.openUntil = time.Time{}
		c.logger.Info("admission: redis reachable again")
	}
}

// do makes one Redis call, bounded by timeout, unless the circuit is open
// (ErrRedisDown, without asking). A nil Circuit always asks. The call's
// error opens the circuit unless it is the caller giving up: ctx ended, or
// the call timed out at a deadline of the caller's that fell within timeout
// (the call may fail a moment before ctx reports it). do then returns ctx.Err(), or context.DeadlineExceeded, not
// the call's error; call wraps its own errors, so the two never compare
// equal.
func (c *Circuit) do(ctx context.Context, timeout time.Duration, call func(context.Context) error) error {
	if c != nil && !c.probe(timeout) {
		return ErrRedisDown
	}
	dl, ok := ctx.Deadline()
	callerBound := ok && time.Until(dl) <= timeout
	cctx, cancel := context.WithTimeout(ctx, timeout)
	err := call(cctx)
	cancel()
	switch {
	case err == nil:
		if c != nil {
			c.Succeeded()
		}
	case ctx.Err() != nil:
		return ctx.Err()
	case callerBound && isTimeout(err):
		return context.DeadlineExceeded
	case c != nil:
		c.Failed(err)
	}
	return err
}

// Do makes one Redis call through c as the Limiter's own calls go (do):
// not at all while c is open (ErrRedisDown), bounded by timeout, its
// failure opening c unless ctx ended first (ctx's error is returned). It
// is for a caller sharing the process's Circuit (WithCircuit) with
// calls of its own, such as the heartbeats.
func (c *Circuit) Do(ctx context.Context, timeout time.Duration, call func(context.Context) error) error {
	return c.do(ctx, timeout, call)
}

// isTimeout reports whether err is a call timing out: the context's
// deadline, or the connection's, which go-redis sets from it.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}

// callerGaveUp reports whether err, returned by do, is the caller giving up
// rather than Redis failing or being skipped.
func callerGaveUp(err error) bool {
	return err == context.Canceled || err == context.DeadlineExceeded
}

// Down reports whether the last Redis call failed.
func (c *Circuit) Down() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.down
}

// maxLeftovers bounds what is kept for Redis to hear once it answers again
// (claims to give back, leases to release); past it the oldest are left to
// expire by themselves.
const maxLeftovers = 1024

// keepLeftovers appends more to kept, dropping the oldest past
// maxLeftovers.
func keepLeftovers[T any](kept []T, more ...T) []T {
	kept = append(kept, more...)
	if n := len(kept) - maxLeftovers; n > 0 {
		kept = slices.Delete(kept, 0, n)
	}
	return kept
}
