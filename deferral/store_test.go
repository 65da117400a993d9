package deferral

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/config/policy"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redistest"
)

// clock is a settable clock for a store.
type clock struct{ ms atomic.Int64 }

func (c *clock) now() time.Time      { return time.UnixMilli(c.ms.Load()) }
func (c *clock) add(d time.Duration) { c.ms.Add(d.Milliseconds()) }
func newClock(t time.Time) *clock    { c := &clock{}; c.ms.Store(t.UnixMilli()); return c }
func class(t *testing.T) string      { return "c" + fmt.Sprint(time.Now().UnixNano()) }
func msg(c, id, to string) Message {
	return Message{Class: c, ID: id, To: to, Data: []byte(`{"id":"` + id + `"}`)}
}

// TestTheCapIsExactInAnySlidingWindow: many callers at once, over many
// windows, never give one number more than Count places in any window of
// Per, and give one to an id once (a redelivery takes none).
func TestTheCapIsExactInAnySlidingWindow(t *testing.T) {
	rdb := redistest.Client(t)
	c := newClock(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	s := New(rdb, c.now, nil)
	cl := class(t)
	rules := policy.Sending{Cap: policy.Cap{Count: 3, Per: 10 * time.Second, Drop: true}}
	var sends []time.Time
	for step := range 40 {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				j, err := s.Judge(context.Background(), msg(cl, fmt.Sprintf("m%d-%d", step, i), "+33612345678"), rules)
				if err != nil {
					t.Error(err)
					return
				}
				if j.Verdict == Send {
					mu.Lock()
					sends = append(sends, c.now())
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		// A redelivery of an id that has its place takes no second one.
		if j, _ := s.Judge(context.Background(), msg(cl, fmt.Sprintf("m%d-0", step), "+33612345678"), rules); j.Verdict == Send && j.tookPlace {
			t.Fatalf("a redelivery took a second place")
		}
		c.add(1500 * time.Millisecond)
	}
	for i := range sends {
		in := 0
		for _, u := range sends[i:] {
			if u.Sub(sends[i]) < 10*time.Second {
				in++
			}
		}
		if in > 3 {
			t.Fatalf("%d sends within 10s from %v, want at most 3", in, sends[i])
		}
	}
	if len(sends) < 3*40*15/100/10 {
		t.Errorf("only %d sends in 60s at 3 per 10s", len(sends))
	}
}

// TestAPlaceGivenBackFitsAnother: a place given back (the send did not
// happen) lets the next message through at once.
func TestAPlaceGivenBackFitsAnother(t *testing.T) {
	s := New(redistest.Client(t), nil, nil)
	cl := class(t)
	rules := policy.Sending{Cap: policy.Cap{Count: 1, Per: time.Hour, Drop: true}}
	a := msg(cl, "a", "+33612345678")
	j, err := s.Judge(context.Background(), a, rules)
	if err != nil || j.Verdict != Send {
		t.Fatalf("first: %+v %v", j, err)
	}
	if j2, _ := s.Judge(context.Background(), msg(cl, "b", "+33612345678"), rules); j2.Verdict != Capped {
		t.Fatalf("second within the cap's window: %v, want capped", j2.Verdict)
	}
	if err := s.GiveBack(context.Background(), a, j); err != nil {
		t.Fatal(err)
	}
	if j3, _ := s.Judge(context.Background(), msg(cl, "b", "+33612345678"), rules); j3.Verdict != Send {
		t.Fatalf("after the give-back: %v, want send", j3.Verdict)
	}
}

// TestADeferredMessageWhoseDeadlineComesFirstExpires: a window opening
// after the deadline ends the message expired at once; one stored whose
// deadline passes before its release is never published.
func TestADeferredMessageWhoseDeadlineComesFirstExpires(t *testing.T) {
	c := newClock(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	s := New(redistest.Client(t), c.now, nil)
	var expired atomic.Int64
	s.Expired = func(string) { expired.Add(1) }
	cl := class(t)
	w := fixedWindow(c.now().Add(time.Hour))
	m := msg(cl, "late", "+33612345678")
	m.Deadline = c.now().Add(30 * time.Minute)
	if j, err := s.Judge(context.Background(), m, policy.Sending{Window: w}); err != nil || j.Verdict != Expired {
		t.Fatalf("a window opening after the deadline: %+v %v, want expired", j, err)
	}
	m.Deadline = c.now().Add(2 * time.Hour)
	if j, err := s.Judge(context.Background(), m, policy.Sending{Window: w}); err != nil || j.Verdict != Deferred {
		t.Fatalf("a window opening before the deadline: %+v %v, want deferred", j, err)
	}
	c.add(3 * time.Hour) // past the deadline when released
	r := &Releaser{Store: s, Token: "p", Logger: discard()}
	if n, err := r.Pass(context.Background(), Lane{Class: cl}); err != nil || n != 1 || expired.Load() != 2 {
		t.Fatalf("release past the deadline: claimed %d (%v), expired %d in all; want 1 and 2", n, err, expired.Load())
	}
	if _, total, _ := s.List(context.Background(), cl, 0, 10); total != 0 {
		t.Errorf("%d left stored", total)
	}
}

// TestAReleaseSpreadsOverTheSpread: the releases of messages deferred to
// one opening are spread over release_spread, none before the opening.
func TestAReleaseSpreadsOverTheSpread(t *testing.T) {
	c := newClock(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	s := New(redistest.Client(t), c.now, nil)
	cl := class(t)
	opening := c.now().Add(time.Hour)
	spread := 10 * time.Minute
	var minDue, maxDue time.Time
	for i := range 200 {
		j, err := s.Judge(context.Background(), msg(cl, fmt.Sprint("s", i), "+33612345678"), policy.Sending{Window: fixedWindow(opening), ReleaseSpread: spread})
		if err != nil || j.Verdict != Deferred {
			t.Fatal(j, err)
		}
		if minDue.IsZero() || j.Until.Before(minDue) {
			minDue = j.Until
		}
		if j.Until.After(maxDue) {
			maxDue = j.Until
		}
	}
	if minDue.Before(opening) || !maxDue.Before(opening.Add(spread)) || maxDue.Sub(minDue) < spread*8/10 {
		t.Errorf("releases from %v to %v, want spread over [%v, %v)", minDue, maxDue, opening, opening.Add(spread))
	}
}

// TestTheSpreadEndsBeforeTheDeadline: a window opening before a
// message's deadline releases it, whatever its share of release_spread:
// opening 08:00, deadline 08:05, spread 10m; every release falls in the
// first half of the 5 minutes, still spread over it.
func TestTheSpreadEndsBeforeTheDeadline(t *testing.T) {
	c := newClock(time.Date(2026, 6, 1, 7, 0, 0, 0, time.UTC))
	s := New(redistest.Client(t), c.now, nil)
	cl := class(t)
	opening := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
	deadline := opening.Add(5 * time.Minute)
	rules := policy.Sending{Window: fixedWindow(opening), ReleaseSpread: 10 * time.Minute}
	var minDue, maxDue time.Time
	for i := range 200 {
		m := msg(cl, fmt.Sprint("d", i), "+33612345678")
		m.Deadline = deadline
		j, err := s.Judge(context.Background(), m, rules)
		if err != nil || j.Verdict != Deferred {
			t.Fatalf("%s: %+v %v, want deferred: its window opens before its deadline", m.ID, j, err)
		}
		if minDue.IsZero() || j.Until.Before(minDue) {
			minDue = j.Until
		}
		if j.Until.After(maxDue) {
			maxDue = j.Until
		}
	}
	half := opening.Add(deadline.Sub(opening) / 2)
	if minDue.Before(opening) || !maxDue.Before(half) || maxDue.Sub(minDue) < time.Minute {
		t.Errorf("releases from %v to %v, want spread over [%v, %v)", minDue, maxDue, opening, half)
	}
	// A deadline at the opening leaves no room: the message expires.
	m := msg(cl, "at", "+33612345678")
	m.Deadline = opening
	if j, err := s.Judge(context.Background(), m, rules); err != nil || j.Verdict != Expired {
		t.Errorf("a deadline at the opening: %+v %v, want expired", j, err)
	}
}

// fixedWindow opens at one instant.
type fixedWindow time.Time

func (f fixedWindow) Next(_, _ string, t time.Time) time.Time {
	if t.Before(time.Time(f)) {
		return time.Time(f)
	}
	return t
}

// scriptCalls counts a store's script calls.
type scriptCalls struct {
	Redis
	n atomic.Int64
}

func (c *scriptCalls) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	c.n.Add(1)
	return c.Redis.EvalSha(ctx, sha, keys, args...)
}

// TestARemoveTakesAPageAndKeepsADeferralMadeSince: a release's ids are
// removed a page of removePage in one script call each, only those its
// token still claims: an id deferred again since its claim, another
// releaser's token and an id not stored stay as they are.
func TestARemoveTakesAPageAndKeepsADeferralMadeSince(t *testing.T) {
	c := newClock(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	rdb := &scriptCalls{Redis: redistest.Client(t)}
	s := New(rdb, c.now, nil)
	cl := class(t)
	rules := policy.Sending{Window: fixedWindow(c.now().Add(time.Hour))}
	const n = 2*removePage + 5
	for i := range n {
		if j, err := s.Judge(context.Background(), msg(cl, fmt.Sprint("r", i), "+33612345678"), rules); err != nil || j.Verdict != Deferred {
			t.Fatal(j, err)
		}
	}
	c.add(time.Hour)
	claimed, err := s.Claim(context.Background(), cl, n, "p")
	if err != nil || len(claimed) != n {
		t.Fatalf("claimed %d (%v), want %d", len(claimed), err, n)
	}
	// r7 comes back outside its window: deferred again, its claim cancelled.
	if j, err := s.Judge(context.Background(), msg(cl, "r7", "+33612345678"), policy.Sending{Window: fixedWindow(c.now().Add(time.Hour))}); err != nil || j.Verdict != Deferred {
		t.Fatal(j, err)
	}
	ids := []string{"unknown"}
	for _, m := range claimed {
		ids = append(ids, m.ID)
	}
	if removed, err := s.RemoveAll(context.Background(), cl, "q", ids[:10]); err != nil || slices.Contains(removed, true) {
		t.Fatalf("another token removed %v (%v)", removed, err)
	}
	before := rdb.n.Load()
	removed, err := s.RemoveAll(context.Background(), cl, "p", ids)
	if err != nil || len(removed) != len(ids) {
		t.Fatalf("removed %d answers (%v), want %d", len(removed), err, len(ids))
	}
	if calls, want := rdb.n.Load()-before, int64((len(ids)+removePage-1)/removePage); calls != want {
		t.Errorf("%d ids removed in %d script calls, want %d", len(ids), calls, want)
	}
	for i, id := range ids {
		if want := id != "unknown" && id != "r7"; removed[i] != want {
			t.Errorf("%s removed %v, want %v", id, removed[i], want)
		}
	}
	list, total, err := s.List(context.Background(), cl, 0, 10)
	if err != nil || total != 1 || list[0].ID != "r7" {
		t.Fatalf("left stored: %d %v (%v), want r7 alone", total, list, err)
	}
}

// TestStatsReadNoMoreThanTheNextAskedFor: the releasers' stats (no next
// release asked for) read the counts alone, not the whole set; status's
// read gets the n soonest.
func TestStatsReadNoMoreThanTheNextAskedFor(t *testing.T) {
	c := newClock(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	s := New(redistest.Client(t), c.now, nil)
	cl := class(t)
	for i := range 20 {
		if j, err := s.Judge(context.Background(), msg(cl, fmt.Sprint("n", i), "+33612345678"), policy.Sending{Window: fixedWindow(c.now().Add(time.Hour))}); err != nil || j.Verdict != Deferred {
			t.Fatal(j, err)
		}
	}
	for _, n := range []int{0, 3} {
		st, err := s.StatsOf(context.Background(), cl, n)
		if err != nil || st.Deferred != 20 || len(st.Next) != n {
			t.Errorf("StatsOf(%d): %d deferred, %d next (%v); want 20 and %d", n, st.Deferred, len(st.Next), err, n)
		}
	}
}

// events records a store's status events.
type events struct {
	mu  sync.Mutex
	got []string // "id status"
}

func (e *events) Event(_ context.Context, _, id, status string, _ time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, id+" "+status)
}

var _ Events = (*events)(nil)

// TestATraceTellsADeferralAfterItsEnd: a deferral leaves a trace (when,
// until when, why) that outlives the entry by TraceKeep and says how it
// ended: released by a releaser, expired at its release, or dropped by
// an operator, whose drop publishes the final status event dropped.
func TestATraceTellsADeferralAfterItsEnd(t *testing.T) {
	c := newClock(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	rdb := redistest.Client(t)
	ev := &events{}
	s := New(rdb, c.now, ev)
	cl := class(t)
	ctx := context.Background()
	deferredAt := c.now()
	opening := deferredAt.Add(time.Hour)
	rules := policy.Sending{Window: fixedWindow(opening)}
	for _, id := range []string{"rel", "exp", "drop"} {
		m := msg(cl, id, "+33612345678")
		if id == "exp" {
			m.Deadline = opening.Add(time.Minute)
		}
		if j, err := s.Judge(ctx, m, rules); err != nil || j.Verdict != Deferred {
			t.Fatal(id, j, err)
		}
	}
	if tr, found, err := s.TraceOf(ctx, cl, "rel"); err != nil || !found || tr.Ended != "" || !tr.DeferredAt.Equal(deferredAt) ||
		!tr.Until.Equal(opening) || tr.Reason != "window" {
		t.Fatalf("the trace of a message deferred: %+v %v %v", tr, found, err)
	}
	if ttl := rdb.PTTL(ctx, keys.DeferredOf(cl).Trace("rel")).Val(); ttl <= TraceKeep || ttl > TraceKeep+time.Hour {
		t.Errorf("a deferral's trace lives %v, want its wait (1h) and TraceKeep", ttl)
	}
	if _, found, err := s.TraceOf(ctx, cl, "never"); err != nil || found {
		t.Errorf("an id never deferred: trace found %v (%v)", found, err)
	}

	if ok, err := s.Drop(ctx, cl, "drop"); err != nil || !ok {
		t.Fatalf("drop: %v %v", ok, err)
	}
	c.add(2 * time.Hour) // past exp's deadline
	r := &Releaser{Store: s, Token: "p", Logger: discard()}
	// rel is released by hand, as Pass does once Pub/Sub confirmed it
	// (the lane here has no publisher); exp's claim ends, and the next
	// pass finds it past its deadline.
	claimed, err := s.Claim(ctx, cl, 10, "p")
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claimed %d (%v), want rel and exp", len(claimed), err)
	}
	// A message being released, or one never held, is not dropped: no
	// event, no trace's end.
	for _, id := range []string{"rel", "never"} {
		if ok, err := s.Drop(ctx, cl, id); err != nil || ok {
			t.Errorf("drop of %s (being released, or never held): %v %v, want not dropped", id, ok, err)
		}
	}
	if _, err := s.removeEnded(ctx, cl, "p", EndReleased, []string{"rel"}); err != nil {
		t.Fatal(err)
	}
	c.add(ClaimLease + time.Second)
	if n, err := r.Pass(ctx, Lane{Class: cl}); err != nil || n != 1 {
		t.Fatalf("pass: %d %v, want exp claimed and expired", n, err)
	}
	for id, want := range map[string]string{"rel": EndReleased, "exp": EndExpired, "drop": EndDropped} {
		tr, found, err := s.TraceOf(ctx, cl, id)
		if err != nil || !found || tr.Ended != want || tr.EndedAt.IsZero() || !tr.DeferredAt.Equal(deferredAt) {
			t.Errorf("%s's trace: %+v %v %v, want ended %s", id, tr, found, err, want)
		}
		if ttl := rdb.PTTL(ctx, keys.DeferredOf(cl).Trace(id)).Val(); ttl <= 0 || ttl > TraceKeep {
			t.Errorf("%s's trace lives %v after its end, want at most TraceKeep", id, ttl)
		}
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if want := []string{"rel deferred", "exp deferred", "drop deferred", "drop dropped", "exp expired"}; !slices.Equal(ev.got, want) {
		t.Errorf("events %q, want %q", ev.got, want)
	}
}

// TestAnEarlyReleasePassesTheWindowNotTheCap: a message released early
// by an operator comes back past its closed window once, but its cap
// still holds: over it, it is deferred for the cap; one deferred for its
// cap and released early is deferred for it again; with a place free it
// is sent.
func TestAnEarlyReleasePassesTheWindowNotTheCap(t *testing.T) {
	c := newClock(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	s := New(redistest.Client(t), c.now, nil)
	cl := class(t)
	ctx := context.Background()
	const to = "+33612345678"
	capOnly := policy.Sending{Cap: policy.Cap{Count: 1, Per: time.Hour}}
	both := policy.Sending{Window: fixedWindow(c.now().Add(time.Hour)), Cap: capOnly.Cap}
	judge := func(id string, rules policy.Sending) Judgement {
		t.Helper()
		j, err := s.Judge(ctx, msg(cl, id, to), rules)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	release := func(id string) {
		t.Helper()
		if ok, err := s.ReleaseNow(ctx, cl, id); err != nil || !ok {
			t.Fatalf("release %s early: %v %v", id, ok, err)
		}
	}
	if j := judge("free", both); j.Verdict != Deferred || j.Reason != "window" {
		t.Fatalf("outside its window: %+v", j)
	}
	release("free")
	if j := judge("free", both); j.Verdict != Send {
		t.Fatalf("released early, its cap free: %+v, want send", j)
	}
	// The number's one place is free's now.
	if j := judge("over", both); j.Verdict != Deferred || j.Reason != "window" {
		t.Fatalf("outside its window: %+v", j)
	}
	release("over")
	if j := judge("over", both); j.Verdict != Deferred || j.Reason != "cap" {
		t.Errorf("released early, its cap full: %+v, want deferred for the cap", j)
	}
	if j := judge("capped", capOnly); j.Verdict != Deferred || j.Reason != "cap" {
		t.Fatalf("over its cap: %+v", j)
	}
	release("capped")
	if j := judge("capped", capOnly); j.Verdict != Deferred || j.Reason != "cap" {
		t.Errorf("held by its cap and released early: %+v, want deferred for the cap again", j)
	}
}
