package admission

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// accountRecheck is how often a process that knows of a live account-level
// pause asks Redis again whether it still holds: ResumeAccount in another
// process ends it everywhere within about this long.
const accountRecheck = time.Second

// penaltyRecheck is how often a process that knows of a live 429 penalty
// asks Redis again (with its next admission) whether it still holds:
// ClearPenalty in another process ends it everywhere within about this
// long. In between it is decided without Redis.
const penaltyRecheck = time.Second

// ReportThrottled records that the provider answered 429 with retryAfter:
// this process stops at once, and every process sharing the Redis stops
// until retryAfter has passed, or until ClearPenalty. A longer live penalty
// is never shortened. retryAfter below one millisecond counts as one
// millisecond, above Config.MaxRetryAfter as MaxRetryAfter (and is logged).
// The error reports that Redis could not record the penalty; this process
// honours it regardless.
func (l *Limiter) ReportThrottled(ctx context.Context, retryAfter time.Duration) error {
	if retryAfter > l.cfg.MaxRetryAfter {
		l.cfg.Logger.Warn("admission: a 429 asked for a longer wait than MaxRetryAfter: it stops the account for MaxRetryAfter",
			"account", l.cfg.Account, "retry_after", retryAfter, "max_retry_after", l.cfg.MaxRetryAfter)
		retryAfter = l.cfg.MaxRetryAfter
	}
	return l.penalize(ctx, retryAfter, "")
}

// ReportAccountFailure records that the provider refused the account, not a
// message (bad credentials, suspended, out of credit): every process stops
// sending on it for pause, denied with ReasonAccount, unless ResumeAccount
// ends it earlier. why (a short text without secrets, such as the
// provider's status and code) is kept with the pause for operators. Like
// ReportThrottled it never shortens a longer live penalty. This process
// honours the pause even when Redis cannot record it (it tries again at
// each recheck) and while Redis is unreachable.
func (l *Limiter) ReportAccountFailure(ctx context.Context, pause time.Duration, why string) error {
	return l.penalize(ctx, pause, "account:"+strings.TrimPrefix(why, "account:"))
}

// penalize stops every process for d: a 429 when why is empty, an
// account-level pause otherwise.
func (l *Limiter) penalize(ctx context.Context, d time.Duration, why string) error {
	d = max(d, time.Millisecond)
	now := l.clock.Now()
	l.mu.Lock()
	l.stops.report(now, d, why)
	l.mu.Unlock()

	left, live, err := l.recordPenalty(ctx, d, why)
	if err != nil {
		return err
	}
	// Another process may hold a longer penalty, or an account pause this
	// 429 falls within: honour it here too.
	l.mu.Lock()
	l.stops.recorded(now, l.clock.Now(), left, live, why == "")
	l.mu.Unlock()
	return nil
}

// recordPenalty runs penalty.lua: d, and why ("" for a 429). It returns the
// penalty's time left in Redis and its why there.
func (l *Limiter) recordPenalty(ctx context.Context, d time.Duration, why string) (time.Duration, string, error) {
	if why == "" {
		why = "throttled"
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	var v []any
	err := l.circuit.do(ctx, l.cfg.RedisTimeout, func(ctx context.Context) (err error) {
		a := l.base
		call := penaltyCall{Penalty: a.Penalty, GlobalTAT: a.GlobalTAT, Probe: a.Probe, Learned: a.Learned, Override: a.Override,
			Millis: int64(ms), GlobalTau: a.GlobalTau, Why: why, Adaptive: a.Adaptive}
		v, err = penaltyScript.Run(ctx, l.rdb, call.keys(), call.argv()...).Slice()
		if err != nil {
			return fmt.Errorf("penalty eval: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, "", err
	}
	left, ok1 := v[0].(int64)
	live, ok2 := v[1].(string)
	if len(v) != 2 || !ok1 || !ok2 {
		return 0, "", fmt.Errorf("%w: penalty returned %v", ErrBadReply, v)
	}
	return time.Duration(left) * time.Millisecond, live, nil
}

// ResumeAccount ends a live account-level pause in Redis and in this
// process, for when its cause is fixed (a credential file replaced): the
// account resumes one message per interval, with no burst. It never ends a
// 429 penalty. Other processes see the end within about a second of their
// next admission.
func (l *Limiter) ResumeAccount(ctx context.Context) error {
	if _, err := l.resume(ctx, "account"); err != nil {
		return err
	}
	l.mu.Lock()
	l.stops.endPause()
	l.mu.Unlock()
	return nil
}

// ClearPenalty ends a live 429 penalty in Redis and in this process, for
// an operator who knows the provider takes sends again (a Retry-After far
// too long): the account resumes one message per interval, with no burst.
// It never ends an account-level pause. Other processes see the end with
// their first admission after penaltyRecheck (about a second). ended
// reports whether Redis held a 429 penalty.
func (l *Limiter) ClearPenalty(ctx context.Context) (ended bool, err error) {
	if ended, err = l.resume(ctx, "throttled"); err != nil {
		return false, err
	}
	l.mu.Lock()
	l.stops.endPenalty()
	l.mu.Unlock()
	return ended, nil
}

// resume runs resume.lua: it ends a penalty of kind what ("account" or
// "throttled") in Redis, and reports whether there was one.
func (l *Limiter) resume(ctx context.Context, what string) (bool, error) {
	var n int64
	err := l.circuit.do(ctx, l.cfg.RedisTimeout, func(ctx context.Context) (err error) {
		a := l.base
		call := resumeCall{Penalty: a.Penalty, GlobalTAT: a.GlobalTAT, Probe: a.Probe,
			Debt: a.GlobalTau + int64(l.cfg.MaxCost)*l.intervalGl.Microseconds(), What: what}
		if n, err = resumeScript.Run(ctx, l.rdb, call.keys(), call.argv()...).Int64(); err != nil {
			return fmt.Errorf("resume eval: %w", err)
		}
		return nil
	})
	return n == 1, err
}

// CheckPause is AccountPause, asking Redis (at most once per
// accountRecheck, without taking a send slot) whether a pause this process
// knows of still holds: a process whose pulls a pause stopped learns so
// that it ended, by ResumeAccount elsewhere or by running out. With Redis
// unreachable the pause holds; one Redis never recorded is recorded now.
func (l *Limiter) CheckPause(ctx context.Context) (why string, left time.Duration, ok bool) {
	l.mu.Lock()
	why, left, unshared, due := l.stops.pauseDue(l.clock.Now())
	l.mu.Unlock()
	if !due {
		return l.AccountPause()
	}
	if unshared {
		if _, err := l.sharePause(ctx, left, why); err != nil {
			return l.AccountPause()
		}
	}
	asked := l.clock.Now()
	var v []any
	err := l.circuit.do(ctx, l.cfg.RedisTimeout, func(ctx context.Context) (err error) {
		call := pauseCall{Penalty: l.base.Penalty}
		v, err = pauseScript.Run(ctx, l.rdb, call.keys(), call.argv()...).Slice()
		if err != nil {
			return fmt.Errorf("pause eval: %w", err)
		}
		return nil
	})
	ms, _ := valueAt[int64](v, 0)
	live, _ := valueAt[string](v, 1)
	l.mu.Lock()
	l.stops.pauseRead(asked, l.clock.Now(), time.Duration(ms)*time.Millisecond, live, err == nil && len(v) == 2)
	l.mu.Unlock()
	return l.AccountPause()
}

// valueAt returns v[i] as a T, if it is one.
func valueAt[T any](v []any, i int) (T, bool) {
	var zero T
	if i >= len(v) {
		return zero, false
	}
	x, ok := v[i].(T)
	return x, ok
}

// AccountPause reports the account-level pause this process knows of: why
// (as recorded, "account:" included) and how long it has left; ok is false
// when there is none.
func (l *Limiter) AccountPause() (why string, left time.Duration, ok bool) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stops.accountPause(now)
}
