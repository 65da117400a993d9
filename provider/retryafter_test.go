package provider

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"smsdispatcher/provider/internal/wire"
)

func TestParseRetryAfter(t *testing.T) {
	now := t0
	date := func(d time.Duration) string { return now.Add(d).Format(http.TimeFormat) }
	tests := []struct {
		name   string
		v      string
		want   time.Duration
		wantOK bool
	}{
		{"missing", "", 0, false},
		{"spaces only", "   ", 0, false},
		{"zero", "0", 0, true},
		{"integer", "3", 3 * time.Second, true},
		{"leading zeros", "007", 7 * time.Second, true},
		{"surrounding spaces", " 2 ", 2 * time.Second, true},
		{"decimal", "0.5", 500 * time.Millisecond, true},
		{"decimal quarter", "0.25", 250 * time.Millisecond, true},
		{"decimal tenth is exact", "0.1", 100 * time.Millisecond, true},
		{"decimal with integer part", "1.5", 1500 * time.Millisecond, true},
		{"trailing dot", "2.", 2 * time.Second, true},
		{"leading dot", ".75", 750 * time.Millisecond, true},
		{"nanoseconds", "0.000000001", time.Nanosecond, true},
		{"below nanoseconds truncated", "0.0000000019", time.Nanosecond, true},
		{"a day", "86400", 24 * time.Hour, true},
		{"over a day capped", "86401", MaxRetryAfter, true},
		{"huge capped", "99999999999999999999999999", MaxRetryAfter, true},
		{"huge decimal capped", "86400.5", MaxRetryAfter, true},
		{"negative", "-1", 0, false},
		{"negative decimal", "-0.5", 0, false},
		{"plus sign", "+1", 0, false},
		{"exponent", "1e3", 0, false},
		{"infinity", "inf", 0, false},
		{"hex float", "0x1p3", 0, false},
		{"two dots", "1.2.3", 0, false},
		{"dot only", ".", 0, false},
		{"unit suffix", "5s", 0, false},
		{"garbage", "soon", 0, false},
		{"date in 5s", date(5 * time.Second), 5 * time.Second, true},
		{"date now", date(0), 0, true},
		{"date in the past", date(-time.Hour), 0, true},
		{"date far ahead capped", date(400 * 24 * time.Hour), MaxRetryAfter, true},
		{"RFC 850 date", now.Add(10 * time.Second).Format(time.RFC850), 10 * time.Second, true},
		{"ANSI C date", now.Add(20 * time.Second).Format(time.ANSIC), 20 * time.Second, true},
		{"date without zone name", now.Add(5 * time.Second).Format(time.RFC3339), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseRetryAfter(tt.v, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.v, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{
		"", "0", "1", "120", "0.5", ".5", "5.", "-1", "1e3", "inf", "NaN",
		"86401", "99999999999999999999", "Sun, 06 Nov 1994 08:49:37 GMT",
		"Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
		t0.Add(time.Minute).Format(http.TimeFormat), " 3 ", "1.2.3",
	} {
		f.Add(s, uint32(7))
	}
	f.Fuzz(func(t *testing.T, v string, n uint32) {
		d, ok := ParseRetryAfter(v, t0)
		if d < 0 || d > MaxRetryAfter {
			t.Errorf("ParseRetryAfter(%q) = %v, out of [0, %v]", v, d, MaxRetryAfter)
		}
		if !ok && d != 0 {
			t.Errorf("ParseRetryAfter(%q) = %v, false; want 0 when not ok", v, d)
		}

		// Integers round-trip, capped at a day.
		s := strconv.FormatUint(uint64(n), 10)
		d, ok = ParseRetryAfter(s, t0)
		want := min(time.Duration(n)*time.Second, MaxRetryAfter)
		if !ok || d != want {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, true", s, d, ok, want)
		}
		// So do milliseconds written as decimal seconds, as the simulators write them.
		ms := time.Duration(n%86_400_000) * time.Millisecond
		s = wire.FormatSeconds(ms)
		if d, ok = ParseRetryAfter(s, t0); !ok || d != ms {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, true", s, d, ok, ms)
		}
	})
}
