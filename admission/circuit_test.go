package admission

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
)

// TestClaimsAndLimiterShareOneCircuit: Redis hangs. The first claim pays
// one timeout and opens the circuit; from then on neither the claims nor
// the limiter send Redis anything until the retry interval has passed:
// nothing waits on a Redis known to be down. Once it has passed, one call
// probes, and Redis answering closes the circuit for both.
func TestClaimsAndLimiterShareOneCircuit(t *testing.T) {
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	rdb := redistest.ClientOf(t, proxy.Addr())
	rec := &redistest.Recorder{}
	rdb.AddHook(rec)
	clock := &fakeClock{t: t0}
	logger, _ := newCountingLogger()
	cfg := testConfig(t)
	cfg.RedisTimeout, cfg.RedisRetryAfter, cfg.Logger = 100*time.Millisecond, time.Second, logger
	lim := newLimiter(t, rdb, cfg, WithClock(clock))
	claims := NewClaims(rdb, cfg.Account, 0, 0, cfg.RedisTimeout, lim.circuit)
	ctx := context.Background()

	proxy.SetMode(redistest.Blackhole)
	if _, err := claims.Claim(ctx, "login-1", "a", 0); err == nil || errors.Is(err, ErrRedisDown) {
		t.Fatalf("first claim on a hung Redis: %v, want its timeout", err)
	}
	asked := rec.Len()
	if _, err := claims.Claim(ctx, "login-2", "b", 0); !errors.Is(err, ErrRedisDown) {
		t.Fatalf("claim with the circuit open: %v, want ErrRedisDown", err)
	}
	if err := claims.Release(ctx, "login-2", "b"); !errors.Is(err, ErrRedisDown) {
		t.Fatalf("release with the circuit open: %v, want ErrRedisDown", err)
	}
	if err := claims.Finish(ctx, "login-2", ledger.RecordSent); !errors.Is(err, ErrRedisDown) {
		t.Fatalf("finish with the circuit open: %v, want ErrRedisDown", err)
	}
	if d := try(t, lim, OTP); d.Source != SourceFallback {
		t.Fatalf("admission after a claim found Redis hung: %+v, want the fallback without asking", d)
	}
	if n := rec.Len() - asked; n != 0 {
		t.Fatalf("%d Redis commands sent with the circuit open, want 0", n)
	}

	// The interval over, Redis still hung: one caller probes, the others
	// still do not wait.
	clock.Add(cfg.RedisRetryAfter + time.Millisecond)
	errs := make(chan error, 4)
	for i := range 4 {
		go func() {
			_, err := claims.Claim(ctx, fmt.Sprintf("login-p%d", i), "p", 0)
			errs <- err
		}()
	}
	probes := 0
	for range 4 {
		if err := <-errs; !errors.Is(err, ErrRedisDown) {
			probes++
		}
	}
	if probes != 1 {
		t.Fatalf("%d of 4 concurrent claims asked a hung Redis after the interval, want 1 probe", probes)
	}

	proxy.SetMode(redistest.Up)
	clock.Add(cfg.RedisRetryAfter + time.Millisecond)
	if d := try(t, lim, OTP); d.Source != SourceRedis {
		t.Fatalf("after the retry interval: %+v, want a Redis decision", d)
	}
	if r, err := claims.Claim(ctx, "login-3", "c", 0); err != nil || r.State != ledger.Claimed {
		t.Fatalf("claim once Redis answers: %+v, %v; want claimed", r, err)
	}
}

// TestAClaimReleaseThatMissedRedisIsDoneWhenItAnswers: a claim's Release
// falls in an outage. Once Redis answers a Claim again the claim is given
// back, so that the id's redelivery is not held until the claim expires.
func TestAClaimReleaseThatMissedRedisIsDoneWhenItAnswers(t *testing.T) {
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	clock := &fakeClock{t: t0}
	logger, _ := newCountingLogger()
	cfg := testConfig(t)
	cfg.Logger, cfg.RedisRetryAfter = logger, time.Second
	rdb := redistest.ClientOf(t, proxy.Addr())
	lim := newLimiter(t, rdb, cfg, WithClock(clock))
	claims := NewClaims(rdb, cfg.Account, time.Minute, 0, cfg.RedisTimeout, lim.circuit)
	other := NewClaims(redistest.Client(t), cfg.Account, 0, 0, 0, nil) // another pod
	ctx := context.Background()

	if r, err := claims.Claim(ctx, "promo-1", "a", 0); err != nil || r.State != ledger.Claimed {
		t.Fatalf("claim: %+v, %v", r, err)
	}
	proxy.SetMode(redistest.Refuse)
	if err := claims.Release(ctx, "promo-1", "a"); err == nil {
		t.Fatal("release with Redis down: nil error")
	}
	proxy.SetMode(redistest.Up)
	clock.Add(cfg.RedisRetryAfter + time.Millisecond)
	if r, err := other.Claim(ctx, "promo-1", "b", 0); err != nil || r.State != ledger.Held {
		t.Fatalf("before this pod reaches Redis again: %+v, %v; want held", r, err)
	}
	if _, err := claims.Claim(ctx, "login-9", "c", 0); err != nil {
		t.Fatal(err)
	}
	if r, err := other.Claim(ctx, "promo-1", "b", 0); err != nil || r.State != ledger.Claimed {
		t.Fatalf("once this pod reached Redis again: %+v, %v; want the released claim free", r, err)
	}
}

// TestALeaseWhoseReplyWasLostIsReleased: the script takes a lease, but its
// reply arrives after the call's timeout. The lease must not hold one of
// MaxInFlight's slots until LeaseTTL: it is released by member once Redis
// answers again.
func TestALeaseWhoseReplyWasLostIsReleased(t *testing.T) {
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	direct := redistest.Client(t)
	clock := &fakeClock{t: t0}
	logger, _ := newCountingLogger()
	cfg := testConfig(t)
	cfg.RedisTimeout, cfg.RedisRetryAfter, cfg.Logger = 100*time.Millisecond, time.Second, logger
	cfg.MaxInFlight, cfg.LeaseTTL = 1, time.Minute
	cfg.MaxSenders = 1 // no recovery floor: the point is the lease, not the rate
	lim := newLimiter(t, redistest.ClientOf(t, proxy.Addr()), cfg, WithClock(clock))
	leases := lim.call(OTP).Leases
	ctx := context.Background()
	// Once on a fast Redis, so that the script is cached there and the
	// late call is one EVALSHA.
	if d := try(t, lim, OTP); !d.Allowed || lim.Settle(ctx, d, "", ResultNone, ledger.Story{}) != nil {
		t.Fatalf("warm-up: %+v", d)
	}

	proxy.SetDelay(300 * time.Millisecond)
	if d := try(t, lim, OTP); d.Source != SourceFallback {
		t.Fatalf("reply later than the timeout: %+v, want the fallback", d)
	}
	// The script ran all the same (a reply is only late).
	hang := time.Now().Add(10 * time.Second)
	for direct.ZCard(ctx, leases).Val() != 1 {
		if time.Now().After(hang) {
			t.Fatal("the late admission's lease never appeared in Redis")
		}
		time.Sleep(10 * time.Millisecond) // polling Redis's state from outside the limiter
	}
	proxy.SetDelay(0)
	clock.Add(cfg.RedisRetryAfter + time.Millisecond)
	d := try(t, lim, OTP)
	if !d.Allowed || d.Source != SourceRedis {
		t.Fatalf("MaxInFlight 1 once Redis is fast again: %+v, want allowed (the lost lease released)", d)
	}
	if n := direct.ZCard(ctx, leases).Val(); n != 1 {
		t.Fatalf("%d leases in Redis, want only the new one", n)
	}
	if err := lim.Settle(ctx, d, "", ResultNone, ledger.Story{}); err != nil {
		t.Fatal(err)
	}
	if n := direct.ZCard(ctx, leases).Val(); n != 0 {
		t.Fatalf("%d leases after the release, want 0", n)
	}
}

// TestACallerThatNeverAskedSaysSo: a caller whose max wait runs out while
// another caller of its class holds the turn, or that comes with no time
// left, reports that nobody decided, never a made-up or stale Redis
// denial.
func TestACallerThatNeverAskedSaysSo(t *testing.T) {
	rdb := redistest.Client(t)
	rec := &redistest.Recorder{}
	rdb.AddHook(rec)
	lim := newLimiter(t, rdb, testConfig(t))
	ctx := context.Background()

	lim.classes[OTP].turn <- 1 // another caller of the class holds the turn
	d, err := lim.acquire(ctx, OTP, 20*time.Millisecond)
	<-lim.classes[OTP].turn
	if err != nil || d.Allowed || d.Source != SourceNone || d.Reason != ReasonTurn {
		t.Fatalf("queued behind the turn past its max wait: %+v, %v; want {Source: none, Reason: turn}", d, err)
	}
	if d, err := lim.acquire(ctx, OTP, 0); err != nil || d.Source != SourceNone || d.Reason != ReasonNoTime {
		t.Fatalf("no time left: %+v, %v; want {Source: none, Reason: no_time}", d, err)
	}
	if n := rec.Len(); n != 0 {
		t.Fatalf("%d Redis commands from callers that never asked, want 0", n)
	}
}

// TestClearingAnOverrideGivesTheRateBackAtOnce: a burst under a 1/s
// override leaves the TAT seconds ahead. Cleared, the account owes those
// messages at the configured rate (milliseconds), not seconds of silence.
func TestClearingAnOverrideGivesTheRateBackAtOnce(t *testing.T) {
	cfg := testConfig(t)
	lim := newLimiter(t, redistest.Client(t), cfg)
	ctx := context.Background()
	if err := lim.Override(ctx, 1, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	n := 0
	for ; n < 10 && try(t, lim, OTP).Allowed; n++ {
	}
	if n > cfg.Burst {
		t.Fatalf("%d admitted at once under a 1/s override, want at most BURST = %d", n, cfg.Burst)
	}
	if d := try(t, lim, OTP); d.Allowed || d.RetryAfter < 500*time.Millisecond {
		t.Fatalf("right after the burst under 1/s: %+v, want a wait of about a second", d)
	}
	if err := lim.Override(ctx, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	d := try(t, lim, OTP)
	if !d.Allowed && d.RetryAfter > time.Duration(cfg.Burst+1)*interval(cfg.TargetRPS) {
		t.Fatalf("right after clearing: %+v, want allowed within BURST intervals of %v", d, interval(cfg.TargetRPS))
	}
}

// TestAnOverrideKeepsALivePenaltysLength: a 429 moved the TAT past the
// penalty's end. An override then rescales only what the TAT owes in
// messages, not the penalty's pause: at a ninth of the rate, the account
// must not wait nine times the Retry-After.
func TestAnOverrideKeepsALivePenaltysLength(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := testConfig(t)
	lim := newLimiter(t, rdb, cfg)
	ctx := context.Background()
	if err := lim.ReportThrottled(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := lim.Override(ctx, 10, 10, time.Minute); err != nil {
		t.Fatal(err)
	}
	tat, err := rdb.Get(ctx, lim.tatKeys()[0]).Int64()
	if err != nil {
		t.Fatal(err)
	}
	lead := time.Duration(tat-redisNow(t, rdb)) * time.Microsecond
	// The penalty, then at most BURST messages owed at 10/s.
	if most := 2*time.Second + time.Duration(cfg.Burst)*interval(10); lead > most {
		t.Fatalf("global TAT %v ahead after an override during a 2 s penalty, want at most %v", lead, most)
	}
}
