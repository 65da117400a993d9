package dispatch

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/admission"
	"smsdispatcher/nack"
)

// progress is how far handle took a delivery, for recoverPanic. Written
// by handle's goroutine only.
type progress struct {
	id       string  // the message's id, once decoded
	flight   *flight // the id's flight in this process, until landed
	acted    bool    // m was acked, nacked or dead-lettered
	observed bool    // the Observer was called
}

// recoverPanic ends a delivery whose handling panicked with r, so that
// neither this process nor the next one the message goes to dies of it:
// the message is nacked (nack.Panicked) or, once its handling has
// panicked on Config.MaxHandlerPanics deliveries in this process,
// dead-lettered with reject_reason invalid: handler_panic; the id's flight
// is landed and the Event observed with Panicked set. The log line names
// the message by its Pub/Sub ID only (never its data) and carries the
// stack on the message's first panic. The send claim and the lease a
// panicked send held are not given back: they run out with their TTLs, each a few seconds past SendTimeout.
func (d *Dispatcher) recoverPanic(ctx context.Context, class admission.Class, m *pubsub.Message, ev *Event, p *progress, r any) {
	n := d.panics.add(m.ID)
	ev.Panicked = true
	what := fmt.Sprintf("%T", r) // a value the code panicked with may hold the message
	if re, ok := r.(runtime.Error); ok {
		what = re.Error()
	}
	attrs := []any{"message_id", m.ID, "class", class, "panic", what, "panics", n, "max_panics", d.cfg.MaxHandlerPanics}
	if n == 1 {
		attrs = append(attrs, "stack", string(debug.Stack()))
	}
	d.cfg.Logger.Error("the message handler panicked; the message is nacked, and dead-lettered after max_panics", attrs...)
	if !p.acted {
		ev.Outcome, ev.Err = nack.Panicked, fmt.Errorf("the handler panicked (%s) on %d of the %d deliveries allowed", what, n, d.cfg.MaxHandlerPanics)
		if n >= d.cfg.MaxHandlerPanics {
			ev.Outcome, ev.Err = nack.Invalid, &InvalidError{Reason: "handler_panic", Detail: fmt.Sprintf("the handler panicked on %d deliveries", n)}
		}
		ev.Action, ev.Err = d.actAfterPanic(ctx, class, m, *ev)
		d.ended(m.ID, ev.Action)
	}
	if p.flight != nil {
		d.land(p.id, p.flight, *ev)
	}
	ev.Finished = d.now()
	if !p.observed && d.deps.Observer != nil {
		d.deps.Observer.Observe(*ev)
	}
}

// actAfterPanic is act for a delivery that panicked; should act panic too
// (the dead-letter publish), the message is nacked.
func (d *Dispatcher) actAfterPanic(ctx context.Context, class admission.Class, m *pubsub.Message, ev Event) (action nack.Action, why error) {
	defer func() {
		if r := recover(); r != nil {
			d.cfg.Logger.Error("acting on a message whose handler panicked panicked too; nacked", "message_id", m.ID, "panic", fmt.Sprintf("%T", r))
			m.Nack()
			action, why = nack.Nack, ev.Err
		}
	}()
	return d.act(ctx, class, nil, m, ev) // a panic is never a provider's refusal: no record to write
}

// ended forgets the panics of the Pub/Sub message id once action ended it.
func (d *Dispatcher) ended(id string, action nack.Action) {
	if action != nack.Nack {
		d.panics.forget(id)
	}
}

// maxPanicCounts bounds the messages panicCounts remembers.
const maxPanicCounts = 1000

// panicCounts counts, by Pub/Sub message ID, the deliveries whose handling
// panicked in this process. Pub/Sub counts deliveries only with a
// dead-letter policy, and counts every nack; a count in Redis would fail
// with Redis. Counted here, a message that Pub/Sub hands to k processes in
// turn may panic up to k × (MaxHandlerPanics - 1) + 1 times before one of
// them dead-letters it. A message is forgotten once it reached an end;
// when maxPanicCounts are held, an arbitrary one is forgotten to make room.
// The zero value is empty; it is safe for concurrent use.
type panicCounts struct {
	held atomic.Int64 // len(n): forget skips the lock while none is held
	mu   sync.Mutex
	n    map[string]int // guarded by mu
}

// add counts one more panic of id and returns its count.
func (c *panicCounts) add(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	if _, ok := c.n[id]; !ok && len(c.n) >= maxPanicCounts {
		for k := range c.n {
			delete(c.n, k)
			break
		}
	}
	c.n[id]++
	c.held.Store(int64(len(c.n)))
	return c.n[id]
}

// forget drops id's count.
func (c *panicCounts) forget(id string) {
	if c.held.Load() == 0 {
		return
	}
	c.mu.Lock()
	delete(c.n, id)
	c.held.Store(int64(len(c.n)))
	c.mu.Unlock()
}
