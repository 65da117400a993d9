package admission

import (
	"context"
	"strings"
	"testing"
	"time"

	"smsdispatcher/internal/redistest"
)

// TestAccountPauseStopsEveryProcessUntilResumed: an account-level failure
// reported by one process denies every process with ReasonAccount, keeps
// its why in Redis, and is not ended by a shorter 429; ResumeAccount ends
// it at once where it runs and, within accountRecheck, everywhere.
func TestAccountPauseStopsEveryProcessUntilResumed(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	rdb := redistest.Client(t)
	a := newLimiter(t, rdb, cfg)
	clock := &fakeClock{t: time.Now()}
	b := newLimiter(t, redistest.Client(t), cfg, WithClock(clock))

	if err := a.ReportAccountFailure(ctx, time.Minute, "twilio 20003"); err != nil {
		t.Fatalf("ReportAccountFailure: %v", err)
	}
	// A shorter 429 elsewhere during the pause leaves the pause's why.
	c := newLimiter(t, redistest.Client(t), cfg)
	if err := c.ReportThrottled(ctx, 100*time.Millisecond); err != nil {
		t.Fatalf("ReportThrottled: %v", err)
	}
	if why, _, ok := c.AccountPause(); !ok || why != "account:twilio 20003" {
		t.Fatalf("the process that reported the 429: AccountPause %q %v; want the pause Redis holds", why, ok)
	}
	if got := get(t, rdb, a.tatKeys()[2]); got != "account:twilio 20003" {
		t.Fatalf("penalty key = %q, want the pause's why kept through a shorter 429", got)
	}
	for _, class := range []Class{OTP, Marketing} {
		d := try(t, b, class)
		if d.Allowed || d.Source != SourcePenalty || d.Reason != ReasonAccount || d.RetryAfter < 50*time.Second {
			t.Fatalf("%v on another process during the pause: %+v, want an account denial of about a minute", class, d)
		}
	}
	if why, left, ok := b.AccountPause(); !ok || !strings.HasPrefix(why, "account:") || left < 50*time.Second {
		t.Fatalf("AccountPause on the other process = %q, %v, %v; want the pause", why, left, ok)
	}
	if st := b.State(); !st.Penalty || !st.Paused {
		t.Fatalf("State during the pause: %+v, want a penalty and a pause", st)
	}

	if err := a.ResumeAccount(ctx); err != nil {
		t.Fatalf("ResumeAccount: %v", err)
	}
	// What the sends before the pause may owe is kept: at most one interval.
	if d := try(t, a, OTP); !d.Allowed && (d.Source != SourceRedis || d.RetryAfter > 12*time.Millisecond) {
		t.Fatalf("after ResumeAccount, where it ran: %+v, want Redis's slot within an interval", d)
	}
	// The other process knows of the pause and asks Redis again only
	// after accountRecheck: no call per message while paused.
	if d := try(t, b, OTP); d.Allowed || d.Reason != ReasonAccount {
		t.Fatalf("other process right after the resume: %+v, want its known pause", d)
	}
	if _, _, ok := b.CheckPause(ctx); !ok {
		t.Fatalf("CheckPause right after the resume: over; want the known pause until its recheck")
	}
	clock.Add(accountRecheck)
	if why, _, ok := b.CheckPause(ctx); ok {
		t.Fatalf("CheckPause %v after the resume: still paused (%q)", accountRecheck, why)
	}
	// Redis decides again: by the rate (a may have just taken the slot).
	if d := try(t, b, OTP); d.Source != SourceRedis {
		t.Fatalf("other process %v after the resume: %+v, want Redis's decision", accountRecheck, d)
	}
	if _, _, ok := b.AccountPause(); ok {
		t.Fatalf("AccountPause still reported after Redis said it was over")
	}
	if st := b.State(); st.Penalty || st.Paused {
		t.Fatalf("State after the resume: %+v, want neither a penalty nor a pause", st)
	}
}

// TestResumeAccountNeverEndsA429: only an account-level pause is ended.
func TestResumeAccountNeverEndsA429(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	rdb := redistest.Client(t)
	a := newLimiter(t, rdb, cfg)
	b := newLimiter(t, redistest.Client(t), cfg)
	if err := a.ReportThrottled(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := b.ResumeAccount(ctx); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, a.tatKeys()[2]).Val(); ttl < 4*time.Second {
		t.Fatalf("penalty PTTL = %v after ResumeAccount, want the 429's 5 s kept", ttl)
	}
	if d := try(t, b, OTP); d.Allowed || d.Reason != ReasonPenalty {
		t.Fatalf("after ResumeAccount during a 429: %+v, want the 429's denial", d)
	}
}

// TestResumedAccountStartsWithoutABurst: the pause moved the TAT to its
// end; the resume brings it back to what the sends before the pause may
// still owe (tau and one send), then one per interval, no burst.
func TestResumedAccountStartsWithoutABurst(t *testing.T) {
	ctx := context.Background()
	cfg := slowConfig(t) // 1/s, BURST 5
	l := newLimiter(t, redistest.Client(t), cfg)
	for range 5 {
		if d := try(t, l, OTP); !d.Allowed {
			t.Fatalf("the burst before the pause: %+v", d)
		}
	}
	if err := l.ReportAccountFailure(ctx, time.Hour, "vonage status 200 code 4"); err != nil {
		t.Fatal(err)
	}
	if err := l.ResumeAccount(ctx); err != nil {
		t.Fatal(err)
	}
	d := try(t, l, OTP)
	if d.Allowed || d.Reason != ReasonGlobal || d.RetryAfter > time.Second {
		t.Fatalf("right after the resume, the burst spent: %+v; want a rate denial of at most one interval", d)
	}
	time.Sleep(d.RetryAfter)
	if d := try(t, l, OTP); !d.Allowed {
		t.Fatalf("one interval after the resume: %+v, want allowed", d)
	}
	if d := try(t, l, OTP); d.Allowed {
		t.Fatalf("a second send at once: %+v, want a rate denial (no burst after a pause)", d)
	}
}

// TestCostIsChargedInOneCall: a send of several units goes when its first
// unit would and moves the TAT by all of them, so a long message never
// waits for a clean slate behind short ones; in the fallback it waits for
// Redis.
func TestCostIsChargedInOneCall(t *testing.T) {
	ctx := context.Background()
	cfg := slowConfig(t) // 1/s, BURST 5: tau 4 s
	l := newLimiter(t, redistest.Client(t), cfg)
	tryN := func(l *Limiter, class Class, cost int) Decision {
		t.Helper()
		d, err := l.tryAcquire(ctx, class, cost, ticketNone, 0, 0, Claim{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := tryN(l, OTP, 3); !d.Allowed {
		t.Fatalf("3 units on a fresh account: %+v, want allowed", d)
	}
	if d := tryN(l, OTP, 3); !d.Allowed {
		t.Fatalf("3 more units: %+v, want allowed (the TAT is 3 s ahead, within tau)", d)
	}
	d := tryN(l, OTP, 1)
	if d.Allowed || d.RetryAfter < 1500*time.Millisecond {
		t.Fatalf("a 7th unit: %+v, want denied for about 2 s (TAT 6 s ahead, tau 4 s)", d)
	}

	fresh := newLimiter(t, redistest.Client(t), slowConfig(t))
	if d := tryN(fresh, Marketing, 8); !d.Allowed {
		t.Fatalf("8 units (over BURST 5) on a fresh account: %+v, want allowed", d)
	}
	if d := tryN(fresh, OTP, 1); d.Allowed || d.RetryAfter < 3*time.Second {
		t.Fatalf("right after an 8-unit send: %+v, want a wait of about 8 - 4 s", d)
	}
}

// TestALongMessageWaitsForRedisInTheFallback: while Redis is unreachable a
// process cannot know what the others send; a message of several units
// waits rather than each process sending a long one at once.
func TestALongMessageWaitsForRedisInTheFallback(t *testing.T) {
	cfg := testConfig(t)
	px := redistest.NewProxy(t, redistest.Addr(t))
	clock := &fakeClock{t: t0}
	l := newLimiter(t, redistest.ClientOf(t, px.Addr()), cfg, WithClock(clock))
	px.SetMode(redistest.Refuse)
	d, err := l.tryAcquire(context.Background(), OTP, 2, ticketNone, 0, 0, Claim{})
	if err != nil || d.Allowed || d.Source != SourceFallback || d.Reason != ReasonLong {
		t.Fatalf("2 units with Redis down: %+v, %v; want a fallback denial for a long message", d, err)
	}
	clock.Add(time.Second) // past the fallback's first slot, wherever its phase put it
	if d := try(t, l, OTP); !d.Allowed || d.Source != SourceFallback {
		t.Fatalf("1 unit with Redis down: %+v, want the fallback's slot", d)
	}
}

// TestAccountPauseHoldsWithoutRedis: a pause this process knows of holds
// while Redis cannot be asked (the fallback does not send through it), and
// one Redis could not record is recorded at the next recheck, for every
// process, not forgotten.
func TestAccountPauseHoldsWithoutRedis(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	px := redistest.NewProxy(t, redistest.Addr(t))
	clock := &fakeClock{t: time.Now()}
	l := newLimiter(t, redistest.ClientOf(t, px.Addr()), cfg, WithClock(clock))
	other := newLimiter(t, redistest.Client(t), cfg)

	if err := l.ReportAccountFailure(ctx, time.Minute, "vonage status 200 code 9"); err != nil {
		t.Fatal(err)
	}
	px.SetMode(redistest.Refuse)
	clock.Add(2 * accountRecheck)
	for range 3 {
		if d := try(t, l, OTP); d.Allowed || d.Reason != ReasonAccount {
			t.Fatalf("Redis down, past the recheck: %+v; want the pause, not the fallback's slot", d)
		}
		clock.Add(2 * time.Second) // past RedisRetryAfter: each try asks Redis again
	}

	// A second pause, reported while Redis is down, after the first ended.
	px.SetMode(redistest.Up)
	if err := l.ResumeAccount(ctx); err != nil {
		t.Fatal(err)
	}
	px.SetMode(redistest.Refuse)
	if err := l.ReportAccountFailure(ctx, time.Minute, "twilio status 401 code 20003"); err == nil {
		t.Fatal("ReportAccountFailure with Redis down: no error")
	}
	px.SetMode(redistest.Up)
	clock.Add(2 * time.Second)
	if d := try(t, l, OTP); d.Allowed || d.Reason != ReasonAccount {
		t.Fatalf("Redis back, the pause never recorded there: %+v; want the pause kept", d)
	}
	if d := try(t, other, OTP); d.Allowed || d.Reason != ReasonAccount || d.Why != "account:twilio status 401 code 20003" {
		t.Fatalf("another process once the pause is recorded: %+v; want it, with its why", d)
	}
}

// TestAnAccountFailureDuringALonger429MakesItAPause: the 429's time is kept
// and the pause's why takes its place, so that every process reports the
// account's failure and a fixed credential can end it.
func TestAnAccountFailureDuringALonger429MakesItAPause(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.MaxRetryAfter = 2 * time.Hour
	rdb := redistest.Client(t)
	a := newLimiter(t, rdb, cfg)
	if err := a.ReportThrottled(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := a.ReportAccountFailure(ctx, time.Minute, "vonage status 200 code 8"); err != nil {
		t.Fatal(err)
	}
	if got, ttl := get(t, rdb, a.tatKeys()[2]), rdb.PTTL(ctx, a.tatKeys()[2]).Val(); got != "account:vonage status 200 code 8" || ttl < 59*time.Minute {
		t.Fatalf("penalty key %q for %v; want the pause's why for the 429's hour", got, ttl)
	}
	other := newLimiter(t, redistest.Client(t), cfg)
	if d := try(t, other, OTP); d.Reason != ReasonAccount {
		t.Fatalf("another process: %+v, want the account pause", d)
	}
}
