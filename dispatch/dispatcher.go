package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/admission"
	"smsdispatcher/nack"
	"smsdispatcher/priority"
	"smsdispatcher/provider"
)

// Defaults of Config.
const (
	DefaultOTPMaxWait       = time.Second
	DefaultMarketingMaxWait = 8 * time.Second
	DefaultSendTimeout      = 10 * time.Second
	DefaultGrace            = 10 * time.Second
	DefaultBackoffInitial   = 500 * time.Millisecond
	DefaultBackoffMax       = 2 * time.Second
)

// Config is a Dispatcher's configuration. A zero field means its default.
type Config struct {
	// OTPMaxWait and MarketingMaxWait bound how long a message waits for a
	// send slot before it is nacked. Defaults 1s and 8s.
	OTPMaxWait, MarketingMaxWait time.Duration
	// SendTimeout bounds one provider call; a message's deadline bounds it
	// further. Default 10s.
	SendTimeout time.Duration
	// Grace is how long sends in flight may take to finish after Run's
	// context ends. Default 10s.
	Grace time.Duration
	// HoldOTPWithoutRedis nacks OTP while the send-once record cannot be
	// read. By default OTP is sent anyway: a duplicate OTP beats a lost one.
	HoldOTPWithoutRedis bool
	// SendMarketingWithoutRedis sends marketing while the send-once record
	// cannot be read. By default marketing is nacked until Redis is back.
	SendMarketingWithoutRedis bool
	// MaxDeliveryAttempts, if positive, dead-letters (with reject_reason
	// max_attempts) a message whose Pub/Sub delivery attempt reaches it
	// instead of nacking it once more. Set it to the subscription's
	// dead-letter policy, which would otherwise forward it silently.
	MaxDeliveryAttempts int
	// OTPOutstanding and MarketingOutstanding cap the messages a lane holds
	// (Pub/Sub flow control). Zero means the client's default.
	OTPOutstanding, MarketingOutstanding int
	// BackoffInitial and BackoffMax shape the pause of a lane whose retry
	// budget is spent. Defaults 500ms and 2s: a pod whose sends all fail
	// probes again within 2s, so it is sending again within about that of
	// the provider's recovery. The limiter is what bounds an outage's load:
	// every try, first or retry, takes a slot; the pauses cut it further,
	// to about one probe a second per pod and class.
	BackoffInitial, BackoffMax time.Duration
	// Logger; if nil, slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.OTPMaxWait, DefaultOTPMaxWait)
	def(&c.MarketingMaxWait, DefaultMarketingMaxWait)
	def(&c.SendTimeout, DefaultSendTimeout)
	def(&c.Grace, DefaultGrace)
	def(&c.BackoffInitial, DefaultBackoffInitial)
	def(&c.BackoffMax, DefaultBackoffMax)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Deps are what a Dispatcher works with. All are required but Observer.
type Deps struct {
	OTP, Marketing *pubsub.Subscriber
	Limiter        Limiter
	Claims         Claimer
	Sender         Sender
	DeadLetter     DeadLetterer
	Observer       Observer // if nil, nothing is observed
	Tracer         Tracer   // if nil, no spans
	// Attempts counts provider attempts per id for messages whose delivery
	// attempt Pub/Sub does not report (no dead-letter policy). If nil, such
	// messages carry no resend count.
	Attempts AttemptCounter
}

// Event is what happened to one delivery of one message.
type Event struct {
	Class           admission.Class
	Outcome         nack.Outcome
	Action          nack.Action        // what was done with the Pub/Sub message
	MessageID       string             // Pub/Sub message ID
	ID              string             // idempotency key; empty if the data did not decode
	DeliveryAttempt int                // Pub/Sub's count, 0 when the subscription has no dead-letter policy
	PublishTime     time.Time          // when the producer published
	Received        time.Time          // when this delivery reached the dispatcher
	Admitted        time.Time          // when a slot was granted; zero if none
	Decision        admission.Decision // the last admission decision; zero if admission was not reached
	ResendCount     int                // provider attempts of this message before this one, if it reached the provider
	Finished        time.Time
	Err             error // why, for outcomes other than sent; never holds a phone number
}

// Observer is told of every delivery's end. Implementations must be safe
// for concurrent use and must not block.
type Observer interface {
	Observe(Event)
}

// A Dispatcher takes messages from both subscriptions to the provider. Run
// it once.
type Dispatcher struct {
	cfg      Config
	deps     Deps
	gate     priority.Gate
	budget   *nack.Budget
	instance string // prefix of claim tokens: unique per process
	seq      atomic.Uint64

	inflight sync.Map // id -> *flight: duplicates inside the process collapse

	lanes [2]*lane // by class; built by New

	// Set once by Run before any lane starts.
	hard context.Context // sends in flight; ends Grace after Run's context
}

// flight is one id being handled in this process: other deliveries of the
// id wait for its end (join).
type flight struct {
	done chan struct{}
	end  flightEnd // written before done is closed
}

// flightEnd is how a flight ended, as the deliveries waiting on it see it.
type flightEnd int

const (
	endUnsent   flightEnd = iota // acked unsent (expired, ...): no answer for a waiter
	endFinished                  // sent, or refused and dead-lettered: the id is done
	endNacked                    // it comes back
)

// New returns a Dispatcher.
func New(cfg Config, deps Deps) (*Dispatcher, error) {
	if deps.OTP == nil || deps.Marketing == nil || deps.Limiter == nil || deps.Claims == nil ||
		deps.Sender == nil || deps.DeadLetter == nil {
		return nil, errors.New("dispatch: Deps needs OTP, Marketing, Limiter, Claims, Sender and DeadLetter")
	}
	var b [8]byte
	rand.Read(b[:])
	if deps.Tracer == nil {
		deps.Tracer = noTracer{}
	}
	d := &Dispatcher{
		cfg:      cfg.withDefaults(),
		deps:     deps,
		budget:   nack.NewBudget(10, 0.1),
		instance: hex.EncodeToString(b[:]),
	}
	d.lanes = [2]*lane{
		newLane(d, admission.OTP, deps.OTP, d.cfg.OTPOutstanding),
		newLane(d, admission.Marketing, deps.Marketing, d.cfg.MarketingOutstanding),
	}
	return d, nil
}

// Ready reports whether both lanes are receiving.
func (d *Dispatcher) Ready() bool {
	for _, l := range d.lanes {
		if l == nil || !l.receiving.Load() {
			return false
		}
	}
	return true
}

// BudgetTokens returns the retry budget's tokens, for metrics.
func (d *Dispatcher) BudgetTokens() float64 { return d.budget.Tokens() }

// OTPWaiting returns how many OTP messages wait for a send slot, for metrics.
func (d *Dispatcher) OTPWaiting() int { return d.gate.Waiting() }

// Run pulls both classes until ctx ends, then stops pulling, nacks every
// message still waiting for a slot, lets sends in flight finish within
// Config.Grace, and returns once every callback has returned.
func (d *Dispatcher) Run(ctx context.Context) error {
	hard, cancelHard := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHard()
	stopGrace := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(d.cfg.Grace, cancelHard)
		context.AfterFunc(hard, func() { t.Stop() })
	})
	defer stopGrace()
	d.hard = hard
	var wg sync.WaitGroup
	for _, l := range d.lanes {
		wg.Go(func() { l.run(ctx) })
	}
	wg.Wait() // Receive returns once its callbacks have
	return nil
}

// handle is the Receive callback of class: it takes m to one end.
func (d *Dispatcher) handle(ctx context.Context, class admission.Class, subscription string, m *pubsub.Message) {
	ev := Event{Class: class, MessageID: m.ID, PublishTime: m.PublishTime, Received: time.Now()}
	ctx, end := d.deps.Tracer.Delivery(ctx, subscription, m, class)
	defer func() { end(ev) }()
	if m.DeliveryAttempt != nil {
		ev.DeliveryAttempt = *m.DeliveryAttempt
	}

	msg, err := Decode(m.Data, m.ID)
	if err != nil {
		ev.Outcome, ev.Err = nack.Invalid, err
		ev.Action = d.act(ctx, class, m, &ev)
	} else {
		ev.ID = msg.ID
		f, out, err := d.join(ctx, class, msg)
		ev.Outcome, ev.Err = out, err
		if f != nil {
			ev.Outcome, ev.Err = d.claimAndSend(ctx, class, msg, &ev)
		}
		ev.Action = d.act(ctx, class, m, &ev)
		if f != nil {
			d.land(msg.ID, f, ev)
		}
	}
	ev.Finished = time.Now()
	if d.deps.Observer != nil {
		d.deps.Observer.Observe(ev)
	}
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
	wait := time.NewTimer(d.maxWait(class))
	defer wait.Stop()
	for {
		f := &flight{done: make(chan struct{})}
		v, loaded := d.inflight.LoadOrStore(m.ID, f)
		if !loaded {
			return f, 0, nil
		}
		first := v.(*flight)
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
// and returns the action taken: a dead letter that cannot be published
// is nacked instead, and comes back.
func (d *Dispatcher) act(ctx context.Context, class admission.Class, m *pubsub.Message, ev *Event) nack.Action {
	action := nack.ActionFor(ev.Outcome)
	if action == nack.Nack && ev.Outcome != nack.ShuttingDown && d.cfg.MaxDeliveryAttempts > 0 &&
		ev.DeliveryAttempt >= d.cfg.MaxDeliveryAttempts {
		// The subscription would dead-letter it silently after this nack:
		// do it here, with a reason, and count it.
		ev.Err = fmt.Errorf("max_attempts: %d deliveries, last %s: %w", ev.DeliveryAttempt, ev.Outcome, ev.Err)
		action = nack.DeadLetter
	}
	switch action {
	case nack.Ack:
		m.Ack()
	case nack.Nack:
		m.Nack()
	case nack.DeadLetter:
		if err := d.deps.DeadLetter.DeadLetter(d.hard, m, class, nack.RejectReason(ev.Outcome, ev.Err)); err != nil {
			// A refusal's send-once record says "refused": the redelivery
			// is dead-lettered again, never re-sent.
			d.cfg.Logger.Error("dead-letter publish failed; message nacked, it comes back to be dead-lettered",
				"message_id", m.ID, "class", class, "err", err)
			m.Nack()
			return nack.Nack
		}
		if ev.Outcome == nack.Rejected {
			if err := d.deps.Claims.Finish(context.WithoutCancel(ctx), ev.ID, admission.RecordRejected); err != nil {
				d.cfg.Logger.Warn("could not record a dead-lettered id; a redelivery would be dead-lettered again",
					"id", ev.ID, "err", err)
			}
		}
		m.Ack()
	}
	return action
}

// resendCount returns how many times the message reached the provider
// before: Pub/Sub's count of earlier deliveries when the subscription has a
// dead-letter policy, else this service's count of attempts for the id.
func (d *Dispatcher) resendCount(ctx context.Context, ev *Event, id string) int {
	if ev.DeliveryAttempt > 0 {
		return ev.DeliveryAttempt - 1
	}
	if d.deps.Attempts == nil {
		return 0
	}
	n, err := d.deps.Attempts.CountAttempt(ctx, id)
	if err != nil {
		d.cfg.Logger.Debug("attempt count unavailable", "id", id, "err", err)
		return 0
	}
	return n - 1
}

func (d *Dispatcher) expired(m Message) bool {
	return !m.Deadline.IsZero() && !time.Now().Before(m.Deadline)
}

func (d *Dispatcher) maxWait(class admission.Class) time.Duration {
	if class == admission.OTP {
		return d.cfg.OTPMaxWait
	}
	return d.cfg.MarketingMaxWait
}

// claimAndSend takes the id's send claim, a slot and sends.
func (d *Dispatcher) claimAndSend(ctx context.Context, class admission.Class, m Message, ev *Event) (nack.Outcome, error) {
	token := fmt.Sprintf("%s-%d", d.instance, d.seq.Add(1))
	ttl := d.maxWait(class) + d.cfg.SendTimeout + 5*time.Second
	// The record is kept after the delivery's context ends (shutdown,
	// Grace): each call bounds itself, and with Redis known down none waits.
	after := context.WithoutCancel(ctx)
	rec, err := d.deps.Claims.Claim(ctx, m.ID, token, ttl)
	claimed := err == nil
	if err != nil {
		if !errors.Is(err, admission.ErrRedisDown) {
			// A claim that failed may still have landed (a timeout, or
			// this delivery giving up): give it back so that it does not
			// hold the id's redeliveries, here or elsewhere, until it
			// expires.
			if rerr := d.deps.Claims.Release(after, m.ID, token); rerr != nil {
				d.cfg.Logger.Debug("could not release a claim that may not exist", "id", m.ID, "err", rerr)
			}
		}
		if ctx.Err() != nil {
			return nack.ShuttingDown, ctx.Err()
		}
		sendAnyway := (class == admission.OTP && !d.cfg.HoldOTPWithoutRedis) ||
			(class == admission.Marketing && d.cfg.SendMarketingWithoutRedis)
		if !sendAnyway {
			return nack.Denied, fmt.Errorf("send-once record unavailable: %w", err)
		}
		d.cfg.Logger.Warn("send-once record unavailable; sending without it", "class", class, "id", m.ID, "err", err)
	}
	switch rec.State {
	case admission.Held:
		return nack.InFlightElsewhere, nil
	case admission.Finished:
		return nack.Duplicate, nil
	case admission.Refused:
		return nack.Rejected, refusedEarlier(rec.RejectReason)
	}

	out, err := d.admitAndSend(ctx, class, m, ev)
	switch {
	case !claimed:
	case out == nack.Sent:
		if ferr := d.deps.Claims.Finish(after, m.ID, admission.RecordSent); ferr != nil {
			d.cfg.Logger.Warn("could not record a sent id; a redelivery could send it again", "id", m.ID, "err", ferr)
		}
	case out == nack.Rejected:
		// Recorded before the dead letter is published: if that fails, the
		// redelivery is dead-lettered without a second send.
		if ferr := d.deps.Claims.Refuse(after, m.ID, err.Error()); ferr != nil {
			d.cfg.Logger.Warn("could not record a refused id; if its dead letter fails, a redelivery sends it again", "id", m.ID, "err", ferr)
		}
	default: // it will be retried: let the next delivery claim it at once
		if rerr := d.deps.Claims.Release(after, m.ID, token); rerr != nil {
			d.cfg.Logger.Warn("could not release a send claim; the retry waits for it to expire", "id", m.ID, "err", rerr)
		}
	}
	return out, err
}

// refusedEarlier is the provider's refusal of an earlier delivery of the
// same id, as its send-once record kept it.
type refusedEarlier string

func (r refusedEarlier) Error() string   { return string(r) }
func (r refusedEarlier) Permanent() bool { return true }

// admitAndSend passes the priority gate, waits for a slot and sends.
func (d *Dispatcher) admitAndSend(ctx context.Context, class admission.Class, m Message, ev *Event) (nack.Outcome, error) {
	maxWait := d.maxWait(class)
	if !m.Deadline.IsZero() {
		maxWait = min(maxWait, time.Until(m.Deadline))
	}
	start := time.Now()
	release := func() {}
	if class == admission.OTP {
		// A waiting OTP holds marketing back until its slot is decided.
		release = d.gate.EnterOTP()
	} else {
		gctx, cancel := context.WithTimeout(ctx, maxWait)
		err := d.gate.WaitMarketing(gctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nack.ShuttingDown, ctx.Err()
		case err != nil:
			return nack.Denied, fmt.Errorf("OTP held the priority gate for the whole max wait (%v)", maxWait)
		}
	}
	actx, aend := d.deps.Tracer.Admission(ctx, class)
	dec, err := d.deps.Limiter.Acquire(actx, class, maxWait-time.Since(start))
	release()
	aend(dec, time.Since(start))
	ev.Decision = dec
	if err != nil {
		return nack.ShuttingDown, err
	}
	if !dec.Allowed {
		if d.expired(m) {
			return nack.Expired, nil
		}
		return nack.Denied, fmt.Errorf("no send slot within %v (%s, %s)", maxWait, dec.Source, dec.Reason)
	}
	ev.Admitted = time.Now()
	after := context.WithoutCancel(ctx) // bookkeeping outlives Grace; each call bounds itself
	defer func() {
		if err := d.deps.Limiter.Release(after, dec.Lease); err != nil {
			d.cfg.Logger.Warn("could not release an in-flight lease; it expires by itself", "err", err)
		}
	}()
	if d.expired(m) {
		return nack.Expired, nil // the slot goes unused: cheaper than a send nobody waits for
	}

	timeout := d.cfg.SendTimeout
	if !m.Deadline.IsZero() {
		timeout = min(timeout, time.Until(m.Deadline))
	}
	// The send keeps the delivery's values (its span) but not its
	// cancellation: a shutdown stops waiting, not sending; Grace ends
	// sends (d.hard).
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	stop := context.AfterFunc(d.hard, cancel)
	ev.ResendCount = d.resendCount(sctx, ev, m.ID)
	err = d.deps.Sender.Send(provider.WithResendCount(sctx, ev.ResendCount), provider.Message{ID: m.ID, To: m.To, Body: m.Body})
	stop()
	cancel()

	out := nack.Classify(err)
	switch {
	case out == nack.Transient && d.expired(m):
		return nack.Expired, nil // cut off by its own deadline: not the provider's failure
	case out == nack.Transient && d.hard.Err() != nil:
		// Cut off by the shutdown's Grace: not the provider's failure
		// either, so it charges no retry budget and pauses no lane.
		return nack.ShuttingDown, err
	}
	switch out {
	case nack.Sent:
		d.budget.OnSuccess()
		d.lanes[class].succeeded()
	case nack.Throttled:
		d.budget.OnFailure() // the penalty stops sends; a spent budget also stops pulls
		retryAfter := time.Second
		var pe *provider.Error
		if errors.As(err, &pe) {
			retryAfter = pe.RetryAfter
		}
		if terr := d.deps.Limiter.ReportThrottled(after, retryAfter); terr != nil {
			d.cfg.Logger.Warn("could not share a 429 penalty; this process honours it alone", "retry_after", retryAfter, "err", terr)
		}
	case nack.Transient:
		d.budget.OnFailure()
		if !d.budget.Allow() {
			d.lanes[class].pause()
		}
	}
	return out, err
}
