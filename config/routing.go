package config

// The accounts' routing: which accounts send a class to a number, as the
// accounts file says it (destinations, route), and the checks of those keys.

import (
	"fmt"
	"slices"
	"strings"

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
)

// Routing is what the settings say of sending: the accounts, in order,
// and how a class's accounts are ordered for a destination.
type Routing struct {
	Accounts []Account
	// Route is ACCOUNTS_FILE's route; RouteFirst (the zero value) when the
	// file leaves it out, or without the file.
	Route dispatch.RouteMode
	// Classes are ACCOUNTS_FILE's classes in priority order (Process.Lanes);
	// nil when the file lists none, or without the file.
	Classes []Class
}

// Routing returns the accounts s describes and their route: ACCOUNTS_FILE's,
// or the one account of the single-account variables, serving both
// classes with marketing capped at MARKETING_RPS, every destination,
// without a sender pool, an adaptive limit or a failover class. An error
// is an *Error.
func (s Settings) Routing() (Routing, error) {
	if s.AccountsFile != "" {
		return loadAccounts(s.Process, s.AccountsFile)
	}
	return Routing{Accounts: []Account{s.Account}}, nil
}

// Accounts returns the accounts of s.Routing, in order.
func (s Settings) Accounts() ([]Account, error) {
	r, err := s.Routing()
	return r.Accounts, err
}

// Table is the routing table of r's accounts (dispatch.Table): which of
// them, by index, send a class to a destination.
func (r Routing) Table() *dispatch.Table {
	return dispatch.NewTable(Served(r.Accounts), Destinations(r.Accounts), r.Route)
}

// bothClasses are the classes of the single account.
func bothClasses() []admission.Class { return []admission.Class{admission.OTP, admission.Marketing} }

// Served lists the classes of each account, for dispatch.Route and
// dispatch.NewTable.
func Served(accounts []Account) [][]admission.Class {
	out := make([][]admission.Class, len(accounts))
	for i, a := range accounts {
		out[i] = a.Classes
	}
	return out
}

// Destinations lists the destinations of each account (nil: every one),
// for dispatch.NewTable.
func Destinations(accounts []Account) [][]string {
	out := make([][]string, len(accounts))
	for i, a := range accounts {
		out[i] = a.Destinations
	}
	return out
}

// maxPrefixDigits is the most digits a destination's prefix has: a
// country code (3 at most) and a few of the national number, enough to
// tell a region or a mobile range.
const maxPrefixDigits = 6

// destinations checks list, the destinations of the i-th account: nil
// when the key is left out (every destination), else E.164 prefixes,
// each once.
func (l *accountsLoader) destinations(i int, list []string) ([]string, error) {
	if len(list) == 0 {
		if l.given(i, "destinations") {
			return nil, keyErrorf("destinations", "an empty list would send nothing: list prefixes such as \"+81\", or leave the key out for every destination")
		}
		return nil, nil
	}
	seen := map[string]int{}
	out := make([]string, 0, len(list))
	for j, d := range list {
		key := fmt.Sprintf("destinations[%d]", j)
		d = strings.TrimSpace(d)
		if !validPrefix(d) {
			return nil, keyErrorf(key, "want + and 1 to %d digits, such as \"+81\", got %q", maxPrefixDigits, d)
		}
		if k, ok := seen[d]; ok {
			return nil, keyErrorf(key, "%q is also destinations[%d]", d, k)
		}
		seen[d] = j
		out = append(out, d)
	}
	return out, nil
}

// validPrefix reports whether d is "+" and 1 to maxPrefixDigits digits.
func validPrefix(d string) bool {
	if len(d) < 2 || len(d) > 1+maxPrefixDigits || d[0] != '+' {
		return false
	}
	for i := 1; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	return true
}

// failoverClasses checks list, an account's failover_classes, against the
// classes it serves: configured classes (all, in priority order) but the
// first, each once.
func failoverClasses(list []string, serves map[admission.Class]bool, all []admission.Class) ([]admission.Class, error) {
	var out []admission.Class
	for j, name := range list {
		key := fmt.Sprintf("failover_classes[%d]", j)
		c := admission.Class(strings.TrimSpace(name))
		switch {
		case c == all[0]:
			return nil, keyErrorf(key, "%s always fails over: remove it", c)
		case len(all) == 1:
			return nil, keyErrorf(key, "the only class, %s, fails over already: no other class to list", all[0])
		case !slices.Contains(all, c):
			return nil, keyErrorf(key, "want %s, got %q", orWords(all[1:]), name)
		case !serves[c]:
			return nil, keyErrorf(key, "the account does not serve %s (see its classes)", c)
		case slices.Contains(out, c):
			return nil, keyErrorf(key, "%s is listed twice", c)
		}
		out = append(out, c)
	}
	return out, nil
}
