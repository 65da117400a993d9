package admission

import (
	"context"
	"fmt"
	"time"
)

// localLease marks a lease held in the fallback, not in Redis.
const localLease = "local"

// fallbackAt decides in the fallback, holding a local lease when
// MaxInFlight is set. A send of more than one unit (a message of several
// segments) waits for Redis: no process knows what the others send, and a
// long message from each of them at once would break the contract. Called
// with l.mu held.
func (l *Limiter) fallbackAt(now time.Time, class Class, cost int) Decision {
	if cost > 1 {
		return Decision{RetryAfter: l.cfg.RedisRetryAfter, Source: SourceFallback, Reason: ReasonLong}
	}
	if l.cfg.MaxInFlight > 0 && l.localInFlight >= max(1, l.cfg.MaxInFlight/l.cfg.MaxSenders) {
		return Decision{RetryAfter: l.intervalGl, Source: SourceFallback, Reason: ReasonInFlight}
	}
	d := l.fb.decideAt(now, class)
	if d.Allowed && l.cfg.MaxInFlight > 0 {
		l.localInFlight++
		d.Lease = localLease
	}
	return d
}

// Release ends the in-flight lease of an admission (Decision.Lease), and
// with it any lease whose admission reply or release was lost; an empty
// lease ends only those. A lease Redis did not hear of is kept for the next
// Release; past that it expires after LeaseTTL.
func (l *Limiter) Release(ctx context.Context, lease string) error {
	switch lease {
	case "":
		l.mu.Lock()
		none := len(l.orphans) == 0
		l.mu.Unlock()
		if none {
			return nil
		}
	case localLease:
		l.mu.Lock()
		l.localInFlight = max(0, l.localInFlight-1)
		l.mu.Unlock()
		return nil
	}
	l.mu.Lock()
	members := toAny(l.orphans)
	l.orphans = nil
	l.mu.Unlock()
	if lease != "" {
		members = append(members, lease)
	}
	if len(members) == 0 {
		return nil
	}
	err := l.circuit.do(ctx, l.cfg.RedisTimeout, func(ctx context.Context) error {
		if err := leaseReleaseScript.Run(ctx, l.rdb, []string{l.admit[OTP].Leases}, members...).Err(); err != nil {
			return fmt.Errorf("lease release: %w", err)
		}
		return nil
	})
	if err != nil {
		for _, m := range members {
			l.orphan(m.(string))
		}
	}
	return err
}

// orphan keeps lease for the next Release.
func (l *Limiter) orphan(lease string) {
	l.mu.Lock()
	l.orphans = keepLeftovers(l.orphans, lease)
	l.mu.Unlock()
}

func toAny(s []string) []any {
	a := make([]any, len(s))
	for i, v := range s {
		a[i] = v
	}
	return a
}
