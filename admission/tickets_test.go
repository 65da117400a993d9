package admission

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/redistest"
)

// TestWakeTicketsAreSpacedByTheirSendsCost: a send of c units moves the
// TATs by c intervals, so the waiter after it can go c intervals later at
// the earliest. The tickets handed to waiters of 3 units are 3 spacings
// apart, and the ticket an admission takes for the caller queued behind
// it ('2 <n>') is n spacings before the next. Spaced one interval apart,
// two waiters in three woke before their slot and asked again.
func TestWakeTicketsAreSpacedByTheirSendsCost(t *testing.T) {
	r := newTicketRig(t, testConfig(t))
	rdb, ctx, l, send, now := r.rdb, r.ctx, r.l, r.send, int64(ticketNow)
	spacing := l.classes[Marketing].spacing.Microseconds()
	call := func(cost int, tickets string) scriptCall { return r.call(Marketing, cost, tickets) }

	// A denial takes a ticket for the caller's own cost.
	deny := call(3, ticketOnDenial)
	deleteKeysAtEnd(t, rdb, deny)
	global, wake := deny.admitKey(t, 1), deny.admitKey(t, 4)
	if err := rdb.Set(ctx, global, strconv.FormatInt(now+time.Second.Microseconds(), 10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	var waits []int64
	for range 4 {
		d := send(deny)
		if d.Allowed {
			t.Fatalf("a send past a full global level was allowed: %+v", d)
		}
		waits = append(waits, d.RetryAfter.Microseconds())
	}
	for i := 1; i < len(waits); i++ {
		if got := waits[i] - waits[i-1]; got != 3*spacing {
			t.Fatalf("tickets of cost-3 waiters %v µs from now: %d µs apart, want 3 spacings (%d µs)", waits, got, 3*spacing)
		}
	}

	// An admission takes the ticket of the caller queued behind it, for
	// that caller's cost: the next ticket is that many spacings later.
	// Marketing may take the global tolerance but its reserve: BURST 5
	// leaves it 3 intervals, all taken, so that the slot after the send
	// opens later than now.
	full := now + 3*interval(l.cfg.TargetRPS).Microseconds()
	for _, tickets := range []string{"2 2", ticketAlways} {
		if err := rdb.Del(ctx, wake).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Set(ctx, global, strconv.FormatInt(full, 10), 0).Err(); err != nil {
			t.Fatal(err)
		}
		a := send(call(3, tickets))
		if !a.Allowed || a.RetryAfter != 0 {
			t.Fatalf("tickets %q: the first send was not admitted at once: %+v", tickets, a)
		}
		d := send(deny)
		units := int64(1)
		if tickets == "2 2" {
			units = 2
		}
		if got := d.RetryAfter.Microseconds() - a.Next.Microseconds(); a.Next <= 0 || got != units*spacing {
			t.Fatalf("tickets %q: next %v, then a denial's %v: %d µs apart, want %d spacings (%d µs)",
				tickets, a.Next, d.RetryAfter, got, units, units*spacing)
		}
	}
}

// TestTheTicketOfTheQueuedIsForTheCheapestOfThem: an admitted caller takes
// a ticket for the next of its class's queued callers, spaced by the
// lowest cost among them (the next to get the turn may cost more: its
// ticket is then early, never late); with none of more than one unit the
// mode is plain '2'.
func TestTheTicketOfTheQueuedIsForTheCheapestOfThem(t *testing.T) {
	l := newLimiter(t, &recorder{}, testConfig(t))
	c := l.classes[Marketing]
	l.queue(c, 3, 1)
	l.queue(c, 2, 1)
	l.queue(c, 2, 1)
	if got := l.ticketFor(c); got != "2 2" {
		t.Fatalf("queued costs 3, 2, 2: %q, want \"2 2\"", got)
	}
	l.queue(c, 2, -1)
	l.queue(c, 2, -1)
	if got := l.ticketFor(c); got != "2 3" {
		t.Fatalf("queued cost 3: %q, want \"2 3\"", got)
	}
	l.queue(c, 1, 1)
	if got := l.ticketFor(c); got != ticketAlways {
		t.Fatalf("queued costs 3, 1: %q, want %q", got, ticketAlways)
	}
	l.queue(c, 1, -1)
	l.queue(c, 3, -1)
	if len(c.costs) != 0 || c.queued.Load() != 0 {
		t.Fatalf("none queued: costs %v, queued %d", c.costs, c.queued.Load())
	}
}

// TestAnEarlierClassesSendPushesTheLaterClassesTickets: marketing's
// tickets are spaced by its ceiling's interval, but an OTP sent meanwhile
// takes slots of the global level they share. The marketing waiter after
// one already waiting and an OTP of 3 units each is told when the global
// level lets it go: 6 global intervals on (the first waiter's 3 and the
// OTP's 3), not one ceiling slot of 3 units after the first waiter (which
// would wake it too early, to ask twice).
func TestAnEarlierClassesSendPushesTheLaterClassesTickets(t *testing.T) {
	r := newTicketRig(t, testConfig(t))
	rdb, ctx, l, send, now := r.rdb, r.ctx, r.l, r.send, int64(ticketNow)
	call := func(class Class, tickets string) scriptCall { return r.call(class, 3, tickets) }
	market, otp := call(Marketing, ticketOnDenial), call(OTP, ticketOnDenial)
	deleteKeysAtEnd(t, rdb, market, otp)
	// The global level one µs past what marketing may take (BURST 5 less
	// its reserve: 3 intervals); OTP may take one interval more.
	g := interval(l.cfg.TargetRPS).Microseconds()
	if err := rdb.Set(ctx, market.admitKey(t, 1), strconv.FormatInt(now+3*g+1, 10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	if d := send(market); d.Allowed || d.RetryAfter.Microseconds() != 1 {
		t.Fatalf("the first marketing waiter: %+v, want a denial and a ticket in 1 µs", d)
	}
	if d := send(otp); !d.Allowed || d.RetryAfter != 0 {
		t.Fatalf("the OTP: %+v, want it sent at once", d)
	}
	d := send(market)
	if want := 6*g + 1; d.Allowed || d.RetryAfter.Microseconds() != want {
		t.Fatalf("the second marketing waiter: %+v, want a denial and a ticket in %d µs (6 global intervals past the first's)", d, want)
	}
}

// TestAClassAtTheAccountsRateFollowsNoShadow: a class whose tickets are
// spaced by the global level's own interval follows the global TAT
// already; the shadow its wake key holds is not waited for. A shadow left
// ahead (a waiter that asked twice, as a pool's waiters do while its
// senders open) would otherwise hold every ticket past slots left empty:
// a pool of 10,000 senders fell from 0.86 to 0.79 of its account's rate.
func TestAClassAtTheAccountsRateFollowsNoShadow(t *testing.T) {
	cfg := testConfig(t)
	cfg.MarketingRPS = cfg.TargetRPS
	r := newTicketRig(t, cfg)
	rdb, ctx, now := r.rdb, r.ctx, int64(ticketNow)
	deny := r.call(Marketing, 1, ticketOnDenial)
	deleteKeysAtEnd(t, rdb, deny)
	global, wake := deny.admitKey(t, 1), deny.admitKey(t, 4)
	open := now + (500 * time.Millisecond).Microseconds()
	if err := rdb.Set(ctx, global, strconv.FormatInt(open, 10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	shadow := now + 5*time.Second.Microseconds()
	if err := rdb.Set(ctx, wake, strconv.FormatInt(open, 10)+" "+strconv.FormatInt(shadow, 10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	d := r.send(deny)
	// A ticket follows a stale hint at most 1 s per unit past the slot:
	// the shadow's would be 1.5 s from now.
	if d.Allowed || d.RetryAfter > time.Second {
		t.Fatalf("denied with a ticket %v from now (%+v); want the slot's own, within 0.5 s, not the shadow's", d.RetryAfter, d)
	}
}

// ticketNow is the test clock's now of a ticketRig, in µs.
const ticketNow = 1_800_000_000_000_000

// A ticketRig runs a limiter's the admission script calls on a real Redis at ticketNow.
type ticketRig struct {
	t       *testing.T
	ctx     context.Context
	rdb     *redis.Client
	scripts scriptSet
	rec     *recorder
	l       *Limiter
}

func newTicketRig(t *testing.T, cfg Config) *ticketRig {
	rdb := redistest.Client(t)
	rec := &recorder{}
	return &ticketRig{t: t, ctx: context.Background(), rdb: rdb, scripts: loadScripts(t, rdb), rec: rec, l: newLimiter(t, rec, cfg)}
}

// call records the limiter's call of a class's send of cost units, with
// the given ticket mode, a waiter of an hour and no lookahead.
func (r *ticketRig) call(class Class, cost int, tickets string) scriptCall {
	return r.rec.take(r.t, func() error {
		_, err := r.l.eval(r.ctx, r.l.classes[class], cost, false, tickets, time.Hour, 0, Claim{})
		return err
	})
}

// send runs sc at ticketNow and returns its decision.
func (r *ticketRig) send(sc scriptCall) Decision {
	r.t.Helper()
	d, err := gcraReplyErr(r.scripts.send(r.ctx, r.rdb, sc, ticketNow))
	if err != nil {
		r.t.Fatalf("the admission script: %v", err)
	}
	return d
}
