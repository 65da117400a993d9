package nack

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Outcome is how the handling of one delivery ended.
type Outcome int

const (
	// Sent means the provider accepted the message (2xx).
	Sent Outcome = iota
	// Expired means the message's deadline passed before it was sent.
	Expired
	// Duplicate means its id was already sent (or finished) earlier.
	Duplicate
	// Invalid means the message breaks docs/contract.md section 2.
	Invalid
	// Denied means admission gave no send slot within the class's max wait.
	Denied
	// Throttled means the provider answered 429.
	Throttled
	// Rejected means the provider refused the message for good (other 4xx).
	Rejected
	// Transient means a 5xx, a timeout or a connection error.
	Transient
	// InFlightElsewhere means another process holds the send claim of this
	// id right now.
	InFlightElsewhere
	// ShuttingDown means the process is stopping before the message was sent.
	ShuttingDown
	// AccountFailure means the provider refused the account, not the
	// message (bad credentials, suspended, out of credit): the message
	// waits for the account to be fixed.
	AccountFailure
	// Panicked means the dispatcher's handling of the delivery panicked
	// (a bug, recovered): the message comes back to be handled again.
	Panicked
	// Suppressed means the number is on the suppression list, or the
	// provider said it opted out (Twilio 21610): never sent, never
	// retried, never dead-lettered (docs/suppressions.md).
	Suppressed
	// Deferred means the message is outside its class's send window (or
	// over its cap) and the deferral store holds it until it may be sent.
	Deferred
	// Capped means the message is over its class's per-recipient cap,
	// which drops it: never sent.
	Capped
	// Blocked means the pumping guard refused the message (package
	// guard): never sent, acked with a status event saying why.
	Blocked

	// numOutcomes counts the outcomes above; tests iterate up to it.
	numOutcomes
)

var outcomeNames = [numOutcomes]string{
	Sent:              "sent",
	Expired:           "expired",
	Duplicate:         "duplicate",
	Invalid:           "invalid",
	Denied:            "denied",
	Throttled:         "throttled",
	Rejected:          "rejected",
	Transient:         "transient",
	InFlightElsewhere: "in_flight_elsewhere",
	ShuttingDown:      "shutting_down",
	AccountFailure:    "account_failure",
	Panicked:          "panicked",
	Suppressed:        "suppressed",
	Deferred:          "deferred",
	Capped:            "capped",
	Blocked:           "blocked",
}

// String returns the outcome's name in snake case ("sent",
// "in_flight_elsewhere", ...), fit for a metric label; an unknown value gives
// "Outcome(n)".
func (o Outcome) String() string {
	if o >= 0 && o < numOutcomes {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Action is what the dispatcher does with a delivery once its Outcome is
// known.
type Action int

const (
	// Ack acknowledges the message: Pub/Sub will not deliver it again.
	Ack Action = iota
	// Nack asks Pub/Sub to deliver the message again later.
	Nack
	// DeadLetter publishes the message to the dead-letter topic with a
	// reject_reason attribute (see RejectReason), then acks it.
	DeadLetter
)

// String returns "ack", "nack" or "dead_letter"; an unknown value gives
// "Action(n)".
func (a Action) String() string {
	switch a {
	case Ack:
		return "ack"
	case Nack:
		return "nack"
	case DeadLetter:
		return "dead_letter"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// ActionFor returns the Action for an Outcome. It is the one table:
// Sent, Expired, Duplicate, Suppressed, Deferred, Capped and Blocked ack; Invalid and Rejected dead-letter; Denied,
// Throttled, Transient, InFlightElsewhere, ShuttingDown, AccountFailure and
// Panicked nack. An unknown Outcome nacks, because redelivery cannot lose a
// message.
func ActionFor(o Outcome) Action {
	switch o {
	case Sent, Expired, Duplicate, Suppressed, Deferred, Capped, Blocked:
		return Ack
	case Invalid, Rejected:
		return DeadLetter
	case Denied, Throttled, Transient, InFlightElsewhere, ShuttingDown, AccountFailure, Panicked:
		return Nack
	}
	return Nack
}

// throttler is a provider error that can say it was a 429. It is declared
// here, not imported, so that nack does not depend on the provider package.
type throttler interface {
	error
	Throttled() bool
}

// accountFailer is a provider error that can say the account, not the
// message, was refused.
type accountFailer interface {
	error
	AccountFailure() bool
}

// optedOut is a provider error that can say the recipient opted out of
// the provider's messages (Twilio 21610).
type optedOut interface {
	error
	OptedOut() bool
}

// permanent is a provider error that can say the provider refused the
// message for good.
type permanent interface {
	error
	Permanent() bool
}

// Classify maps the error of one provider send to an Outcome: nil is Sent;
// an error whose tree holds a Throttled() bool method returning true is
// Throttled; otherwise one whose tree holds an AccountFailure() bool method
// returning true is AccountFailure; otherwise one whose tree holds an
// OptedOut() bool method returning true is Suppressed (the refusal of
// one recipient, before Permanent: it is not dead-lettered); otherwise
// one whose tree holds a Permanent() bool method returning true is
// Rejected; anything else (context.DeadlineExceeded, a
// network error, a 5xx) is Transient. For each method, the first error in the
// tree that has it decides, as with errors.As.
//
// Throttled is checked first so that a 429, which is also a 4xx, always
// reaches the shared penalty instead of the dead-letter topic; an account
// failure before Permanent so that a wrong token never dead-letters a good
// message.
func Classify(err error) Outcome {
	if err == nil {
		return Sent
	}
	if t, ok := errors.AsType[throttler](err); ok && t.Throttled() {
		return Throttled
	}
	if a, ok := errors.AsType[accountFailer](err); ok && a.AccountFailure() {
		return AccountFailure
	}
	if o, ok := errors.AsType[optedOut](err); ok && o.OptedOut() {
		return Suppressed
	}
	if p, ok := errors.AsType[permanent](err); ok && p.Permanent() {
		return Rejected
	}
	return Transient
}

// DefaultRetryAfter is how long a 429 without a usable Retry-After asks
// every sender to wait.
const DefaultRetryAfter = time.Second

// A Verdict is what one provider send came to.
type Verdict struct {
	Outcome Outcome
	// RetryAfter is, for Throttled, how long the provider asked every
	// sender to wait: the Backoff of the first error in the tree that has
	// a Backoff() time.Duration method, else DefaultRetryAfter. Zero for
	// any other outcome.
	RetryAfter time.Duration
}

// backoffer is a provider error that can say how long to wait.
type backoffer interface {
	error
	Backoff() time.Duration
}

// Judge classifies err as Classify does and, for Throttled, carries the
// Retry-After the provider asked for.
func Judge(err error) Verdict {
	v := Verdict{Outcome: Classify(err)}
	if v.Outcome == Throttled {
		v.RetryAfter = DefaultRetryAfter
		if b, ok := errors.AsType[backoffer](err); ok {
			v.RetryAfter = b.Backoff()
		}
	}
	return v
}

// MaxRejectReasonLen is the longest reject_reason RejectReason returns, in
// bytes: Pub/Sub refuses attribute values over 1024 bytes, and a dead letter
// that cannot be published would be nacked for ever.
const MaxRejectReasonLen = 1024

// RejectReason returns the value of the reject_reason attribute of a dead
// letter: "invalid: " followed by the validation error for Invalid, and
// "provider: " followed by the provider's error for Rejected (once: an
// error whose text already starts so is not prefixed again). With a nil err
// it returns "invalid" or "provider"; for any other Outcome (a message
// dead-lettered after too many attempts), err's text, or o.String() when
// err is nil, so the attribute is never empty. The result is valid UTF-8 of at most
// MaxRejectReasonLen bytes.
//
// RejectReason copies err.Error() as it is: callers guarantee that their
// error texts hold no phone number, message body or token.
func RejectReason(o Outcome, err error) string {
	var prefix string
	switch o {
	case Invalid:
		prefix = "invalid"
	case Rejected:
		prefix = "provider"
	default:
		if err == nil {
			return o.String()
		}
		return truncateUTF8(strings.ToValidUTF8(err.Error(), "\uFFFD"), MaxRejectReasonLen)
	}
	if err == nil {
		return prefix
	}
	text := err.Error()
	if !strings.HasPrefix(text, prefix+": ") { // the provider's errors say "provider: " already
		text = prefix + ": " + text
	}
	return truncateUTF8(strings.ToValidUTF8(text, "\uFFFD"), MaxRejectReasonLen)
}

// truncateUTF8 cuts valid UTF-8 s to at most n bytes without splitting a
// rune.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
