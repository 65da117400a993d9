package admission

import (
	"fmt"
	"strconv"
	"time"
)

// A route's skip: an account whose first-class messages to one destination
// prefix stop arriving (a carrier filtering that route) is skipped for that
// class and prefix, as a degraded account is for everything, until a probe
// to it is delivered (docs/design.md, "A message's receipts"). receipt.lua
// counts each first-class final per (account, prefix) and sets the skip
// key {sms:<account>}:skip:<prefix>; gcra.lua reads it in the MGET it
// already does, and denies the first class (ReasonRouteSkipped) but one
// probe per RouteRule.ProbeEvery.

// RouteRule says when an account's route to a destination prefix is
// skipped for the first class. A zero field means its default.
type RouteRule struct {
	// MinDeliveredRatio is the share of first-class finals to a prefix
	// that must be delivered: below it, with at least MinFinals finals in
	// the last Window, the route is skipped. Default 0.5; a negative ratio
	// turns the rule off (nothing is counted, nothing skipped).
	MinDeliveredRatio float64
	// MinFinals is the fewest finals in Window the ratio is judged on.
	// Default 10.
	MinFinals int
	// Window is how far back finals count, in six buckets, in whole
	// seconds. Default 2m.
	Window time.Duration
	// ProbeEvery is how often a skipped route admits one first-class send
	// (across every process): its probe. Default 5s: a probe's receipt
	// takes seconds to say whether it arrived.
	ProbeEvery time.Duration
}

// Defaults of RouteRule.
const (
	DefaultMinDeliveredRatio = 0.5
	DefaultRouteMinFinals    = 10
	DefaultRouteWindow       = 2 * time.Minute
	DefaultRouteProbeEvery   = 5 * time.Second
)

// routeBuckets is how many buckets cover a RouteRule's Window.
const routeBuckets = 6

func (r RouteRule) withDefaults() RouteRule {
	if r.MinDeliveredRatio == 0 {
		r.MinDeliveredRatio = DefaultMinDeliveredRatio
	}
	if r.MinFinals <= 0 {
		r.MinFinals = DefaultRouteMinFinals
	}
	if r.Window <= 0 {
		r.Window = DefaultRouteWindow
	}
	if r.ProbeEvery <= 0 {
		r.ProbeEvery = DefaultRouteProbeEvery
	}
	return r
}

// Off reports whether the rule is turned off (a negative ratio).
func (r RouteRule) Off() bool { return r.MinDeliveredRatio < 0 }

// validate reports what of r (after defaults) cannot work.
func (r RouteRule) validate() error {
	switch {
	case r.Off():
		return nil
	case !(r.MinDeliveredRatio <= 1):
		return &ConfigError{Field: "Route.MinDeliveredRatio", Reason: fmt.Sprintf("must be at most 1 (negative: off), got %v", r.MinDeliveredRatio)}
	case r.Window < routeBuckets*time.Second:
		return &ConfigError{Field: "Route.Window", Reason: fmt.Sprintf("must be at least %ds, got %v", routeBuckets, r.Window)}
	}
	return nil
}

// arg is r as receipt.lua's ARGV[8], the skip living keep: '<ratio>
// <min_finals> <window_s> <probe_us> <keep_ms>', or "" when r is off.
func (r RouteRule) arg(keep time.Duration) string {
	if r.Off() {
		return ""
	}
	return fmt.Sprintf("%s %d %d %d %d", strconv.FormatFloat(r.MinDeliveredRatio, 'f', -1, 64), r.MinFinals,
		int64(r.Window/time.Second), r.ProbeEvery.Microseconds(), max(keep.Milliseconds(), 1))
}

// skipKey is the key of the skip of the account's route to prefix; ""
// gives the account's key no route is ever skipped under, for a call
// with no prefix.
func (l *Limiter) skipKey(prefix string) string { return l.tag + ":skip:" + prefix }
