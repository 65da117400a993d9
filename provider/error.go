package provider

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"smsdispatcher/provider/internal/wire"
)

// Kind is what a provider's answer means for the message and the account.
type Kind int

const (
	// KindByStatus, the zero value, derives the kind from Error.Status the
	// generic API's way (see Error.Kind).
	KindByStatus Kind = iota
	// KindThrottled: the account is over its rate; nobody should send on
	// it for RetryAfter. The message is fine.
	KindThrottled
	// KindRefused: the provider refused this message for good.
	KindRefused
	// KindAccount: the account cannot send at all (bad credentials,
	// suspended, out of credit). The message is fine; nothing on the
	// account can be sent until an operator acts.
	KindAccount
	// KindTemporary: worth another try later (5xx, a redirect, a provider
	// that says so).
	KindTemporary
)

// String returns the kind's name in snake case, fit for a label.
func (k Kind) String() string {
	switch k {
	case KindThrottled:
		return "throttled"
	case KindRefused:
		return "refused"
	case KindAccount:
		return "account_failure"
	case KindTemporary:
		return "temporary"
	}
	return "by_status"
}

// Error is the provider's answer to a Send when it is not an acceptance:
// an HTTP status other than 2xx or, for providers that answer 200 with a
// per-message status (Vonage), that status.
type Error struct {
	// Provider names the adapter ("twilio", "vonage"); empty for the
	// generic API, whose errors read as they always have.
	Provider string
	// Status is the HTTP status code.
	Status int
	// Code is the provider's own error code (Twilio's code, Vonage's
	// status); for the generic API, GenericOptedOut when a refusal's
	// answer says so, empty otherwise.
	Code string
	// Kind is what the answer means; KindByStatus derives it from Status
	// (see Meaning).
	Kind Kind
	// RetryAfter is set for a throttle only: the parsed Retry-After, never
	// negative, at most MaxRetryAfter; DefaultRetryAfter when the answer
	// has none or it does not parse; 0 for a date in the past.
	RetryAfter time.Duration
	// Message is the first 256 bytes (or fewer) of the answer's body, with
	// invalid UTF-8 dropped and, should the provider echo them as they are,
	// JSON-escaped or in part, the token replaced by "[redacted]", the
	// message's body (4 bytes or longer) by "[body]", and the digits of its
	// number (but the last 4) and of the body's digit groups by '*' (see
	// redact.go for the exact rule). Should the result still show one of
	// them, which takes a body built to collide with those placeholders,
	// Message is a fixed placeholder instead. It never holds the request.
	Message string
}

// Error describes the answer: "provider: [name ]status N[ code C][ (retry
// after D)][: message]".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("provider: ")
	if e.Provider != "" {
		b.WriteString(e.Provider)
		b.WriteString(" ")
	}
	b.WriteString("status ")
	b.WriteString(strconv.Itoa(e.Status))
	if e.Code != "" {
		b.WriteString(" code ")
		b.WriteString(e.Code)
	}
	if e.Throttled() {
		b.WriteString(" (retry after ")
		b.WriteString(e.RetryAfter.String())
		b.WriteString(")")
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Meaning returns e.Kind, or for KindByStatus the generic API's reading of
// Status: 429 throttled; 401 and 403 an account failure (the credential,
// not the message); any other 4xx refused; anything else (5xx, a redirect,
// which the default Client does not follow, a status no provider should
// send, even a 2xx) temporary.
func (e *Error) Meaning() Kind {
	if e.Kind != KindByStatus {
		return e.Kind
	}
	switch s := e.Status; {
	case s == http.StatusTooManyRequests:
		return KindThrottled
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		return KindAccount
	case s >= 400 && s < 500:
		return KindRefused
	}
	return KindTemporary
}

// Throttled reports whether the account is over its rate: nobody should
// send on it for RetryAfter.
func (e *Error) Throttled() bool { return e.Meaning() == KindThrottled }

// Backoff returns how long the provider asked every sender to wait:
// RetryAfter.
func (e *Error) Backoff() time.Duration { return e.RetryAfter }

// Permanent reports whether the provider refused this message for good.
// Sending it again will not help.
func (e *Error) Permanent() bool { return e.Meaning() == KindRefused }

// GenericOptedOut is the "code" of the generic API's answer refusing a
// message for its recipient's opt-out: a 4xx (not 401, 403 or 429) whose
// JSON body is {"error": "...", "code": "opted_out"} (docs/contract.md
// section 7).
const GenericOptedOut = "opted_out"

// OptedOut reports whether the provider refused the message because its
// recipient opted out of the sender's messages (Twilio 21610, the
// generic API's GenericOptedOut): the dispatcher puts the number on the
// suppression list for every account and settles the message suppressed
// (docs/suppressions.md). It is Permanent too.
func (e *Error) OptedOut() bool {
	switch e.Provider {
	case "twilio":
		return e.Code == strconv.Itoa(wire.TwilioUnsubscribed)
	case "":
		return e.Code == GenericOptedOut && e.Meaning() == KindRefused
	}
	return false
}

// AccountFailure reports whether the account cannot send at all: the
// message is fine and must wait for the account, not be dead-lettered.
func (e *Error) AccountFailure() bool { return e.Meaning() == KindAccount }

// Temporary reports whether the answer is worth another try later.
func (e *Error) Temporary() bool { return e.Meaning() == KindTemporary }
