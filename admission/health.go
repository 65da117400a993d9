package admission

import (
	"context"
	"fmt"
	"math"
	"time"
)

// An account's health: whether its sends are failing transiently (5xx,
// timeouts, no connection), shared by every process in one key that the
// admission call already reads (docs/decisions.md, "An account's health").
// finish.lua keeps the state from what each send came to (Settle's
// SendResult); the admission script admits only probes while the account is degraded.

// Health is an account's health as Redis last said it.
type Health int

const (
	// Healthy: no failure counted since the last success.
	Healthy Health = iota
	// Failing: healthy, with a run of failures counted; the next success
	// ends it (Settle reports it).
	Failing
	// Degraded: the account admits probes only, one per
	// HealthRule.ProbeEvery across every process, until HealthRule.Probes
	// succeed in a row.
	Degraded
)

// String returns "healthy", "failing" or "degraded".
func (h Health) String() string {
	switch h {
	case Healthy:
		return "healthy"
	case Failing:
		return "failing"
	case Degraded:
		return "degraded"
	}
	return fmt.Sprintf("Health(%d)", int(h))
}

// A SendResult is what one send said of its account's health, for Settle.
type SendResult int

const (
	// ResultNone says nothing of it: a 429 (the penalty covers it), an
	// account refusal (the pause does), a send cut off by its own deadline
	// or a shutdown, or no send.
	ResultNone SendResult = iota
	// ResultOK: the provider answered, accepting or refusing the message.
	ResultOK
	// ResultFailed: a transient failure (5xx, a refused or reset
	// connection, Vonage status 5).
	ResultFailed
	// ResultTimedOut: no answer within the send's timeout.
	ResultTimedOut
)

// arg is r as finish.lua's ARGV[5], for a send admitted when the account
// was admitted (the decision's health). Every success is reported, as a
// probe's when it was one: a run of failures may have begun after the
// admission, counted by another process this one has not heard from, and
// any success ends it (finish.lua reads the health key only, when there is
// no run to end).
func (r SendResult) arg(admitted Health) string {
	switch {
	case r == ResultOK && admitted == Degraded:
		return "probe_ok"
	case r == ResultOK:
		return "ok"
	case r == ResultFailed:
		return "fail"
	case r == ResultTimedOut:
		return "timeout"
	}
	return ""
}

// HealthRule says when an account is degraded and when it is healthy
// again. A zero field means its default.
type HealthRule struct {
	// Failures in a row, the first at most Window ago, make a healthy
	// account degraded; so do Timeouts timeouts in a row. Any success ends
	// the run. Defaults 5, 10s, 3.
	Failures int
	Window   time.Duration
	Timeouts int
	// Probes successes in a row make a degraded account healthy; it admits
	// one send per ProbeEvery meanwhile. Defaults 3, 1s.
	Probes     int
	ProbeEvery time.Duration
	// HedgedProbeEvery is how often a degraded account admits a probe of
	// a caller that hedges it (Claim.Hedged): such a probe costs its
	// message no more than the hedge's bound, so the first class probes
	// often and finds the provider answering again within this. Default
	// 100ms.
	HedgedProbeEvery time.Duration
	// Keep is how long the state lives in Redis after its last change: a
	// degraded account nobody sends on is forgotten after it. Default 10m.
	Keep time.Duration
}

// Defaults of HealthRule.
const (
	DefaultHealthFailures = 5
	DefaultHealthWindow   = 10 * time.Second
	DefaultHealthTimeouts = 3
	DefaultHealthProbes   = 3
	DefaultProbeEvery     = time.Second
	DefaultHedgedProbe    = 100 * time.Millisecond
	DefaultHealthKeep     = 10 * time.Minute
)

func (r HealthRule) withDefaults() HealthRule {
	if r.Failures <= 0 {
		r.Failures = DefaultHealthFailures
	}
	if r.Window <= 0 {
		r.Window = DefaultHealthWindow
	}
	if r.Timeouts <= 0 {
		r.Timeouts = DefaultHealthTimeouts
	}
	if r.Probes <= 0 {
		r.Probes = DefaultHealthProbes
	}
	if r.ProbeEvery <= 0 {
		r.ProbeEvery = DefaultProbeEvery
	}
	if r.HedgedProbeEvery <= 0 {
		r.HedgedProbeEvery = DefaultHedgedProbe
	}
	if r.Keep <= 0 {
		r.Keep = DefaultHealthKeep
	}
	return r
}

// arg is r as finish.lua's ARGV[6].
func (r HealthRule) arg() string {
	return fmt.Sprintf("%d %d %d %d %d %d", r.Window.Microseconds(), r.Failures, r.Timeouts, r.Probes,
		r.ProbeEvery.Microseconds(), max(r.Keep.Milliseconds(), 1))
}

// Health is the account's health as the last script reply of this process
// said it.
func (l *Limiter) Health() Health { return Health(l.health.Load()) }

// setHealth keeps the account's health as a script reply said it, and
// when.
func (l *Limiter) setHealth(h Health) {
	l.health.Store(int32(h))
	l.healthAt.Store(l.clock.Now().UnixNano())
}

// healthAge is how long ago a script reply last told the account's
// health (an admission's, a settle's, RefreshHealth's); the longest
// duration if none ever did.
func (l *Limiter) healthAge() time.Duration {
	at := l.healthAt.Load()
	if at == 0 {
		return math.MaxInt64
	}
	return l.clock.Now().Sub(time.Unix(0, at))
}

// RefreshHealth reads the account's health into Health when no script
// reply (an admission's, a settle's, an earlier refresh's) told it for
// longer than olderThan (0: whenever it is called): one read-only script
// call, through the circuit. A process that sends nothing on the account,
// and so makes no other script call there, learns its health so. asked
// reports whether it called Redis.
func (l *Limiter) RefreshHealth(ctx context.Context, olderThan time.Duration) (asked bool, err error) {
	if olderThan > 0 && l.healthAge() <= olderThan {
		return false, nil
	}
	call := healthCall{Health: l.base.Health}
	return true, l.circuit.do(ctx, l.cfg.RedisTimeout, func(ctx context.Context) error {
		h, err := healthScript.RunRO(ctx, l.rdb, call.keys(), call.argv()...).Int64()
		if err != nil {
			return fmt.Errorf("health: %w", err)
		}
		if h < int64(Healthy) || h > int64(Degraded) {
			return fmt.Errorf("%w: health.lua answered %d", ErrBadReply, h)
		}
		// A reply of an admission or a settle that crossed this one may be
		// overwritten by an older state; the next reply of any of them
		// sets it right.
		l.setHealth(Health(h))
		return nil
	})
}
