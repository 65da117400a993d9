package admission

import (
	"context"
	"strconv"
	"sync"
	"time"

	"smsdispatcher/ledger"
)

// minWait keeps a malformed zero wait from turning Admit into a busy loop.
const minWait = 100 * time.Microsecond

// lookaheadSlots is how many of its class's intervals ahead a caller books
// a slot rather than be denied: enough that a waiter woken by its ticket a
// little before its slot (early, below) takes it in one call, and little enough
// that a booked slot is as good as sent: marketing never books far ahead
// of an OTP (which then waits at most that long behind it), and no more is
// booked than can go out after a 429 or while Redis is down than the sends
// already on the wire.
const lookaheadSlots = 1

// lookahead is how far ahead a caller of class c books a slot of cost
// units. A class books past any slot a later class may have booked (the
// longest message's lookahead of the slowest class after it, and an
// interval for the slot itself) and one more: a later class's bookings
// never make an earlier one ask twice. A class after the first books no
// further ahead than the last class (marketing's one interval by
// default): a slot booked ahead moves the shared levels' TATs to it, and
// a slow middle class booking a whole interval of its own ahead would
// hold the global and reserve levels there, away from the earlier
// classes and, idle in between, from the later ones.
func (l *Limiter) lookahead(c *classState, cost int) time.Duration {
	la := time.Duration(lookaheadSlots*l.cfg.MaxCost)*c.later + time.Duration(lookaheadSlots*cost)*c.spacing
	if c.pos > 0 {
		la = min(la, time.Duration(lookaheadSlots*cost)*l.lastSpacing)
	}
	return la
}

// early is how long before its wake ticket a waiter of class c asks: half
// an interval (or of its lookahead, if shorter), well within the lookahead,
// so that it books its slot ahead and
// sends when it opens. A waiter that asked on its ticket would find the
// slot opened a little before (the timer's and the round trip's lateness),
// and at BURST 1 the account would lose that much of every interval.
func (l *Limiter) early(c *classState) time.Duration { return min(c.spacing, l.lookahead(c, 1)) / 2 }

// Admit waits up to maxWait for a send slot of class, for a send of cost
// units (its segments, when rates count segments; below 1 counts as 1),
// taking, when claim.Token is set, the id's send-once claim in the same
// Redis call as the slot. The send goes when its first unit would and is
// charged all of them, so that any window of length W sees at most rate *
// W + BURST - 1 + cost units. It sleeps exactly as long as the last answer
// says (never on a fixed tick) and gives up at once when it would have to
// wait past maxWait, returning that denial (or, when it never asked, a
// Decision of SourceNone saying why): the caller nacks instead of holding
// the message.
//
// Two things keep Redis calls near one per admission under a backlog.
// Within a process only one caller per class talks to Redis at a time; the
// others queue behind it. Across processes, a waiter does not wake when the
// next slot opens (with every other process's waiter, one winning and the
// rest paying a call for nothing): The admission script hands each waiter a wake ticket,
// as many intervals after the last one handed out as that one's send costs
// (a 3-segment send takes three slots), and an admitted caller with
// another caller queued behind it gets that caller's ticket in the same
// answer.
//
// It returns when the slot is open: a slot a little ahead is booked at
// once and waited for outside the class's turn. A Decision denied for
// ReasonRecord says what the id's record holds (do not send); an allowed
// one with Claimed set goes to Settle after the send. A Redis-down
// fallback claims nothing, denies a send of more than one unit
// (ReasonLong), and denies every class but OTP (ReasonNoRecord) until
// Redis answers again, or its wait runs out: a short outage holds a
// campaign, rather than hand it back to come again. If ctx ends while the
// caller waits for a booked slot, the slot is lost, the claim given back,
// and the error is ctx's. A class the account does not have is an error.
//
// Admit times its own wait on the monotonic clock (real timers), not on
// the Limiter's Clock. The error is non-nil only when ctx ends first.
func (l *Limiter) Admit(ctx context.Context, class Class, cost int, maxWait time.Duration, claim Claim) (Decision, error) {
	d, err := l.admit(ctx, class, cost, maxWait, claim)
	if d.Allowed {
		d.at = l.clock.Now() // the send begins now: Settle tells finish.lua how long ago
	}
	return d, err
}

func (l *Limiter) admit(ctx context.Context, class Class, cost int, maxWait time.Duration, claim Claim) (Decision, error) {
	c, err := l.classOf(class)
	if err != nil {
		return Decision{}, err
	}
	cost = max(cost, 1)
	if maxWait <= 0 {
		return notAsked(ReasonNoTime), nil
	}
	w := newWaiting(ctx, maxWait)
	defer w.stop()
	if d, ok, err := l.takeTurn(w, c, cost); !ok {
		return d, err
	}
	// The turn is given back once the slot is decided, before the wait
	// for a booked slot.
	var once sync.Once
	endTurn := func() { once.Do(func() { <-c.turn }) }
	defer endTurn()
	if d, ok, err := l.awaitTicket(w, c); !ok {
		return d, err
	}
	return l.ask(w, c, cost, claim, endTurn)
}

// waiting is one caller's wait for a slot, timed on the monotonic clock:
// it began at start and may last maxWait.
type waiting struct {
	ctx     context.Context
	start   time.Time
	maxWait time.Duration
	expire  *time.Timer // fires when maxWait is over
	timer   *time.Timer // sleep's, made at the first sleep
}

func newWaiting(ctx context.Context, maxWait time.Duration) *waiting {
	return &waiting{ctx: ctx, start: time.Now(), maxWait: maxWait, expire: time.NewTimer(maxWait)}
}

// left is how much of maxWait is left.
func (w *waiting) left() time.Duration { return w.maxWait - time.Since(w.start) }

// fits reports whether waiting d more stays within maxWait.
func (w *waiting) fits(d time.Duration) bool { return time.Since(w.start)+d <= w.maxWait }

// sleep waits d, or until ctx ends (its error).
func (w *waiting) sleep(d time.Duration) error {
	if w.timer == nil {
		w.timer = time.NewTimer(d)
	} else {
		w.timer.Reset(d)
	}
	select {
	case <-w.ctx.Done():
		return w.ctx.Err()
	case <-w.timer.C:
		return nil
	}
}

func (w *waiting) stop() {
	w.expire.Stop()
	if w.timer != nil {
		w.timer.Stop()
	}
}

// takeTurn waits for class c's turn for a caller of cost; ok is false
// when the wait or ctx ran out first, with the answer to give.
func (l *Limiter) takeTurn(w *waiting, c *classState, cost int) (d Decision, ok bool, err error) {
	l.queue(c, cost, 1)
	defer l.queue(c, cost, -1)
	select {
	case c.turn <- 1:
		return Decision{}, true, nil
	case <-w.ctx.Done():
		return notAsked(ReasonTurn), false, w.ctx.Err()
	case <-w.expire.C:
		return notAsked(ReasonTurn), false, nil
	}
}

// awaitTicket waits for the ticket the previous admission of class c
// brought back; ok is false when it is past the wait, or ctx ended.
func (l *Limiter) awaitTicket(w *waiting, c *classState) (d Decision, ok bool, err error) {
	l.mu.Lock()
	ask := c.nextAsk
	l.mu.Unlock()
	if wait := time.Until(ask); wait > 0 {
		if !w.fits(wait) {
			return notAsked(ReasonTicket), false, nil
		}
		if err := w.sleep(wait); err != nil {
			return notAsked(ReasonTicket), false, err
		}
	}
	return Decision{}, true, nil
}

// ask asks for a slot of class c until it is admitted, its answer is
// final, or the wait runs out; endTurn gives the class's turn back.
func (l *Limiter) ask(w *waiting, c *classState, cost int, claim Claim, endTurn func()) (Decision, error) {
	for tries := 1; ; tries++ {
		tickets := ticketOnDenial
		if c.queued.Load() > 0 {
			tickets = l.ticketFor(c)
		}
		within := w.left()
		lookahead := min(within, l.lookahead(c, cost))
		d, err := l.try(w.ctx, c, cost, tickets, within, lookahead, claim)
		d.Tries, d.id = tries, claim.ID
		if err != nil {
			return d, err
		}
		if d.Allowed {
			if tickets != ticketOnDenial && d.Source == SourceRedis {
				l.mu.Lock()
				c.nextAsk = time.Now().Add(d.Next - l.early(c))
				l.mu.Unlock()
			}
			endTurn()
			return l.awaitSlot(w, d)
		}
		if d.Reason == ReasonRecord || ((d.Reason == ReasonDegraded || d.Reason == ReasonRouteSkipped) && claim.Failover) {
			return d, nil
		}
		wait, ok := l.retryWait(w, c, d)
		if !ok {
			return d, nil
		}
		if err := w.sleep(wait); err != nil {
			return d, err
		}
	}
}

// awaitSlot waits for the slot d booked ahead, if it did. A 429 or an
// account pause this process heard of meanwhile denies it: the slot goes
// unused.
func (l *Limiter) awaitSlot(w *waiting, d Decision) (Decision, error) {
	if d.RetryAfter > 0 {
		// The booked slot opens in RetryAfter, counted from the answer:
		// never before it, on Redis's clock.
		if err := w.sleep(d.RetryAfter); err != nil {
			_ = l.Settle(context.WithoutCancel(w.ctx), d, "", ResultNone, ledger.Story{})
			return Decision{}, err
		}
		d.RetryAfter = 0
		if p, stop := l.stopped(); stop {
			_ = l.Settle(context.WithoutCancel(w.ctx), d, "", ResultNone, ledger.Story{})
			p.Tries = d.Tries
			return p, nil
		}
	}
	return d, nil
}

// retryWait is how long a caller of class c denied d waits before it asks
// again; ok is false when that is past its wait.
func (l *Limiter) retryWait(w *waiting, c *classState, d Decision) (wait time.Duration, ok bool) {
	wait = max(d.RetryAfter, minWait)
	if !w.fits(wait) {
		return 0, false
	}
	if d.Reason == ReasonGlobal || d.Reason == ReasonCeiling || d.Reason == ReasonReserve {
		wait = max(wait-l.early(c), minWait)
	}
	if d.Reason == ReasonPenalty {
		wait = min(wait, penaltyRecheck) // it may be cleared meanwhile
	}
	return wait, true
}

// queue counts n callers of cost more (n = 1) or fewer (n = -1) waiting for
// class c's turn.
func (l *Limiter) queue(c *classState, cost, n int) {
	c.queued.Add(int32(n))
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.costs[cost] += n; c.costs[cost] <= 0 {
		delete(c.costs, cost)
	}
}

// ticketFor returns the wake-ticket mode of a caller of class c with
// others queued behind it: a ticket for the next of them when it is
// admitted, of the lowest cost among them. The next may cost more (the
// turn goes to the first queued, whatever its cost): its ticket is then
// early, which costs at most a call, where one too late would leave its
// slot empty.
func (l *Limiter) ticketFor(c *classState) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := 0
	for cost := range c.costs {
		if next == 0 || cost < next {
			next = cost
		}
	}
	if next <= 1 {
		return ticketAlways
	}
	return ticketAlways + " " + strconv.Itoa(next)
}

// notAsked is the answer to a caller that gave up before it asked: nobody
// decided, and why it did not ask is the reason.
func notAsked(why Reason) Decision {
	return Decision{Source: SourceNone, Reason: why}
}
