package admission

import (
	"context"
	"fmt"
	"time"
)

// ReportThrottled records that the provider answered 429 with retryAfter:
// this process stops at once, and every process sharing the Redis stops
// until retryAfter has passed. A longer live penalty is never shortened.
// retryAfter below one millisecond counts as one millisecond. The error
// reports that Redis could not record the penalty; this process honours it
// regardless.
func (l *Limiter) ReportThrottled(ctx context.Context, retryAfter time.Duration) error {
	retryAfter = max(retryAfter, time.Millisecond)
	now := l.clock.Now()
	l.mu.Lock()
	if until := now.Add(retryAfter); until.After(l.penaltyUntil) {
		l.penaltyUntil = until
	}
	l.mu.Unlock()

	ms := (retryAfter + time.Millisecond - 1) / time.Millisecond
	var left int64
	err := l.circuit.do(ctx, l.cfg.RedisTimeout, func(ctx context.Context) (err error) {
		a := l.admit[OTP]
		call := penaltyCall{Penalty: a.Penalty, GlobalTAT: a.GlobalTAT, Millis: int64(ms), GlobalTau: a.GlobalTau}
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
	if until := now.Add(time.Duration(left) * time.Millisecond); until.After(l.penaltyUntil) {
		l.penaltyUntil = until
	}
	l.mu.Unlock()
	return nil
}
