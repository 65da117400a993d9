package status

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/config"
)

// seconds is how many whole seconds of sends Read reads: the last 1, 10
// and 60 s come from them, and Watch draws them.
const seconds = 60

// AliveWithin is how recent a process's last heartbeat must be for the
// report to call it alive; a quieter one is silent (cut off from Redis, in
// its fallback, or dead) until heartbeatKeep drops it.
const AliveWithin = 3 * heartbeatEvery

// Setup is one account as the report needs it: the settings it shows
// beside the state in Redis, and the limiter that reads that state.
type Setup struct {
	config.Account
	Limiter *admission.Limiter
}

// Report is what `dispatcher status` prints; its JSON is the `status
// --json` contract, documented in docs/observing.md ("Status") and stable:
// fields are added, never renamed.
type Report struct {
	Time     time.Time `json:"time"`
	Accounts []Account `json:"accounts"`
	// Route is how the routes order a class's accounts for a destination:
	// first or longest_prefix.
	Route  string  `json:"route"`
	Routes []Route `json:"routes"`
	// Suppressions is the suppression list's size and changes; nil when
	// it was not read.
	Suppressions *Suppressions `json:"suppressions,omitempty"`
}

// Suppressions is the suppression list in a Report (docs/suppressions.md):
// how many numbers it holds, and its changes in the last hour by source
// and action ("inbound add": 3).
type Suppressions struct {
	Numbers  int64          `json:"numbers"`
	LastHour map[string]int `json:"changes_last_hour"`
}

// Route is one row of the routing table in a Report (part of the `status
// --json` contract): the accounts that send Class to a destination whose
// longest configured prefix is Prefix.
type Route struct {
	Class string `json:"class"`
	// Prefix is an E.164 prefix ("+81"), or "*" for every destination no
	// configured prefix matches.
	Prefix string `json:"prefix"`
	// Accounts are the accounts' names in order: the home first, then
	// those its overflow goes to. Empty: no route (such messages are
	// dead-lettered).
	Accounts []string `json:"accounts"`
}

// routesOf is the routing table of r, as a Report shows it.
func routesOf(r config.Routing) []Route {
	routes := []Route{}
	for _, row := range r.Table().Rows() {
		rt := Route{Class: row.Class.String(), Prefix: row.Prefix, Accounts: []string{}}
		if rt.Prefix == "" {
			rt.Prefix = "*"
		}
		for _, i := range row.Accounts {
			rt.Accounts = append(rt.Accounts, r.Accounts[i].Name)
		}
		routes = append(routes, rt)
	}
	return routes
}

// Account is one account of a Report (part of the `status --json`
// contract).
type Account struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
	// Classes are the classes the account serves, in priority order.
	Classes      []string `json:"classes"`
	RateUnit     string   `json:"rate_unit"`
	ContractRPS  float64  `json:"contract_rps"`
	TargetRPS    float64  `json:"target_rps"`
	MarketingRPS float64  `json:"marketing_rps"`
	// ClassRates are each class's ceiling and reserve on the account, in
	// priority order.
	ClassRates []ClassRate `json:"class_rates"`
	// InForceRPS is the target in force: the lowest of the configured
	// target, the override's and the learned rate.
	InForceRPS float64          `json:"in_force_rps"`
	Override   *Override        `json:"override"`
	Learned    *Learned         `json:"learned"`
	Sent       map[string]*Sent `json:"sent"`
	Penalty    *Penalty         `json:"penalty"`
	InFlight   int              `json:"in_flight"`
	Processes  []Process        `json:"processes"`
	Health     Health           `json:"health"`

	// Delivery is the final receipts of each class the account serves
	// over the last DeliveryWindow; absent where receipts are not read.
	Delivery map[string]*Delivery `json:"delivery,omitempty"`

	// LearnedIgnored is the learned rate's state in Redis when the
	// admission script ignores it (a rate below the minimum, or no state
	// it can read).
	LearnedIgnored string `json:"learned_ignored,omitempty"`
}

// ClassRate is one class's limits on an Account (part of the `status
// --json` contract), as configured (class_rps, reserve_rps).
type ClassRate struct {
	Class string `json:"class"`
	// CeilingRPS is the most the class may send on the account.
	CeilingRPS float64 `json:"ceiling_rps"`
	// ReserveRPS is the rate the classes after it may never take
	// together on the account; 0: none.
	ReserveRPS float64 `json:"reserve_rps"`
}

// Override is an operator's override in force on an Account (part of the
// `status --json` contract).
type Override struct {
	TargetRPS float64 `json:"target_rps"` // 0: not overridden
	// MarketingRPS lowers the last class's ceiling (marketing's with the
	// default classes); 0: not overridden.
	MarketingRPS float64  `json:"marketing_rps"`
	LeftSeconds  *float64 `json:"left_seconds"` // null: until cleared
	// Ignored is the override's value in Redis when the admission script
	// ignores some of it (a rate that is not a number of at least the
	// minimum counts as 0 above).
	Ignored string `json:"ignored,omitempty"`
}

// Learned is an Account's learned rate (part of the `status --json`
// contract).
type Learned struct {
	RPS     float64 `json:"rps"`
	Mode    string  `json:"mode"` // searching, probing, settled, pinned
	LowRPS  float64 `json:"low_rps"`
	HighRPS float64 `json:"high_rps"`
}

// Sent is an Account's sends of one class (part of the `status --json`
// contract).
type Sent struct {
	Last1s  int `json:"last_1s"`
	Last10s int `json:"last_10s"`
	Last60s int `json:"last_60s"`
	// PerSecond is the units sent in each of the last 60 whole seconds,
	// oldest first.
	PerSecond []int `json:"per_second"`
}

// Penalty is the pause in force on an Account (part of the `status
// --json` contract).
type Penalty struct {
	LeftSeconds float64 `json:"left_seconds"`
	Reason      string  `json:"reason"` // "429", or "account" for an account-level pause
	Detail      string  `json:"detail,omitempty"`
}

// Health is an Account's health as every process reads it from Redis
// (part of the `status --json` contract).
type Health struct {
	State string `json:"state"` // "healthy", or "degraded": the account admits probes only and OTP goes on to the next account
	// Since is when the account became degraded; null while healthy.
	Since *time.Time `json:"since"`
	// FailuresInARow counts the run of transient failures (5xx, timeouts,
	// no connection): while healthy, the run so far (0 after a
	// success); while degraded, the run that made it so.
	FailuresInARow int `json:"failures_in_a_row"`
	// ProbesOK counts, while degraded, the probes that succeeded in a row.
	ProbesOK int `json:"probes_ok"`
}

// Process is a process that beat on an Account (part of the `status
// --json` contract).
type Process struct {
	ID       string  `json:"id"`
	Host     string  `json:"host"`
	Version  string  `json:"version"`
	Mode     string  `json:"mode"` // ok, penalty, paused, fallback; "silent" when it stopped beating
	LastBeat float64 `json:"last_beat_seconds_ago"`
	Alive    bool    `json:"alive"`
	// Denied is, by class, the deliveries the process nacked on the
	// account for want of a send slot since it started, as of its last
	// beat (status.Denied); a class it denied none of is left out.
	Denied map[string]int64 `json:"denied,omitempty"`
}

// Read reads every account of setups on r at now; the report's routes are
// those of routing, every configured account's (setups may be fewer).
func Read(ctx context.Context, r Redis, setups []Setup, routing config.Routing, now time.Time) (Report, error) {
	rep := Report{Time: now.UTC(), Route: routing.Route.String(), Routes: routesOf(routing)}
	// The whole seconds before the current one: a second still being
	// counted would read low.
	last := now.Truncate(time.Second).Add(-time.Second)
	var byAccount map[string][]listed
	if len(setups) > 0 {
		// One read for every account: each process lists its accounts.
		_, registry, err := r.processes(ctx)
		if err != nil {
			return Report{}, err
		}
		byAccount = listings(registry)
	}
	for _, s := range setups {
		st, err := r.readAccount(ctx, s.Limiter, last, seconds)
		if err != nil {
			return Report{}, fmt.Errorf("account %s: %w", s.Name, err)
		}
		st.Processes = append(st.Processes, byAccount[s.Name]...)
		a := accountOf(s, st)
		if err := readDelivery(ctx, s, &a); err != nil {
			return Report{}, fmt.Errorf("account %s: %w", s.Name, err)
		}
		rep.Accounts = append(rep.Accounts, a)
	}
	return rep, nil
}

// listings maps each account to the processes of the registry that list
// it, each with its state there as an older process wrote it on the
// account's keys ("<mode> <host> <version>"), which accountOf reads.
func listings(registry []listed) map[string][]listed {
	out := map[string][]listed{}
	for _, p := range registry {
		host, version, modes, ok := parseRegistryState(p.State)
		if !ok {
			continue
		}
		denied := parseDenials(p.State)
		for account, mode := range modes {
			out[account] = append(out[account], listed{ID: p.ID, State: state(mode, host, version), LastBeat: p.LastBeat, Denied: denied[account]})
		}
	}
	return out
}

// accountOf is the report of account s from its state st.
func accountOf(s Setup, st accountState) Account {
	a := Account{Name: s.Name, Provider: s.Provider, RateUnit: s.RateUnit,
		ContractRPS: s.ContractRPS, TargetRPS: s.TargetRPS, MarketingRPS: s.MarketingRPS, InForceRPS: s.TargetRPS,
		InFlight: st.InFlight, Sent: map[string]*Sent{}, ClassRates: []ClassRate{}, Processes: []Process{}}
	classes := st.Classes // the limiter's, in priority order
	if len(classes) == 0 {
		classes = s.Classes
	}
	limits := limitsOf(s.Account)
	for _, class := range classes {
		a.Classes = append(a.Classes, class.String())
		a.ClassRates = append(a.ClassRates, ClassRate{Class: class.String(), CeilingRPS: limits[class].RPS, ReserveRPS: limits[class].Reserve})
	}
	if o := st.Override; o != nil {
		a.Override = &Override{TargetRPS: o.TargetRPS, MarketingRPS: o.MarketingRPS, Ignored: o.Ignored}
		if o.Left > 0 {
			left := o.Left.Seconds()
			a.Override.LeftSeconds = &left
		}
		if o.TargetRPS > 0 {
			a.InForceRPS = min(a.InForceRPS, o.TargetRPS)
		}
	}
	a.LearnedIgnored = st.LearnedIgnored
	if l := st.Learned; l.RPS > 0 {
		a.Learned = &Learned{RPS: l.RPS, Mode: l.Mode, LowRPS: l.Low, HighRPS: l.High}
		if s.Adaptive.Enabled || l.Mode == "pinned" { // else inert (docs/configuring.md, "Accounts")
			a.InForceRPS = min(a.InForceRPS, l.RPS)
		}
	}
	for _, class := range classes {
		per := st.Sent[class]
		sr := &Sent{PerSecond: per}
		for i, n := range per {
			age := len(per) - i
			if age <= 1 {
				sr.Last1s += n
			}
			if age <= 10 {
				sr.Last10s += n
			}
			sr.Last60s += n
		}
		a.Sent[class.String()] = sr
	}
	// The default two are always there, as before classes could be
	// configured: a reader of sent.otp or sent.marketing finds zeros on
	// an account that does not serve it.
	for _, class := range []admission.Class{admission.OTP, admission.Marketing} {
		if a.Sent[class.String()] == nil {
			a.Sent[class.String()] = &Sent{PerSecond: make([]int, countedSeconds(st))}
		}
	}
	if st.PenaltyLeft > 0 {
		p := &Penalty{LeftSeconds: st.PenaltyLeft.Seconds(), Reason: "429"}
		if detail, ok := strings.CutPrefix(st.PenaltyWhy, "account:"); ok {
			p.Reason, p.Detail = "account", detail
		}
		a.Penalty = p
	}
	for _, p := range st.Processes {
		pr := Process{ID: p.ID, Mode: "unknown", LastBeat: st.Now.Sub(p.LastBeat).Seconds(), Denied: p.Denied}
		if mode, host, version, ok := parseState(p.State); ok {
			pr.Mode, pr.Host, pr.Version = mode, host, version
		}
		pr.Alive = st.Now.Sub(p.LastBeat) <= AliveWithin
		if !pr.Alive {
			pr.Mode = "silent"
		}
		a.Processes = append(a.Processes, pr)
	}
	slices.SortFunc(a.Processes, func(x, y Process) int { return strings.Compare(x.ID, y.ID) })
	a.Health = healthOf(st.Health)
	return a
}

// limitsOf returns the ceiling and reserve of each class of a as its
// limiter is given them (config.Process.Limiter), a ceiling of 0 read as
// the target: admission.Config's default classes when a names none.
func limitsOf(a config.Account) map[admission.Class]admission.ClassLimit {
	list := config.Process{}.Limiter(a).Classes
	if len(list) == 0 {
		list = []admission.ClassLimit{{Name: admission.OTP}, {Name: admission.Marketing, RPS: a.MarketingRPS}}
	}
	out := make(map[admission.Class]admission.ClassLimit, len(list))
	for _, l := range list {
		l.RPS = cmp.Or(l.RPS, a.TargetRPS)
		out[l.Name] = l
	}
	return out
}

// healthOf is the report of an account's health h: a run of failures
// that has not made the account degraded is still healthy, as the
// admission treats it.
func healthOf(h healthState) Health {
	r := Health{State: "healthy", FailuresInARow: h.Failures}
	if h.Health == admission.Degraded {
		since := h.Since.UTC()
		r.State, r.Since, r.ProbesOK = "degraded", &since, h.ProbesOK
	}
	return r
}

// countedSeconds is how many seconds st counted the sends of.
func countedSeconds(st accountState) int {
	for _, per := range st.Sent {
		return len(per)
	}
	return 0
}
