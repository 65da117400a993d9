package nack

import (
	"math"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
)

func fixed(r float64) JitterOption { return WithRand(func() float64 { return r }) }

func TestFullJitterCaps(t *testing.T) {
	const ms = time.Millisecond
	// Caps from 100ms doubling to a 1s ceiling (800ms doubled is 1.6s, cut to 1s).
	caps := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1000 * ms, 1000 * ms, 1000 * ms}
	almostOne := math.Nextafter(1, 0)
	tests := []struct {
		name string
		r    float64
		want func(cap time.Duration) (lo, hi time.Duration)
	}{
		{"zero gives zero", 0, func(time.Duration) (lo, hi time.Duration) { return 0, 0 }},
		{"half gives half the cap", 0.5, func(c time.Duration) (lo, hi time.Duration) { return c / 2, c / 2 }},
		{"just under one gives the cap", almostOne, func(c time.Duration) (lo, hi time.Duration) { return c - 1, c }},
		{"above one is clamped to the cap", 1.5, func(c time.Duration) (lo, hi time.Duration) { return c, c }},
		{"negative is clamped to zero", -0.5, func(time.Duration) (lo, hi time.Duration) { return 0, 0 }},
		{"NaN is zero", math.NaN(), func(time.Duration) (lo, hi time.Duration) { return 0, 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := NewFullJitter(100*ms, time.Second, fixed(tt.r))
			for i, c := range caps {
				got := j.NextBackOff()
				if lo, hi := tt.want(c); got < lo || got > hi {
					t.Errorf("call %d (cap %v): NextBackOff() = %v, want in [%v, %v]", i, c, got, lo, hi)
				}
			}
		})
	}
}

func TestFullJitterReset(t *testing.T) {
	j := NewFullJitter(10*time.Millisecond, time.Second, fixed(0.5))
	var first []time.Duration
	for range 5 {
		first = append(first, j.NextBackOff())
	}
	j.Reset()
	for i, want := range first {
		if got := j.NextBackOff(); got != want {
			t.Errorf("call %d after Reset: NextBackOff() = %v, want %v", i, got, want)
		}
	}
	if first[0] != 5*time.Millisecond {
		t.Errorf("first NextBackOff() = %v, want 5ms", first[0])
	}
}

func TestFullJitterBounds(t *testing.T) {
	almostOne := math.Nextafter(1, 0)
	tests := []struct {
		name             string
		initial, max     time.Duration
		wantFirst, wantN time.Duration // with r = 1: the first cap and the cap after 200 calls
	}{
		{"initial above max is lowered", 5 * time.Second, time.Second, time.Second, time.Second},
		{"zero initial never grows", 0, time.Second, 0, 0},
		{"negative initial is zero", -time.Second, time.Second, 0, 0},
		{"negative max is zero", time.Second, -time.Second, 0, 0},
		{"huge max does not overflow", time.Nanosecond, math.MaxInt64, time.Nanosecond, math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := NewFullJitter(tt.initial, tt.max, fixed(1))
			if got := j.NextBackOff(); got != tt.wantFirst {
				t.Errorf("first NextBackOff() = %v, want %v", got, tt.wantFirst)
			}
			var got time.Duration
			for range 199 {
				got = j.NextBackOff()
				if got == backoff.Stop || got < 0 {
					t.Fatalf("NextBackOff() = %v, want never Stop or negative", got)
				}
			}
			if got != tt.wantN {
				t.Errorf("200th NextBackOff() = %v, want %v", got, tt.wantN)
			}
			// Just under one must stay within the cap.
			j = NewFullJitter(tt.initial, tt.max, fixed(almostOne))
			limit := max(tt.max, 0)
			for range 200 {
				if got := j.NextBackOff(); got < 0 || got > limit {
					t.Fatalf("NextBackOff() = %v, want in [0, %v]", got, limit)
				}
			}
		})
	}
}

func TestFullJitterDefaultRand(t *testing.T) {
	j := NewFullJitter(time.Second, time.Second)
	for range 1000 {
		if got := j.NextBackOff(); got < 0 || got > time.Second {
			t.Fatalf("NextBackOff() = %v, want in [0, 1s]", got)
		}
	}
}
