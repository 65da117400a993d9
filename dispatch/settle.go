package dispatch

import (
	"context"

	"smsdispatcher/admission"
	"smsdispatcher/nack"
)

// The settle step: after a send, the id's send-once record of what came of
// it and the end of the send's lease, on the account that admitted it.

// record is the id's send-once record of what came of t's send: the
// provider's acceptance; its refusal, recorded before the dead letter is
// published, so that if that fails the redelivery is dead-lettered without
// a second send; or "" when it will be retried, which gives the claim back
// so that the next delivery claims it at once. Without a claim (an
// overflow's account) only a sent record counts: the lease ends either way.
func (t try) record() string {
	switch t.outcome {
	case nack.Sent:
		return admission.SentRecord(t.receipt.ID)
	case nack.Rejected:
		return admission.RefusedRecord(t.err.Error())
	}
	return ""
}

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
