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
	if err := a.ReportThrottled(ctx, 100*time.Millisecond); err != nil {
		t.Fatalf("ReportThrottled: %v", err)
	}
	if got := get(t, rdb, a.Keys()[2]); got != "account:twilio 20003" {
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
	if penalty, _ := b.State(); !penalty {
		t.Fatalf("State: no penalty during the pause")
	}

	if err := a.ResumeAccount(ctx); err != nil {
		t.Fatalf("ResumeAccount: %v", err)
	}
	if d := try(t, a, OTP); !d.Allowed {
		t.Fatalf("after ResumeAccount, where it ran: %+v, want allowed", d)
	}
	// The other process knows of the pause and asks Redis again only
	// after accountRecheck: no call per message while paused.
	if d := try(t, b, OTP); d.Allowed || d.Reason != ReasonAccount {
		t.Fatalf("other process right after the resume: %+v, want its known pause", d)
	}
	clock.Add(accountRecheck)
	// Redis decides again: by the rate (a may have just taken the slot).
	if d := try(t, b, OTP); d.Source != SourceRedis {
		t.Fatalf("other process %v after the resume: %+v, want Redis's decision", accountRecheck, d)
	}
	if _, _, ok := b.AccountPause(); ok {
		t.Fatalf("AccountPause still reported after Redis said it was over")
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
	if ttl := rdb.PTTL(ctx, a.Keys()[2]).Val(); ttl < 4*time.Second {
		t.Fatalf("penalty PTTL = %v after ResumeAccount, want the 429's 5 s kept", ttl)
	}
	if d := try(t, b, OTP); d.Allowed || d.Reason != ReasonPenalty {
		t.Fatalf("after ResumeAccount during a 429: %+v, want the 429's denial", d)
	}
}

// TestResumedAccountStartsWithoutABurst: the pause moved the TAT to its
// end; the resume brings it back to one send at once, then one per
// interval.
func TestResumedAccountStartsWithoutABurst(t *testing.T) {
	ctx := context.Background()
	cfg := slowConfig(t) // 1/s, BURST 5
	l := newLimiter(t, redistest.Client(t), cfg)
	if err := l.ReportAccountFailure(ctx, time.Hour, "vonage 4"); err != nil {
		t.Fatal(err)
	}
	if err := l.ResumeAccount(ctx); err != nil {
		t.Fatal(err)
	}
	if d := try(t, l, OTP); !d.Allowed {
		t.Fatalf("first send after the resume: %+v, want allowed", d)
	}
	if d := try(t, l, OTP); d.Allowed || d.Reason != ReasonGlobal {
		t.Fatalf("second send at once: %+v, want a rate denial (no burst after a pause)", d)
	}
}

// TestCostIsChargedInOneCall: a send of 3 units takes 3 intervals of the
// account; one of more units than BURST waits for a clean slate, then goes.
func TestCostIsChargedInOneCall(t *testing.T) {
	ctx := context.Background()
	cfg := slowConfig(t) // 1/s, BURST 5
	l := newLimiter(t, redistest.Client(t), cfg)
	tryN := func(cost int) Decision {
		t.Helper()
		d, err := l.tryAcquire(ctx, OTP, cost, ticketNone, 0)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := tryN(3); !d.Allowed {
		t.Fatalf("3 units on a fresh account: %+v, want allowed", d)
	}
	if d := tryN(3); d.Allowed {
		t.Fatalf("3 more units at once: %+v, want denied (6 > BURST 5)", d)
	}
	if d := tryN(2); !d.Allowed {
		t.Fatalf("2 more units: %+v, want allowed (5 = BURST)", d)
	}
	if d := tryN(1); d.Allowed {
		t.Fatalf("a 6th unit in the same instant: %+v, want denied", d)
	}

	fresh := newLimiter(t, redistest.Client(t), slowConfig(t))
	if d, _ := fresh.tryAcquire(ctx, Marketing, 8, ticketNone, 0); !d.Allowed {
		t.Fatalf("8 units (over BURST 5) on a clean slate: %+v, want allowed", d)
	}
	d, _ := fresh.tryAcquire(ctx, OTP, 1, ticketNone, 0)
	if d.Allowed || d.RetryAfter < 2*time.Second {
		t.Fatalf("right after an 8-unit send: %+v, want a wait of about 8 - (BURST-1) s", d)
	}
}
