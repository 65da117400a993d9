// Package policy decides what each class of messages is owed: its rules,
// computed once from its name and its place in the process's priority
// order (Of), and read as fields by every package below config
// (admission, dispatch, server) instead of comparing a class's name or
// position.
//
// Invariant: Of is the one place a class's rules are decided. A rule of
// the first class follows the position (a first class of any name fails
// over, is hedged and holds the others at the gate); a rule of OTP's own
// follows the name otp, wherever it stands (the send without its record,
// the route skip, the resend on a failed receipt), as docs/design.md
// "Classes" describes.
//
// It imports nothing of the project's, so that admission and dispatch,
// which config imports, can read it.
package policy

import "time"

// Class is one class's rules.
type Class struct {
	// First class: the one served first.

	// FailsOver: a message its home account cannot take (under a penalty,
	// paused, degraded, or skipping the route to its destination prefix)
	// goes on to the next account of its route, on every account; another
	// class does only on an account listing it in failover_classes.
	FailsOver bool
	// Hedged: a message whose home has not answered within the hedge's
	// bound goes out on the next account of its route as well (a
	// duplicate beats a loss).
	Hedged bool
	// HoldsGate: while one of its messages waits for a send slot, the
	// later classes of the process wait at the priority gate.
	HoldsGate bool
	// TargetOnly: only the account's target rate caps it (no class_rps),
	// and its lane's flow control is sized on that whole rate in one
	// process.
	TargetOnly bool
	// RetriedSoon: its subscription redelivers a nacked message after 1 s
	// to 10 s, a later class's after 5 s to 60 s.
	RetriedSoon bool
	// MaxWait is how long a message of it waits for a send slot by
	// default (a class's max_wait, or OTP_MAX_WAIT, MARKETING_MAX_WAIT,
	// replaces it).
	MaxWait time.Duration

	// OTP's own: a class named otp.

	// SendsWithoutRecord: while Redis is down a message of it is sent
	// without its send-once record (a duplicate beats a loss); any other
	// class's waits for Redis (admission.ReasonNoRecord).
	SendsWithoutRecord bool
	// SkipsFailingRoute: its receipts judge each account's route to a
	// destination prefix, and an account whose route fails is skipped for
	// it while the caller can send elsewhere (admission.RouteRule).
	SkipsFailingRoute bool
	// Resent: with receipts on, a message of it whose final receipt says
	// it did not arrive is sent once more through another account, unless
	// its producer said resend_on_failure false.
	Resent bool
	// OverrideSparesAlone: the override's second rate does not lower its
	// ceiling on an account it is the only class of (the first rate alone
	// does); it lowers the ceiling of any other account's last class.
	OverrideSparesAlone bool

	// Suppressed: a message to a number on the suppression list is
	// refused before admission (docs/suppressions.md). Every class's,
	// unless ACCOUNTS_FILE's class says suppression: false (Unsuppressed).
	Suppressed bool
	// Sending is the class's send windows and per-recipient cap, as its
	// keys in ACCOUNTS_FILE say them (config.Process.Policy sets it over
	// Of's rules: a name and a position cannot say hours).
	Sending Sending
	// Guard is the class's pumping guard (package guard): its rules as
	// the class's keys of ACCOUNTS_FILE give them, shared and never
	// written after the load (a pointer keeps Class comparable); nil:
	// none. Of leaves it nil; config's Process.Policy adds the keys: the
	// first class is guarded when its keys say so, a later class when it
	// opts in with keys of its own (docs/guard.md).
	Guard *Guard
}

// Guard is a class's rules against traffic pumping; the zero value
// guards nothing.
type Guard struct {
	// Countries are the country codes ("+44") a message may go to; empty:
	// all. DenyCountries are those it may not; at most one is set.
	Countries, DenyCountries []string
	// AllowPrefixes are the E.164 prefixes ("+4477009") the automatic
	// blocks (prefix_rate, conversion) never count nor block.
	AllowPrefixes []string
	// MaxPerPrefix is the range's brake; a zero Count: none.
	MaxPerPrefix PrefixRate
	// MinConversion is the range's share of verified codes; a zero
	// MinSends: none.
	MinConversion Conversion
}

// PrefixRate allows at most Count sends of the class in any window of Per
// to the numbers sharing their first Digits digits after the +; the next
// blocks the range for BlockFor.
type PrefixRate struct {
	Digits, Count int
	Per, BlockFor time.Duration
}

// Conversion blocks a range of Digits digits for BlockFor when at least
// MinSends of its sends in Per are older than Grace and the share of
// them verified is under Ratio.
type Conversion struct {
	Ratio                float64
	MinSends, Digits     int
	Per, Grace, BlockFor time.Duration
}

// On reports whether g has any rule; a nil g has none.
func (g *Guard) On() bool {
	return g != nil && (len(g.Countries)+len(g.DenyCountries) > 0 || g.MaxPerPrefix.Count > 0 || g.MinConversion.MinSends > 0)
}

// Unsuppressed returns c for a class whose file says suppression: false:
// its messages go to numbers on the list (the recipient asked for this
// one, this minute).
func (c Class) Unsuppressed() Class {
	c.Suppressed = false
	return c
}

// Sending is when a message of a class may be handed to a provider: in
// its recipient's hours (Window) and under its cap (Cap). The zero value
// sends at any time, without a cap.
type Sending struct {
	// Window, if not nil, is the class's send windows (window.Windows).
	Window Window
	// Cap, if Count > 0, bounds the sends of the class to one number.
	Cap Cap
	// ReleaseSpread spreads the releases of the messages deferred to one
	// window's opening over this long (0: at once).
	ReleaseSpread time.Duration
}

// Window says when a message may be sent (window.Windows).
type Window interface {
	// Next is the first instant at or after t when a message to to, with
	// its producer's zone tz ("" for none), may be sent: t when it may be
	// now, the zero time when never within a month.
	Next(to, tz string, t time.Time) time.Time
}

// Cap is max_per_recipient: at most Count sends of the class to one
// number in any window of Per, across every account and process; over
// it, the message is deferred until one more fits, or dropped (Drop).
type Cap struct {
	Count int
	Per   time.Duration
	Drop  bool
}

// DefaultReleaseSpread is release_spread when a class with send windows
// leaves it out.
const DefaultReleaseSpread = 10 * time.Minute

// OTP is the name whose class keeps OTP's own rules (admission.OTP is
// it).
const OTP = "otp"

// Default max waits: the first class's, and any later one's.
const (
	FirstMaxWait = time.Second
	LaterMaxWait = 8 * time.Second
)

// Of returns the rules of the class named name at position pos of the
// process's priority order (0: served first).
func Of(name string, pos int) Class {
	first := pos == 0
	c := Class{
		FailsOver: first, Hedged: first, HoldsGate: first, TargetOnly: first, RetriedSoon: first,
		MaxWait: LaterMaxWait, Suppressed: true,
	}
	if first {
		c.MaxWait = FirstMaxWait
	}
	if name == OTP {
		c.SendsWithoutRecord, c.SkipsFailingRoute, c.Resent, c.OverrideSparesAlone = true, true, true, true
	}
	return c
}

// Default returns the rules of the class named name among the default
// classes, otp then marketing: otp's are the first class's, any other
// name's a later class's.
func Default(name string) Class {
	if name == OTP {
		return Of(name, 0)
	}
	return Of(name, 1)
}
