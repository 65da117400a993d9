package dispatch

import (
	"cmp"
	"fmt"
	"slices"

	"smsdispatcher/admission"
)

// RouteMode is how a Table orders the accounts that serve a class and a
// destination. The zero value is RouteFirst.
type RouteMode int

const (
	// RouteFirst orders them as the accounts are configured.
	RouteFirst RouteMode = iota
	// RouteLongestPrefix orders them by their longest prefix matching the
	// destination, longest first (an account without destinations counts
	// as 0 digits), in configured order among equals.
	RouteLongestPrefix
)

// String returns "first" or "longest_prefix", as ACCOUNTS_FILE's route
// says them.
func (m RouteMode) String() string {
	switch m {
	case RouteFirst:
		return "first"
	case RouteLongestPrefix:
		return "longest_prefix"
	}
	return fmt.Sprintf("RouteMode(%d)", int(m))
}

// ParseRouteMode returns the RouteMode named "first" or "longest_prefix".
func ParseRouteMode(s string) (RouteMode, error) {
	switch s {
	case "first":
		return RouteFirst, nil
	case "longest_prefix":
		return RouteLongestPrefix, nil
	}
	return 0, fmt.Errorf("dispatch: unknown route %q (want first or longest_prefix)", s)
}

// A Table is the routing table: which accounts send a class to a
// destination, in order. The first is the home of the class and the
// destination (it keeps the ids' send-once records); the others take its
// overflow. It is built once, at start, so that a message's route costs a
// few map lookups (at most one per digit of the longest prefix) whatever
// the number of accounts. A Table is safe for concurrent use; it never
// changes once built.
type Table struct {
	mode     RouteMode
	classes  []admission.Class                  // every class some account serves, in the order the accounts list them
	longest  int                                // length of the longest prefix, "+" included
	prefixes []string                           // every account's prefixes, sorted, each once
	routes   map[admission.Class]routesByPrefix // every class some account serves
}

// routesByPrefix is one class's routes by the longest configured prefix a
// destination starts with ("": none).
type routesByPrefix map[string][]int

// TableRow is one row of a Table: the accounts, by index in order, that
// send Class to a destination whose longest configured prefix is Prefix
// ("" for every destination no configured prefix matches).
type TableRow struct {
	Class    admission.Class
	Prefix   string
	Accounts []int
}

// NewTable builds the routing table of accounts whose i-th serves the
// classes served[i] and the destinations destinations[i], E.164 prefixes
// such as "+81" (nil or empty: every destination), ordered by mode. The
// prefixes are taken as given: the loaders of accounts check them.
func NewTable(served [][]admission.Class, destinations [][]string, mode RouteMode) *Table {
	t := &Table{mode: mode, routes: map[admission.Class]routesByPrefix{}}
	for _, ds := range destinations {
		for _, d := range ds {
			if !slices.Contains(t.prefixes, d) {
				t.prefixes = append(t.prefixes, d)
				t.longest = max(t.longest, len(d))
			}
		}
	}
	slices.Sort(t.prefixes)
	for _, classes := range served {
		for _, c := range classes {
			if t.routes[c] == nil {
				t.routes[c] = routesByPrefix{}
				t.classes = append(t.classes, c)
			}
		}
	}
	for c, byPrefix := range t.routes {
		for _, p := range append([]string{""}, t.prefixes...) {
			byPrefix[p] = t.build(served, destinations, c, p)
		}
	}
	return t
}

// build is the route of class to a destination whose longest configured
// prefix is p: every configured prefix the destination starts with is one
// that p starts with.
func (t *Table) build(served [][]admission.Class, destinations [][]string, class admission.Class, p string) []int {
	type match struct{ account, digits int }
	var ms []match
	for i, classes := range served {
		if !slices.Contains(classes, class) {
			continue
		}
		var ds []string
		if i < len(destinations) {
			ds = destinations[i]
		}
		if len(ds) == 0 {
			ms = append(ms, match{i, 0})
			continue
		}
		best := -1
		for _, d := range ds {
			if len(p) >= len(d) && p[:len(d)] == d {
				best = max(best, len(d))
			}
		}
		if best >= 0 {
			ms = append(ms, match{i, best})
		}
	}
	if t.mode == RouteLongestPrefix {
		slices.SortStableFunc(ms, func(a, b match) int { return cmp.Compare(b.digits, a.digits) })
	}
	out := make([]int, len(ms))
	for j, m := range ms {
		out[j] = m.account
	}
	return out
}

// Route returns the indexes of the accounts that send class to to, in
// order: the first is the home, the others take its overflow. It is empty
// when no account serves both (the message has no route). The slice is
// the table's: the caller must not change it.
func (t *Table) Route(class admission.Class, to string) []int {
	return t.routes[class][t.prefix(to)]
}

// prefix is the longest configured prefix to starts with, "" when none:
// the key of to's route in every class's routesByPrefix.
func (t *Table) prefix(to string) string {
	for n := min(len(to), t.longest); n >= 2; n-- {
		if _, ok := slices.BinarySearch(t.prefixes, to[:n]); ok {
			return to[:n]
		}
	}
	return ""
}

// Mode is the table's RouteMode.
func (t *Table) Mode() RouteMode { return t.mode }

// Rows returns the table for the start-up log and the status report: for
// each class some account serves, in the order the accounts list them
// (priority order: OTP first), and each configured prefix, then "" (every
// other destination), the accounts in order; a row without accounts is a
// destination of that class with no route.
func (t *Table) Rows() []TableRow {
	var rows []TableRow
	for _, c := range t.classes {
		for _, p := range append(slices.Clone(t.prefixes), "") {
			rows = append(rows, TableRow{Class: c, Prefix: p, Accounts: slices.Clone(t.routes[c][p])})
		}
	}
	return rows
}

// twoDigitCodes are the country codes of two digits in ITU-T E.164's
// zones 2 to 9; the other codes of those zones have three digits, and
// zones 1 (North America) and 7 (Russia, Kazakhstan) are codes of one.
var twoDigitCodes = map[string]bool{
	"20": true, "27": true,
	"30": true, "31": true, "32": true, "33": true, "34": true, "36": true, "39": true,
	"40": true, "41": true, "43": true, "44": true, "45": true, "46": true, "47": true, "48": true, "49": true,
	"51": true, "52": true, "53": true, "54": true, "55": true, "56": true, "57": true, "58": true,
	"60": true, "61": true, "62": true, "63": true, "64": true, "65": true, "66": true,
	"81": true, "82": true, "84": true, "86": true,
	"90": true, "91": true, "92": true, "93": true, "94": true, "95": true, "98": true,
}

// destinationPrefix is the prefix a route is skipped by (admission's
// RouteRule): "+" and to's country code ("+62"), "" when to has none.
func destinationPrefix(to string) string {
	if cc := CountryCode(to); cc != "" {
		return "+" + cc
	}
	return ""
}

// CountryCode returns the country code of to, an E.164 number
// ("+819012345678" gives "81", "+14155550100" gives "1"), and "" when to is
// not "+" and digits or is shorter than its code. It is what a metric may
// say of a destination: never the number.
func CountryCode(to string) string {
	if len(to) < 2 || to[0] != '+' {
		return ""
	}
	digits := to[1:]
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return ""
		}
	}
	n := 3
	switch {
	case digits[0] == '1' || digits[0] == '7':
		n = 1
	case len(digits) >= 2 && twoDigitCodes[digits[:2]]:
		n = 2
	}
	if len(digits) < n {
		return ""
	}
	return digits[:n]
}
