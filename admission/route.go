package admission

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"time"
)

// A route's skip: an account whose first-class messages to one destination
// prefix stop arriving (a carrier filtering that route) is skipped for that
// class and prefix, as a degraded account is for everything, until a probe
// to it is delivered (docs/decisions.md, "A message's receipts"). receipt.lua
// counts each first-class final per (account, prefix) that says something
// of the route, delivered or failed for the route (Report.RouteFailed),
// and the numbers those failures went to, and sets the skip key
// {sms:<account>}:skip:<prefix>; the admission script reads it in the MGET it already
// does, and denies the first class (ReasonRouteSkipped) but one probe per
// RouteRule.ProbeEvery, to callers that can send elsewhere only: the last
// account of a message's route is never skipped.

// RouteRule says when an account's route to a destination prefix is
// skipped for the first class. A zero field means its default.
type RouteRule struct {
	// MinDeliveredRatio is the share of the route's verdicts in the last
	// Window (first-class messages to the prefix delivered, or failed for
	// the route) that must be delivered: below it, with route failures to
	// at least MinNumbers numbers, the route is skipped. Failures for the
	// recipient (a handset off, a number that does not exist) are no
	// verdict. Default 0.5; a negative ratio turns the rule off (nothing
	// is counted, nothing skipped).
	MinDeliveredRatio float64
	// MinNumbers is the fewest distinct numbers the route's failures in
	// Window must have gone to: one number failing again and again (a
	// recipient's carrier refusing it) is not a route. Default 10, at
	// most 64.
	MinNumbers int
	// Window is how far back the verdicts count, in six buckets, in whole
	// seconds. Default 20s: a route a carrier starts filtering at a steady
	// rate is skipped once its failures outnumber the deliveries of the
	// last Window, in about half of it (docs/measurements-runs.md).
	Window time.Duration
	// ProbeEvery is how often a skipped route admits one first-class send
	// (across every process): its probe. Default 5s: a probe's receipt
	// takes seconds to say whether it arrived.
	ProbeEvery time.Duration
}

// Defaults of RouteRule.
const (
	DefaultMinDeliveredRatio = 0.5
	DefaultRouteMinNumbers   = 10
	DefaultRouteWindow       = 20 * time.Second
	DefaultRouteProbeEvery   = 5 * time.Second
)

// routeBuckets is how many buckets cover a RouteRule's Window;
// maxRouteNumbers the most MinNumbers (the numbers a route's counts hold).
const (
	routeBuckets    = 6
	maxRouteNumbers = 64
)

func (r RouteRule) withDefaults() RouteRule {
	if r.MinDeliveredRatio == 0 {
		r.MinDeliveredRatio = DefaultMinDeliveredRatio
	}
	if r.MinNumbers <= 0 {
		r.MinNumbers = DefaultRouteMinNumbers
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
	case r.MinNumbers > maxRouteNumbers:
		return &ConfigError{Field: "Route.MinNumbers", Reason: fmt.Sprintf("must be at most %d, got %d", maxRouteNumbers, r.MinNumbers)}
	case r.Window < routeBuckets*time.Second:
		return &ConfigError{Field: "Route.Window", Reason: fmt.Sprintf("must be at least %ds, got %v", routeBuckets, r.Window)}
	}
	return nil
}

// arg is r as receipt.lua's ARGV[8], the skip living keep: '<ratio>
// <min_numbers> <window_s> <probe_us> <keep_ms>', or "" when r is off.
func (r RouteRule) arg(keep time.Duration) string {
	if r.Off() {
		return ""
	}
	return fmt.Sprintf("%s %d %d %d %d", strconv.FormatFloat(r.MinDeliveredRatio, 'f', -1, 64), r.MinNumbers,
		int64(r.Window/time.Second), r.ProbeEvery.Microseconds(), max(keep.Milliseconds(), 1))
}

// skipKey is the key of the skip of the account's route to prefix; ""
// gives the account's key no route is ever skipped under, for a call
// with no prefix.
func (l *Limiter) skipKey(prefix string) string { return l.key.Skip(prefix) }

// routeOf is a first-class message's route as its story keeps it
// (finish.lua's ARGV[12]): '<prefix> <number>', number a 24-bit hash of
// the destination, six hex digits. The story never holds the number: a
// country's hundreds of millions of numbers share 2^24 hashes, so a hash
// names none, yet it tells apart the few dozen numbers a route's failures
// are judged on (two of 64 share one once in 8,000 such sets). Without a
// destination it is the prefix alone.
func routeOf(prefix, to string) string {
	prefix = prefix[:min(len(prefix), maxPrefix)]
	if prefix == "" || to == "" {
		return prefix
	}
	h := fnv.New32a()
	h.Write([]byte(to))
	return fmt.Sprintf("%s %06x", prefix, h.Sum32()&0xffffff)
}

// maxPrefix is how many characters of a destination's prefix a story keeps
// ("+" and a country code).
const maxPrefix = 8
