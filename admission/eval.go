package admission

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ErrBadReply reports a script reply of an unexpected shape.
var ErrBadReply = errors.New("admission: unexpected script reply")

// eval runs gcra.lua once for a send of cost units, taking claim's
// send-once claim with the slot when claim.Token is set. recovering says
// this process is coming back from its fallback: others may still be in
// theirs for up to one RedisRetryAfter, sending (MaxSenders-1)/MaxSenders
// of the target between them, so the script first reserves that much time
// on both keys. A slot opening within lookahead is booked: the Decision is
// allowed with RetryAfter the wait until it opens.
func (l *Limiter) eval(ctx context.Context, c *classState, cost int, recovering bool, tickets string, within, lookahead time.Duration, claim Claim) (Decision, error) {
	call := c.admit
	call.Tickets, call.Within, call.Cost, call.Lookahead = tickets, within.Microseconds(), cost, lookahead.Microseconds()
	if recovering {
		call.RecoveryFloor = l.recoveryFloor
	}
	if l.cfg.MaxInFlight > 0 {
		call.Lease = l.instance + "-" + strconv.FormatUint(l.leaseSeq.Add(1), 10)
	}
	if claim.Token != "" {
		ttl := claim.TTL
		if ttl <= 0 {
			ttl = DefaultClaimTTL
		}
		call.Record, call.Token, call.ClaimMillis, call.Count = l.claims.Key(claim.ID), claim.Token, ttl.Milliseconds(), claim.Count
	}
	call.Failover = claim.Failover
	if claim.Failover && claim.Hedged {
		call.HedgedProbe = l.cfg.Health.HedgedProbeEvery.Microseconds()
	}
	if c.policy.SkipsFailingRoute && claim.Prefix != "" && claim.Failover {
		// Only a class that skips a failing route (OTP) is skipped, and
		// only for a caller that can send elsewhere: the last account of
		// a route is never skipped (a skip there would leave the prefix
		// with none).
		call.Skip = l.skipKey(claim.Prefix)
	}
	lease := call.Lease
	var v []any
	err := l.circuit.do(ctx, l.cfg.RedisTimeout, func(ctx context.Context) (err error) {
		keys, argv := call.keys(), call.argv()
		for built := false; ; built = true {
			v, err = gcraScript.Run(ctx, l.rdb, keys, argv...).Slice()
			if err != nil {
				return fmt.Errorf("gcra eval: %w", err)
			}
			if built || !poolMissing(v) {
				return nil
			}
			// An index of the sender pool is missing: built, then asked
			// again (once: a second miss is a bad reply).
			if err := l.pool.build(ctx, l.rdb); err != nil {
				return err
			}
		}
	})
	if err != nil {
		if err != ErrRedisDown {
			// The script may have run and taken the lease and the claim
			// with the reply lost: free them rather than hold a slot for
			// LeaseTTL and the id's redeliveries for the claim's life.
			if lease != "" {
				l.orphan(lease)
			}
			if claim.Token != "" {
				// At once, while this delivery still knows it: a shutdown
				// may leave no later call to give it back with.
				l.claims.Release(context.WithoutCancel(ctx), claim.ID, claim.Token) //nolint:errcheck // kept for later on failure
			}
		}
		return Decision{}, err
	}
	d, learned, err := parseReply(v)
	if err == nil {
		l.learned.Store(learned)
		l.setHealth(d.Health)
		if d.Reason != ReasonRecord { // a record's denial returns before the rates are read
			l.reportIgnored(v[8].(int64))
		}
		d.Sender, err = l.pool.sender(v[6])
	}
	if err == nil && d.Allowed {
		d.Lease, d.class, d.units = lease, c.name, cost
		if claim.Token != "" {
			d.Claimed, d.claim = true, claim
		}
	}
	return d, err
}

// parseReply turns gcra.lua's {allowed, wait_us, reason, next_us,
// attempts, detail, sender, learned, ignored, health} into a Decision, and
// the learned rate's thousandths.
func parseReply(v []any) (Decision, int64, error) {
	d, err := parseDecision(v)
	if err != nil {
		return d, 0, err
	}
	return d, v[7].(int64), nil
}

func parseDecision(v []any) (Decision, error) {
	if len(v) != 10 {
		return Decision{}, fmt.Errorf("%w: %d elements, want 10", ErrBadReply, len(v))
	}
	detail, ok := v[5].(string)
	if !ok {
		return Decision{}, fmt.Errorf("%w: element 5 is %T", ErrBadReply, v[5])
	}
	sender, ok := v[6].(string)
	if !ok {
		return Decision{}, fmt.Errorf("%w: element 6 is %T", ErrBadReply, v[6])
	}
	var n [10]int64
	for i := range n {
		if i == 5 || i == 6 {
			continue
		}
		x, ok := v[i].(int64)
		if !ok {
			return Decision{}, fmt.Errorf("%w: element %d is %T", ErrBadReply, i, v[i])
		}
		n[i] = x
	}
	if sender != "" && (n[0] != 1 || n[2] != 0) {
		return Decision{}, fmt.Errorf("%w: a sender with a denial: %v", ErrBadReply, v)
	}
	us := func(x int64) time.Duration { return time.Duration(x) * time.Microsecond }
	if n[9] < int64(Healthy) || n[9] > int64(Degraded) {
		return Decision{}, fmt.Errorf("%w: health %d", ErrBadReply, n[9])
	}
	d := Decision{Allowed: n[0] == 1, RetryAfter: us(n[1]), Source: SourceRedis, Attempts: int(n[4]), Health: Health(n[9])}
	switch {
	case n[0] == 1 && n[2] == 0:
		d.RetryAfter, d.Next = max(d.RetryAfter, 0), max(us(n[3]), 0)
	case n[0] == 0 && n[2] == 1:
		d.Source, d.Reason = SourcePenalty, ReasonPenalty
	case n[0] == 0 && n[2] == 2:
		d.Reason = ReasonGlobal
	case n[0] == 0 && n[2] == 3:
		d.Reason = ReasonCeiling
	case n[0] == 0 && n[2] == 10:
		d.Reason = ReasonReserve
	case n[0] == 0 && n[2] == 4:
		d.Reason = ReasonInFlight
	case n[0] == 0 && n[2] == 7:
		d.Reason = ReasonSender
	case n[0] == 0 && n[2] == 8:
		d.Reason = ReasonDegraded
	case n[0] == 0 && n[2] == 9:
		d.Reason = ReasonRouteSkipped
	case n[0] == 0 && n[2] == 5 && detail != "":
		d.Source, d.Reason, d.Why = SourcePenalty, ReasonAccount, detail
	case n[0] == 0 && n[2] == 6:
		rec, err := parseRecord(detail)
		if err != nil {
			return Decision{}, err
		}
		d.Reason, d.Record, d.RetryAfter = ReasonRecord, rec, 0
		return d, nil
	default:
		return Decision{}, fmt.Errorf("%w: %v", ErrBadReply, v)
	}
	if detail != "" && d.Reason != ReasonAccount {
		return Decision{}, fmt.Errorf("%w: a detail with reason %d", ErrBadReply, n[2])
	}
	if !d.Allowed && d.RetryAfter <= 0 {
		return Decision{}, fmt.Errorf("%w: denial without a wait: %v", ErrBadReply, v)
	}
	return d, nil
}

// What gcra.lua found in Redis and ignored (its reply's ignored), bits.
const (
	ignoredOverride = 1 // the override: a rate not 0 nor a number of at least MinRPS
	ignoredLearned  = 2 // the learned rate's state: a rate below MinRPS, or a field out of range
)

// reportIgnored logs what gcra.lua ignored in Redis when that changes: a
// value only a hand-written key or a bug can leave there, which would
// otherwise hide behind the configured rates holding.
func (l *Limiter) reportIgnored(bits int64) {
	if old := l.ignored.Swap(bits); old == bits || bits == 0 {
		return
	}
	l.cfg.Logger.Warn("admission: a rate in redis is below the minimum or not a number: ignored, the configured rates hold",
		"account", l.cfg.Account, "override", bits&ignoredOverride != 0, "learned", bits&ignoredLearned != 0, "min_rps", MinRPS)
}
