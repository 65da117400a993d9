package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/ledger"
	"smsdispatcher/nack"
)

// overflow sends a message that its home account, r[0], could not take
// (denied: under a penalty, paused, degraded or skipping the route to the
// message's destination prefix) on the next account of r
// that admits it within wait. The id's record stays with the home account:
// it is claimed there apart (one more call, on the overflow path only) and
// settled there after the send; the other account's admission takes a
// slot only.
func (d *Dispatcher) overflow(ctx context.Context, class admission.Class, r []*account, m Message, segments, deliveryAttempt int, claim admission.Claim, wait time.Duration, denied admission.Decision) try {
	home := r[0]
	t := try{decision: denied, account: home, home: home, outcome: nack.Denied,
		err: fmt.Errorf("no send slot within the max wait (%s, %s) on any account", denied.Source, denied.Reason)}
	start := time.Now()
	// The claim outlives the wait for the other account's slot, then the
	// send, as a claim taken with the slot does.
	rec, cerr := home.Claims.Claim(ctx, m.recordID(), claim.Token, wait+claim.TTL)
	switch {
	case cerr != nil && !d.policy(class).SendsWithoutRecord:
		// Only OTP goes without its record (Redis down): a duplicate OTP
		// beats a lost one, not so a campaign's message.
		t.err = fmt.Errorf("send-once record unavailable: %w", cerr)
		return t
	case cerr != nil:
		// Without the record (Redis down) OTP is sent anyway. (A shutdown
		// meanwhile ends the admission below, and the claim, if it was
		// taken, is given back.)
		d.cfg.Logger.Warn("send-once record unavailable; sending without it", "class", class, "id", m.ID, "err", cerr)
	case rec.State == ledger.Held:
		t.outcome, t.err = nack.InFlightElsewhere, nil
		return t
	case rec.State == ledger.Refused:
		t.outcome, t.err = nack.Rejected, refusedEarlier(rec.RejectReason)
		return t
	case rec.State != ledger.Claimed:
		t.outcome, t.err = nack.Duplicate, nil
		return t
	}
	// A claim whose reply was lost may be held: settled all the same
	// (Finish writes the record whatever holds it; Release gives back only
	// this token's claim).
	claimed := cerr == nil || !errors.Is(cerr, admission.ErrRedisDown)
	t = d.sendOnNext(ctx, nil, class, nextOf(r, segments), m, segments, deliveryAttempt, claim.Prefix, wait-time.Since(start), t)
	if t.outcome == nack.Denied && t.decision.Reason == admission.ReasonAccount {
		d.holdPaused()
	}
	if claimed {
		d.settleApart(ctx, home, m.recordID(), claim.Token, t)
	}
	return t
}

// nextOf returns the accounts of r after its home that can take a body of
// segments (else their start-up check did not allow for it).
func nextOf(r []*account, segments int) []*account {
	var next []*account
	for _, a := range r[1:] {
		if a.RateUnit != PerSegment || segments <= a.MaxSegments {
			next = append(next, a)
		}
	}
	return next
}

// sendOnNext sends m on the first account of next that admits it within
// wait, going on past those under a penalty or degraded as an overflow
// does, and settles the send there: no claim on that account (the home
// keeps the id's record), its slot and lease only. t is the try to
// return when none admits it. lost abandons the send (sendAdmitted).
func (d *Dispatcher) sendOnNext(ctx, lost context.Context, class admission.Class, next []*account, m Message, segments, deliveryAttempt int, prefix string, wait time.Duration, t try) try {
	start := time.Now()
	for i, a := range next {
		// No claim here (no Token); the ID names the message whose story
		// this account keeps when it sends it (Settle).
		claim := admission.Claim{ID: m.recordID(), Failover: i+1 < len(next) && d.failsOver(a, class), Prefix: prefix}
		dec, err := d.admit(ctx, class, a, a.cost(segments), wait-time.Since(start), claim)
		if err != nil {
			t.outcome, t.err = nack.ShuttingDown, err
			break
		}
		t.decision = dec
		if !dec.Allowed {
			if claim.Failover && overflows(dec) {
				continue
			}
			t.err = fmt.Errorf("no send slot within the max wait on account %s (%s, %s)", a.Name, dec.Source, dec.Reason)
			break
		}
		t = d.sendAdmitted(ctx, class, a, m, d.resendCount(deliveryAttempt, dec), claim.Failover, t, lost)
		// No claim on this account: the send's record (written at home)
		// only counts the send here, with the lease's end.
		if err := d.settleOn(context.WithoutCancel(ctx), a, class, m, dec, t); err != nil {
			d.cfg.Logger.Warn("could not end a send's lease; it runs out", "account", a.Name, "err", err)
		}
		break
	}
	return t
}
