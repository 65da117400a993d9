package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/admission"
	"smsdispatcher/nack"
	"smsdispatcher/provider"
)

// The per-message path, in the order of docs/design.md: handle decodes,
// joins the id's flight in this process, passes the priority gate and
// waits for a slot, claiming the id across processes in the same Redis
// call (claimAndSend), sends, judges the answer, settles the id's record
// and the send's lease in one more call, acts on the Pub/Sub message
// (act) and lands the flight. Each step takes values and returns what it
// came to; only handle writes the Event.

// try is what one delivery's attempt came to, for its Event.
type try struct {
	account  *account // the account that admitted it, or the class's home
	outcome  nack.Outcome
	err      error
	decision admission.Decision // the last admission decision; zero if admission was not reached
	admitted time.Time          // when a slot was granted; zero if none
	resends  int                // provider attempts before this one, if it reached the provider
	receipt  provider.Receipt   // the provider's acceptance, when sent
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
	msg, err := Decode(m.Data, m.ID)
	if err == nil {
		ev.ID = msg.ID
		ev.Segments, err = d.segments(class, msg)
	}
	if err != nil {
		t = try{outcome: nack.Invalid, err: err}
	} else {
		p.id = msg.ID
		p.flight, t.outcome, t.err = d.join(ctx, class, msg)
		if p.flight != nil {
			t = d.claimAndSend(ctx, class, msg, ev.Segments, ev.DeliveryAttempt)
		}
	}
	ev.Outcome, ev.Err, ev.Decision, ev.Admitted, ev.ResendCount = t.outcome, t.err, t.decision, t.admitted, t.resends
	ev.ProviderID, ev.Account, ev.Sender = t.receipt.ID, d.route[class][0].Name, t.decision.Sender
	if t.account != nil {
		ev.Account = t.account.Name
	}
	ev.Action, ev.Err = d.act(ctx, class, m, ev)
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

// segments returns how many segments m's body takes; when the home
// account of class counts segments, a body of more than its MaxSegments is
// invalid: the start-up check sized the account's bound to it. (An
// overflow skips an account that could not take it.)
func (d *Dispatcher) segments(class admission.Class, m Message) (int, error) {
	n, _ := provider.Segments(m.Body)
	if a := d.route[class][0]; a.RateUnit == PerSegment && n > a.MaxSegments {
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
func (d *Dispatcher) act(ctx context.Context, class admission.Class, m *pubsub.Message, ev Event) (nack.Action, error) {
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
		if ev.Outcome == nack.Rejected {
			if err := d.route[class][0].Claims.Finish(context.WithoutCancel(ctx), ev.ID, admission.RecordRejected); err != nil {
				d.cfg.Logger.Warn("could not record a dead-lettered id; a redelivery would be dead-lettered again",
					"id", ev.ID, "err", err)
			}
		}
		m.Ack()
	}
	return action, why
}

// claimAndSend takes the id's send claim with a slot (one Redis call),
// sends, and keeps the id's record of what came of it (one more).
func (d *Dispatcher) claimAndSend(ctx context.Context, class admission.Class, m Message, segments, deliveryAttempt int) try {
	maxWait := d.maxWait(class)
	if !m.Deadline.IsZero() {
		maxWait = min(maxWait, m.Deadline.Sub(d.now()))
	}
	claim := admission.Claim{
		ID:    m.ID,
		Token: d.token(),
		TTL:   d.cfg.SendTimeout + 5*time.Second,
		// Without a dead-letter policy Pub/Sub counts no deliveries: the
		// record counts the sends, for the trace's resend count.
		Count: deliveryAttempt == 0,
	}
	home := d.route[class][0]
	start := time.Now()
	dec, err := d.admit(ctx, class, home, home.cost(segments), maxWait, claim)
	if err == nil && overflows(class, dec) && len(d.route[class]) > 1 {
		return d.overflow(ctx, class, m, segments, deliveryAttempt, claim, maxWait-time.Since(start), dec)
	}
	t := try{decision: dec, account: home}
	switch {
	case errors.Is(err, errGateHeld):
		t.outcome, t.err = nack.Denied, fmt.Errorf("%w for the whole max wait (%v)", err, maxWait)
		return t
	case err != nil:
		t.outcome, t.err = nack.ShuttingDown, err
		return t
	case dec.Reason == admission.ReasonRecord:
		switch dec.Record.State {
		case admission.Held:
			t.outcome = nack.InFlightElsewhere
		case admission.Refused:
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
	t = d.sendAdmitted(ctx, class, home, m, d.resendCount(deliveryAttempt, dec), t)
	d.settle(ctx, m.ID, dec, t)
	return t
}

// sendAdmitted sends m on account a, which admitted it (t.decision), and
// returns what came of it; the caller settles.
func (d *Dispatcher) sendAdmitted(ctx context.Context, class admission.Class, a *account, m Message, resends int, t try) try {
	t.admitted, t.account = d.now(), a
	if d.expired(m) {
		t.outcome = nack.Expired // the slot goes unused: cheaper than a send nobody waits for
		return t
	}
	var sendErr error
	version := a.credentialVersion()
	t.resends = resends
	t.receipt, sendErr = d.send(ctx, a, m, t.decision.Sender, t.resends)
	t.outcome, t.err = d.judge(ctx, class, a, m, version, sendErr)
	return t
}

// overflow sends an OTP that its home account could not admit because of
// a penalty (denied) on the next account serving OTP that admits it
// within wait. The id's record stays with the home account: it is claimed
// there apart (one more call, on the overflow path only) and settled
// there after the send; the other account's admission takes a slot only.
func (d *Dispatcher) overflow(ctx context.Context, class admission.Class, m Message, segments, deliveryAttempt int, claim admission.Claim, wait time.Duration, denied admission.Decision) try {
	home := d.route[class][0]
	t := try{decision: denied, account: home, outcome: nack.Denied,
		err: fmt.Errorf("no send slot within the max wait (%s, %s) on any account", denied.Source, denied.Reason)}
	start := time.Now()
	// The claim outlives the wait for the other account's slot, then the
	// send, as a claim taken with the slot does.
	rec, cerr := home.Claims.Claim(ctx, m.ID, claim.Token, wait+claim.TTL)
	switch {
	case cerr != nil:
		// Without the record (Redis down) OTP is sent anyway. (A shutdown
		// meanwhile ends the admission below, and the claim, if it was
		// taken, is given back.)
		d.cfg.Logger.Warn("send-once record unavailable; sending without it", "class", class, "id", m.ID)
	case rec.State == admission.Held:
		t.outcome, t.err = nack.InFlightElsewhere, nil
		return t
	case rec.State == admission.Refused:
		t.outcome, t.err = nack.Rejected, refusedEarlier(rec.RejectReason)
		return t
	case rec.State != admission.Claimed:
		t.outcome, t.err = nack.Duplicate, nil
		return t
	}
	// A claim whose reply was lost may be held: settled all the same
	// (Finish writes the record whatever holds it; Release gives back only
	// this token's claim).
	claimed := cerr == nil || !errors.Is(cerr, admission.ErrRedisDown)
	for _, a := range d.route[class][1:] {
		if a.RateUnit == PerSegment && segments > a.MaxSegments {
			continue // its start-up check did not allow for a body this long
		}
		dec, err := d.admit(ctx, class, a, a.cost(segments), wait-time.Since(start), admission.Claim{})
		if err != nil {
			t.outcome, t.err = nack.ShuttingDown, err
			break
		}
		t.decision = dec
		if !dec.Allowed {
			if overflows(class, dec) {
				continue
			}
			t.err = fmt.Errorf("no send slot within the max wait on account %s (%s, %s)", a.Name, dec.Source, dec.Reason)
			break
		}
		t = d.sendAdmitted(ctx, class, a, m, d.resendCount(deliveryAttempt, dec), t)
		// No claim on this account: the send's record (written at home
		// below) only counts the send here, with the lease's end.
		record := ""
		if t.outcome == nack.Sent {
			record = admission.SentRecord(t.receipt.ID)
		}
		if err := a.Limiter.Settle(context.WithoutCancel(ctx), dec, record); err != nil {
			d.cfg.Logger.Warn("could not end a send's lease; it runs out", "account", a.Name, "err", err)
		}
		break
	}
	if t.outcome == nack.Denied && t.decision.Reason == admission.ReasonAccount {
		d.holdPaused()
	}
	if claimed {
		d.settleApart(ctx, home, m.ID, claim.Token, t)
	}
	return t
}

// settleApart keeps the id's record on the home account after an
// overflow: what settle writes in the admission's call, in one call of
// its own.
func (d *Dispatcher) settleApart(ctx context.Context, home *account, id, token string, t try) {
	ctx = context.WithoutCancel(ctx)
	var err error
	switch t.outcome {
	case nack.Sent:
		err = home.Claims.Finish(ctx, id, admission.SentRecord(t.receipt.ID))
	case nack.Rejected:
		err = home.Claims.Refuse(ctx, id, t.err.Error())
	default:
		err = home.Claims.Release(ctx, id, token)
	}
	if err != nil {
		d.cfg.Logger.Warn("could not keep an overflowed id's record", "id", id, "outcome", t.outcome, "err", err)
	}
}

// token names one delivery attempt, unique across processes: the
// instance's name and a counter.
func (d *Dispatcher) token() string {
	var buf [64]byte
	b := append(buf[:0], d.instance...)
	b = append(b, '-')
	return string(strconv.AppendUint(b, d.seq.Add(1), 10))
}

// settle keeps the id's record of what came of its send and ends the
// send's lease, in one call that outlives the delivery's context
// (shutdown, Grace): it bounds itself, and with Redis known down it does
// not wait.
func (d *Dispatcher) settle(ctx context.Context, id string, dec admission.Decision, t try) {
	var record, what string
	switch t.outcome {
	case nack.Sent:
		record, what = admission.SentRecord(t.receipt.ID), "could not record a sent id; a redelivery could send it again"
	case nack.Rejected:
		// Recorded before the dead letter is published: if that fails, the
		// redelivery is dead-lettered without a second send.
		record, what = admission.RefusedRecord(t.err.Error()), "could not record a refused id; if its dead letter fails, a redelivery sends it again"
	default: // it will be retried: let the next delivery claim it at once
		what = "could not give back a send claim; the retry waits for it to expire"
	}
	if err := t.account.Limiter.Settle(context.WithoutCancel(ctx), dec, record); err != nil {
		d.cfg.Logger.Warn(what, "id", id, "err", err)
	}
}

// refusedEarlier is the provider's refusal of an earlier delivery of the
// same id, as its send-once record kept it.
type refusedEarlier string

func (r refusedEarlier) Error() string   { return string(r) }
func (r refusedEarlier) Permanent() bool { return true }

// errGateHeld is admit's answer to marketing that found OTP holding the
// priority gate for its whole wait.
var errGateHeld = errors.New("OTP held the priority gate")

// admit passes the priority gate of class and waits up to maxWait for a
// slot and claim. The error is errGateHeld, or the delivery's context
// ending.
func (d *Dispatcher) admit(ctx context.Context, class admission.Class, a *account, cost int, maxWait time.Duration, claim admission.Claim) (admission.Decision, error) {
	start := time.Now() // the wait itself runs on real timers
	release := func() {}
	if class == admission.OTP {
		// A waiting OTP holds marketing back until its slot is decided.
		release = d.gate.EnterOTP()
	} else if d.gate.Waiting() > 0 {
		gctx, cancel := context.WithTimeout(ctx, maxWait)
		err := d.gate.WaitMarketing(gctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return admission.Decision{}, ctx.Err()
		case err != nil:
			return admission.Decision{}, errGateHeld
		}
	}
	// Deferred: a panic in Admit must not leave marketing held for good.
	defer release()
	actx, aend := d.deps.Tracer.Admission(ctx, class)
	dec, err := a.Limiter.Admit(actx, class, cost, maxWait-time.Since(start), claim)
	aend(dec, time.Since(start))
	return dec, err
}

// send sends m once, resends being the provider attempts before this one
// (the trace's resend count), and returns the provider's answer. The send
// keeps the delivery's values (its span) but not its cancellation: a
// shutdown stops waiting, not sending; Grace ends sends (d.hard).
func (d *Dispatcher) send(ctx context.Context, a *account, m Message, from string, resends int) (provider.Receipt, error) {
	timeout := d.cfg.SendTimeout
	if !m.Deadline.IsZero() {
		timeout = min(timeout, m.Deadline.Sub(d.now()))
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	stop := context.AfterFunc(d.hard, cancel)
	defer stop()
	return a.Sender.Send(provider.WithResendCount(sctx, resends),
		provider.Message{ID: m.ID, To: m.To, Body: m.Body, Deadline: m.Deadline, From: from})
}

// judge turns the provider's answer into the delivery's outcome and does
// what it asks of the process: a success refills the retry budget, a 429
// stops every process for its Retry-After, an account-level failure stops
// every process for AccountPause, a transient failure spends the budget
// and, once it is spent, pauses the class's pulls. A send cut off by its
// own deadline or by the shutdown's Grace is not the provider's failure
// and charges nothing. version is the credential's when the send began.
func (d *Dispatcher) judge(ctx context.Context, class admission.Class, a *account, m Message, version uint64, err error) (nack.Outcome, error) {
	v := nack.Judge(err)
	switch {
	case v.Outcome == nack.Transient && d.expired(m):
		return nack.Expired, nil
	case v.Outcome == nack.Transient && d.hard.Err() != nil:
		return nack.ShuttingDown, err
	}
	switch v.Outcome {
	case nack.Sent:
		d.budget.OnSuccess()
		d.lanes[class].succeeded()
	case nack.Throttled:
		d.budget.OnFailure() // the penalty stops sends; a spent budget also stops pulls
		if terr := a.Limiter.ReportThrottled(context.WithoutCancel(ctx), v.RetryAfter); terr != nil {
			d.cfg.Logger.Warn("could not share a 429 penalty; this process honours it alone", "account", a.Name, "retry_after", v.RetryAfter, "err", terr)
		}
	case nack.AccountFailure:
		d.accountFailed(ctx, a, version, err)
		d.holdPaused()
	case nack.Transient:
		d.budget.OnFailure()
		if !d.budget.Allow() {
			d.lanes[class].pause()
		}
	}
	return v.Outcome, err
}

// holdPaused stops the pulls of each class whose every account is paused,
// until a pause is over.
func (d *Dispatcher) holdPaused() {
	for class, l := range d.lanes {
		if _, _, ok := d.classPause(admission.Class(class)); ok {
			l.hold()
		}
	}
}

// accountLogEvery spaces the error log of account-level failures: one line
// a minute per process says it all; the metrics count every one.
const accountLogEvery = time.Minute

// accountFailed stops every process on the account for AccountPause: the
// provider refused the account, and every message would meet the same
// answer. A send made with a credential that has changed since (read again
// by the adapter or the watcher) says nothing of the new one: no pause.
func (d *Dispatcher) accountFailed(ctx context.Context, a *account, version uint64, err error) {
	if a.Credentials != nil {
		if _, rerr := a.Credentials.Reload(); rerr == nil && a.Credentials.Version() != version {
			d.cfg.Logger.Info("the provider refused a credential that has since changed; the next send uses the new one")
			return
		}
	}
	why := accountWhy(err)
	perr := a.Limiter.ReportAccountFailure(context.WithoutCancel(ctx), d.cfg.AccountPause, why)
	if perr == nil && a.Credentials != nil && a.Credentials.Version() != version {
		// The credential changed while this refusal was on its way, and
		// the watcher may have ended the pause just before this report
		// began it again: end it, the next send uses the new credential.
		if rerr := a.Limiter.ResumeAccount(context.WithoutCancel(ctx)); rerr == nil {
			return
		}
	}
	now := time.Now().UnixNano()
	last := a.logged.Load()
	if now-last < int64(accountLogEvery) || !a.logged.CompareAndSwap(last, now) {
		return
	}
	d.cfg.Logger.Error("the provider refused the account: sending stopped on it; messages wait (nacked), none is dead-lettered; fix the credential or the account",
		"account", a.Name, "reason", why, "pause", d.cfg.AccountPause, "err", err, "pause_shared", perr == nil)
}

// accountWhy is the short reason kept with an account pause: the
// provider's status and code, never its message text.
func accountWhy(err error) string {
	var pe *provider.Error
	if !errors.As(err, &pe) {
		return "account"
	}
	why := "status " + strconv.Itoa(pe.Status)
	if pe.Provider != "" {
		why = pe.Provider + " " + why
	}
	if pe.Code != "" {
		why += " code " + pe.Code
	}
	return why
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
	if class == admission.OTP {
		return d.cfg.OTPMaxWait
	}
	return d.cfg.MarketingMaxWait
}
