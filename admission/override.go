package admission

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Override lowers the account's rates for every process until ttl has
// passed (ttl 0: until cleared): targetRPS and marketingRPS, where positive,
// replace TargetRPS and MarketingRPS in the script when they are lower; a
// value above the configured one is ignored there, so an override can never
// raise a rate. Both zero clears it. The Redis-down fallback keeps the
// configured share. What the account owes from sends just made is carried
// over to the new rate, so a cleared override gives the configured rate
// back at once, while a live 429 penalty keeps its length; that reckoning
// uses this Limiter's configured rates, which must be the pods'. An
// override that ends by its ttl gets no such reckoning: the account may
// then wait up to Burst intervals of the override's rate.
func (l *Limiter) Override(ctx context.Context, targetRPS, marketingRPS float64, ttl time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.RedisTimeout)
	defer cancel()
	f := func(v float64) string { return strconv.FormatFloat(max(v, 0), 'f', -1, 64) }
	what := "override"
	if targetRPS <= 0 && marketingRPS <= 0 {
		what, targetRPS, marketingRPS, ttl = "override clear", 0, 0, 0
	}
	// The configured intervals, so that the script can rescale what the
	// TATs owe to the interval in force after the change.
	ms := int64(0) // until cleared
	if ttl > 0 {
		ms = int64((ttl + time.Millisecond - 1) / time.Millisecond) // a ttl under 1 ms is not "until cleared"
	}
	a := l.admit[OTP]
	call := overrideCall{
		Override: a.Override, GlobalTAT: a.GlobalTAT, MarketingTAT: a.MarketingTAT,
		WakeOTP: a.Wake, WakeMarketing: l.admit[Marketing].Wake,
		TargetRPS: f(targetRPS), MarketingRPS: f(marketingRPS), Millis: ms,
		GlobalInterval: a.GlobalInterval, MarketingInterval: a.MarketingInterval,
		GlobalTau: a.GlobalTau, MarketingTau: a.MarketingTau,
	}
	err := overrideScript.Run(ctx, l.rdb, call.keys(), call.argv()...).Err()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
