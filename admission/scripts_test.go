package admission

import (
	"context"
	"testing"
	"time"

	"smsdispatcher/internal/redistest"
)

// TestScriptOpNamesEveryCallByItsScript: the Redis calls of a sent
// message, as a client sends them, are named by what they do, so that the
// Redis-calls-per-message figure says which operation costs what.
func TestScriptOpNamesEveryCallByItsScript(t *testing.T) {
	rdb := redistest.Client(t)
	rec := &redistest.Recorder{}
	rdb.AddHook(rec)
	cfg := testConfig(t)
	cfg.MaxInFlight = 10
	lim := newLimiter(t, rdb, cfg)
	claims := NewClaims(rdb, cfg.Account, 0, 0, 0, nil)
	ctx := context.Background()

	steps := []struct {
		op  string
		run func() error
	}{
		{OpClaim, func() error { _, err := claims.Claim(ctx, "login-1", "a", 0); return err }},
		{OpAdmit, func() error {
			d, err := lim.TryAcquire(ctx, OTP)
			if err == nil {
				err = lim.Release(ctx, d.Lease)
			}
			return err
		}},
		{OpAttempt, func() error { _, err := claims.CountAttempt(ctx, "login-1"); return err }},
		{OpFinish, func() error { return claims.Finish(ctx, "login-1", RecordSent) }},
		{OpRelease, func() error { return claims.Release(ctx, "login-2", "b") }},
		{OpPenalty, func() error { return lim.ReportThrottled(ctx, time.Millisecond) }},
		{OpOverride, func() error { return lim.Override(ctx, 0, 0, 0) }},
	}
	var want []string
	for _, s := range steps {
		if err := s.run(); err != nil {
			t.Fatalf("%s: %v", s.op, err)
		}
		want = append(want, s.op)
		if s.op == OpAdmit {
			want = append(want, OpLeaseRelease)
		}
	}
	var got []string
	for _, args := range rec.Commands() {
		// An EVALSHA answered NOSCRIPT is followed by its EVAL: one step.
		if op := ScriptOp(args); op != "other" && (len(got) == 0 || got[len(got)-1] != op) {
			got = append(got, op)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("ops %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ops %v, want %v", got, want)
		}
	}
	if op := ScriptOp([]any{"eval", gcraLua, "6"}); op != OpAdmit {
		t.Fatalf("EVAL of gcra.lua: %q, want %q", op, OpAdmit)
	}
	if op := ScriptOp([]any{"get", "{sms:a}:penalty"}); op != "other" {
		t.Fatalf("GET: %q, want other", op)
	}
}
