package dispatch

import (
	"context"

	"smsdispatcher/admission"
	"smsdispatcher/internal/attr"
	"smsdispatcher/ledger"
	"smsdispatcher/nack"
)

// The settle step, top-down: after a send, on the account that admitted
// it, the id's send-once record of what came of it (record), with the
// story its receipts need when they are on (story), and the end of the
// send's lease, in one call to the limiter (settleOn); after an overflow,
// the home's record apart (settleApart).

// settle keeps the id's record of what came of its send and ends the
// send's lease, in one call that outlives the delivery's context
// (shutdown, Grace): it bounds itself, and with Redis known down it does
// not wait.
func (d *Dispatcher) settle(ctx context.Context, class admission.Class, m Message, dec admission.Decision, t try) {
	what := "could not give back a send claim; the retry waits for it to expire"
	switch t.outcome {
	case nack.Sent:
		what = "could not record a sent id; a redelivery could send it again"
	case nack.Rejected:
		what = "could not record a refused id; if its dead letter fails, a redelivery sends it again"
	}
	if err := d.settleOn(context.WithoutCancel(ctx), t.account, class, m, dec, t); err != nil {
		d.cfg.Logger.Warn(what, "id", m.ID, "err", err)
	}
}

// settleOn is a's Settle of t's send, keeping m's story with a sent
// record when receipts are on.
func (d *Dispatcher) settleOn(ctx context.Context, a *account, class admission.Class, m Message, dec admission.Decision, t try) error {
	var s ledger.Story
	if d.cfg.Receipts && t.outcome == nack.Sent {
		s = d.story(class, m, t)
	}
	return a.Limiter.Settle(ctx, dec, t.record(), t.result, s)
}

// story is what the account that sent m keeps of t's send for its
// receipts: the class, the sender, the destination's prefix and number
// (its account's route, counted by the receipts; admission keeps only a
// hash of the number), the provider's ids (every part's when it names
// parts), and m's data for a resend until m's deadline, or
// attr.ResendWithin of now without one. A message past that keeps no
// payload. The payload holds m's id and that deadline (WithID): a
// producer's data without them would make each copy of the resend
// another message, sent at any time.
func (d *Dispatcher) story(class admission.Class, m Message, t try) ledger.Story {
	s := ledger.Story{ID: m.ID, Class: class.String(), Sender: t.decision.Sender, ProviderIDs: t.receipt.Parts,
		Prefix: destinationPrefix(m.To), To: m.To}
	if len(s.ProviderIDs) == 0 && t.receipt.ID != "" {
		s.ProviderIDs = []string{t.receipt.ID}
	}
	if m.resend != nil {
		now := d.now()
		until := m.Deadline
		if until.IsZero() {
			until = now.Add(attr.ResendWithin)
		}
		if until.After(now) {
			s.Resend, s.ResendUntil = WithID(m.resend, m.ID, until), until
		}
	}
	return s
}

// record is the id's send-once record of what came of t's send: the
// provider's acceptance; its refusal, recorded before the dead letter is
// published, so that if that fails the redelivery is dead-lettered without
// a second send; or "" when it will be retried, which gives the claim back
// so that the next delivery claims it at once. Without a claim (an
// overflow's account) only a sent record counts: the lease ends either way.
func (t try) record() string {
	switch t.outcome {
	case nack.Sent:
		return ledger.SentRecord(t.receipt.ID)
	case nack.Rejected:
		return ledger.RefusedRecord(t.err.Error())
	}
	// A suppressed message gives its claim back too: its number is on
	// the list, which stops a redelivery or a replay before admission.
	return ""
}

// settleApart keeps the id's record on the home account after an
// overflow: what settle writes in the admission's call, in one call of
// its own.
func (d *Dispatcher) settleApart(ctx context.Context, home *account, id, token string, t try) {
	ctx = context.WithoutCancel(ctx)
	var err error
	switch t.outcome {
	case nack.Sent:
		err = home.Claims.Finish(ctx, id, t.record())
	case nack.Rejected:
		err = home.Claims.Refuse(ctx, id, t.err.Error())
	default:
		err = home.Claims.Release(ctx, id, token)
	}
	if err != nil {
		d.cfg.Logger.Warn("could not keep an overflowed id's record", "id", id, "outcome", t.outcome, "err", err)
	}
}
