package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/config/policy"
)

const sendingAccount = "accounts:\n  - name: main\n    provider: generic\n    generic: {url: https://a.example, token: t1}\n    classes: [otp, marketing]\n"

// TestSendingErrors: a bad value of a class's send windows or cap stops
// the start with one line naming the file, the class and the key.
func TestSendingErrors(t *testing.T) {
	base, err := loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, class, want string }{
		{"bad hours", `send_hours: "8-21"`, `classes[1].send_hours: class marketing: want a time HH:MM, got "8"`},
		{"empty span", `send_hours: "08:00-08:00"`, `classes[1].send_hours: class marketing: "08:00-08:00" is an empty span`},
		{"bad day", `send_hours: "08:00-21:00 mon-sun-x"`, `classes[1].send_hours: class marketing: want days`},
		{"bad prefix", `send_hours_by_prefix: {"33": "08:00-22:00"}`, `classes[1].send_hours_by_prefix.33: class marketing: want an E.164 prefix`},
		{"bad prefix hours", `send_hours_by_prefix: {"+33": "08:00-25:00"}`, `classes[1].send_hours_by_prefix.+33: class marketing: want a time 00:00 to 23:59, got "25:00"`},
		{"bad zone", `send_hours: "08:00-21:00", default_zone: Mars/Olympus`, `classes[1].default_zone: class marketing: want an IANA zone such as Europe/Paris, got "Mars/Olympus"`},
		{"zone without hours", `default_zone: Europe/Paris`, `classes[1].default_zone: class marketing: set without send_hours`},
		{"bad date", `send_hours: "08:00-21:00", closed_dates: ["2026-13-01"]`, `classes[1].closed_dates: class marketing: want a date YYYY-MM-DD, got "2026-13-01"`},
		{"bad prefix date", `send_hours: "08:00-21:00", closed_dates_by_prefix: {"+33": ["14 July"]}`, `classes[1].closed_dates_by_prefix.+33: class marketing: want a date YYYY-MM-DD`},
		{"cap count", `max_per_recipient: {count: 0, per: 24h}`, `classes[1].max_per_recipient.count: class marketing: want 1 to 1000 sends, got 0`},
		{"cap per", `max_per_recipient: {count: 3, per: day}`, `classes[1].max_per_recipient.per: class marketing: want a duration from 1s to 744h`},
		{"cap on_cap", `max_per_recipient: {count: 3, per: 24h, on_cap: wait}`, `classes[1].max_per_recipient.on_cap: class marketing: want defer or drop, got "wait"`},
		{"spread", `send_hours: "08:00-21:00", release_spread: -1s`, `classes[1].release_spread: class marketing: want a duration from 0s to 24h`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, "accounts.yaml", "classes: [{name: otp}, {name: marketing, "+tt.class+"}]\n"+sendingAccount)
			_, err := loadAccounts(base.Process, path)
			var ce *Error
			if !errors.As(err, &ce) || ce.Env != "ACCOUNTS_FILE" {
				t.Fatalf("loadAccounts: %v; want a configuration error for ACCOUNTS_FILE", err)
			}
			if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || !strings.Contains(msg, path+": line 1: "+tt.want) {
				t.Errorf("error\n %s\nwant one line with\n %s", msg, path+": line 1: "+tt.want)
			}
		})
	}
}

// TestSendingInThePolicy: a class's send windows and cap reach its
// policy; a class without them has none, and release_spread defaults to
// 10m.
func TestSendingInThePolicy(t *testing.T) {
	path := writeFile(t, "accounts.yaml", `classes:
  - name: otp
    max_per_recipient: {count: 5, per: 15m, on_cap: drop}
  - name: marketing
    send_hours: "08:00-21:00"
    send_hours_by_prefix: {"+33": "08:00-22:00 mon-sat"}
    default_zone: America/New_York
    closed_dates: ["2026-12-25"]
    max_per_recipient: {count: 3, per: 24h}
`+sendingAccount)
	cfg, err := loadConfig(map[string]string{"ACCOUNTS_FILE": path})
	if err != nil {
		t.Fatal(err)
	}
	otp, mkt := cfg.Process.Policy(admission.OTP).Sending, cfg.Process.Policy(admission.Marketing).Sending
	if otp.Window != nil || otp.Cap != (policy.Cap{Count: 5, Per: 15 * time.Minute, Drop: true}) {
		t.Errorf("otp's sending = %+v, want no window and a dropping cap of 5 per 15m", otp)
	}
	if mkt.Window == nil || mkt.Cap != (policy.Cap{Count: 3, Per: 24 * time.Hour}) || mkt.ReleaseSpread != 10*time.Minute {
		t.Fatalf("marketing's sending = %+v, want a window, a deferring cap of 3 per 24h, a spread of 10m", mkt)
	}
	christmas := time.Date(2026, 12, 25, 17, 0, 0, 0, time.UTC) // noon in New York
	if got := mkt.Window.Next("+447700900123", "", christmas); !got.Equal(time.Date(2026, 12, 26, 13, 0, 0, 0, time.UTC)) {
		t.Errorf("a closed date: next opening %v, want 2026-12-26 08:00 in New York", got)
	}
}
