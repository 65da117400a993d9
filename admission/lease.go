package admission

import "time"

// localLease marks a lease held in the fallback, not in Redis.
const localLease = "local"

// fallbackAt decides in the fallback, holding a local lease when
// MaxInFlight is set. A send of more than one unit (a message of several
// segments) waits for Redis: no process knows what the others send, and a
// long message from each of them at once would break the contract. Called
// with l.mu held.
func (l *Limiter) fallbackAt(now time.Time, c *classState, cost int) Decision {
	if cost > 1 {
		return Decision{RetryAfter: l.cfg.RedisRetryAfter, Source: SourceFallback, Reason: ReasonLong}
	}
	if l.cfg.MaxInFlight > 0 && l.localInFlight >= max(1, l.cfg.MaxInFlight/l.cfg.MaxSenders) {
		return Decision{RetryAfter: l.intervalGl, Source: SourceFallback, Reason: ReasonInFlight}
	}
	d := l.fb.decideAt(now, c.levels, c.admit.CeilingInterval != 0)
	if d.Allowed && l.cfg.MaxInFlight > 0 {
		l.localInFlight++
		d.Lease = localLease
	}
	return d
}
