package dispatch

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/admission"
	"smsdispatcher/config/policy"
	"smsdispatcher/nack"
)

// lane pulls one class. Its Receive is restarted after a pause (retry
// budget spent) or an error, until the Dispatcher's context ends.
type lane struct {
	d         *Dispatcher
	class     admission.Class
	policy    policy.Class  // Lane.Policy: the class's rules
	pos       int           // its place in the priority order: 0 first
	maxWait   time.Duration // Lane.MaxWait
	sub       *pubsub.Subscriber
	receiving atomic.Bool
	waiting   atomic.Int32 // messages deciding their slot (Dispatcher.Waiting)
	// slots, when the client reads ahead, caps the messages in the
	// pipeline at the lane's outstanding; nil otherwise.
	slots chan struct{}

	mu sync.Mutex
	// Guarded by mu.
	cancel  context.CancelFunc // ends the current Receive
	paused  bool               // the current Receive was ended by pause
	held    bool               // ... by hold: the account is paused
	backoff *nack.FullJitter   // pauses of a spent retry budget
	errWait *nack.FullJitter   // restarts after Receive failed (IAM, a missing subscription)
}

// Receive errors are not the provider failing but our setup: retried more
// slowly than a budget pause, so that a wrong subscription does not log an
// error and call Pub/Sub every second per lane and pod.
const (
	receiveRetryInitial = time.Second
	receiveRetryMax     = 30 * time.Second
)

// newLane caps the messages in hand at outstanding, and their data at
// outstanding × MaxDataBytes: what Pub/Sub may send the client (its flow
// control, which the service applies on its side too). With Config.ReadAhead above it, for a server that ignores flow
// control (an emulator), the client reads that many instead and
// outstanding slots cap the pipeline: the client leases and extends only
// what it has read, and a message the server sent that waits unread in the
// stream has the stream's lease only (10s, below), runs out and is
// delivered again, however soon this process would have sent it. A
// message's max wait starts only once it holds a slot.
func newLane(d *Dispatcher, ln Lane, pos int) *lane {
	sub, outstanding := ln.Subscriber, ln.Outstanding
	var slots chan struct{}
	if outstanding > 0 {
		sub.ReceiveSettings.MaxOutstandingMessages = outstanding
		if d.cfg.ReadAhead > outstanding {
			sub.ReceiveSettings.MaxOutstandingMessages = d.cfg.ReadAhead
			slots = make(chan struct{}, outstanding)
		}
	}
	// Bytes too, not only messages: the client's default (1e9 bytes) would
	// let a lane hold its count of messages of up to Pub/Sub's 10 MB each,
	// far over a pod's memory. The cap is what that many valid messages
	// (MaxDataBytes each) take; a larger one, too_large to be sent, counts
	// as the whole cap and is handled alone.
	held := sub.ReceiveSettings.MaxOutstandingMessages
	if held <= 0 {
		held = pubsub.DefaultReceiveSettings.MaxOutstandingMessages
	}
	sub.ReceiveSettings.MaxOutstandingBytes = held * MaxDataBytes
	// Shutdown (and pause) keep the client's default: wait for every
	// callback (ours nack what has not been sent and bound sends by Grace),
	// nack what was pulled but not handed over. A message that reaches the
	// client while a stream is closing can still slip past: the lease the
	// client last asked for is what brings it back. Asking 10s at a time
	// (the least Pub/Sub allows) bounds that at 10s instead of 60s.
	sub.ReceiveSettings.MaxDurationPerAckExtension = 10 * time.Second
	return &lane{
		d: d, class: ln.Class, policy: ln.Policy, pos: pos, maxWait: ln.MaxWait, sub: sub, slots: slots,
		backoff: nack.NewFullJitter(d.cfg.BackoffInitial, d.cfg.BackoffMax),
		errWait: nack.NewFullJitter(receiveRetryInitial, receiveRetryMax),
	}
}

// run receives until ctx ends.
func (l *lane) run(ctx context.Context) {
	log := l.d.cfg.Logger.With("class", l.class, "subscription", l.sub.ID())
	for {
		rctx, cancel := context.WithCancel(ctx)
		l.mu.Lock()
		l.cancel, l.paused, l.held = cancel, false, false
		l.mu.Unlock()

		l.receiving.Store(true)
		err := l.sub.Receive(rctx, func(cctx context.Context, m *pubsub.Message) {
			if l.slots != nil {
				select {
				case l.slots <- struct{}{}:
					defer func() { <-l.slots }()
				case <-cctx.Done(): // handle nacks it at once
				}
			}
			l.d.handle(cctx, l.class, l.sub.ID(), m)
		})
		l.receiving.Store(false)
		cancel()
		if ctx.Err() != nil {
			return
		}

		l.mu.Lock()
		paused, held := l.paused, l.held
		l.mu.Unlock()
		if held {
			l.waitForAccount(ctx, log)
			continue
		}
		l.mu.Lock()
		var wait time.Duration
		if paused {
			wait = l.backoff.NextBackOff()
		} else {
			wait = l.errWait.NextBackOff()
		}
		l.mu.Unlock()
		if paused {
			log.Warn("retry budget spent: pausing pulls", "for", wait, "budget_tokens", l.d.budget.Tokens())
		} else {
			log.Error("receive stopped; retrying", "in", wait, "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// pause ends the current Receive; run waits out a backoff before pulling
// again. Messages in hand are nacked as their callbacks see the context end.
func (l *lane) pause() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.paused && l.cancel != nil {
		l.paused = true
		l.cancel()
	}
}

// accountPoll is how often a lane held by an account pause asks whether it
// still holds.
const accountPoll = time.Second

// hold ends the current Receive because the account is paused: run pulls
// again only once the pause is over. A message pulled during the pause
// would be denied and nacked at once, again and again: every delivery
// counts toward the subscription's dead-letter policy, and a long pause
// would dead-letter good messages. Held, they wait in the subscription.
func (l *lane) hold() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.paused && l.cancel != nil {
		l.paused, l.held = true, true
		l.cancel()
	}
}

// waitForAccount returns once the account's pause is over or ctx ends.
func (l *lane) waitForAccount(ctx context.Context, log *slog.Logger) {
	why, left, _ := l.d.classPause(l.class)
	log.Warn("the provider refused the account: pulls stopped until the pause ends; messages wait in the subscription",
		"reason", why, "left", left.Round(time.Second))
	t := time.NewTicker(accountPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !l.d.classPaused(ctx, l.class) {
			log.Info("the account's pause is over: pulling again")
			return
		}
	}
}

// succeeded resets both backoffs after a send went through.
func (l *lane) succeeded() {
	l.mu.Lock()
	l.backoff.Reset()
	l.errWait.Reset()
	l.mu.Unlock()
}
