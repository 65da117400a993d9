package admission

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"smsdispatcher/ledger"
)

// ErrBadReply reports a script reply of an unexpected shape: the
// ledger's, one error for every script of an account.
var ErrBadReply = ledger.ErrBadReply

// eval runs the admission script (compose.go) of the parts the call uses
// once for a send of cost units, taking claim's send-once claim with the
// slot when claim.Token is set. recovering says this process is coming
// back from its fallback: others may still be in theirs for up to one
// RedisRetryAfter, sending (MaxSenders-1)/MaxSenders of the target between
// them, so the script first reserves that much time on both keys. A slot
// opening within lookahead is booked: the Decision is allowed with
// RetryAfter the wait until it opens.
func (l *Limiter) eval(ctx context.Context, c *classState, cost int, recovering bool, tickets string, within, lookahead time.Duration, claim Claim) (Decision, error) {
	call := l.admitCallOf(c, cost, recovering, tickets, within, lookahead, claim)
	lease := call.Lease
	script := admitScript(partsOf(call))
	var v []any
	err := l.circuit.do(ctx, l.cfg.RedisTimeout, func(ctx context.Context) (err error) {
		keys, argv := script.send(&call, c.argv)
		for built := false; ; built = true {
			v, err = script.run(ctx, l.rdb, keys, argv...).Slice()
			if err != nil {
				return fmt.Errorf("admission eval: %w", err)
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
			l.reportIgnored(v[replyIgnored].(int64))
		}
		d.Sender, err = l.pool.sender(v[replySender])
	}
	if err == nil && d.Allowed {
		d.Lease, d.class, d.units = lease, c.name, cost
		if claim.Token != "" {
			d.Claimed, d.claim = true, claim
		}
	}
	return d, err
}

// admitCallOf is c's admission call for one send: its class's keys and
// rates, with this send's cost, wait bounds, lease and claim.
func (l *Limiter) admitCallOf(c *classState, cost int, recovering bool, tickets string, within, lookahead time.Duration, claim Claim) admitCall {
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
	return call
}

// parseReply turns the admission script's reply (rewrite.go's admitReply)
// into a Decision, and the learned rate's thousandths.
func parseReply(v []any) (Decision, int64, error) {
	d, err := parseDecision(v)
	if err != nil {
		return d, 0, err
	}
	return d, v[replyLearned].(int64), nil
}

func parseDecision(v []any) (Decision, error) {
	if len(v) != replyLen {
		return Decision{}, fmt.Errorf("%w: %d elements, want %d", ErrBadReply, len(v), replyLen)
	}
	detail, ok := v[replyDetail].(string)
	if !ok {
		return Decision{}, fmt.Errorf("%w: element %d is %T", ErrBadReply, replyDetail, v[replyDetail])
	}
	sender, ok := v[replySender].(string)
	if !ok {
		return Decision{}, fmt.Errorf("%w: element %d is %T", ErrBadReply, replySender, v[replySender])
	}
	var n [replyLen]int64
	for i := range n {
		if i == replyDetail || i == replySender {
			continue
		}
		x, ok := v[i].(int64)
		if !ok {
			return Decision{}, fmt.Errorf("%w: element %d is %T", ErrBadReply, i, v[i])
		}
		n[i] = x
	}
	allowed, code := n[replyAllowed] == 1, n[replyReason]
	if sender != "" && (!allowed || code != codeAllowed) {
		return Decision{}, fmt.Errorf("%w: a sender with a denial: %v", ErrBadReply, v)
	}
	us := func(x int64) time.Duration { return time.Duration(x) * time.Microsecond }
	if n[replyHealth] < int64(Healthy) || n[replyHealth] > int64(Degraded) {
		return Decision{}, fmt.Errorf("%w: health %d", ErrBadReply, n[replyHealth])
	}
	d := Decision{Allowed: allowed, RetryAfter: us(n[replyWait]), Source: SourceRedis, Attempts: int(n[replyAttempts]), Health: Health(n[replyHealth])}
	switch {
	case allowed && code == codeAllowed:
		d.RetryAfter, d.Next = max(d.RetryAfter, 0), max(us(n[replyNext]), 0)
		if n[replySlot] < 0 {
			return Decision{}, fmt.Errorf("%w: slot %d", ErrBadReply, n[replySlot])
		}
		d.slotMS = n[replySlot] / 1000
	case n[replyAllowed] != 0 || code <= codeAllowed || code >= codeLen || code == codePoolMissing:
		return Decision{}, fmt.Errorf("%w: %v", ErrBadReply, v)
	case code == codeAccount && detail == "":
		return Decision{}, fmt.Errorf("%w: %v", ErrBadReply, v)
	case code == codeRecord:
		rec, err := ledger.ParseRecord(detail)
		if err != nil {
			return Decision{}, err
		}
		d.Reason, d.Record, d.RetryAfter = ReasonRecord, rec, 0
		return d, nil
	default:
		r := admitReasons[code]
		d.Source, d.Reason = r.source, r.reason
		if code == codeAccount {
			d.Why = detail
		}
	}
	if detail != "" && d.Reason != ReasonAccount {
		return Decision{}, fmt.Errorf("%w: a detail with reason %d", ErrBadReply, code)
	}
	if !d.Allowed && d.RetryAfter <= 0 {
		return Decision{}, fmt.Errorf("%w: denial without a wait: %v", ErrBadReply, v)
	}
	return d, nil
}

// What the admission script found in Redis and ignored (its reply's ignored), bits.
const (
	ignoredOverride = 1 // the override: a rate not 0 nor a number of at least MinRPS
	ignoredLearned  = 2 // the learned rate's state: a rate below MinRPS, or a field out of range
)

// reportIgnored logs what the admission script ignored in Redis when that changes: a
// value only a hand-written key or a bug can leave there, which would
// otherwise hide behind the configured rates holding.
func (l *Limiter) reportIgnored(bits int64) {
	if old := l.ignored.Swap(bits); old == bits || bits == 0 {
		return
	}
	l.cfg.Logger.Warn("admission: a rate in redis is below the minimum or not a number: ignored, the configured rates hold",
		"account", l.cfg.Account, "override", bits&ignoredOverride != 0, "learned", bits&ignoredLearned != 0, "min_rps", MinRPS)
}
