package demo

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/config"
)

// TestQuietHoursDeferFranceUntilItsNextMinute: --quiet-hours closes the
// campaign's French numbers (their zone, Europe/Paris, by the number) until
// the next whole minute of Paris time at least quietLead ahead, and leaves
// every other number open; OTP gets no window.
func TestQuietHoursDeferFranceUntilItsNextMinute(t *testing.T) {
	for _, tt := range []struct {
		now, opens time.Time
		hours      string
	}{
		// Summer (CEST, UTC+2): 10:00:50 UTC + 15 s is past 10:01.
		{time.Date(2026, 7, 1, 10, 0, 50, 0, time.UTC), time.Date(2026, 7, 1, 10, 2, 0, 0, time.UTC), "12:02-00:02"},
		// Winter (CET, UTC+1), 15 s before a minute: that minute.
		{time.Date(2026, 12, 7, 23, 59, 45, 0, time.UTC), time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC), "01:00-13:00"},
	} {
		cfg, q, err := quietHours(config.Settings{}, tt.now)
		if err != nil {
			t.Fatal(err)
		}
		if !q.Opens.Equal(tt.opens) || q.Hours != tt.hours {
			t.Errorf("at %v: opens %v with %q, want %v with %q", tt.now, q.Opens, q.Hours, tt.opens, tt.hours)
		}
		mkt := cfg.Policy(admission.Marketing).Sending
		if mkt.Window == nil || mkt.ReleaseSpread != quietSpread {
			t.Fatalf("marketing's sending %+v: want a window released over %v", mkt, quietSpread)
		}
		if got := mkt.Window.Next(frenchMobile(), "", tt.now); !got.Equal(tt.opens) {
			t.Errorf("at %v: a French number opens at %v, want %v", tt.now, got, tt.opens)
		}
		if got := mkt.Window.Next("+819012345678", "", tt.now); !got.Equal(tt.now) {
			t.Errorf("at %v: a Japanese number opens at %v, want now", tt.now, got)
		}
		if cfg.Policy(admission.OTP).Sending.Window != nil {
			t.Error("otp got a window")
		}
	}
}

// TestReportShowsTheRelease: with --quiet-hours the report says the
// window, how many were deferred and how many of them were sent after
// their release; without it, nothing of it.
func TestReportShowsTheRelease(t *testing.T) {
	r := Report{Instances: 1, Sent: map[admission.Class]int{admission.Marketing: 30}, Provider: "generic", RateUnit: "message"}
	var plain bytes.Buffer
	r.Print(&plain, config.Settings{})
	if strings.Contains(plain.String(), "quiet hours") || strings.Contains(plain.String(), "deferred /") {
		t.Errorf("a plain report tells of quiet hours:\n%s", plain.String())
	}
	r.Quiet = &QuietHours{Prefix: "+33", Zone: "Europe/Paris", Hours: "12:02-00:02", Opens: time.Date(2026, 7, 1, 10, 2, 0, 0, time.UTC)}
	r.Deferred, r.Released, r.ReleasedFrom, r.ReleasedUntil = 10, 10, 62*time.Second, 67*time.Second
	var out bytes.Buffer
	r.Print(&out, config.Settings{})
	for _, want := range []string{"quiet hours                      +33 numbers' window 12:02-00:02 in Europe/Paris, opened 10:02:00 UTC",
		"deferred / released and sent     10 / 10, sent from 1m2s to 1m7s after the start"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
