package alertrecord

import (
	"testing"
	"time"
)

// TestOptOutSpanIsDueAtItsRate: a span's replies are due one at its start,
// then one every 1/rate s, none at or after its end.
func TestOptOutSpanIsDueAtItsRate(t *testing.T) {
	sp := optOutSpan{from: 30 * time.Second, until: 60 * time.Second, rate: 0.5}
	for _, tt := range []struct {
		el   time.Duration
		want int
	}{{29 * time.Second, 0}, {30 * time.Second, 1}, {31 * time.Second, 1}, {32 * time.Second, 2}, {58 * time.Second, 15}, {time.Hour, 15}} {
		if got := sp.due(tt.el); got != tt.want {
			t.Errorf("due at %v = %d, want %d", tt.el, got, tt.want)
		}
	}
}
