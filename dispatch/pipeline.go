package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/admission"
	"smsdispatcher/ledger"
	"smsdispatcher/nack"
	"smsdispatcher/provider"
)

// The per-message path, in the order of docs/design.md: handle decodes,
// joins the id's flight in this process, passes the priority gate and
// waits for a slot, claiming the id across processes in the same Redis
// call (claimAndSend), sends and judges the answer (send.go), settles the
// id's record and the send's lease in one more call (settle.go), acts on
// the Pub/Sub message (act) and lands the flight. An OTP its home account
// cannot admit under a penalty goes to the next account (overflow.go).
// Each step takes values and returns what it came to; only handle writes
// the Event.

// try is what one delivery's attempt came to, for its Event.
type try struct {
	account  *account // the account that admitted it, or the class's home
	home     *account // the first account of its route: a stopped message's status event names it
	outcome  nack.Outcome
	err      error
	decision admission.Decision   // the last admission decision; zero if admission was not reached
	admitted time.Time            // when a slot was granted; zero if none
	resends  int                  // provider attempts before this one, if it reached the provider
	receipt  provider.Receipt     // the provider's acceptance, when sent
	result   admission.SendResult // what the send said of its account's health
	hedged   string               // the home it was hedged from, if it was
	// suppressed is, for the outcome Suppressed, the source of the list's
	// entry that stopped it.
	suppressed string
	blocked    string // why the guard refused it (nack.Blocked), if it did
}

// handle is the Receive callback of class: it takes m to one end. A
// panic on the way is recovered (recoverPanic): it ends the delivery, not
// the process.
func (d *Dispatcher) handle(ctx context.Context, class admission.Class, subscription string, m *pubsub.Message) {
	ev := Event{Class: class, MessageID: m.ID, PublishTime: m.PublishTime, Received: d.now()}
	ctx, end := d.deps.Tracer.Delivery(ctx, subscription, m, class)
	defer func() { end(ev) }()
	if m.DeliveryAttempt != nil {
		ev.DeliveryAttempt = *m.DeliveryAttempt
	}
	var p progress
	defer func() {
		if r := recover(); r != nil {
			d.recoverPanic(ctx, class, m, &ev, &p, r)
		}
	}()

	var t try
	var r []*account // the accounts sending class to the message's destination, home first
	msg, err := Decode(m.Data, m.ID)
	if err == nil {
		ev.ID = msg.ID
		r, err = d.routeOf(class, msg.To)
		if err != nil {
			ev.NoRoute = CountryCode(msg.To)
		}
	}
	if err == nil {
		r, ev.ResendReason = d.resendRoute(class, m, &msg, r)
	}
	if err == nil && len(r) > 0 {
		ev.Segments, err = d.segments(r[0], msg)
	}
	switch {
	case err != nil:
		t = try{outcome: nack.Invalid, err: err}
	case len(r) == 0:
		// A resend whose every account sent it before: the original was
		// sent, and is done.
		t = try{outcome: nack.Duplicate, err: errResendNoAccount}
		d.cfg.Logger.Debug("a resend has no account left on its route; acked unsent", "id", msg.ID, "class", class)
	case d.refused(ctx, class, msg, r[0], &t):
		// Every path to a provider comes here: a first send, its
		// overflow, a resend and a replayed dead letter.
	default:
		p.id = msg.ID
		p.flight, t.outcome, t.err = d.join(ctx, class, msg)
		if p.flight != nil {
			var h holding
			var held bool
			if t, h, held = d.hold(ctx, class, m, msg); !held {
				t = d.claimAndSend(ctx, class, r, msg, ev.Segments, ev.DeliveryAttempt)
				d.unhold(ctx, h, t)
			}
		}
	}
	ev.Outcome, ev.Err, ev.Decision, ev.Admitted, ev.ResendCount = t.outcome, t.err, t.decision, t.admitted, t.resends
	ev.ProviderID, ev.Sender, ev.HedgedFrom, ev.SuppressedBy = t.receipt.ID, t.decision.Sender, t.hedged, t.suppressed
	if t.blocked != "" {
		ev.Blocked, ev.BlockedCountry = t.blocked, CountryCode(msg.To)
	}
	switch {
	case (t.outcome == nack.Suppressed || t.outcome == nack.Blocked) && len(r) > 0:
		// Stopped, whichever account it waited on or was refused by, a
		// message is its home's (docs/contract.md, sections 7 and 8).
		ev.Account = r[0].Name
	case t.account != nil:
		ev.Account = t.account.Name
	case len(r) > 0:
		ev.Account = r[0].Name
	default: // no route, or not decoded: the class's first account, as before routes
		ev.Account = d.route[class][0].Name
	}
	ev.Action, ev.Err = d.act(ctx, class, r, m, ev)
	d.suppressedEnd(ctx, ev, msg.To)
	p.acted = true
	d.ended(m.ID, ev.Action)
	if p.flight != nil {
		d.land(msg.ID, p.flight, ev)
		p.flight = nil
	}
	ev.Finished = d.now()
	p.observed = true
	if d.deps.Observer != nil {
		d.deps.Observer.Observe(ev)
	}
}

// segments returns how many segments m's body takes; when home counts
// segments, a body of more than its MaxSegments is invalid: the start-up
// check sized the account's bound to it. (An overflow skips an account
// that could not take it.)
func (d *Dispatcher) segments(home *account, m Message) (int, error) {
	n, _ := provider.Segments(m.Body)
	if a := home; a.RateUnit == PerSegment && n > a.MaxSegments {
		return n, &InvalidError{Reason: "too_many_segments", Detail: fmt.Sprintf("body is %d segments, more than MAX_SEGMENTS (%d)", n, a.MaxSegments)}
	}
	return n, nil
}

// join makes this delivery of m the flight of its id in this process and
// returns it. When another delivery of the id is in flight here, join
// waits for its end instead (up to the class's max wait) and returns the
// outcome that end means for this one: Duplicate when the id was sent or
// dead-lettered, InFlightElsewhere when it was nacked or is still in
// flight. A delivery that ended unsent (expired, say, where this one may
// have a later deadline) answers nothing: this one then takes its place.
func (d *Dispatcher) join(ctx context.Context, class admission.Class, m Message) (*flight, nack.Outcome, error) {
	if d.expired(m) {
		return nil, nack.Expired, nil
	}
	var wait *time.Timer // made only when there is a flight to wait for
	defer func() {
		if wait != nil {
			wait.Stop()
		}
	}()
	for {
		f := &flight{done: make(chan struct{})}
		v, loaded := d.inflight.LoadOrStore(m.ID, f)
		if !loaded {
			return f, 0, nil
		}
		first := v.(*flight)
		if wait == nil {
			wait = time.NewTimer(d.maxWait(class))
		}
		select {
		case <-first.done:
			switch first.end {
			case endFinished:
				return nil, nack.Duplicate, nil
			case endNacked:
				return nil, nack.InFlightElsewhere, nil
			}
		case <-wait.C:
			return nil, nack.InFlightElsewhere, nil
		case <-ctx.Done():
			return nil, nack.ShuttingDown, ctx.Err()
		}
	}
}

// land ends id's flight f with what was done with the delivery, once that
// is done: a waiter must never ack on a first outcome whose action failed.
func (d *Dispatcher) land(id string, f *flight, ev Event) {
	switch {
	case ev.Action == nack.Nack:
		f.end = endNacked
	case ev.Outcome == nack.Sent || ev.Outcome == nack.Duplicate ||
		(ev.Outcome == nack.Rejected && ev.Action == nack.DeadLetter):
		f.end = endFinished
	default:
		f.end = endUnsent
	}
	d.inflight.Delete(id)
	close(f.done)
}

// act does what ev's outcome calls for with m (ack, nack or dead-letter)
// and returns the action taken, and ev's error with why when it differs:
// a message on its last delivery is dead-lettered rather than nacked, and a
// dead letter that cannot be published is nacked instead, and comes back.
// r is the message's route (home first; empty when it has none).
func (d *Dispatcher) act(ctx context.Context, class admission.Class, r []*account, m *pubsub.Message, ev Event) (nack.Action, error) {
	action, why := nack.ActionFor(ev.Outcome), ev.Err
	if action == nack.Nack && ev.Outcome != nack.ShuttingDown && d.cfg.MaxDeliveryAttempts > 0 &&
		ev.DeliveryAttempt >= d.cfg.MaxDeliveryAttempts {
		// The subscription would dead-letter it silently after this nack:
		// do it here, with a reason, and count it.
		why = fmt.Errorf("max_attempts: %d deliveries, last %s: %w", ev.DeliveryAttempt, ev.Outcome, ev.Err)
		action = nack.DeadLetter
	}
	switch action {
	case nack.Ack:
		m.Ack()
	case nack.Nack:
		m.Nack()
	case nack.DeadLetter:
		if err := d.deps.DeadLetter.DeadLetter(d.hard, m, class, nack.RejectReason(ev.Outcome, why)); err != nil {
			// A refusal's send-once record says "refused": the redelivery
			// is dead-lettered again, never re-sent.
			d.cfg.Logger.Error("dead-letter publish failed; message nacked, it comes back to be dead-lettered",
				"message_id", m.ID, "class", class, "err", err)
			m.Nack()
			return nack.Nack, why
		}
		if ev.Outcome == nack.Rejected && len(r) > 0 {
			if err := r[0].Claims.Finish(context.WithoutCancel(ctx), ev.ID, ledger.RecordRejected); err != nil {
				d.cfg.Logger.Warn("could not record a dead-lettered id; a redelivery would be dead-lettered again",
					"id", ev.ID, "err", err)
			}
		}
		m.Ack()
	}
	return action, why
}

// claimAndSend takes the id's send claim with a slot on r's home (one
// Redis call), sends, and keeps the id's record of what came of it (one
// more). A class that may fail over goes on to the next account of r when
// the home is under a penalty or degraded, or when its send failed and
// made it degraded (overflow.go).
func (d *Dispatcher) claimAndSend(ctx context.Context, class admission.Class, r []*account, m Message, segments, deliveryAttempt int) try {
	maxWait := d.maxWait(class)
	if !m.Deadline.IsZero() {
		maxWait = min(maxWait, m.Deadline.Sub(d.now()))
	}
	claim := admission.Claim{
		ID:    m.recordID(),
		Token: d.token(),
		TTL:   d.cfg.SendTimeout + 5*time.Second,
		// Without a dead-letter policy Pub/Sub counts no deliveries: the
		// record counts the sends, for the trace's resend count.
		Count:    deliveryAttempt == 0,
		Failover: len(r) > 1 && d.failsOver(r[0], class),
		Prefix:   destinationPrefix(m.To),
	}
	claim.Hedged = claim.Failover && d.hedges(class, r)
	home := r[0]
	start := time.Now()
	dec, err := d.admit(ctx, class, home, home.cost(segments), maxWait, claim)
	if err == nil && claim.Failover && overflows(dec) {
		return d.overflow(ctx, class, r, m, segments, deliveryAttempt, claim, maxWait-time.Since(start), dec)
	}
	t := try{decision: dec, account: home, home: home}
	switch {
	case errors.Is(err, errGateHeld):
		t.outcome, t.err = nack.Denied, fmt.Errorf("%w for the whole max wait (%v)", err, maxWait)
		return t
	case err != nil:
		t.outcome, t.err = nack.ShuttingDown, err
		return t
	case dec.Reason == admission.ReasonRecord:
		switch dec.Record.State {
		case ledger.Held:
			t.outcome = nack.InFlightElsewhere
		case ledger.Refused:
			t.outcome, t.err = nack.Rejected, refusedEarlier(dec.Record.RejectReason)
		default:
			t.outcome = nack.Duplicate
		}
		return t
	case dec.Reason == admission.ReasonNoRecord:
		t.outcome, t.err = nack.Denied, errors.New("send-once record unavailable: Redis is down or full; marketing waits for it")
		return t
	case dec.Allowed:
	case d.expired(m):
		t.outcome = nack.Expired
		return t
	default:
		t.outcome, t.err = nack.Denied, fmt.Errorf("no send slot within %v (%s, %s)", maxWait, dec.Source, dec.Reason)
		if dec.Reason == admission.ReasonAccount {
			d.holdPaused()
		}
		return t
	}
	if !dec.Claimed {
		// Without the record (Redis down) OTP is sent anyway: a duplicate
		// OTP beats a lost one.
		d.cfg.Logger.Warn("send-once record unavailable; sending without it", "class", class, "id", m.ID)
	}
	if claim.Hedged {
		var hedged bool
		if t, hedged = d.sendHedged(ctx, class, r, m, segments, deliveryAttempt, claim.Prefix, t); hedged {
			return t
		}
	} else {
		t = d.sendAdmitted(ctx, class, home, m, d.resendCount(deliveryAttempt, dec), claim.Failover, t, nil)
	}
	d.settle(ctx, class, m, dec, t)
	if claim.Failover && t.outcome == nack.Transient && dec.Claimed && home.Limiter.Health() == admission.Degraded {
		// This failure made the home degraded (or found it so): the next
		// account, at once, rather than a nack and a redelivery. After a
		// timeout the provider may have taken the message: a duplicate
		// OTP beats a lost one (docs/contract.md, promise 5).
		wait := d.maxWait(class)
		if !m.Deadline.IsZero() {
			wait = min(wait, m.Deadline.Sub(d.now()))
		}
		if wait > 0 {
			failed := admission.Decision{Source: admission.SourceRedis, Reason: admission.ReasonDegraded}
			return d.overflow(ctx, class, r, m, segments, deliveryAttempt, claim, wait, failed)
		}
	}
	return t
}

// token names one delivery attempt, unique across processes: the
// instance's name and a counter.
func (d *Dispatcher) token() string {
	var buf [64]byte
	b := append(buf[:0], d.instance...)
	b = append(b, '-')
	return string(strconv.AppendUint(b, d.seq.Add(1), 10))
}

// refusedEarlier is the provider's refusal of an earlier delivery of the
// same id, as its send-once record kept it.
type refusedEarlier string

func (r refusedEarlier) Error() string   { return string(r) }
func (r refusedEarlier) Permanent() bool { return true }

// errGateHeld is admit's answer to a message that found the first class
// holding the priority gate for its whole wait.
var errGateHeld = errors.New("the first class held the priority gate")

// admit passes the priority gate of class and waits up to maxWait for a
// slot and claim. The error is errGateHeld, or the delivery's context
// ending.
func (d *Dispatcher) admit(ctx context.Context, class admission.Class, a *account, cost int, maxWait time.Duration, claim admission.Claim) (admission.Decision, error) {
	start := time.Now() // the wait itself runs on real timers
	ln := d.laneOf[class]
	ln.waiting.Add(1)
	defer ln.waiting.Add(-1)
	pos := ln.pos
	if ln.policy.HoldsGate {
		// A waiting message of the first class holds the later classes
		// back until its slot is decided. Deferred: a panic in Admit must
		// not hold them for good. The later classes hold none: each waits
		// for its own ceiling too, and a backlog waiting for a middle
		// class's ceiling would hold the last class in every process and
		// waste the room its ceiling leaves. Redis keeps their order
		// across processes (each later class leaves the earlier ones a
		// part of the levels they share).
		defer d.gate.Enter(pos)()
	} else if d.gate.Ahead(pos) > 0 {
		gctx, cancel := context.WithTimeout(ctx, maxWait)
		err := d.gate.Wait(gctx, pos)
		cancel()
		switch {
		case ctx.Err() != nil:
			return admission.Decision{}, ctx.Err()
		case err != nil:
			return admission.Decision{}, errGateHeld
		}
	}
	actx, aend := d.deps.Tracer.Admission(ctx, class)
	dec, err := a.Limiter.Admit(actx, class, cost, maxWait-time.Since(start), claim)
	aend(dec, time.Since(start))
	return dec, err
}

// resendCount returns how many times the message was tried before this
// attempt: with a dead-letter policy, Pub/Sub's count of earlier deliveries
// (those that never reached the provider, denied or nacked, included);
// without one, the sends its record counted (none without Redis).
func (d *Dispatcher) resendCount(deliveryAttempt int, dec admission.Decision) int {
	if deliveryAttempt > 0 {
		return deliveryAttempt - 1
	}
	return dec.Attempts
}

func (d *Dispatcher) expired(m Message) bool {
	return !m.Deadline.IsZero() && !d.now().Before(m.Deadline)
}

func (d *Dispatcher) maxWait(class admission.Class) time.Duration {
	return d.laneOf[class].maxWait
}
