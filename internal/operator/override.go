package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/config"
)

// An Override is an operator's change of an account's override, as
// `dispatcher override` and the console make it (ChangeOverride).
type Override struct {
	// TargetRPS and MarketingRPS lower the account's target and its last
	// class's ceiling (MarketingRPS with the default classes) for every
	// process; 0 leaves one as configured. Each only lowers: a value
	// above the configured one has no effect.
	TargetRPS, MarketingRPS float64
	// TTL is how long the override holds (0: until cleared).
	TTL time.Duration
	// Clear removes the override instead: the configured rates apply.
	Clear bool
}

// CheckOverride refuses an override that would not do what it says: a
// rate below admission.MinRPS (it would not lower the rate), a negative
// TTL (it would make the override permanent), or neither rate given.
// what names the fields in the error: the flags' or the form's names of
// the target, the marketing rate and the TTL.
func CheckOverride(o Override, what [3]string) error {
	if o.TTL < 0 {
		return fmt.Errorf("%s must not be negative (0: until cleared), got %v", what[2], o.TTL)
	}
	if o.Clear {
		return nil
	}
	for i, rps := range []float64{o.TargetRPS, o.MarketingRPS} {
		if err := admission.CheckOverrideRate(rps); err != nil {
			return fmt.Errorf("%s %w", what[i], err)
		}
	}
	if o.TargetRPS == 0 && o.MarketingRPS == 0 {
		return fmt.Errorf("give %s or %s, or clear the override", what[0], what[1])
	}
	return nil
}

// ChangeOverride sets or clears account's override on its limiter lim
// and says what it did, in words.
func ChangeOverride(ctx context.Context, lim *admission.Limiter, account config.Account, o Override) (string, error) {
	if lim == nil {
		return "", errors.New("no limiter")
	}
	if o.Clear {
		if err := lim.Override(ctx, 0, 0, o.TTL); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s: override cleared: configured rates apply", account.Name), nil
	}
	if err := lim.Override(ctx, o.TargetRPS, o.MarketingRPS, o.TTL); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s: override set for %v: target %g/s, marketing %g/s (each only where below the configured %g and %g)",
		account.Name, o.TTL, o.TargetRPS, o.MarketingRPS, account.TargetRPS, account.MarketingRPS), nil
}
