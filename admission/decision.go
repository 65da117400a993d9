package admission

import (
	"fmt"
	"strings"
	"time"

	"smsdispatcher/config/policy"
	"smsdispatcher/ledger"
)

// Class names a priority class of messages: 1 to 32 of [a-z0-9_-]. The
// account's classes, in priority order, are Config.Classes; without them
// they are OTP then Marketing.
type Class string

const (
	// OTP is the first class of the default two: served first, limited
	// only by the account's target rate. A class of this name keeps the
	// rules that are OTP's (a resend on a failed receipt, the route skip):
	// config/policy decides them, ClassLimit.Policy carries them.
	OTP Class = policy.OTP
	// Marketing is the second of the default two: limited by the target
	// rate and by its own ceiling (MarketingRPS).
	Marketing Class = "marketing"
)

// String returns the class's name.
func (c Class) String() string { return string(c) }

// ParseClass returns the Class named s, if s is a valid name.
func ParseClass(s string) (Class, error) {
	if n := len(s); n < 1 || n > 32 || strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
		return "", fmt.Errorf("admission: class name %q must be 1 to 32 of [a-z0-9_-]", s)
	}
	return Class(s), nil
}

// Source says who took a decision.
type Source string

const (
	// SourceRedis is a decision of the shared GCRA script.
	SourceRedis Source = "redis"
	// SourceFallback is a decision of the in-process limiter while Redis is
	// unreachable.
	SourceFallback Source = "fallback"
	// SourcePenalty is a denial because the provider answered 429 and its
	// Retry-After has not run out (ReasonPenalty), or refused the account
	// and the pause has not run out (ReasonAccount).
	SourcePenalty Source = "penalty"
	// SourceNone is a denial nobody decided: the caller gave up before it
	// asked (Reason says why).
	SourceNone Source = "none"
)

// Reason says which limit denied a request.
type Reason string

const (
	ReasonNone     Reason = ""          // allowed
	ReasonPenalty  Reason = "penalty"   // a 429 penalty is live
	ReasonGlobal   Reason = "global"    // TargetRPS would be exceeded
	ReasonCeiling  Reason = "ceiling"   // the class's ceiling would be exceeded (MarketingRPS, ClassLimit.RPS)
	ReasonReserve  Reason = "reserve"   // an earlier class's reserve would be taken (ClassLimit.Reserve)
	ReasonInFlight Reason = "in_flight" // MaxInFlight sends are in flight
	ReasonAccount  Reason = "account"   // an account-level pause is live (ReportAccountFailure)
	ReasonLong     Reason = "long"      // a send of several units waits for Redis (fallback)
	ReasonRecord   Reason = "record"    // the id's record says not to send (Decision.Record)
	ReasonNoRecord Reason = "no_record" // a class but OTP waits for Redis to keep its send-once record (fallback)
	ReasonSender   Reason = "sender"    // no sender of the pool has a slot yet
	ReasonDegraded Reason = "degraded"  // the account's sends are failing: it admits probes only (Health)
	// ReasonRouteSkipped: the first class's messages to the destination's
	// prefix stopped arriving through the account (RouteRule): it admits
	// probes only to that prefix.
	ReasonRouteSkipped Reason = "route_skipped"

	// Reasons of SourceNone: the caller did not ask.
	ReasonTurn   Reason = "turn"    // its max wait ran out queued behind a caller of its class
	ReasonTicket Reason = "ticket"  // its wake ticket lay past its max wait
	ReasonNoTime Reason = "no_time" // it came with no time left to wait
)

// A Decision is the answer to one admission request.
type Decision struct {
	// Allowed reports whether the caller holds a send slot and may send now.
	Allowed bool
	// RetryAfter is, when denied, how long until a slot may open. Zero when
	// allowed, and when nobody decided (SourceNone).
	RetryAfter time.Duration
	// Source is who decided.
	Source Source
	// Reason is the limit that denied; empty when allowed.
	Reason Reason
	// Next is, when allowed to an Admit with another caller of the class
	// waiting in this process, how long that caller should wait before it
	// asks (its wake ticket). Zero otherwise.
	Next time.Duration
	// Lease, when allowed with Config.MaxInFlight set, names the in-flight
	// lease the caller holds: Settle ends it when the send is over.
	Lease string
	// Why is, for ReasonAccount, the pause's reason as recorded
	// ("account:twilio status 401 code 20003").
	Why string
	// Tries is how many decisions Admit asked for, this one included:
	// 1 means the first answer was final. A decision that asks once without waiting leaves it 0.
	Tries int
	// Claimed reports, for an admission given a Claim, that Redis recorded
	// the claim with the slot: pass the Decision to Settle after the send.
	// An admission of the Redis-down fallback claims nothing.
	Claimed bool
	// Record is, for ReasonRecord, what the id's record says: another
	// attempt holds its claim (Held), or it has a final record.
	Record ledger.Record
	// Attempts is, for an admission whose Claim counts, how many sends of
	// the id were counted before this one: the trace's resend count.
	Attempts int
	// Sender is, when allowed on an account with a sender pool, the From
	// of the sender whose slot was taken: send from it.
	Sender string
	// Health is the account's health as the admission found it: an
	// allowed send on a Degraded account is its probe.
	Health Health

	claim Claim  // the claim taken, for Settle
	id    string // the message's id (Claim.ID given to Admit), for Settle's story
	class Class  // the class and units Redis admitted, for Settle's count of sends
	units int
	at    time.Time // when Admit let the send go (the Limiter's clock), for Settle's health report
	// slotMS is when Redis booked the send's slot to open, ms on Redis's
	// clock (0: not said): Settle dates the send's story by it, so that
	// finish.lua needs no TIME of its own.
	slotMS int64
}
