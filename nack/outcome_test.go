package nack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestActionFor(t *testing.T) {
	tests := []struct {
		o    Outcome
		want Action
	}{
		{Sent, Ack},
		{Expired, Ack},
		{Duplicate, Ack},
		{Invalid, DeadLetter},
		{Denied, Nack},
		{Throttled, Nack},
		{Rejected, DeadLetter},
		{Transient, Nack},
		{InFlightElsewhere, Nack},
		{ShuttingDown, Nack},
		{AccountFailure, Nack}, // the message is fine: it waits for the account
		{Panicked, Nack},       // dead-lettered by the dispatcher after a few
		{Suppressed, Ack},      // never sent, never retried, never dead-lettered
		{Deferred, Ack},        // the deferral store holds it
		{Capped, Ack},          // dropped by its cap
		{Blocked, Ack},         // refused by the guard: its status event says so
		{numOutcomes, Nack},    // unknown: redelivery loses nothing
		{-1, Nack},
	}
	for _, tt := range tests {
		t.Run(tt.o.String(), func(t *testing.T) {
			if got := ActionFor(tt.o); got != tt.want {
				t.Errorf("ActionFor(%v) = %v, want %v", tt.o, got, tt.want)
			}
		})
	}
}

// TestEveryOutcomeIsNamedAndCovered fails when an Outcome has no name or no
// known Action, and when one is added at all: its count check makes whoever
// adds one extend TestActionFor's table too.
func TestEveryOutcomeIsNamedAndCovered(t *testing.T) {
	seen := map[string]Outcome{}
	for o := range numOutcomes {
		name := o.String()
		if name == "" || strings.HasPrefix(name, "Outcome(") {
			t.Errorf("Outcome %d has no name", int(o))
		}
		if prev, dup := seen[name]; dup {
			t.Errorf("Outcomes %d and %d are both named %q", int(prev), int(o), name)
		}
		seen[name] = o
		if a := ActionFor(o); a.String() == "" || strings.HasPrefix(a.String(), "Action(") {
			t.Errorf("ActionFor(%v) = %v, not a known Action", o, a)
		}
	}
	if len(seen) != 16 {
		t.Errorf("%d outcomes, want 16: update TestActionFor and the metrics", len(seen))
	}
}

func TestOutcomeString(t *testing.T) {
	tests := []struct {
		o    Outcome
		want string
	}{
		{Sent, "sent"},
		{Expired, "expired"},
		{Duplicate, "duplicate"},
		{Invalid, "invalid"},
		{Denied, "denied"},
		{Throttled, "throttled"},
		{Rejected, "rejected"},
		{Transient, "transient"},
		{InFlightElsewhere, "in_flight_elsewhere"},
		{ShuttingDown, "shutting_down"},
		{Panicked, "panicked"},
		{Suppressed, "suppressed"},
		{Deferred, "deferred"},
		{Capped, "capped"},
		{Blocked, "blocked"},
		{numOutcomes, "Outcome(16)"},
		{-1, "Outcome(-1)"},
	}
	for _, tt := range tests {
		if got := tt.o.String(); got != tt.want {
			t.Errorf("Outcome(%d).String() = %q, want %q", int(tt.o), got, tt.want)
		}
	}
}

func TestActionString(t *testing.T) {
	tests := []struct {
		a    Action
		want string
	}{
		{Ack, "ack"},
		{Nack, "nack"},
		{DeadLetter, "dead_letter"},
		{3, "Action(3)"},
	}
	for _, tt := range tests {
		if got := tt.a.String(); got != tt.want {
			t.Errorf("Action(%d).String() = %q, want %q", int(tt.a), got, tt.want)
		}
	}
}

// providerError has the shape of provider.Error: methods to branch on and
// the fields the dispatcher reads.
type providerError struct {
	Status     int
	RetryAfter time.Duration
}

func (e *providerError) Error() string   { return fmt.Sprintf("status %d", e.Status) }
func (e *providerError) Throttled() bool { return e.Status == 429 }
func (e *providerError) Permanent() bool {
	return e.Status >= 400 && e.Status < 500 && e.Status != 429 && !e.AccountFailure()
}
func (e *providerError) AccountFailure() bool { return e.Status == 401 || e.Status == 403 }
func (e *providerError) Temporary() bool      { return e.Status >= 500 }

var (
	_ throttler     = (*providerError)(nil)
	_ permanent     = (*providerError)(nil)
	_ accountFailer = (*providerError)(nil)
)

// accountAndPermanent says both: the account wins.
type accountAndPermanent struct{}

func (accountAndPermanent) Error() string        { return "both" }
func (accountAndPermanent) AccountFailure() bool { return true }
func (accountAndPermanent) Permanent() bool      { return true }

// optedOutError is a provider's refusal of one recipient who opted out:
// permanent too, and the opt-out wins.
type optedOutError struct{}

func (optedOutError) Error() string   { return "opted out" }
func (optedOutError) OptedOut() bool  { return true }
func (optedOutError) Permanent() bool { return true }

// flags is an error that answers Throttled and Permanent as told.
type flags struct{ throttled, permanent bool }

func (f flags) Error() string   { return "flags" }
func (f flags) Throttled() bool { return f.throttled }
func (f flags) Permanent() bool { return f.permanent }

// onlyPermanent has Permanent but not Throttled.
type onlyPermanent struct{}

func (onlyPermanent) Error() string   { return "only permanent" }
func (onlyPermanent) Permanent() bool { return true }

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Outcome
	}{
		{"nil", nil, Sent},
		{"429", &providerError{Status: 429, RetryAfter: time.Second}, Throttled},
		{"400", &providerError{Status: 400}, Rejected},
		{"404", &providerError{Status: 404}, Rejected},
		{"401", &providerError{Status: 401}, AccountFailure},
		{"403 wrapped", fmt.Errorf("send: %w", &providerError{Status: 403}), AccountFailure},
		{"account and permanent", accountAndPermanent{}, AccountFailure},
		{"opted out, and permanent", fmt.Errorf("x: %w", optedOutError{}), Suppressed},
		{"500", &providerError{Status: 500}, Transient},
		{"503", &providerError{Status: 503}, Transient},
		{"429 wrapped", fmt.Errorf("send: %w", &providerError{Status: 429}), Throttled},
		{"400 wrapped twice", fmt.Errorf("a: %w", fmt.Errorf("b: %w", &providerError{Status: 400})), Rejected},
		{"503 wrapped", fmt.Errorf("send: %w", &providerError{Status: 503}), Transient},
		{"joined with 429", errors.Join(io.EOF, &providerError{Status: 429}), Throttled},
		{"throttled and permanent", flags{throttled: true, permanent: true}, Throttled},
		{"neither", flags{}, Transient},
		{"permanent without Throttled", fmt.Errorf("x: %w", onlyPermanent{}), Rejected},
		{"deadline", context.DeadlineExceeded, Transient},
		{"deadline wrapped", fmt.Errorf("post: %w", context.DeadlineExceeded), Transient},
		{"canceled", context.Canceled, Transient},
		{"net", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, Transient},
		{"dns", &net.DNSError{Err: "no such host", Name: "sms.example", IsTemporary: true}, Transient},
		{"plain", errors.New("boom"), Transient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestRejectReason(t *testing.T) {
	long := strings.Repeat("é", MaxRejectReasonLen) // 2 bytes a rune
	tests := []struct {
		name string
		o    Outcome
		err  error
		want string
	}{
		{"invalid", Invalid, errors.New(`"to" is not E.164`), `invalid: "to" is not E.164`},
		{"rejected", Rejected, &providerError{Status: 400}, "provider: status 400"},
		{"invalid nil", Invalid, nil, "invalid"},
		{"rejected nil", Rejected, nil, "provider"},
		{"dead-lettered after too many attempts", Transient, errors.New("max_attempts: 100 deliveries"), "max_attempts: 100 deliveries"},
		{"other outcome without error", Transient, nil, "transient"},
		{"bad utf-8", Invalid, errors.New("body \xff"), "invalid: body \uFFFD"},
		{"too long", Invalid, errors.New(long), ("invalid: " + long)[:MaxRejectReasonLen-1]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RejectReason(tt.o, tt.err)
			if got != tt.want {
				t.Errorf("RejectReason(%v, %v) = %q, want %q", tt.o, tt.err, got, tt.want)
			}
			if len(got) > MaxRejectReasonLen || !utf8.ValidString(got) {
				t.Errorf("RejectReason(%v, ...) is %d bytes, valid UTF-8 %v", tt.o, len(got), utf8.ValidString(got))
			}
		})
	}
}

// backoffError is a 429 that says how long to wait.
type backoffError struct{ d time.Duration }

func (e backoffError) Error() string          { return "status 429" }
func (e backoffError) Throttled() bool        { return true }
func (e backoffError) Backoff() time.Duration { return e.d }

func TestJudgeCarriesTheRetryAfterOfA429(t *testing.T) {
	tests := []struct {
		err  error
		want Verdict
	}{
		{nil, Verdict{Outcome: Sent}},
		{backoffError{3 * time.Second}, Verdict{Outcome: Throttled, RetryAfter: 3 * time.Second}},
		{fmt.Errorf("send: %w", backoffError{0}), Verdict{Outcome: Throttled}}, // a date in the past: at once
		{flags{throttled: true}, Verdict{Outcome: Throttled, RetryAfter: DefaultRetryAfter}},
		{flags{permanent: true}, Verdict{Outcome: Rejected}},
		{errors.New("connection reset"), Verdict{Outcome: Transient}},
	}
	for _, tt := range tests {
		if got := Judge(tt.err); got != tt.want {
			t.Errorf("Judge(%v) = %+v, want %+v", tt.err, got, tt.want)
		}
	}
}
