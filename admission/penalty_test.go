package admission

import (
	"context"
	"testing"
	"time"

	"smsdispatcher/internal/redistest"
)

// TestARetryAfterAboveTheCapStopsTheAccountForTheCapOnly: a 429 asking
// for a day stops the account for MaxRetryAfter, in the process that
// heard it, in Redis and in the others.
func TestARetryAfterAboveTheCapStopsTheAccountForTheCapOnly(t *testing.T) {
	ctx := context.Background()
	for _, capped := range []time.Duration{0, 30 * time.Second} {
		cfg := testConfig(t)
		cfg.MaxRetryAfter = capped
		if capped == 0 {
			capped = DefaultMaxRetryAfter
		}
		rdb := redistest.Client(t)
		a := newLimiter(t, rdb, cfg)
		b := newLimiter(t, redistest.Client(t), cfg)
		if err := a.ReportThrottled(ctx, 24*time.Hour); err != nil {
			t.Fatal(err)
		}
		if ttl := rdb.PTTL(ctx, a.tatKeys()[2]).Val(); ttl > capped || ttl < capped-time.Minute/2 {
			t.Fatalf("MaxRetryAfter %v: penalty PTTL %v after a Retry-After of 24h, want about %v", capped, ttl, capped)
		}
		for name, l := range map[string]*Limiter{"the process that heard the 429": a, "another process": b} {
			if d := try(t, l, OTP); d.Reason != ReasonPenalty || d.RetryAfter > capped {
				t.Fatalf("MaxRetryAfter %v, %s: %+v, want a penalty of at most %v", capped, name, d, capped)
			}
		}
	}
}

// TestClearPenaltyEndsA429EverywhereWithinARecheck: an operator's
// ClearPenalty ends a 429 penalty in Redis and where it ran at once, and
// in another process that knows of the penalty with its first admission
// after penaltyRecheck, long before the penalty would have ended. It never
// ends an account-level pause.
func TestClearPenaltyEndsA429EverywhereWithinARecheck(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	rdb := redistest.Client(t)
	a := newLimiter(t, rdb, cfg)
	clock := &fakeClock{t: time.Now()}
	b := newLimiter(t, redistest.Client(t), cfg, WithClock(clock))
	operator := newLimiter(t, redistest.Client(t), cfg)

	if err := a.ReportThrottled(ctx, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	if d := try(t, b, OTP); d.Reason != ReasonPenalty || d.RetryAfter < 4*time.Minute {
		t.Fatalf("another process during the penalty: %+v, want Redis's 429 penalty", d)
	}
	ended, err := operator.ClearPenalty(ctx)
	if err != nil || !ended {
		t.Fatalf("ClearPenalty: %v, %v; want a penalty ended", ended, err)
	}
	if ttl := rdb.PTTL(ctx, a.tatKeys()[2]).Val(); ttl > 0 {
		t.Fatalf("penalty key lives %v after ClearPenalty", ttl)
	}
	// The probe after it goes alone for a second, not for the five minutes
	// the penalty had left.
	if ttl := rdb.PTTL(ctx, a.call(OTP).Probe).Val(); ttl > time.Second {
		t.Fatalf("probe key lives %v after ClearPenalty, want at most 1s", ttl)
	}
	// The other process decides on its own until its recheck; its first
	// admission after it asks Redis.
	if d := try(t, b, OTP); d.Reason != ReasonPenalty {
		t.Fatalf("the other process right after the clear: %+v, want its known penalty until its recheck", d)
	}
	clock.Add(penaltyRecheck)
	if d := try(t, b, OTP); d.Source != SourceRedis || d.Reason == ReasonPenalty {
		t.Fatalf("the other process %v after the clear: %+v, want Redis's decision, no penalty", penaltyRecheck, d)
	}
	if b.State().Penalty {
		t.Fatal("State of the other process: penalty, after Redis said there was none")
	}
	if ended, err := operator.ClearPenalty(ctx); err != nil || ended {
		t.Fatalf("ClearPenalty without a penalty: %v, %v; want none ended", ended, err)
	}

	// An account-level pause is not a 429's: it stays.
	if err := a.ReportAccountFailure(ctx, time.Minute, "twilio 20003"); err != nil {
		t.Fatal(err)
	}
	if ended, err := operator.ClearPenalty(ctx); err != nil || ended {
		t.Fatalf("ClearPenalty during an account pause: %v, %v; want nothing ended", ended, err)
	}
	if d := try(t, operator, OTP); d.Reason != ReasonAccount {
		t.Fatalf("after ClearPenalty during an account pause: %+v, want the pause's denial", d)
	}
}

// TestAWaiterThroughAPenaltySeesItCleared: a caller waiting through a 429
// penalty asks again at least every penaltyRecheck, so that a cleared
// penalty does not keep it waiting. (The context's deadline only bounds
// the test: the penalty has 40 s left, the caller needs about one.)
func TestAWaiterThroughAPenaltySeesItCleared(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	a := newLimiter(t, redistest.Client(t), cfg)
	if err := a.ReportThrottled(ctx, 40*time.Second); err != nil {
		t.Fatal(err)
	}
	if ended, err := newLimiter(t, redistest.Client(t), cfg).ClearPenalty(ctx); err != nil || !ended {
		t.Fatalf("ClearPenalty elsewhere: %v, %v", ended, err)
	}
	// A bound on a waiter that never asks again (it would wait 40 s), not
	// a speed claim: one recheck comes within a second.
	wctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	d, err := a.acquire(wctx, OTP, time.Minute)
	if err != nil || !d.Allowed {
		t.Fatalf("Acquire after the penalty was cleared elsewhere: %+v, %v; want allowed after its recheck", d, err)
	}
}

// TestAPenaltyEndsWithOneSendNotABurst: a penalty moves the account's TAT
// to its end, so that when it ends the account resumes one message per
// interval, not with a burst of BURST at once that a provider still
// refusing would answer with as many 429s. At 0.01/s the interval is 100
// s: the calls after the penalty fall in one interval however loaded the
// machine is.
func TestAPenaltyEndsWithOneSendNotABurst(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.TargetRPS, cfg.MarketingRPS = MinRPS, MinRPS
	rdb := redistest.Client(t)
	a := newLimiter(t, rdb, cfg)
	if err := a.ReportThrottled(ctx, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// The penalty's end, as Redis says it.
	for rdb.Exists(ctx, a.tatKeys()[2]).Val() == 1 { // a millisecond's polls
	}
	b := newLimiter(t, redistest.Client(t), cfg)
	if d, err := b.acquire(ctx, OTP, time.Second); err != nil || !d.Allowed {
		t.Fatalf("the first send after the penalty: %+v, %v; want allowed", d, err)
	}
	for i := range cfg.Burst {
		if d := try(t, b, OTP); d.Allowed || d.Reason != ReasonGlobal {
			t.Fatalf("send %d at once after the penalty's first: %+v; want the rate's denial (no burst after a penalty)", i+2, d)
		}
	}
}
