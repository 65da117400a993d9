package window

import (
	"testing"
	"time"
)

func loc(t *testing.T, name string) *time.Location {
	t.Helper()
	l, err := ParseZone(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func hours(t *testing.T, s string) Hours {
	t.Helper()
	h, err := ParseHours(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestParseHoursRefuses(t *testing.T) {
	for _, s := range []string{"", "8:00-21:00", "08:00", "08:00-21:60", "25:00-21:00", "24:00-08:00",
		"08:00-08:00", "08:00-21:00 mon-xyz", "08:00-21:00 mon sat", "08:00-21:00 " + "mon,,sat"} {
		if _, err := ParseHours(s); err == nil {
			t.Errorf("ParseHours(%q) accepted", s)
		}
	}
	for _, s := range []string{"08:00-21:00", "22:00-06:00 fri-sun", "00:00-24:00", "08:00-22:00 mon-sat", "09:00-17:00 mon,wed,fri"} {
		if _, err := ParseHours(s); err != nil {
			t.Errorf("ParseHours(%q): %v", s, err)
		}
	}
}

// TestOpen judges the window at fixed instants: a window crossing
// midnight, a day list, closed dates, a prefix's own hours, a number of
// several zones, the DST changes of America/New_York and Europe/Paris,
// and a tz field overriding the number's zones.
func TestOpen(t *testing.T) {
	ny, paris, la := loc(t, "America/New_York"), loc(t, "Europe/Paris"), loc(t, "America/Los_Angeles")
	zonesOf := func(to string) []*time.Location {
		switch to {
		case "+12125550100":
			return []*time.Location{ny}
		case "+18005550100": // two zones: both must be open
			return []*time.Location{ny, la}
		case "+33612345678":
			return []*time.Location{paris}
		}
		return nil
	}
	w := &Windows{
		Rule: Rule{Hours: hours(t, "08:00-21:00")},
		ByPrefix: map[string]Rule{
			"+33":   {Hours: hours(t, "08:00-22:00 mon-sat"), Closed: []string{"2026-07-14"}},
			"+1212": {Hours: hours(t, "08:00-20:00")},
		},
		Default: ny, ZonesOf: zonesOf,
	}
	night := &Windows{Rule: Rule{Hours: hours(t, "22:00-02:00 fri"), Closed: []string{"2026-12-25"}}, Default: paris, ZonesOf: zonesOf}
	at := func(l *time.Location, s string) time.Time {
		v, err := time.ParseInLocation("2006-01-02 15:04", s, l)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		name   string
		w      *Windows
		to, tz string
		t      time.Time
		open   bool
	}{
		{"prefix +1212 until 20:00", w, "+12125550100", "", at(ny, "2026-06-10 19:59"), true},
		{"prefix +1212 closed at 20:00", w, "+12125550100", "", at(ny, "2026-06-10 20:00"), false},
		{"before 08:00", w, "+12125550100", "", at(ny, "2026-06-10 07:59"), false},
		{"two zones: NY open, LA 05:30", w, "+18005550100", "", at(ny, "2026-06-10 08:30"), false},
		{"two zones: both open", w, "+18005550100", "", at(ny, "2026-06-10 11:00"), true},
		{"two zones: NY 21:30 closed, LA open", w, "+18005550100", "", at(ny, "2026-06-10 21:30"), false},
		{"France: Sunday closed", w, "+33612345678", "", at(paris, "2026-06-14 12:00"), false},
		{"France: Saturday 21:59", w, "+33612345678", "", at(paris, "2026-06-13 21:59"), true},
		{"France: closed date", w, "+33612345678", "", at(paris, "2026-07-14 12:00"), false},
		{"tz overrides the number", w, "+33612345678", "America/New_York", at(paris, "2026-06-13 15:00"), true}, // 09:00 NY
		{"tz overrides the number, closed", w, "+33612345678", "America/New_York", at(paris, "2026-06-13 13:00"), false},
		{"unknown number: default zone", w, "+447700900123", "", at(ny, "2026-06-10 08:00"), true},
		{"unknown number: default zone closed", w, "+447700900123", "", at(ny, "2026-06-10 21:00"), false},
		{"crossing midnight: Friday 23:00", night, "+4470", "", at(paris, "2026-06-12 23:00"), true},
		{"crossing midnight: Saturday 01:59", night, "+4470", "", at(paris, "2026-06-13 01:59"), true},
		{"crossing midnight: Saturday 02:00", night, "+4470", "", at(paris, "2026-06-13 02:00"), false},
		{"crossing midnight: Thursday 23:00", night, "+4470", "", at(paris, "2026-06-11 23:00"), false},
		{"crossing midnight: Friday 21:59", night, "+4470", "", at(paris, "2026-06-12 21:59"), false},
		{"crossing midnight: closed date", night, "+4470", "", at(paris, "2026-12-25 23:00"), false},
		// DST spring: New York 2026-03-08 02:00 EST -> 03:00 EDT; 07:59 EDT is 11:59 UTC.
		{"NY spring: 07:59 EDT", w, "+447700900123", "", time.Date(2026, 3, 8, 11, 59, 0, 0, time.UTC), false},
		{"NY spring: 08:00 EDT", w, "+447700900123", "", time.Date(2026, 3, 8, 12, 0, 0, 0, time.UTC), true},
		// DST autumn: New York 2026-11-01 02:00 EDT -> 01:00 EST; 08:00 EST is 13:00 UTC.
		{"NY autumn: 12:30 UTC is 07:30 EST", w, "+447700900123", "", time.Date(2026, 11, 1, 12, 30, 0, 0, time.UTC), false},
		{"NY autumn: 13:00 UTC is 08:00 EST", w, "+447700900123", "", time.Date(2026, 11, 1, 13, 0, 0, 0, time.UTC), true},
		// Paris spring 2026-03-29 (CET->CEST): 08:00 CEST is 06:00 UTC; autumn 2026-10-25: 08:00 CET is 07:00 UTC.
		{"Paris spring: 05:59 UTC", w, "+33612345678", "", time.Date(2026, 3, 30, 5, 59, 0, 0, time.UTC), false},
		{"Paris spring: 06:00 UTC", w, "+33612345678", "", time.Date(2026, 3, 30, 6, 0, 0, 0, time.UTC), true},
		{"Paris autumn: 06:30 UTC", w, "+33612345678", "", time.Date(2026, 10, 26, 6, 30, 0, 0, time.UTC), false},
		{"Paris autumn: 07:00 UTC", w, "+33612345678", "", time.Date(2026, 10, 26, 7, 0, 0, 0, time.UTC), true},
	} {
		if got := c.w.Open(c.to, c.tz, c.t); got != c.open {
			t.Errorf("%s: Open at %v = %v, want %v", c.name, c.t.UTC(), got, c.open)
		}
	}
}

// TestNext finds the opening: the next morning, across a DST change, past
// a Sunday and a closed date, the intersection of two zones, never.
func TestNext(t *testing.T) {
	ny, paris, la := loc(t, "America/New_York"), loc(t, "Europe/Paris"), loc(t, "America/Los_Angeles")
	zonesOf := func(to string) []*time.Location {
		if to == "+18005550100" {
			return []*time.Location{ny, la}
		}
		return nil
	}
	w := &Windows{Rule: Rule{Hours: hours(t, "08:00-21:00")}, Default: ny, ZonesOf: zonesOf,
		ByPrefix: map[string]Rule{"+33": {Hours: hours(t, "08:00-22:00 mon-sat"), Closed: []string{"2026-12-28"}}}}
	fr := &Windows{Rule: w.ByPrefix["+33"], Default: paris}
	never := &Windows{Rule: Rule{Hours: hours(t, "08:00-09:00")}, ZonesOf: func(string) []*time.Location {
		return []*time.Location{ny, loc(t, "Asia/Tokyo")}
	}}
	for _, c := range []struct {
		name string
		w    *Windows
		to   string
		t    time.Time
		want time.Time
	}{
		{"open now", w, "+44", time.Date(2026, 6, 10, 15, 0, 30, 0, time.UTC), time.Date(2026, 6, 10, 15, 0, 30, 0, time.UTC)},
		{"next morning", w, "+44", time.Date(2026, 6, 11, 3, 0, 30, 0, time.UTC), time.Date(2026, 6, 11, 12, 0, 0, 0, time.UTC)},
		{"NY spring forward night", w, "+44", time.Date(2026, 3, 8, 5, 0, 0, 0, time.UTC), time.Date(2026, 3, 8, 12, 0, 0, 0, time.UTC)},
		{"NY autumn back night", w, "+44", time.Date(2026, 11, 1, 5, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 13, 0, 0, 0, time.UTC)},
		{"two zones: LA's 08:00", w, "+18005550100", time.Date(2026, 6, 10, 12, 0, 0, 0, time.UTC), time.Date(2026, 6, 10, 15, 0, 0, 0, time.UTC)},
		{"Saturday night to Monday, past Sunday", fr, "+33", time.Date(2026, 12, 26, 22, 0, 0, 0, time.UTC), time.Date(2026, 12, 29, 7, 0, 0, 0, time.UTC)},
		{"Paris spring: Sunday closed then Monday 08:00 CEST", fr, "+33", time.Date(2026, 3, 28, 22, 0, 0, 0, time.UTC), time.Date(2026, 3, 30, 6, 0, 0, 0, time.UTC)},
		{"Paris autumn: Monday 08:00 CET", fr, "+33", time.Date(2026, 10, 24, 22, 0, 0, 0, time.UTC), time.Date(2026, 10, 26, 7, 0, 0, 0, time.UTC)},
		{"no shared hour: never", never, "+1", time.Date(2026, 6, 10, 0, 0, 0, 0, time.UTC), time.Time{}},
	} {
		if got := c.w.Next(c.to, "", c.t); !got.Equal(c.want) {
			t.Errorf("%s: Next(%v) = %v, want %v", c.name, c.t, got.UTC(), c.want)
		}
	}
}

// TestZones: libphonenumber's data places a number, and one it cannot
// place is judged by the default zone.
func TestZones(t *testing.T) {
	if z := Zones("+12125550123"); len(z) != 1 || z[0].String() != "America/New_York" {
		t.Errorf("Zones(+1212…) = %v, want America/New_York", z)
	}
	if z := Zones("+33612345678"); len(z) != 1 || z[0].String() != "Europe/Paris" {
		t.Errorf("Zones(+336…) = %v, want Europe/Paris", z)
	}
	if z := Zones("+18005550123"); len(z) < 2 {
		t.Errorf("Zones(+1800…) = %v, want several", z)
	}
	if z := Zones("+15551234567"); len(z) != 0 {
		t.Errorf("Zones of an invalid number = %v, want none", z)
	}
	w := &Windows{Rule: Rule{Hours: hours(t, "08:00-21:00")}, Default: loc(t, "Asia/Tokyo")}
	if !w.Open("+15551234567", "", time.Date(2026, 6, 10, 1, 0, 0, 0, time.UTC)) { // 10:00 Tokyo
		t.Error("an invalid number is not judged by the default zone")
	}
}
