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

// ReportThrottled records that the provider answered 429 with retryAfter:
// this process stops at once, and every process sharing the Redis stops
// until retryAfter has passed. A longer live penalty is never shortened.
// retryAfter below one millisecond counts as one millisecond. The error
// reports that Redis could not record the penalty; this process honours it
// regardless.
func (l *Limiter) ReportThrottled(ctx context.Context, retryAfter time.Duration) error {
	return l.penalize(ctx, retryAfter, "")
}

// ReportAccountFailure records that the provider refused the account, not a
// message (bad credentials, suspended, out of credit): every process stops
// sending on it for pause, denied with ReasonAccount, unless ResumeAccount
// ends it earlier. why (a short text without secrets, such as the
// provider's error code) is kept with the pause for operators. Like
// ReportThrottled it never shortens a longer live penalty, and this process
// honours the pause even when Redis cannot record it.
func (l *Limiter) ReportAccountFailure(ctx context.Context, pause time.Duration, why string) error {
	return l.penalize(ctx, pause, "account:"+strings.TrimPrefix(why, "account:"))
}

// penalize stops every process for d: a 429 when why is empty, an
// account-level pause otherwise.
func (l *Limiter) penalize(ctx context.Context, d time.Duration, why string) error {
	d = max(d, time.Millisecond)
	now := l.clock.Now()
	l.mu.Lock()
	l.extendPenalty(now, d, why)
	l.mu.Unlock()

	value := why
	if value == "" {
		value = "throttled"
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	var left int64
	err := l.circuit.do(ctx, l.cfg.RedisTimeout, func(ctx context.Context) (err error) {
		a := l.admit[OTP]
		call := penaltyCall{Penalty: a.Penalty, GlobalTAT: a.GlobalTAT, Millis: int64(ms), GlobalTau: a.GlobalTau, Why: value}
		left, err = penaltyScript.Run(ctx, l.rdb, call.keys(), call.argv()...).Int64()
		if err != nil {
			return fmt.Errorf("penalty eval: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Another process may hold a longer penalty: honour it here too.
	l.mu.Lock()
	l.extendPenalty(now, time.Duration(left)*time.Millisecond, "")
	l.mu.Unlock()
	return nil
}

// extendPenalty makes this process honour a penalty of d from now, keeping
// a longer one it knows of; a non-empty why marks it an account-level
// pause. l.mu must be held.
func (l *Limiter) extendPenalty(now time.Time, d time.Duration, why string) {
	if until := now.Add(d); until.After(l.penaltyUntil) {
		l.penaltyUntil = until
	}
	if why != "" {
		l.pauseWhy, l.pauseChecked = why, now
	}
}

// ResumeAccount ends a live account-level pause in Redis and in this
// process, for when its cause is fixed (a credential file replaced): the
// account resumes one message per interval, with no burst. It never ends a
// 429 penalty. Other processes see the end within about a second of their
// next admission.
func (l *Limiter) ResumeAccount(ctx context.Context) error {
	err := l.circuit.do(ctx, l.cfg.RedisTimeout, func(ctx context.Context) error {
		a := l.admit[OTP]
		call := resumeCall{Penalty: a.Penalty, GlobalTAT: a.GlobalTAT, GlobalTau: a.GlobalTau}
		if err := resumeScript.Run(ctx, l.rdb, call.keys(), call.argv()...).Err(); err != nil {
			return fmt.Errorf("resume eval: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.endPause()
	l.mu.Unlock()
	return nil
}

// endPause forgets an account-level pause this process knows of. l.mu
// must be held.
func (l *Limiter) endPause() {
	if l.pauseWhy != "" {
		l.penaltyUntil, l.pauseWhy = time.Time{}, ""
	}
}

// AccountPause reports the account-level pause this process knows of: why
// (as given to ReportAccountFailure, "account:" included) and how long it
// has left; ok is false when there is none.
func (l *Limiter) AccountPause() (why string, left time.Duration, ok bool) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pauseWhy == "" || !now.Before(l.penaltyUntil) {
		return "", 0, false
	}
	return l.pauseWhy, l.penaltyUntil.Sub(now), true
}
