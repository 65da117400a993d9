package dispatch

import (
	"context"
	"errors"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/admission"
	"smsdispatcher/nack"
)

// The receipts' side of the pipeline: a resend's route, without the
// accounts that sent it before, and the story a sent message's record
// keeps for its receipts (admission.Story).

// The Pub/Sub attributes of a resend (docs/contract.md section 2).
const (
	// AttrResendAvoid names the accounts a resend must not go through,
	// comma-separated: those that sent it before.
	AttrResendAvoid = "sms-resend-avoid"
	// AttrResendReason is why it is sent again: the final status, then
	// the provider's error code when there is one ("undelivered 30007").
	AttrResendReason = "sms-resend-reason"
)

// ResendWithin is how long after its acceptance a message without a
// deadline may still be resent: past it, a login code is stale.
const ResendWithin = 5 * time.Minute

// maxResendReason bounds Event.ResendReason: the attribute crosses the
// topic like a producer's, and goes on the trace.
const maxResendReason = 64

// errResendNoAccount is why a resend is acked unsent: every account of
// its route is one it must avoid.
var errResendNoAccount = errors.New("resend_no_account: every account on its route sent it before")

// resendRoute returns r, msg's route, without the accounts the delivery m
// must avoid as a resend, and why it is resent ("" when it is not one). A
// resend is never resent again; another first-class message with
// ResendOnFailure gets its data as msg.resend when receipts are on.
func (d *Dispatcher) resendRoute(class admission.Class, m *pubsub.Message, msg *Message, r []*account) ([]*account, string) {
	avoid, ok := m.Attributes[AttrResendAvoid]
	if !ok {
		if d.cfg.Receipts && class == admission.OTP && msg.ResendOnFailure {
			msg.resend = m.Data
		}
		return r, ""
	}
	msg.resent = true
	return avoiding(r, avoid), resendReason(m.Attributes[AttrResendReason])
}

// avoiding returns the accounts of r not named in avoid, a comma-separated
// list of names, in r's order.
func avoiding(r []*account, avoid string) []*account {
	names := strings.Split(avoid, ",")
	for i, n := range names {
		names[i] = strings.TrimSpace(n)
	}
	named := func(a *account) bool {
		for _, n := range names {
			if n != "" && n == a.Name { // an unnamed account (Deps' one) is never named
				return true
			}
		}
		return false
	}
	var out []*account
	for _, a := range r {
		if !named(a) {
			out = append(out, a)
		}
	}
	return out
}

// resendReason is s cut to maxResendReason bytes of printable ASCII, the
// rest dropped.
func resendReason(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < maxResendReason; i++ {
		if s[i] >= 0x20 && s[i] <= 0x7e {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// story is what the account that sent m keeps of t's send for its
// receipts: the class, the sender, the destination's prefix and number
// (its account's route, counted by the receipts; admission keeps only a
// hash of the number), the provider's ids (every part's when
// it names parts), and m's data for a resend until m's deadline, or
// ResendWithin of now without one. A message past that keeps no payload.
// The payload holds m's id and that deadline (WithID): a producer's data
// without them would make each copy of the resend another message, sent
// at any time.
func (d *Dispatcher) story(class admission.Class, m Message, t try) admission.Story {
	s := admission.Story{ID: m.ID, Class: class.String(), Sender: t.decision.Sender, ProviderIDs: t.receipt.Parts,
		Prefix: destinationPrefix(m.To), To: m.To}
	if len(s.ProviderIDs) == 0 && t.receipt.ID != "" {
		s.ProviderIDs = []string{t.receipt.ID}
	}
	if m.resend != nil {
		now := d.now()
		until := m.Deadline
		if until.IsZero() {
			until = now.Add(ResendWithin)
		}
		if until.After(now) {
			s.Resend, s.ResendUntil = WithID(m.resend, m.ID, until), until
		}
	}
	return s
}

// settleOn is a's Settle of t's send, keeping m's story with a sent
// record when receipts are on.
func (d *Dispatcher) settleOn(ctx context.Context, a *account, class admission.Class, m Message, dec admission.Decision, t try) error {
	if d.cfg.Receipts && t.outcome == nack.Sent {
		return a.Limiter.SettleStory(ctx, dec, t.record(), t.result, d.story(class, m, t))
	}
	return a.Limiter.Settle(ctx, dec, t.record(), t.result)
}
