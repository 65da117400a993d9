package admission

import (
	"context"
	"time"
)

// TEMPORARY stub, replaced at merge

// Story is what a sent message's receipts need kept with its record. Zero: nothing kept.
type Story struct {
	Class       string    // the class's name ("otp", "marketing")
	Sender      string    // the sender it went from ("" the adapter's)
	ProviderIDs []string  // the provider's ids: Receipt.Parts, or {Receipt.ID}; empty: nothing kept
	Resend      []byte    // the message's Pub/Sub data, for a first-class message that may be sent once more
	ResendUntil time.Time // when that resend stops being worth it (zero: no resend)
}

// SettleStory is Settle that also keeps s with a sent record.
func (l *Limiter) SettleStory(ctx context.Context, d Decision, record string, result SendResult, s Story) error {
	return l.Settle(ctx, d, record, result)
}
