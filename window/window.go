// Package window decides when a message of a class may be sent: the
// class's send hours (send_hours, send_hours_by_prefix, closed_dates) read
// in every zone its recipient may be in (the message's tz, else the zones
// libphonenumber's data gives the number, else the class's default_zone).
//
// Invariants: a message is open only at an instant that is open in every
// one of its zones (a number of several zones is sent only in the hours
// they all share); a prefix's hours replace the class's, the longest
// matching prefix winning; a closed date closes the whole local day. The
// package is pure: it reads no clock and talks to nothing, so that its
// rules are tested at fixed instants (docs/windows.md).
package window

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // zones are the recipients', not the image's: embed them
)

// Hours is one span of the day, HH:MM-HH:MM, on the days it lists; a span
// whose end is not after its start crosses midnight, and belongs to the
// day it starts on.
type Hours struct {
	from, to int     // minutes of the day; to may be 1440 (24:00)
	days     [7]bool // by time.Weekday
}

var dayNames = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// ParseHours reads "HH:MM-HH:MM" with an optional day list: "mon-sat",
// "sat,sun", "mon-fri,sun". Without one, every day.
func ParseHours(s string) (Hours, error) {
	fields := strings.Fields(s)
	if len(fields) < 1 || len(fields) > 2 {
		return Hours{}, fmt.Errorf("want HH:MM-HH:MM and an optional day list such as mon-sat, got %q", s)
	}
	a, b, ok := strings.Cut(fields[0], "-")
	if !ok {
		return Hours{}, fmt.Errorf("want HH:MM-HH:MM, got %q", fields[0])
	}
	var h Hours
	var err error
	if h.from, err = clock(a, false); err != nil {
		return Hours{}, err
	}
	if h.to, err = clock(b, true); err != nil {
		return Hours{}, err
	}
	if h.from == h.to {
		return Hours{}, fmt.Errorf("%q is an empty span: write 00:00-24:00 for the whole day", fields[0])
	}
	if len(fields) == 1 {
		h.days = [7]bool{true, true, true, true, true, true, true}
		return h, nil
	}
	for _, part := range strings.Split(fields[1], ",") {
		x, y, isRange := strings.Cut(part, "-")
		i, j := slices.Index(dayNames, x), slices.Index(dayNames, y)
		if !isRange {
			j = i
		}
		if i < 0 || j < 0 {
			return Hours{}, fmt.Errorf("want days such as mon-fri or sat,sun, got %q", fields[1])
		}
		for d := i; ; d = (d + 1) % 7 {
			h.days[d] = true
			if d == j {
				break
			}
		}
	}
	return h, nil
}

// clock reads HH:MM as minutes of the day; 24:00 only as an end.
func clock(s string, end bool) (int, error) {
	hh, mm, ok := strings.Cut(s, ":")
	h, err1 := strconv.Atoi(hh)
	m, err2 := strconv.Atoi(mm)
	switch {
	case !ok || len(hh) != 2 || len(mm) != 2 || err1 != nil || err2 != nil || m < 0 || m > 59 || h < 0:
		return 0, fmt.Errorf("want a time HH:MM, got %q", s)
	case h == 24 && m == 0 && end:
		return 1440, nil
	case h > 23:
		return 0, fmt.Errorf("want a time 00:00 to 23:59, got %q", s)
	}
	return h*60 + m, nil
}

// openAt says whether local, a wall-clock time, is inside h.
func (h Hours) openAt(local time.Time) bool {
	min := local.Hour()*60 + local.Minute()
	day := local.Weekday()
	if h.from < h.to {
		return h.days[day] && min >= h.from && min < h.to
	}
	yesterday := (day + 6) % 7
	return (h.days[day] && min >= h.from) || (h.days[yesterday] && min < h.to)
}

// Rule is the hours of a class or of one of its prefixes, with its
// closed dates (YYYY-MM-DD, local).
type Rule struct {
	Hours  Hours
	Closed []string
}

func (r Rule) openAt(local time.Time) bool {
	return r.Hours.openAt(local) && !slices.Contains(r.Closed, local.Format(time.DateOnly))
}

// ParseDate checks a closed date, YYYY-MM-DD.
func ParseDate(s string) error {
	if _, err := time.Parse(time.DateOnly, s); err != nil {
		return fmt.Errorf("want a date YYYY-MM-DD, got %q", s)
	}
	return nil
}

// ParseZone reads an IANA zone name (a message's tz, a class's
// default_zone); Local and the empty name are refused, a zone must be
// said.
func ParseZone(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("want an IANA zone such as Europe/Paris, got %q", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("want an IANA zone such as Europe/Paris, got %q", name)
	}
	return loc, nil
}

// Windows is a class's send windows: its own rule, its prefixes' rules,
// and the zone of a number no zone is known for.
type Windows struct {
	Rule     Rule
	ByPrefix map[string]Rule // E.164 prefixes, "+33"
	Default  *time.Location  // nil: UTC
	// ZonesOf returns a number's zones (Zones by default); a test may
	// stand in for it.
	ZonesOf func(to string) []*time.Location
}

// rule is the rule for to: its longest matching prefix's, else the
// class's.
func (w *Windows) rule(to string) Rule {
	best := -1
	r := w.Rule
	for p, pr := range w.ByPrefix {
		if strings.HasPrefix(to, p) && len(p) > best {
			best, r = len(p), pr
		}
	}
	return r
}

// zones are the zones a message to to with tz (its producer's, "" for
// none; Decode validated it) is judged in.
func (w *Windows) zones(to, tz string) []*time.Location {
	if tz != "" {
		if loc, err := ParseZone(tz); err == nil {
			return []*time.Location{loc}
		}
	}
	of := w.ZonesOf
	if of == nil {
		of = Zones
	}
	if z := of(to); len(z) > 0 {
		return z
	}
	if w.Default != nil {
		return []*time.Location{w.Default}
	}
	return []*time.Location{time.UTC}
}

// Open reports whether a message to to with tz may be sent at t: open in
// every one of its zones.
func (w *Windows) Open(to, tz string, t time.Time) bool {
	return w.open(w.rule(to), w.zones(to, tz), t)
}

func (w *Windows) open(r Rule, zones []*time.Location, t time.Time) bool {
	for _, z := range zones {
		if !r.openAt(t.In(z)) {
			return false
		}
	}
	return true
}

// Horizon bounds the search for an opening: a rule that opens in none of
// the next 31 days is taken as never open.
const Horizon = 31 * 24 * time.Hour

// Next returns the first instant at or after t at which a message to to
// with tz may be sent: t itself when it is open, the zero time when the
// window does not open within Horizon. Windows open on whole minutes in
// every zone, so the search steps by minutes.
func (w *Windows) Next(to, tz string, t time.Time) time.Time {
	r, zones := w.rule(to), w.zones(to, tz)
	if w.open(r, zones, t) {
		return t
	}
	for c := t.Truncate(time.Minute).Add(time.Minute); c.Sub(t) <= Horizon; c = c.Add(time.Minute) {
		if w.open(r, zones, c) {
			return c
		}
	}
	return time.Time{}
}
