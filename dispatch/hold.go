package dispatch

import (
	"context"
	"fmt"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/admission"
	"smsdispatcher/deferral"
	"smsdispatcher/nack"
)

// The send windows' and caps' step, before admission on every path a
// message takes to a provider: a first send, its overflow and failover
// (which follow its admission), a resend of a failed OTP and a replayed
// dead letter (both published again to the class's topic, and handled
// here as any delivery).

// holding is what the deferral step said of one delivery.
type holding struct {
	msg deferral.Message
	j   deferral.Judgement
}

// hold judges msg, delivered as m, by its class's send windows and cap
// (Deps.Deferral); held is false when it may go to admission now, and
// t then says nothing. A deferred message is stored before hold returns,
// so that act acks it only once the store holds it.
func (d *Dispatcher) hold(ctx context.Context, class admission.Class, m *pubsub.Message, msg Message) (t try, h holding, held bool) {
	rules := d.policy(class).Sending
	if d.deps.Deferral == nil || (rules.Window == nil && rules.Cap.Count == 0) {
		return try{}, h, false
	}
	h.msg = deferral.Message{Class: class.String(), ID: msg.recordID(), To: msg.To, TZ: msg.TZ, Deadline: msg.Deadline,
		Data: WithID(m.Data, msg.ID, msg.Deadline), Attributes: m.Attributes}
	j, err := d.deps.Deferral.Judge(ctx, h.msg, rules)
	h.j = j
	switch {
	case err != nil:
		if d.policy(class).SendsWithoutRecord && rules.Window == nil {
			// Its cap alone could not be read: an OTP goes, as it goes
			// without its record (a duplicate beats a loss).
			d.cfg.Logger.Warn("recipient cap unavailable; sending without it", "class", class, "id", msg.ID, "err", err)
			return try{}, h, false
		}
		return try{outcome: nack.Denied, err: fmt.Errorf("deferral store unavailable: %w", err)}, h, true
	case j.Verdict == deferral.Deferred:
		return try{outcome: nack.Deferred}, h, true
	case j.Verdict == deferral.Capped:
		return try{outcome: nack.Capped}, h, true
	case j.Verdict == deferral.Expired:
		return try{outcome: nack.Expired, err: fmt.Errorf("its %s opens after its deadline", j.Reason)}, h, true
	}
	return try{}, h, false
}

// unhold gives back the cap's place h took when t did not hand the
// message to a provider.
func (d *Dispatcher) unhold(ctx context.Context, h holding, t try) {
	if d.deps.Deferral == nil {
		return
	}
	switch t.outcome {
	case nack.Sent, nack.Transient, nack.Rejected, nack.Panicked:
		return // handed to a provider, or may have been
	}
	if err := d.deps.Deferral.GiveBack(context.WithoutCancel(ctx), h.msg, h.j); err != nil {
		d.cfg.Logger.Warn("a recipient cap's place was not given back; it ends with its window", "id", h.msg.ID, "err", err)
	}
}
