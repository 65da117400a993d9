package providertest

import (
	"maps"
	"slices"
	"time"
)

// MaxInAnyWindow returns the largest number of times that fall in one
// half-open window [t, t+w) of length w, for any t: the measure of "no
// window of any phase sees more than N". Times need not be sorted (an
// unsorted slice is sorted in a copy; times is never modified). It returns
// 0 if w is not positive or times is empty.
func MaxInAnyWindow(times []time.Time, w time.Duration) int {
	if w <= 0 || len(times) == 0 {
		return 0
	}
	if !slices.IsSortedFunc(times, time.Time.Compare) {
		times = slices.Clone(times)
		slices.SortFunc(times, time.Time.Compare)
	}
	// A set of times fits in some window [t, t+w) exactly when its last
	// and first are less than w apart: slide i so times[i..j] is the
	// largest such run ending at j.
	best, i := 0, 0
	for j := range times {
		for times[j].Sub(times[i]) >= w {
			i++
		}
		best = max(best, j-i+1)
	}
	return best
}

// A Window is what MaxInWindow counts.
type Window struct {
	// Length is the windows' length. Zero or negative: MaxInWindow
	// returns 0.
	Length time.Duration
	// Segments counts each arrival as its Segments (at least 1), as
	// Config.CountSegments does; otherwise each counts 1.
	Segments bool
	// BySender counts each sender's arrivals (Arrival.From) apart, as
	// Config.SenderLimit does; otherwise the account's together, as
	// Limit does.
	BySender bool
}

// MaxInWindow returns the most units that accepted arrivals (Outcome
// "accepted"; not duplicates, which are no send) put in one half-open
// window [t, t+m.Length), for any t: the Simulator's own sliding measure,
// so two arrivals exactly m.Length apart are never in one window. With
// m.BySender, sender is the sender that reached most (the least in byte
// order among those that tie; "" may be one, for requests without a
// sender); otherwise, and when nothing was accepted, sender is "".
//
// "No sender above its rate" is MaxInWindow(arr, Window{Length: W,
// BySender: true}) ≤ SenderLimit for W = SenderWindow, and "the account
// never above its limit" the same without BySender, against Limit; with
// Fixed the account's windows are fixed ones, which this sliding measure
// may see up to twice full. arrivals need not be in order and are never
// modified.
func MaxInWindow(arrivals []Arrival, m Window) (most int, sender string) {
	if m.Length <= 0 {
		return 0, ""
	}
	groups := make(map[string][]Arrival)
	for _, a := range arrivals {
		if a.Outcome != string(outAccepted) {
			continue
		}
		key := ""
		if m.BySender {
			key = a.From
		}
		groups[key] = append(groups[key], a) // a copy: sorting it leaves arrivals alone
	}
	for _, key := range slices.Sorted(maps.Keys(groups)) {
		if n := maxUnitsInWindow(groups[key], m); n > most {
			most, sender = n, key
		}
	}
	return most, sender
}

// maxUnitsInWindow is MaxInWindow for one group; it sorts g.
func maxUnitsInWindow(g []Arrival, m Window) int {
	slices.SortStableFunc(g, func(a, b Arrival) int { return a.At.Compare(b.At) })
	units := func(a Arrival) int {
		if m.Segments {
			return max(a.Segments, 1)
		}
		return 1
	}
	// As in MaxInAnyWindow: g[i..j] is the longest run ending at j whose
	// first and last are less than m.Length apart; sum is its units.
	best, sum, i := 0, 0, 0
	for j := range g {
		sum += units(g[j])
		for g[j].At.Sub(g[i].At) >= m.Length {
			sum -= units(g[i])
			i++
		}
		best = max(best, sum)
	}
	return best
}

// MaxInWindow is MaxInWindow over the kept arrivals (see
// Config.MaxArrivals), counted in the Simulator's unit (segments with
// CountSegments): with bySender, the most any one sender had in a window
// of length window, and which; otherwise the account's most.
func (s *Simulator) MaxInWindow(window time.Duration, bySender bool) (most int, sender string) {
	return MaxInWindow(s.Arrivals(), Window{Length: window, Segments: s.cfg.CountSegments, BySender: bySender})
}
