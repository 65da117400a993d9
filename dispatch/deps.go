package dispatch

import (
	"context"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/admission"
	"smsdispatcher/deadletter"
	"smsdispatcher/ledger"
	"smsdispatcher/provider"
)

// Limiter hands out send slots (admission.Limiter).
type Limiter interface {
	// Admit waits for a slot of cost units (1, or the message's segments
	// when rates count segments), taking the id's send-once claim in the
	// same call.
	Admit(ctx context.Context, class admission.Class, cost int, maxWait time.Duration, claim admission.Claim) (admission.Decision, error)
	// Settle is the one call after a send: the id's record of what became
	// of it ("" gives the claim back), the end of the send's lease, what
	// the send said of the account's health, and, with a sent record, s:
	// what the message's receipts need (Config.Receipts; the zero Story
	// keeps nothing), on the account that sent it, with or without its
	// claim.
	Settle(ctx context.Context, d admission.Decision, record string, result admission.SendResult, s ledger.Story) error
	// Health is the account's health as this process last heard it.
	Health() admission.Health
	ReportThrottled(ctx context.Context, retryAfter time.Duration) error
	// ReportAccountFailure stops every process for pause: the provider
	// refused the account, not a message.
	ReportAccountFailure(ctx context.Context, pause time.Duration, why string) error
	// ResumeAccount ends an account-level pause early: its cause is fixed.
	ResumeAccount(ctx context.Context) error
	// AccountPause reports the account-level pause this process knows of.
	AccountPause() (why string, left time.Duration, ok bool)
	// CheckPause is AccountPause, asking Redis at most once a second
	// whether the pause still holds.
	CheckPause(ctx context.Context) (why string, left time.Duration, ok bool)
}

// Claimer keeps the send-once record of each id (admission.Claims): the
// Limiter takes and settles the claims; a dead letter's record is
// written once it is out.
type Claimer interface {
	Finish(ctx context.Context, id, record string) error
	// Claim, Refuse and Release keep the record apart from an admission:
	// for an OTP sent on another account than the one keeping its
	// records (an overflow).
	Claim(ctx context.Context, id, token string, ttl time.Duration) (ledger.Record, error)
	Refuse(ctx context.Context, id, reason string) error
	Release(ctx context.Context, id, token string) error
}

// Suppressions is the deployment's suppression list as this process
// keeps it (suppress.List, with the server's publishers).
type Suppressions interface {
	// Suppressed reports whether number is on the list, and the source
	// of its entry: from memory, no Redis call.
	Suppressed(number string) (source string, ok bool)
	// OptedOut puts number on the list for every account on the word of
	// account's provider (Twilio 21610).
	OptedOut(ctx context.Context, number, account string) error
	// Refused publishes the status event suppressed of the message id of
	// class to number, whose home is account, stopped by an entry of
	// source, and records which change stopped it (dispatcher message).
	Refused(ctx context.Context, id, number string, class admission.Class, account, source string)
}

// Sender sends one message to the provider (provider.Client, Twilio,
// Vonage).
type Sender interface {
	Send(ctx context.Context, m provider.Message) (provider.Receipt, error)
}

// Credentials is the provider credential a Dispatcher watches
// (provider.Secret): when its file changes, the account's pause ends.
type Credentials interface {
	// Reload reads the credential again and reports whether it changed.
	Reload() (changed bool, err error)
	// Version counts the changes seen so far.
	Version() uint64
}

// DeadLetterer publishes a message that will never be sent to the
// dead-letter topic and returns once the server has it.
type DeadLetterer interface {
	DeadLetter(ctx context.Context, m *pubsub.Message, class admission.Class, reason string) error
}

// Tracer opens the spans of a delivery (telemetry.Tracing). Each end
// function is called exactly once.
type Tracer interface {
	// Delivery starts the span of one delivery of m from subscription.
	Delivery(ctx context.Context, subscription string, m *pubsub.Message, class admission.Class) (context.Context, func(Event))
	// Admission starts the span of the wait for a send slot.
	Admission(ctx context.Context, class admission.Class) (context.Context, func(d admission.Decision, wait time.Duration))
}

type noTracer struct{}

func (noTracer) Delivery(ctx context.Context, _ string, _ *pubsub.Message, _ admission.Class) (context.Context, func(Event)) {
	return ctx, func(Event) {}
}

func (noTracer) Admission(ctx context.Context, _ admission.Class) (context.Context, func(admission.Decision, time.Duration)) {
	return ctx, func(admission.Decision, time.Duration) {}
}

var (
	_ Limiter = (*admission.Limiter)(nil)
	_ Claimer = (*admission.Claims)(nil)
	_ Sender  = (*provider.Client)(nil)
)

// DeadLetterTopic dead-letters by publishing to a Pub/Sub topic.
type DeadLetterTopic struct {
	Publisher *pubsub.Publisher
}

// DeadLetter publishes m's dead letter (deadletter.New: m's data and
// attributes with why it will never be sent, its data cut to MaxDataBytes)
// and waits for the server's answer.
func (t DeadLetterTopic) DeadLetter(ctx context.Context, m *pubsub.Message, class admission.Class, reason string) error {
	_, err := t.Publisher.Publish(ctx, deadletter.New(m, class, reason, MaxDataBytes)).Get(ctx)
	return err
}

// Guard is the pumping guard (guard.Guard), asked before a message's
// admission on every path to a provider, and told of every send.
type Guard interface {
	// Blocks returns why the guard refuses a message of class with id to
	// number to, "" when it lets it go; it publishes a refused message's
	// status event naming account. It reads memory only.
	Blocks(ctx context.Context, class, id, to, account string) string
	// Sent counts one send (a message handed to a provider, whatever its
	// answer); it only queues it.
	Sent(class, id, to string)
}
