package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
)

func TestBurstThenExactSpacing(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, slowConfig(t))
	for i := range 5 {
		if d := try(t, l, OTP); !d.Allowed || d.Source != SourceRedis {
			t.Fatalf("call %d after a quiet spell: got %+v, want allowed by redis", i+1, d)
		}
	}
	d := try(t, l, OTP)
	want := interval(1) // 1/TARGET_RPS
	if d.Allowed || d.Reason != ReasonGlobal {
		t.Fatalf("call 6: got %+v, want denied by the global rate", d)
	}
	if d.RetryAfter <= want-100*time.Millisecond || d.RetryAfter > want {
		t.Fatalf("call 6: RetryAfter = %v, want about 1/TARGET_RPS = %v", d.RetryAfter, want)
	}
}

func TestUsesRedisClockNotProcessClock(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := slowConfig(t)
	behind := newLimiter(t, rdb, cfg, WithClock(skewedClock(-time.Hour)))
	ahead := newLimiter(t, redistest.Client(t), cfg, WithClock(skewedClock(time.Hour)))

	allowed := 0
	for _, l := range []*Limiter{behind, behind, behind, behind, behind, ahead, ahead, ahead, ahead, ahead} {
		d := try(t, l, OTP)
		if d.Source != SourceRedis {
			t.Fatalf("decision %+v: want one of Redis", d)
		}
		if d.Allowed {
			allowed++
		} else if d.RetryAfter > interval(1) {
			t.Errorf("denial waits %v: a process clock leaked into the decision", d.RetryAfter)
		}
	}
	if allowed != 5 {
		t.Fatalf("two processes with clocks two hours apart were allowed %d in a burst, want BURST=5", allowed)
	}
}

func TestIdleTimeDoesNotBankCredit(t *testing.T) {
	for _, class := range []Class{OTP, Marketing} {
		t.Run(class.String(), func(t *testing.T) {
			rdb := redistest.Client(t)
			l := newLimiter(t, rdb, slowConfig(t))
			// A TAT ten seconds in the past: an account idle for ten seconds
			// whose key has not expired yet.
			for _, key := range l.tatKeys()[:2] {
				plantTAT(t, rdb, key, -10*time.Second, time.Minute)
			}
			allowed := 0
			for range 20 {
				if try(t, l, class).Allowed {
					allowed++
				}
			}
			want := 5 // BURST
			if class == Marketing {
				want-- // one slot of the burst is OTP's
			}
			if allowed != want {
				t.Fatalf("after ten idle seconds %d were allowed at once, want %d", allowed, want)
			}
		})
	}
}

func TestMarketingLeavesOTPOneSlotOfTheBurst(t *testing.T) {
	l := newLimiter(t, redistest.Client(t), slowConfig(t))
	for i := range 4 {
		if d := try(t, l, Marketing); !d.Allowed {
			t.Fatalf("marketing %d of a fresh burst: %+v, want allowed", i+1, d)
		}
	}
	if d := try(t, l, Marketing); d.Allowed || d.Reason != ReasonGlobal {
		t.Fatalf("marketing 5: %+v, want denied: the last slot of the burst is OTP's", d)
	}
	if d := try(t, l, OTP); !d.Allowed {
		t.Fatalf("OTP after a marketing burst: %+v, want allowed at once", d)
	}
}

// TestAnAccountLeavesAFixedSetOfKeys: the account's state is a fixed set
// of keys, written without an expiry (a TAT or ticket in the past means
// the same as none, and one MSET writes them); everything per message (the
// ids' records) and per event (a penalty) expires.
func TestAnAccountLeavesAFixedSetOfKeys(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := testConfig(t)
	l := newLimiter(t, rdb, cfg)
	ctx := context.Background()
	for i := range 20 {
		class := bothClasses[i%2]
		d, err := l.Admit(ctx, class, 1, time.Second, Claim{ID: fmt.Sprint("m", i), Token: "t"})
		if err != nil || !d.Allowed {
			t.Fatalf("send %d: %+v, %v", i, d, err)
		}
		if err := l.Settle(ctx, d, ledger.RecordSent, ResultNone, ledger.Story{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.ReportThrottled(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	prefix := keys.For(cfg.Account).Prefix()
	names, err := rdb.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	lasting := map[string]bool{}
	for _, k := range names {
		ttl, err := rdb.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl < 0 {
			lasting[strings.TrimPrefix(k, prefix)] = true
		}
	}
	want := map[string]bool{"tat:global": true, "tat:marketing": true, "wake:otp": true, "wake:marketing": true}
	for k := range lasting {
		if !want[k] {
			t.Errorf("key %s lasts: only the account's TATs and tickets may", k)
		}
	}
}

func TestPenaltyIsSharedAcrossLimitersAndHonouredUntilItEnds(t *testing.T) {
	cfg := testConfig(t)
	a := newLimiter(t, redistest.Client(t), cfg)
	rdb := redistest.Client(t)
	b := newLimiter(t, rdb, cfg)

	if err := a.ReportThrottled(context.Background(), 300*time.Millisecond); err != nil {
		t.Fatalf("ReportThrottled: %v", err)
	}
	for _, class := range []Class{OTP, Marketing} {
		d := try(t, b, class)
		if d.Allowed || d.Source != SourcePenalty {
			t.Fatalf("%v on another limiter during the penalty: got %+v, want a penalty denial", class, d)
		}
		if d.RetryAfter <= 0 || d.RetryAfter > 300*time.Millisecond {
			t.Fatalf("%v: RetryAfter = %v, want the penalty's remaining time (≤ 300ms)", class, d.RetryAfter)
		}
	}
	d, err := b.acquire(context.Background(), OTP, time.Second)
	if err != nil || !d.Allowed {
		t.Fatalf("Acquire across the penalty's end: %+v, %v; want allowed", d, err)
	}
	if ttl := rdb.PTTL(context.Background(), b.tatKeys()[2]).Val(); ttl > 0 {
		t.Fatalf("allowed while the penalty still had %v to run", ttl)
	}
}

func TestShorterPenaltyDoesNotOverwriteLonger(t *testing.T) {
	cfg := testConfig(t)
	rdb := redistest.Client(t)
	a := newLimiter(t, rdb, cfg)
	b := newLimiter(t, redistest.Client(t), cfg)
	ctx := context.Background()
	if err := a.ReportThrottled(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := b.ReportThrottled(ctx, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, a.tatKeys()[2]).Val(); ttl < 4*time.Second {
		t.Fatalf("penalty PTTL = %v after a 5s then a 100ms report, want the 5s one kept", ttl)
	}
	if d := try(t, b, OTP); d.Source != SourcePenalty || d.RetryAfter < 4*time.Second {
		t.Fatalf("decision after a shorter report: %+v, want the longer penalty", d)
	}
}

func TestMarketingIsCappedWhileOTPGetsThrough(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, testConfig(t))
	plantTAT(t, rdb, l.tatKeys()[1], 10*time.Second, time.Minute) // marketing spent its cap
	if d := try(t, l, Marketing); d.Allowed || d.Reason != ReasonCeiling {
		t.Fatalf("marketing over its cap: got %+v, want denied by the marketing cap", d)
	}
	if d := try(t, l, OTP); !d.Allowed {
		t.Fatalf("OTP while marketing is at its cap: got %+v, want allowed", d)
	}
}

func TestDeniedMarketingChangesNoKey(t *testing.T) {
	tests := []struct {
		name   string
		full   int // index in Keys() of the key planted full
		reason Reason
	}{
		{"marketing cap full", 1, ReasonCeiling},
		{"global rate full", 0, ReasonGlobal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb := redistest.Client(t)
			l := newLimiter(t, rdb, testConfig(t))
			keys := l.tatKeys()[:2]
			plantTAT(t, rdb, keys[tt.full], 10*time.Second, time.Minute)
			before := []string{get(t, rdb, keys[0]), get(t, rdb, keys[1])}
			if d := try(t, l, Marketing); d.Allowed || d.Reason != tt.reason {
				t.Fatalf("got %+v, want denied by %q", d, tt.reason)
			}
			after := []string{get(t, rdb, keys[0]), get(t, rdb, keys[1])}
			for i := range keys {
				if before[i] != after[i] {
					t.Errorf("%s changed from %s to %s on a denial", keys[i], before[i], after[i])
				}
			}
		})
	}
}

func TestOneRoundTripPerTryAcquire(t *testing.T) {
	rdb := redistest.Client(t)
	rec := &redistest.Recorder{}
	rdb.AddHook(rec)
	l := newLimiter(t, rdb, testConfig(t))
	try(t, l, OTP) // may load the script (NOSCRIPT, then EVAL)
	rec.Reset()
	for range 20 {
		try(t, l, Marketing)
	}
	if n := rec.Len(); n != 20 {
		t.Fatalf("20 TryAcquire sent %d commands, want 20: %v", n, rec.Commands())
	}
}

func TestScriptSurvivesScriptFlush(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, testConfig(t))
	try(t, l, OTP)
	if err := rdb.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if d := try(t, l, OTP); d.Source != SourceRedis {
		t.Fatalf("after SCRIPT FLUSH: %+v, want a redis decision (EVAL on NOSCRIPT)", d)
	}
}

func TestRedisDownFallsBackToSlowLocalRate(t *testing.T) {
	for _, mode := range []redistest.Mode{redistest.Refuse, redistest.Blackhole} {
		t.Run(map[redistest.Mode]string{redistest.Refuse: "refused", redistest.Blackhole: "timeout"}[mode], func(t *testing.T) {
			proxy := redistest.NewProxy(t, redistest.Addr(t))
			rdb := redistest.ClientOf(t, proxy.Addr())
			rec := &redistest.Recorder{}
			rdb.AddHook(rec)
			clock := &fakeClock{t: t0}
			logger, logs := newCountingLogger()
			cfg := testConfig(t)
			cfg.Logger = logger
			cfg.RedisTimeout = 20 * time.Millisecond
			l := newLimiter(t, rdb, cfg, WithClock(clock))
			proxy.SetMode(mode)

			// Ask every 10ms of process time for 10s, both classes.
			allowed := map[Class]int{}
			for i := range 1000 {
				class := bothClasses[i%2]
				d := try(t, l, class)
				if d.Source != SourceFallback {
					t.Fatalf("call %d with Redis down: %+v, want a fallback decision", i, d)
				}
				if d.Allowed {
					allowed[class]++
				}
				if n := rec.Len(); n > 11 {
					// At once: each try of a blackholed Redis takes its timeout.
					t.Fatalf("Redis was tried %d times in the first %v of fallback, want once a second", n, time.Duration(i+1)*10*time.Millisecond)
				}
				clock.Add(10 * time.Millisecond)
			}
			total := allowed[OTP] + allowed[Marketing]
			// TARGET_RPS/MAX_SENDERS = 90/23 per second, one at a time.
			if hi := 10*90/23 + 1; total > hi || total < hi-2 {
				t.Errorf("fallback allowed %d in 10s, want about 10×90/23 ≤ %d", total, hi)
			}
			if hi := 10*70/23 + 1; allowed[Marketing] > hi {
				t.Errorf("fallback allowed %d marketing in 10s, want ≤ 10×70/23 = %d", allowed[Marketing], hi)
			}
			if n := rec.Len(); n > 11 {
				t.Errorf("Redis was tried %d times in 10s of fallback, want once a second", n)
			}
			if n := logs.n.Load(); n > 11 {
				t.Errorf("%d log lines in 10s of fallback, want at most one a second", n)
			}
		})
	}
}

func TestRedisBackAfterTheSkip(t *testing.T) {
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	rdb := redistest.ClientOf(t, proxy.Addr())
	clock := &fakeClock{t: t0}
	logger, _ := newCountingLogger()
	cfg := testConfig(t)
	cfg.Logger = logger
	l := newLimiter(t, rdb, cfg, WithClock(clock))

	proxy.SetMode(redistest.Refuse)
	if d := try(t, l, OTP); d.Source != SourceFallback {
		t.Fatalf("Redis down: %+v, want fallback", d)
	}
	proxy.SetMode(redistest.Up)
	clock.Add(500 * time.Millisecond)
	if d := try(t, l, OTP); d.Source != SourceFallback {
		t.Fatalf("Redis back, 0.5s into the skip: %+v, want fallback still", d)
	}
	clock.Add(600 * time.Millisecond)
	if d := try(t, l, OTP); d.Source != SourceRedis {
		t.Fatalf("Redis back, skip over: %+v, want a redis decision", d)
	}
}

func TestCanceledContextIsNotARedisFailure(t *testing.T) {
	l := newLimiter(t, redistest.Client(t), testConfig(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.tryOnce(ctx, OTP); !errors.Is(err, context.Canceled) {
		t.Fatalf("TryAcquire on a canceled context: err = %v, want context.Canceled", err)
	}
	if d := try(t, l, OTP); d.Source != SourceRedis {
		t.Fatalf("after a canceled call: %+v, want redis (no circuit opened)", d)
	}
}

func TestAcquireWakesWhenTheSlotOpensNotOnATick(t *testing.T) {
	rdb := redistest.Client(t)
	rec := &redistest.Recorder{}
	rdb.AddHook(rec)
	cfg := testConfig(t)
	cfg.TargetRPS, cfg.MarketingRPS, cfg.Burst = 10, 10, 1 // a slot every 100ms
	l := newLimiter(t, rdb, cfg)
	try(t, l, OTP)
	rec.Reset()

	d, err := l.acquire(context.Background(), OTP, time.Second)
	if err != nil || !d.Allowed {
		t.Fatalf("Acquire: %+v, %v; want allowed within a second", d, err)
	}
	if n := rec.Len(); n > 3 {
		t.Fatalf("Acquire made %d Redis calls to wait one 100ms slot, want ≤ 3 (it should sleep until the slot)", n)
	}
}

func TestAcquireGivesBackAtOnceWhenTheSlotOpensTooLate(t *testing.T) {
	rdb := redistest.Client(t)
	rec := &redistest.Recorder{}
	rdb.AddHook(rec)
	cfg := testConfig(t)
	cfg.TargetRPS, cfg.MarketingRPS, cfg.Burst = 1, 1, 1 // a slot every second
	l := newLimiter(t, rdb, cfg)
	try(t, l, OTP)
	rec.Reset()

	d, err := l.acquire(context.Background(), OTP, 50*time.Millisecond)
	if err != nil || d.Allowed {
		t.Fatalf("Acquire: %+v, %v; want the denial", d, err)
	}
	if d.RetryAfter <= 50*time.Millisecond {
		t.Fatalf("RetryAfter = %v, want the time to the next slot (> maxWait)", d.RetryAfter)
	}
	if n := rec.Len(); n != 1 {
		t.Fatalf("Acquire made %d Redis calls, want 1", n)
	}
}

func TestAcquireReturnsWhenContextEnds(t *testing.T) {
	cfg := testConfig(t)
	cfg.TargetRPS, cfg.MarketingRPS, cfg.Burst = 1, 1, 1
	l := newLimiter(t, redistest.Client(t), cfg)
	try(t, l, OTP)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := l.acquire(ctx, OTP, time.Minute)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire after cancel: %v, want context.Canceled", err)
	}
}

// TestManyProcessesStayUnderTarget runs 200 goroutines on 4 limiters (four
// "processes", each with its own client) for 3s.
func TestManyProcessesStayUnderTarget(t *testing.T) {
	cfg := testConfig(t)
	rdb := redistest.Client(t)
	var limiters []*Limiter
	for range 4 {
		limiters = append(limiters, newLimiter(t, redistest.Client(t), cfg))
	}
	var allowed atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := redisNow(t, rdb)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			l, class := limiters[i%4], bothClasses[i%2]
			for ctx.Err() == nil {
				d, err := l.acquire(ctx, class, 200*time.Millisecond)
				if err == nil && d.Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Duration(redisNow(t, rdb)-start) * time.Microsecond

	got := int(allowed.Load())
	// GCRA's bound over any span: one per interval plus the burst.
	limit := int(elapsed/interval(cfg.TargetRPS)) + cfg.Burst
	floor := int(0.95 * float64(3*cfg.TargetRPS+float64(cfg.Burst)))
	t.Logf("admitted %d in %v of Redis time (bound %d, floor %d)", got, elapsed, limit, floor)
	if got > limit {
		t.Fatalf("admitted %d in %v, above TARGET_RPS·t + BURST = %d", got, elapsed, limit)
	}
	if got < floor {
		t.Fatalf("admitted %d in 3s, below 95%% of TARGET_RPS·3 + BURST = %d", got, floor)
	}
}

// TestBackFromFallbackReservesTheOthersShare: a process coming back to
// Redis after an outage leaves room for processes still sending from their
// fallback, so the account does not see Redis's full rate on top of theirs.
func TestBackFromFallbackReservesTheOthersShare(t *testing.T) {
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	clock := &fakeClock{t: t0}
	logger, _ := newCountingLogger()
	cfg := testConfig(t)
	cfg.Logger = logger
	back := newLimiter(t, redistest.ClientOf(t, proxy.Addr()), cfg, WithClock(clock))
	other := newLimiter(t, redistest.Client(t), cfg) // never lost Redis

	proxy.SetMode(redistest.Refuse)
	if d := try(t, back, OTP); d.Source != SourceFallback {
		t.Fatalf("Redis down: %+v, want fallback", d)
	}
	proxy.SetMode(redistest.Up)
	clock.Add(1100 * time.Millisecond)
	// (MaxSenders-1)/MaxSenders of a second, less the burst tolerance.
	want := time.Second*22/23 - 4*interval(90) - 50*time.Millisecond
	for _, l := range []*Limiter{back, other} {
		d := try(t, l, Marketing)
		if d.Source != SourceRedis || d.Allowed || d.RetryAfter < want {
			t.Fatalf("right after a process came back: %+v, want a Redis denial of at least %v", d, want)
		}
	}
}

// TestAWaitingHerdCostsAboutOneCallPerAdmission: eight processes with a
// marketing backlog each. Without wake tickets every process's waiter wakes
// when the next slot opens and all but one pay a call for nothing (about
// eight calls per admission).
func TestAWaitingHerdCostsAboutOneCallPerAdmission(t *testing.T) {
	limiters, recs := recordedLimiters(t, 8, testConfig(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 * 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if d, err := limiters[i%8].acquire(ctx, Marketing, 8*time.Second); err == nil && d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	calls := 0
	for _, r := range recs {
		calls += r.Len()
	}
	ratio := float64(calls) / float64(admitted.Load())
	t.Logf("%d script calls for %d admissions: %.2f per admission", calls, admitted.Load(), ratio)
	if admitted.Load() < 100 || ratio > 1.5 {
		t.Fatalf("%d calls for %d admissions (%.2f each), want ≤ 1.5 each", calls, admitted.Load(), ratio)
	}
}

func TestOverrideLowersTheRateForEveryProcessAndNeverRaisesIt(t *testing.T) {
	cfg := slowConfig(t) // one a second: quick calls all fall in one slot
	ctx := context.Background()
	tests := []struct {
		name           string
		target, market float64
		wantOTP        time.Duration // RetryAfter of the first denial after a burst
	}{
		{"lowered to 0.5/s", 0.5, 0.25, 2 * time.Second},
		{"above the configured rate: ignored", 1000, 1000, interval(1)},
		{"cleared", 0, 0, interval(1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfg
			cfg.Account = redistest.UniqueAccount(t)
			op := newLimiter(t, redistest.Client(t), cfg)
			if tt.target == 0 { // set one, then clear it
				if err := op.Override(ctx, 0.5, 0.25, time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			if err := op.Override(ctx, tt.target, tt.market, time.Minute); err != nil {
				t.Fatal(err)
			}
			other := newLimiter(t, redistest.Client(t), cfg) // another process
			var d Decision
			for range 6 {
				if d = try(t, other, OTP); !d.Allowed {
					break
				}
			}
			if d.Allowed || d.RetryAfter > tt.wantOTP || d.RetryAfter < tt.wantOTP/2 {
				t.Fatalf("first denial after a burst: %+v, want a wait of about %v", d, tt.wantOTP)
			}
		})
	}
}
