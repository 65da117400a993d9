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

// eval runs gcra.lua once for a send of cost units. recovering says this process is coming back
// from its fallback: others may still be in theirs for up to one
// RedisRetryAfter, sending (MaxSenders-1)/MaxSenders of the target between
// them, so the script first reserves that much time on both keys.
func (l *Limiter) eval(ctx context.Context, class Class, cost int, recovering bool, tickets string, within time.Duration) (Decision, error) {
	call := l.admit[class]
	call.Tickets, call.Within, call.Cost = tickets, within.Microseconds(), cost
	if recovering {
		call.RecoveryFloor = l.recoveryFloor
	}
	if l.cfg.MaxInFlight > 0 {
		call.Lease = l.instance + "-" + strconv.FormatUint(l.leaseSeq.Add(1), 10)
	}
	lease := call.Lease
	var v []any
	err := l.circuit.do(ctx, l.cfg.RedisTimeout, func(ctx context.Context) (err error) {
		v, err = gcraScript.Run(ctx, l.rdb, call.keys(), call.argv()...).Slice()
		if err != nil {
			return fmt.Errorf("gcra eval: %w", err)
		}
		return nil
	})
	if err != nil {
		if lease != "" && err != ErrRedisDown {
			// The script may have run and taken the lease with the reply
			// lost: free it rather than hold a slot for LeaseTTL.
			l.orphan(lease)
		}
		return Decision{}, err
	}
	d, err := parseReply(v)
	if err == nil && d.Allowed {
		d.Lease = lease
	}
	return d, err
}

// parseReply turns gcra.lua's {allowed, wait_us, reason} (and, for an
// account pause, its why) into a Decision.
func parseReply(v []any) (Decision, error) {
	var why string
	if len(v) == 4 {
		s, ok := v[3].(string)
		if !ok {
			return Decision{}, fmt.Errorf("%w: element 3 is %T", ErrBadReply, v[3])
		}
		why, v = s, v[:3]
	}
	if len(v) != 3 {
		return Decision{}, fmt.Errorf("%w: %d elements, want 3", ErrBadReply, len(v))
	}
	var n [3]int64
	for i := range v {
		x, ok := v[i].(int64)
		if !ok {
			return Decision{}, fmt.Errorf("%w: element %d is %T", ErrBadReply, i, v[i])
		}
		n[i] = x
	}
	d := Decision{Allowed: n[0] == 1, RetryAfter: time.Duration(n[1]) * time.Microsecond, Source: SourceRedis}
	switch {
	case n[0] == 1 && n[2] == 0:
		d.Next, d.RetryAfter = max(d.RetryAfter, 0), 0
	case n[0] == 0 && n[2] == 1:
		d.Source, d.Reason = SourcePenalty, ReasonPenalty
	case n[0] == 0 && n[2] == 2:
		d.Reason = ReasonGlobal
	case n[0] == 0 && n[2] == 3:
		d.Reason = ReasonMarketing
	case n[0] == 0 && n[2] == 4:
		d.Reason = ReasonInFlight
	case n[0] == 0 && n[2] == 5 && why != "":
		d.Source, d.Reason, d.Why = SourcePenalty, ReasonAccount, why
	default:
		return Decision{}, fmt.Errorf("%w: %v", ErrBadReply, v)
	}
	if why != "" && d.Reason != ReasonAccount {
		return Decision{}, fmt.Errorf("%w: a why with reason %d", ErrBadReply, n[2])
	}
	if !d.Allowed && d.RetryAfter <= 0 {
		return Decision{}, fmt.Errorf("%w: denial without a wait: %v", ErrBadReply, v)
	}
	return d, nil
}
