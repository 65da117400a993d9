package admission

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// ErrBadOverride reports an override Override refuses: a rate that is not
// 0 (not overridden) nor a finite number of at least MinRPS, or a negative
// ttl.
var ErrBadOverride = errors.New("admission: bad override")

// CheckOverrideRate reports whether rps can be an override's rate: 0 (that
// rate not overridden) or a finite number of at least MinRPS, the lowest
// rate a Limiter takes. The scripts ignore a lower one found in Redis.
func CheckOverrideRate(rps float64) error {
	if rps == 0 || (rps >= MinRPS && !math.IsInf(rps, 0)) {
		return nil
	}
	return fmt.Errorf("must be 0 (not overridden) or a finite number of at least %v/s, got %v", MinRPS, rps)
}

// Override lowers the account's rates for every process until ttl has
// passed (ttl 0: until cleared): targetRPS and marketingRPS, where not 0,
// replace TargetRPS and the last class's ceiling (MarketingRPS with the default classes) in the script when they are lower; a
// value above the configured one is ignored there, so an override can never
// raise a rate. Both zero clears it. A rate that CheckOverrideRate refuses,
// or a negative ttl, is an error wrapping ErrBadOverride, and nothing is
// written. The Redis-down fallback keeps the configured share. What the
// account owes from sends just made is carried over to the new rate, so a cleared override gives the configured rate
// back at once, while a live 429 penalty keeps its length; that reckoning
// uses this Limiter's configured rates, which must be the pods'. An
// override that ends by its ttl gets no such reckoning: the account may
// then wait up to Burst intervals of the override's rate.
func (l *Limiter) Override(ctx context.Context, targetRPS, marketingRPS float64, ttl time.Duration) error {
	for _, r := range []struct {
		what string
		rps  float64
	}{{"target", targetRPS}, {"marketing", marketingRPS}} {
		if err := CheckOverrideRate(r.rps); err != nil {
			return fmt.Errorf("%w: %s rate %w", ErrBadOverride, r.what, err)
		}
	}
	if ttl < 0 {
		return fmt.Errorf("%w: ttl must not be negative (0: until cleared), got %v", ErrBadOverride, ttl)
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.RedisTimeout)
	defer cancel()
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	what := "override"
	if targetRPS == 0 && marketingRPS == 0 {
		what, targetRPS, marketingRPS, ttl = "override clear", 0, 0, 0
	}
	// The configured intervals, so that the script can rescale what the
	// TATs owe to the interval in force after the change.
	ms := int64(0) // until cleared
	if ttl > 0 {
		// Rounded up without overflowing: a ttl under 1 ms is not "until
		// cleared", and neither is the longest one.
		ms = int64(ttl / time.Millisecond)
		if ttl%time.Millisecond != 0 {
			ms++
		}
	}
	// The second rate is the last class's ceiling (marketing's with the
	// default classes); a last class without one has nothing to lower.
	a, first, last := l.base, l.classes[l.order[0]].admit, l.classes[l.order[len(l.order)-1]].admit
	if last.CeilingInterval == 0 {
		last.CeilingInterval, last.CeilingTau = a.GlobalInterval, a.GlobalTau
	}
	call := overrideCall{
		Override: a.Override, GlobalTAT: a.GlobalTAT, MarketingTAT: last.CeilingTAT,
		WakeOTP: first.Wake, WakeMarketing: last.Wake, WakeOthers: l.middleWakes(),
		TargetRPS: f(targetRPS), MarketingRPS: f(marketingRPS), Millis: ms,
		GlobalInterval: a.GlobalInterval, MarketingInterval: last.CeilingInterval,
		GlobalTau: a.GlobalTau, MarketingTau: last.CeilingTau,
	}
	err := overrideScript.Run(ctx, l.rdb, call.keys(), call.argv()...).Err()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
