package console

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"smsdispatcher/config"
	"smsdispatcher/config/policy"
	"smsdispatcher/window"
)

// classRules is a class's rules in force as page 5 shows them, in words.
type classRules struct {
	Name        string
	Suppression string
	Windows     []string // "" none: any time
	Cap         string
	Guard       []string
}

// rulesOf are the rules in force of each of p's classes.
func rulesOf(p config.Process) []classRules {
	var out []classRules
	for _, c := range p.ClassList() {
		pol := p.Policy(c.Name)
		r := classRules{Name: c.Name.String(), Suppression: "on: a number on the list is refused"}
		if !pol.Suppressed {
			r.Suppression = "off (suppression: false): the list does not stop it"
		}
		r.Windows = windowsOf(pol.Sending)
		if cp := pol.Sending.Cap; cp.Count > 0 {
			over := "deferred until one more fits"
			if cp.Drop {
				over = "dropped"
			}
			r.Cap = fmt.Sprintf("at most %d to one number in any %v; over it, %s", cp.Count, cp.Per, over)
		}
		r.Guard = guardOf(pol.Guard)
		out = append(out, r)
	}
	return out
}

// windowsOf says a class's send windows: its hours, each prefix's, the
// closed dates, the default zone, the release spread.
func windowsOf(s policy.Sending) []string {
	if s.Window == nil {
		return nil
	}
	w, ok := s.Window.(*window.Windows)
	if !ok {
		return []string{"send windows of the program's own"}
	}
	zone := "UTC"
	if w.Default != nil {
		zone = w.Default.String()
	}
	lines := []string{"hours " + hoursOf(w.Rule.Hours) + " in the recipient's zone (" + zone + " when unknown)"}
	if len(w.Rule.Closed) > 0 {
		lines = append(lines, "closed "+strings.Join(w.Rule.Closed, ", "))
	}
	for _, p := range slices.Sorted(maps.Keys(w.ByPrefix)) {
		line := p + ": hours " + hoursOf(w.ByPrefix[p].Hours)
		if c := w.ByPrefix[p].Closed; len(c) > 0 {
			line += ", closed " + strings.Join(c, ", ")
		}
		lines = append(lines, line)
	}
	if s.ReleaseSpread > 0 {
		lines = append(lines, fmt.Sprintf("the messages deferred to an opening released over %v", s.ReleaseSpread))
	}
	return lines
}

// weekOf is a week, Monday first, in which hoursOf reads the hours.
var weekOf = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// hoursOf says h day by day ("mon-fri 08:00-21:00; sat, sun closed"),
// read through window.Windows.Open minute by minute over a week in UTC:
// Hours keeps its spans to itself. A span that crosses midnight shows as
// its two parts, each on its own day.
func hoursOf(h window.Hours) string {
	w := &window.Windows{Rule: window.Rule{Hours: h}, ZonesOf: func(string) []*time.Location { return []*time.Location{time.UTC} }}
	names := []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}
	var days []string // each day's spans
	for d := range 7 {
		var spans []string
		start := -1
		for m := 0; m <= 1440; m++ {
			open := m < 1440 && w.Open("", "", weekOf.Add(time.Duration(d*1440+m)*time.Minute))
			switch {
			case open && start < 0:
				start = m
			case !open && start >= 0:
				spans = append(spans, fmt.Sprintf("%02d:%02d-%02d:%02d", start/60, start%60, m/60, m%60))
				start = -1
			}
		}
		days = append(days, strings.Join(spans, ", "))
	}
	var parts []string
	for d := 0; d < 7; {
		e := d
		for e+1 < 7 && days[e+1] == days[d] {
			e++
		}
		name := names[d]
		if e > d {
			name += "-" + names[e]
		}
		spans := days[d]
		if spans == "" {
			spans = "closed"
		}
		parts = append(parts, name+" "+spans)
		d = e + 1
	}
	if len(parts) == 1 {
		return strings.TrimPrefix(parts[0], "mon-sun ")
	}
	return strings.Join(parts, "; ")
}

// guardOf says a class's guard rules.
func guardOf(g *policy.Guard) []string {
	if !g.On() {
		return nil
	}
	var lines []string
	if len(g.Countries) > 0 {
		lines = append(lines, "only to "+strings.Join(g.Countries, ", "))
	}
	if len(g.DenyCountries) > 0 {
		lines = append(lines, "never to "+strings.Join(g.DenyCountries, ", "))
	}
	if r := g.MaxPerPrefix; r.Count > 0 {
		lines = append(lines, fmt.Sprintf("at most %d sends in %v to a range of %d digits; the next blocks it for %v", r.Count, r.Per, r.Digits, r.BlockFor))
	}
	if c := g.MinConversion; c.MinSends > 0 {
		lines = append(lines, fmt.Sprintf("a range of %d digits blocked for %v when under %.0f %% of its sends in %v are verified (at least %d sends, each older than %v)",
			c.Digits, c.BlockFor, c.Ratio*100, c.Per, c.MinSends, c.Grace))
	}
	if len(g.AllowPrefixes) > 0 {
		lines = append(lines, "never counted nor blocked: "+strings.Join(g.AllowPrefixes, ", "))
	}
	return lines
}
