package admission

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"smsdispatcher/internal/redistest"
)

// TestOverrideRefusesRatesBelowTheMinimumAndANegativeTTL: Override refuses
// a rate that is neither 0 nor a finite number of at least MinRPS (below
// it the scripts would have no integer for the interval) and a negative
// ttl (the override would never end), with ErrBadOverride, and writes
// nothing to Redis.
func TestOverrideRefusesRatesBelowTheMinimumAndANegativeTTL(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, slowConfig(t))
	ctx := context.Background()
	tests := []struct {
		name              string
		target, marketing float64
		ttl               time.Duration
	}{
		{"target 1e-14", 1e-14, 0, time.Minute},
		{"target just below the minimum", math.Nextafter(MinRPS, 0), 0, time.Minute},
		{"target negative", -1, 0, time.Minute},
		{"target NaN", math.NaN(), 0, time.Minute},
		{"target +Inf", math.Inf(1), 0, time.Minute},
		{"marketing 1e-20", 0, 1e-20, time.Minute},
		{"marketing -Inf", 0.5, math.Inf(-1), time.Minute},
		{"negative ttl", 0.5, 0, -time.Second},
		{"negative ttl clearing", 0, 0, -time.Nanosecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := l.Override(ctx, tt.target, tt.marketing, tt.ttl); !errors.Is(err, ErrBadOverride) {
				t.Fatalf("Override(%v, %v, %v) = %v, want ErrBadOverride", tt.target, tt.marketing, tt.ttl, err)
			}
			if v := get(t, rdb, l.admit[OTP].Override); v != "<absent>" {
				t.Fatalf("the override key holds %q after a refused override", v)
			}
		})
	}
	// The minimum itself, and the longest ttl, which must not round to
	// "until cleared".
	if err := l.Override(ctx, MinRPS, MinRPS, math.MaxInt64); err != nil {
		t.Fatalf("Override(MinRPS, MinRPS, longest ttl): %v", err)
	}
	// PTTL raw: its milliseconds overflow a time.Duration.
	if ms, err := rdb.Do(ctx, "PTTL", l.admit[OTP].Override).Int64(); err != nil || ms <= 0 {
		t.Fatalf("the longest ttl left the override with PTTL %v ms (%v), want a lifetime", ms, err)
	}
}
