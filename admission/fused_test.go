package admission

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/redistest"
	"smsdispatcher/internal/scriptop"
	"smsdispatcher/ledger"
)

// The fused calls: the id's claim taken with the slot (Admit), and its
// record written with the lease's end (Settle).

// oneSlotConfig admits one message a second with no burst: a second call
// within the same second is denied, or booked a second ahead.
func oneSlotConfig(t *testing.T) Config {
	c := slowConfig(t)
	c.Burst = 1
	return c
}

// TestADenialWritesNoClaim: a denied admission leaves the id's record as
// it was, so that another process may claim it at once.
func TestADenialWritesNoClaim(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, oneSlotConfig(t))
	ctx := context.Background()
	if d, err := l.tryAcquire(ctx, OTP, 1, ticketNone, 0, 0, Claim{ID: "first", Token: "a"}); err != nil || !d.Allowed || !d.Claimed {
		t.Fatalf("first: %+v, %v; want allowed and claimed", d, err)
	}
	d, err := l.tryAcquire(ctx, OTP, 1, ticketOnDenial, time.Hour, 0, Claim{ID: "second", Token: "b"})
	if err != nil || d.Allowed || d.Reason != ReasonGlobal {
		t.Fatalf("second: %+v, %v; want denied by the rate", d, err)
	}
	if v := get(t, rdb, l.Claims().Key("second")); v != "<absent>" {
		t.Fatalf("the denied id's record is %q, want none", v)
	}
}

// TestADuplicateTakesNoSlot: an id already sent, or claimed by another
// attempt, is answered from its record, and no TAT moves.
func TestADuplicateTakesNoSlot(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := testConfig(t)
	l := newLimiter(t, rdb, cfg)
	ctx := context.Background()
	d, err := l.Admit(ctx, Marketing, 1, time.Second, Claim{ID: "sent", Token: "a"})
	if err != nil || !d.Claimed {
		t.Fatalf("first: %+v, %v", d, err)
	}
	if err := l.Settle(ctx, d, ledger.SentRecord("SM1"), ResultNone, ledger.Story{}); err != nil {
		t.Fatal(err)
	}
	if d, err := l.Admit(ctx, OTP, 1, time.Second, Claim{ID: "held", Token: "b"}); err != nil || !d.Claimed {
		t.Fatalf("held: %+v, %v", d, err)
	}
	keys := l.tatKeys()[:2]
	before := []string{get(t, rdb, keys[0]), get(t, rdb, keys[1])}
	for _, tt := range []struct {
		id   string
		want ledger.Record
	}{
		{"sent", ledger.Record{State: ledger.Finished, ProviderID: "SM1"}},
		{"held", ledger.Record{State: ledger.Held}},
	} {
		d, err := l.Admit(ctx, Marketing, 1, time.Second, Claim{ID: tt.id, Token: "c"})
		if err != nil || d.Allowed || d.Reason != ReasonRecord || d.Record != tt.want {
			t.Errorf("%s again: %+v, %v; want its record %+v", tt.id, d, err, tt.want)
		}
	}
	if after := []string{get(t, rdb, keys[0]), get(t, rdb, keys[1])}; after[0] != before[0] || after[1] != before[1] {
		t.Fatalf("TATs %v -> %v: a duplicate took a slot", before, after)
	}
}

// TestSendsAreCountedAcrossGivenBackClaims: a counted claim given back
// keeps its count, so that the next attempt's resend count goes on.
func TestSendsAreCountedAcrossGivenBackClaims(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, testConfig(t))
	ctx := context.Background()
	for want := range 3 {
		d, err := l.Admit(ctx, OTP, 1, time.Second, Claim{ID: "retried", Token: string(rune('a' + want)), Count: true})
		if err != nil || !d.Claimed || d.Attempts != want {
			t.Fatalf("attempt %d: %+v, %v; want claimed with %d before it", want+1, d, err, want)
		}
		if err := l.Settle(ctx, d, "", ResultNone, ledger.Story{}); err != nil {
			t.Fatal(err)
		}
	}
	// A claim given back is free to claim for any attempt.
	if rec, err := l.Claims().Claim(ctx, "retried", "z", 0); err != nil || rec.State != ledger.Claimed {
		t.Fatalf("claim after the count: %+v, %v", rec, err)
	}
}

// lostReply runs the admission script for real and then ends the caller's context
// before the reply, as a shutdown mid-call would.
type lostReply struct{ cancel context.CancelFunc }

func (lostReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (lostReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h lostReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(context.WithoutCancel(ctx), cmd)
		if scriptop.Of(cmd.Args()) == OpAdmit {
			h.cancel()
			return ctx.Err()
		}
		return err
	}
}

// TestAClaimWhoseReplyWasLostIsGivenBack: the admission's claim landed in
// Redis but its reply was lost (the caller's context ended): the claim is
// given back at once, or every other process would see the id held until
// it expires.
func TestAClaimWhoseReplyWasLostIsGivenBack(t *testing.T) {
	rdb := redistest.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	lossy := redistest.Client(t)
	lossy.AddHook(lostReply{cancel})
	l := newLimiter(t, lossy, testConfig(t))
	if d, err := l.Admit(ctx, Marketing, 1, time.Second, Claim{ID: "cut", Token: "a"}); err == nil || d.Claimed {
		t.Fatalf("admission: %+v, %v; want its context's end", d, err)
	}
	if get(t, rdb, l.tatKeys()[1]) == "<absent>" {
		t.Fatal("the script never ran: nothing to give back")
	}
	if v := get(t, rdb, l.Claims().Key("cut")); v != "<absent>" {
		t.Fatalf("record %q left behind, want the claim given back", v)
	}
}

// TestABookedSlotIsWaitedFor: a slot opening within the lookahead is
// booked in the same call, and Admit returns once it opens: one call, and
// never early.
func TestABookedSlotIsWaitedFor(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := testConfig(t)
	cfg.TargetRPS, cfg.MarketingRPS, cfg.Burst = 10, 10, 1
	l := newLimiter(t, rdb, cfg)
	ctx := context.Background()
	first, err := l.Admit(ctx, OTP, 1, time.Second, Claim{})
	if err != nil || !first.Allowed {
		t.Fatalf("first: %+v, %v", first, err)
	}
	start := time.Now()
	d, err := l.Admit(ctx, OTP, 1, time.Second, Claim{})
	waited := time.Since(start)
	if err != nil || !d.Allowed || d.Tries != 1 {
		t.Fatalf("second: %+v, %v; want allowed on its first call (booked)", d, err)
	}
	// The slot opens one interval (100 ms) after the first, on Redis's
	// clock; less the time the first reply took to come back.
	if waited < 90*time.Millisecond {
		t.Fatalf("second returned %v after the first's answer, want about one interval (100ms): sent before its slot", waited)
	}
}

// TestABookedSlotIsGivenUpOnA429: a 429 this process hears of while it
// waits for a booked slot stops that send too: the slot goes unused and
// the claim is given back.
func TestABookedSlotIsGivenUpOnA429(t *testing.T) {
	rdb := redistest.Client(t)
	admitted := make(chan struct{}, 8)
	hooked := redistest.Client(t)
	hooked.AddHook(afterAdmit(admitted))
	l := newLimiter(t, hooked, oneSlotConfig(t))
	ctx := context.Background()
	if d, err := l.Admit(ctx, OTP, 1, 3*time.Second, Claim{}); err != nil || !d.Allowed {
		t.Fatalf("first: %+v, %v", d, err)
	}
	<-admitted
	type result struct {
		d   Decision
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := l.Admit(ctx, OTP, 1, 3*time.Second, Claim{ID: "booked", Token: "a"})
		done <- result{d, err}
	}()
	<-admitted // the second is booked a second ahead, and waits for it
	if err := l.ReportThrottled(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.d.Allowed || r.d.Reason != ReasonPenalty {
		t.Fatalf("the booked send: %+v, %v; want denied by the 429's penalty", r.d, r.err)
	}
	if v := get(t, rdb, l.Claims().Key("booked")); v != "<absent>" {
		t.Fatalf("record %q left behind, want the claim given back", v)
	}
}

// TestTheRecoveryFloorIsRaisedEvenByADuplicate: the first call of a process
// back from its fallback raises both TATs for the others still in theirs,
// whatever it decides: a duplicate's answer comes from its record, but the
// floor is kept.
func TestTheRecoveryFloorIsRaisedEvenByADuplicate(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, testConfig(t))
	ctx := context.Background()
	if err := rdb.Set(ctx, l.Claims().Key("again"), ledger.RecordSent, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.stops.fallback = true
	l.mu.Unlock()
	d, err := l.Admit(ctx, Marketing, 1, time.Second, Claim{ID: "again", Token: "a"})
	if err != nil || d.Reason != ReasonRecord {
		t.Fatalf("a duplicate back from the fallback: %+v, %v", d, err)
	}
	lead := time.Duration(mustInt(t, get(t, rdb, l.tatKeys()[0]))-redisNow(t, rdb)) * time.Microsecond
	if want := time.Duration(l.recoveryFloor)*time.Microsecond - 100*time.Millisecond; lead < want {
		t.Fatalf("global TAT %v ahead, want the recovery floor (%v)", lead, time.Duration(l.recoveryFloor)*time.Microsecond)
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// TestTheProbeAfterAPenaltyGoesAlone: for a second after a penalty ends no
// slot is booked ahead, by any process: the probe that finds whether the
// provider still refuses is the only send on its way.
func TestTheProbeAfterAPenaltyGoesAlone(t *testing.T) {
	cfg := testConfig(t)
	cfg.TargetRPS, cfg.MarketingRPS, cfg.Burst = 10, 10, 1
	rdb := redistest.Client(t)
	a := newLimiter(t, rdb, cfg)
	b := newLimiter(t, redistest.Client(t), cfg)
	probe := newLimiter(t, redistest.Client(t), cfg) // heard of no penalty
	ctx := context.Background()
	if err := a.ReportThrottled(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	// The penalty ends (and the TAT it moved with it), its probe key lives.
	if err := rdb.Del(ctx, append(a.tatKeys()[:1], a.tatKeys()[2])...).Err(); err != nil {
		t.Fatal(err)
	}
	if d, err := probe.tryAcquire(ctx, OTP, 1, ticketNone, time.Second, 0, Claim{}); err != nil || !d.Allowed {
		t.Fatalf("the probe: %+v, %v; want allowed", d, err)
	}
	// The next slot opens one interval (100 ms) on: within another
	// process's lookahead, but not to be booked while the probe's answer
	// may still be a 429.
	d, err := b.tryAcquire(ctx, OTP, 1, ticketNone, time.Second, time.Second, Claim{})
	if err != nil || d.Allowed {
		t.Fatalf("another process right after the probe: %+v, %v; want denied, not booked", d, err)
	}
}

// afterAdmit is a go-redis hook that signals on admitted each time a call
// of the admission script has been answered.
type afterAdmit chan struct{}

func (afterAdmit) DialHook(next redis.DialHook) redis.DialHook { return next }
func (afterAdmit) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h afterAdmit) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if scriptop.Of(cmd.Args()) == OpAdmit {
			h <- struct{}{}
		}
		return err
	}
}

// TestASlotIsBookedOnlyWithinTheLookahead: a caller whose slot opens
// further ahead than its lookahead is denied and waits, booking nothing:
// a slot booked far ahead would go out after a 429 or a Redis outage that
// came meanwhile. Redis's TAT after the first answer says which it did.
func TestASlotIsBookedOnlyWithinTheLookahead(t *testing.T) {
	cfg := slowConfig(t) // 1/s: the lookahead of an OTP is 2 s
	cfg.Burst = 1
	rdb := redistest.Client(t)
	admitted := make(chan struct{}, 8)
	hooked := redistest.Client(t)
	hooked.AddHook(afterAdmit(admitted))
	l := newLimiter(t, hooked, cfg)
	plantTAT(t, rdb, l.tatKeys()[0], 10*time.Second, time.Minute) // the next slot opens in 10 s
	tat := get(t, rdb, l.tatKeys()[0])

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = l.acquire(ctx, OTP, 30*time.Second) // ends with ctx
	}()
	<-admitted
	after := get(t, rdb, l.tatKeys()[0])
	cancel()
	<-done
	if after != tat {
		t.Fatalf("global TAT %s -> %s after the first answer: a slot 10 s ahead was booked, want a denial (lookahead 2 s)", tat, after)
	}
}
