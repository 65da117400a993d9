package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"smsdispatcher/admission"
)

// An Account is one provider account a Dispatcher sends on: its limiter
// (its own keys in Redis), its send-once records, its provider.
type Account struct {
	// Name is the account's name, on spans and metrics (Event.Account).
	Name string
	// Classes are the classes it serves. A class is sent to a number by the
	// first account of its route (Table) that serves it; an OTP overflows
	// to the next one only when that account is under a penalty or
	// degraded (docs/decisions.md, "Accounts").
	Classes []admission.Class
	// Destinations are the E.164 prefixes the account sends to ("+81");
	// none: every destination.
	Destinations []string
	// FailoverClasses are the classes besides the first that go on to the next
	// account when this one is under a penalty or degraded.
	FailoverClasses []admission.Class
	Limiter         Limiter
	Claims          Claimer
	Sender          Sender
	Credentials     Credentials // optional: a change ends the account's pause
	// RateUnit and MaxSegments are what the account's rates count.
	RateUnit    RateUnit
	MaxSegments int
}

// account is an Account as the Dispatcher runs it.
type account struct {
	Account
	logged  atomic.Int64 // unix nanoseconds of the last account-failure error log
	answers answers      // its last answer times in this process, for the hedge's bound
}

// cost is what a send of segments takes of a's rates.
func (a *account) cost(segments int) int {
	if a.RateUnit == PerSegment {
		return segments
	}
	return 1
}

// credentialVersion is the version of a's watched credential, 0 without
// one.
func (a *account) credentialVersion() uint64 {
	if a.Credentials == nil {
		return 0
	}
	return a.Credentials.Version()
}

// accounts returns the accounts of deps: Deps.Accounts, or the one account
// of Deps.Limiter, Claims, Sender and Credentials serving every lane's
// class.
func accounts(cfg Config, deps Deps, lanes []Lane) ([]*account, error) {
	list := deps.Accounts
	if len(list) == 0 {
		if deps.Limiter == nil || deps.Claims == nil || deps.Sender == nil {
			return nil, errors.New("dispatch: Deps needs Accounts, or Limiter, Claims and Sender")
		}
		var classes []admission.Class
		for _, l := range lanes {
			classes = append(classes, l.Class)
		}
		list = []Account{{
			Classes: classes,
			Limiter: deps.Limiter, Claims: deps.Claims, Sender: deps.Sender, Credentials: deps.Credentials,
			RateUnit: cfg.RateUnit, MaxSegments: cfg.MaxSegments,
		}}
	}
	var out []*account
	for i, a := range list {
		if a.Limiter == nil || a.Claims == nil || a.Sender == nil {
			return nil, fmt.Errorf("dispatch: account %d (%q) needs Limiter, Claims and Sender", i, a.Name)
		}
		if a.MaxSegments <= 0 {
			a.MaxSegments = DefaultMaxSegments
		}
		out = append(out, &account{Account: a})
	}
	for _, l := range lanes {
		if len(route(out, l.Class)) == 0 {
			return nil, fmt.Errorf("dispatch: no account serves %s", l.Class)
		}
	}
	return out, nil
}

// Route returns the indexes of the accounts serving class, in their order,
// served[i] being the classes of the i-th account: the first is the
// class's home (it keeps the ids' send-once records), the others take an
// OTP's overflow. It is the one routing rule: the Dispatcher sends by it,
// and the loaders of accounts check by it that every class has a home.
func Route(served [][]admission.Class, class admission.Class) []int {
	var r []int
	for i, classes := range served {
		for _, c := range classes {
			if c == class {
				r = append(r, i)
				break
			}
		}
	}
	return r
}

// route returns the accounts of all serving class, in Route's order.
func route(all []*account, class admission.Class) []*account {
	served := make([][]admission.Class, len(all))
	for i, a := range all {
		served[i] = a.Classes
	}
	var r []*account
	for _, i := range Route(served, class) {
		r = append(r, all[i])
	}
	return r
}

// failsOver reports whether class may go on from a to the next account of
// its route: a class whose policy fails over (the first class) always,
// another only when a lists it in FailoverClasses (a second provider's
// price, paid on purpose).
func (d *Dispatcher) failsOver(a *account, class admission.Class) bool {
	return d.policy(class).FailsOver || slices.Contains(a.FailoverClasses, class)
}

// overflows reports whether a denial sends a class that fails over on to
// the next account: only when the account is under a penalty (a 429's or
// an account-level pause), degraded, or skips the route to the message's
// destination prefix (its first-class messages there stopped arriving),
// never for its ordinary rate, so that an OTP storm does not spill into
// another account's share.
func overflows(dec admission.Decision) bool {
	if dec.Reason == admission.ReasonRouteSkipped {
		return !dec.Allowed // the account skips this message's prefix, not the account
	}
	return !dec.Allowed && (dec.Reason == admission.ReasonPenalty || dec.Reason == admission.ReasonAccount ||
		dec.Reason == admission.ReasonDegraded)
}

// routeOf returns the accounts that send class to the number to, by the
// routing table, home first, or an InvalidError no_route when none does.
func (d *Dispatcher) routeOf(class admission.Class, to string) ([]*account, error) {
	r := d.routes[class][d.table.prefix(to)]
	if len(r) == 0 {
		return nil, &InvalidError{Reason: "no_route", Detail: "no account sends " + class.String() + " to this destination"}
	}
	return r, nil
}

// classPause reports whether every account serving class is paused for an
// account-level failure: why (the first's) and the shortest time left.
func (d *Dispatcher) classPause(class admission.Class) (why string, left time.Duration, ok bool) {
	for i, a := range d.route[class] {
		w, l, paused := a.Limiter.AccountPause()
		if !paused {
			return "", 0, false
		}
		if i == 0 || l < left {
			left = l
		}
		if why == "" {
			why = w
		}
	}
	return why, left, true
}

// classPaused is classPause asking Redis (at most once a second per
// account) whether each pause still holds.
func (d *Dispatcher) classPaused(ctx context.Context, class admission.Class) bool {
	for _, a := range d.route[class] {
		if _, _, ok := a.Limiter.CheckPause(ctx); !ok {
			return false
		}
	}
	return true
}

// newTable is the routing table of all, and its routes as accounts: by
// class and by the key of a number's route (Table.prefix), built once so
// that a message's route costs no allocation.
func newTable(all []*account, mode RouteMode) (*Table, map[admission.Class]map[string][]*account) {
	served, destinations := make([][]admission.Class, len(all)), make([][]string, len(all))
	for i, a := range all {
		served[i], destinations[i] = a.Classes, a.Destinations
	}
	t := NewTable(served, destinations, mode)
	routes := map[admission.Class]map[string][]*account{}
	for class, byPrefix := range t.routes {
		routes[class] = map[string][]*account{}
		for p, idx := range byPrefix {
			for _, i := range idx {
				routes[class][p] = append(routes[class][p], all[i])
			}
		}
	}
	return t, routes
}
