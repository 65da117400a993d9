package admission

import (
	"context"
	"fmt"
	"testing"
	"time"

	"smsdispatcher/internal/redistest"
)

// adaptiveConfig learns with the shortest step and probe interval, so that
// a test sees the search move within seconds.
func adaptiveConfig(t *testing.T) Config {
	c := testConfig(t)
	c.MarketingRPS = 90
	c.Adaptive = Adaptive{Enabled: true, MinRPS: 20, Step: 100 * time.Millisecond, ProbeInterval: time.Second}
	return c
}

func learned(t *testing.T, l *Limiter) Learned {
	t.Helper()
	s, err := l.Learned(context.Background())
	if err != nil {
		t.Fatalf("Learned: %v", err)
	}
	return s
}

// TestA429LowersTheLearnedRateOncePerIncident: the first 429 cuts the
// rate to 0.7 of the target for every process; 429s within the next
// second (sends already on their way) cut nothing more; a later one cuts
// again, never below MinRPS.
func TestA429LowersTheLearnedRateOncePerIncident(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := adaptiveConfig(t)
	cfg.Adaptive.MinRPS = 50
	l, other := newLimiter(t, rdb, cfg), newLimiter(t, rdb, cfg)
	ctx := context.Background()
	if s := learned(t, l); s.RPS != 0 {
		t.Fatalf("before any 429: %+v, want nothing learned", s)
	}
	for range 3 {
		if err := l.ReportThrottled(ctx, time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if s := learned(t, l); s.RPS != 63 || s.High != 90 || s.Low != 0 || s.Mode != "searching" {
		t.Fatalf("after one incident: %+v, want 63/s searching below 90", s)
	}
	time.Sleep(1100 * time.Millisecond)
	if d := try(t, other, OTP); !d.Allowed || other.State().LearnedRPS != 63 {
		t.Fatalf("another process: %+v, learned %v; want allowed at the shared 63/s", d, other.State().LearnedRPS)
	}
	if err := other.ReportThrottled(ctx, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if s := learned(t, l); s.RPS != 50 || s.High != 63 {
		t.Fatalf("after a second incident: %+v, want the floor 50/s (0.7 × 63 is below MinRPS)", s)
	}
}

// TestTheLearnedRateSlowsTheAccount: a learned (here pinned) rate spaces
// the slots at its own interval, a 429 leaves a pinned rate alone, and the
// configured rate is back on reset.
func TestTheLearnedRateSlowsTheAccount(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := adaptiveConfig(t)
	cfg.Burst = 1
	l := newLimiter(t, rdb, cfg)
	ctx := context.Background()
	if _, err := l.PinLearned(ctx, 10); err == nil {
		t.Fatal("pinning below MinRPS (20) was accepted")
	}
	if _, err := l.PinLearned(ctx, 91); err == nil {
		t.Fatal("pinning above TargetRPS was accepted")
	}
	if _, err := l.PinLearned(ctx, 20); err != nil {
		t.Fatal(err)
	}
	if err := l.ReportThrottled(ctx, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if s := learned(t, l); s.RPS != 20 || s.Mode != "pinned" {
		t.Fatalf("pinned, then a 429: %+v, want 20/s pinned", s)
	}
	// Five sends at 20/s, BURST 1, take at least four intervals (a loaded
	// machine only adds to it).
	start := time.Now()
	for range 5 {
		if d, err := l.Admit(ctx, OTP, 1, time.Second, Claim{}); err != nil || !d.Allowed {
			t.Fatalf("%+v, %v", d, err)
		}
	}
	if took := time.Since(start); took < 4*50*time.Millisecond-time.Millisecond {
		t.Fatalf("five sends at a pinned 20/s took %v, want at least 200ms", took)
	}
	if l.State().LearnedRPS != 20 {
		t.Fatalf("LearnedRPS %v, want 20", l.State().LearnedRPS)
	}
	if s, err := l.PinLearned(ctx, 0); err != nil || s.RPS != 0 {
		t.Fatalf("reset: %+v, %v", s, err)
	}
	time.Sleep(60 * time.Millisecond) // what the last slot at 20/s owes
	for range 3 {
		if d := try(t, l, OTP); !d.Allowed && d.RetryAfter > 12*time.Millisecond {
			t.Fatalf("after reset: %+v, want no wait longer than one 90/s interval", d)
		}
	}
}

// TestTheSearchClimbsOnlyWhenBusyAndNeverAboveTheTarget: after a 429 the
// rate climbs back by bisection while the account is busy (not while it is
// idle), settles, probes one step higher after the probe interval, and
// never goes above TargetRPS: proven at the target, it is forgotten.
func TestTheSearchClimbsOnlyWhenBusyAndNeverAboveTheTarget(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := adaptiveConfig(t)
	l := newLimiter(t, rdb, cfg)
	ctx := context.Background()
	if err := l.ReportThrottled(ctx, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * cfg.Adaptive.Step)
	try(t, l, OTP) // idle: one send does not make the account busy
	if s := learned(t, l); s.RPS != 63 {
		t.Fatalf("idle: %+v, want still 63/s", s)
	}
	var modes []string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		d, err := l.Admit(ctx, OTP, 1, time.Second, Claim{})
		if err != nil || !d.Allowed {
			t.Fatalf("busy admission: %+v, %v", d, err)
		}
		if r := l.State().LearnedRPS; r > cfg.TargetRPS {
			t.Fatalf("learned rate %v above the target %v", r, cfg.TargetRPS)
		}
		s := learned(t, l)
		if s.RPS > cfg.TargetRPS || s.Low > cfg.TargetRPS {
			t.Fatalf("learned %+v above the target %v", s, cfg.TargetRPS)
		}
		if len(modes) == 0 || modes[len(modes)-1] != s.Mode {
			modes = append(modes, s.Mode)
		}
		if s.Mode == "" {
			break
		}
	}
	// 63 (searching) → 76.5 → 83.25 → 86.6, within 5 % of 90: settled;
	// after the probe interval one step up, capped at 90 (probing); proven
	// there: forgotten.
	if want := []string{"searching", "settled", "probing", ""}; fmt.Sprint(modes) != fmt.Sprint(want) {
		t.Fatalf("modes %q, want %q", modes, want)
	}
}

// TestTheSearchWaitsForThePenaltyAndForPressure: the first step after a
// cut counts from the penalty's end (the cut rate must hold where it is
// used), traffic that never has to wait does not move the search, and a
// Limiter that does not learn ignores what another configuration learned.
func TestTheSearchWaitsForThePenaltyAndForPressure(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := adaptiveConfig(t)
	l := newLimiter(t, rdb, cfg)
	ctx := context.Background()
	if err := l.ReportThrottled(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if s := learned(t, l); s.Next.Before(time.Now().Add(time.Second)) {
		t.Fatalf("after a 1 s penalty the next step is due at %v, before the penalty's end", s.Next)
	}
	time.Sleep(1100 * time.Millisecond)
	// Pairs of sends 150 ms apart: within BURST, neither ever waits.
	for range 10 {
		try(t, l, OTP)
		try(t, l, Marketing)
		time.Sleep(150 * time.Millisecond)
	}
	if s := learned(t, l); s.RPS != 63 || s.Mode != "searching" {
		t.Fatalf("after light traffic: %+v, want still 63/s searching", s)
	}
	off := cfg
	off.Adaptive = Adaptive{}
	other := newLimiter(t, rdb, off)
	if d := try(t, other, OTP); !d.Allowed || other.State().LearnedRPS != 0 {
		t.Fatalf("a Limiter that does not learn: %+v, learned %v; want the configured rate", d, other.State().LearnedRPS)
	}
}

// TestTheFallbackSharesTheLearnedRate: while Redis is down a process's
// share is of the rate the provider taught, marketing's in proportion.
func TestTheFallbackSharesTheLearnedRate(t *testing.T) {
	cfg := Config{TargetRPS: 90, MarketingRPS: 45, MaxSenders: 10}.withDefaults()
	f := newFallback(cfg)
	f.learnedRate(cfg, 60)
	if f.global.interval != interval(6) || f.levels[0].interval != interval(3) {
		t.Fatalf("intervals %v and %v, want those of 6/s and 3/s", f.global.interval, f.levels[0].interval)
	}
	f.learnedRate(cfg, 0)
	if f.global.interval != interval(9) || f.levels[0].interval != interval(4.5) {
		t.Fatalf("intervals %v and %v, want the configured shares", f.global.interval, f.levels[0].interval)
	}
}

// TestA429IgnoresRatesBelowTheMinimumInRedis: penalty.lua reads the
// override, the learned state and the global TAT as the admission script does. A
// hand-written override of 1e-14 or a learned rate of 1e-20 does not drag
// the learned rate below MinRPS on a 429 (the cut starts from the target),
// and a TAT that is not a number does not make the 429 fail.
func TestA429IgnoresRatesBelowTheMinimumInRedis(t *testing.T) {
	rdb := redistest.Client(t)
	ctx := context.Background()
	for _, tt := range []struct{ name, override, learned, tat string }{
		{"override 1e-14", "1e-14 0", "", ""},
		{"learned 1e-20", "", "1e-20 0 0 0 s 0 0", ""},
		{"learned with a low mark past 2^53", "", "60 1e300 90 0 s 0 0", ""},
		{"a TAT that is not a number", "", "", "garbage"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := adaptiveConfig(t)
			l := newLimiter(t, rdb, cfg)
			a := l.base
			t.Cleanup(func() { rdb.Del(ctx, a.Override, a.Learned, a.GlobalTAT) })
			for k, v := range map[string]string{a.Override: tt.override, a.Learned: tt.learned, a.GlobalTAT: tt.tat} {
				if v != "" {
					if err := rdb.Set(ctx, k, v, time.Minute).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := l.ReportThrottled(ctx, time.Millisecond); err != nil {
				t.Fatalf("ReportThrottled: %v", err)
			}
			if s := learned(t, l); s.RPS != 63 || s.High != 90 {
				t.Fatalf("after the 429: %+v, want 63/s (0.7 of the target) searching below 90", s)
			}
		})
	}
}
