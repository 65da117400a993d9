package admission

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"smsdispatcher/internal/redistest"
)

// TestOverrideRefusesRatesBelowTheMinimumAndANegativeTTL: Override refuses
// a rate that is neither 0 nor a finite number of at least MinRPS (below
// it the scripts would have no integer for the interval) and a negative
// ttl (the override would never end), with ErrBadOverride, and writes
// nothing to Redis.
func TestOverrideRefusesRatesBelowTheMinimumAndANegativeTTL(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, slowConfig(t))
	ctx := context.Background()
	tests := []struct {
		name              string
		target, marketing float64
		ttl               time.Duration
	}{
		{"target 1e-14", 1e-14, 0, time.Minute},
		{"target just below the minimum", math.Nextafter(MinRPS, 0), 0, time.Minute},
		{"target negative", -1, 0, time.Minute},
		{"target NaN", math.NaN(), 0, time.Minute},
		{"target +Inf", math.Inf(1), 0, time.Minute},
		{"marketing 1e-20", 0, 1e-20, time.Minute},
		{"marketing -Inf", 0.5, math.Inf(-1), time.Minute},
		{"negative ttl", 0.5, 0, -time.Second},
		{"negative ttl clearing", 0, 0, -time.Nanosecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := l.Override(ctx, tt.target, tt.marketing, tt.ttl); !errors.Is(err, ErrBadOverride) {
				t.Fatalf("Override(%v, %v, %v) = %v, want ErrBadOverride", tt.target, tt.marketing, tt.ttl, err)
			}
			if v := get(t, rdb, l.base.Override); v != "<absent>" {
				t.Fatalf("the override key holds %q after a refused override", v)
			}
		})
	}
	// The minimum itself, and the longest ttl, which must not round to
	// "until cleared".
	if err := l.Override(ctx, MinRPS, MinRPS, math.MaxInt64); err != nil {
		t.Fatalf("Override(MinRPS, MinRPS, longest ttl): %v", err)
	}
	// PTTL raw: its milliseconds overflow a time.Duration.
	if ms, err := rdb.Do(ctx, "PTTL", l.base.Override).Int64(); err != nil || ms <= 0 {
		t.Fatalf("the longest ttl left the override with PTTL %v ms (%v), want a lifetime", ms, err)
	}
}

// TestRatesBelowTheMinimumInRedisChangeNoAdmission writes an override or
// a learned rate by hand (as anything that can write the account's keys
// could, past Override's checks): a rate below MinRPS, negative, not a
// number, or a learned state with a field past 2^53. Two accounts alike but
// for that key then get the same calls of the admission script at the same injected
// instants (a burst of 50 OTP at one instant, then both classes over 20
// s): every answer must be the same, and each must report the key
// ignored. override.lua then clears the override on both, after their
// slots were booked ahead: it must not fail, and leave the same TATs.
func TestRatesBelowTheMinimumInRedisChangeNoAdmission(t *testing.T) {
	rdb := redistest.Client(t)
	scripts := loadScripts(t, rdb)
	ctx := context.Background()
	tests := []struct {
		name              string
		override, learned string // "": not written
		want              int64  // the reply's ignored
	}{
		{"override 1e-14", "1e-14 1e-14", "", ignoredOverride},
		{"override of the target 1e-14", "1e-14 0", "", ignoredOverride},
		{"override just below the minimum", "0.00999 0", "", ignoredOverride},
		{"override negative", "-5 -0.5", "", ignoredOverride},
		{"override not numbers", "abc nan", "", ignoredOverride},
		{"override infinite", "inf 1e400", "", ignoredOverride},
		{"override of one word", "0.5", "", ignoredOverride},
		{"learned 1e-14 pinned", "", "1e-14 0 0 0 P 0 0", ignoredLearned},
		{"learned 1e-14 searching", "", "1e-14 0.5 0.9 0 s 0 1", ignoredLearned},
		{"learned negative", "", "-1 0 0 0 P 0 0", ignoredLearned},
		{"learned not a number", "", "nan 0 0 0 P 0 0", ignoredLearned},
		{"learned with a cut past 2^63", "", "0.5 0 0 0 P 1e300 0", ignoredLearned},
		{"learned with an unknown mode", "", "0.5 0 0 0 X 0 0", ignoredLearned},
		{"both", "1e-20 0", "1e-20 0 0 0 P 0 0", ignoredOverride | ignoredLearned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ls [2]*Limiter
			var recs [2]*recorder
			for i := range ls {
				cfg := slowConfig(t)
				cfg.Adaptive = Adaptive{Enabled: true}
				recs[i] = &recorder{}
				ls[i] = newLimiter(t, recs[i], cfg)
				a := ls[i].call(Marketing)
				deleteKeysAtEnd(t, rdb, scriptCall{keys: []string{a.GlobalTAT, a.CeilingTAT, a.Override, a.Learned,
					a.Wake, ls[i].call(Marketing).Wake, a.Leases}})
			}
			b := ls[1].call(Marketing)
			if tt.override != "" {
				if err := rdb.Set(ctx, b.Override, tt.override, time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if tt.learned != "" {
				if err := rdb.Set(ctx, b.Learned, tt.learned, time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
			}
			at := t0.UnixMicro()
			for i := range 100 {
				class, tickets, lookahead := OTP, ticketNone, time.Duration(0)
				if i >= 50 {
					at += 200_000
					class = bothClasses[i%2]
					tickets, lookahead = ticketAlways, time.Second
				}
				var replies [2][]any
				for j, l := range ls {
					c, _ := gcraCall(t, l, recs[j], class, false, tickets, time.Hour, lookahead, Claim{})
					v, err := scripts.send(ctx, rdb, c, at).Slice()
					if err != nil {
						t.Fatalf("call %d, account %d: %v", i+1, j, err)
					}
					if _, err := parseDecision(v); err != nil {
						t.Fatalf("call %d, account %d: %v", i+1, j, err)
					}
					replies[j] = v
				}
				if !slices.Equal(replies[0][:8], replies[1][:8]) {
					t.Fatalf("call %d (%v): %v with the key, %v without", i+1, class, replies[1], replies[0])
				}
				if got := replies[1][8]; got != tt.want || replies[0][8] != int64(0) {
					t.Fatalf("call %d: ignored %v with the key, %v without; want %d and 0", i+1, got, replies[0][8], tt.want)
				}
			}
			// Booked ahead: the TATs lie seconds past the injected clock,
			// so past Redis's too only if the clock is real. override.lua
			// reads Redis's clock: move both TATs to the same instant ahead
			// of it first.
			ahead := fmt.Sprint(redisNow(t, rdb) + 30_000_000)
			for j, l := range ls {
				a := l.call(Marketing)
				if err := rdb.MSet(ctx, a.GlobalTAT, ahead, a.CeilingTAT, ahead).Err(); err != nil {
					t.Fatal(err)
				}
				c := recs[j].take(t, func() error { return l.Override(ctx, 0, 0, 0) })
				if err := scripts.send(ctx, rdb, c, 0).Err(); err != nil {
					t.Fatalf("override.lua clearing, account %d: %v", j, err)
				}
			}
			for _, k := range []func(admitCall) string{
				func(a admitCall) string { return a.GlobalTAT },
				func(a admitCall) string { return a.CeilingTAT },
			} {
				if a, b := get(t, rdb, k(ls[0].call(Marketing))), get(t, rdb, k(b)); a != b || strings.HasPrefix(b, "-") {
					t.Errorf("after the clear: TAT %s with the key, %s without", b, a)
				}
			}
		})
	}
}

// TestScriptsMinimumRateIsMinRPS: the minimum rate the admission script, override.lua
// and penalty.lua take from Redis is MinRPS, the one Override and Validate
// check.
func TestScriptsMinimumRateIsMinRPS(t *testing.T) {
	want := fmt.Sprintf("local min_rps, max_us = %v, 2 ^ 53 - 1\n", MinRPS)
	for name, src := range map[string]string{"the admission script": fullAdmitLua(t), "override.lua": overrideLua, "penalty.lua": penaltyLua} {
		if n := strings.Count(src, want); n != 1 {
			t.Errorf("%s has %d lines %q, want 1", name, n, want)
		}
	}
}

// TestAnIgnoredRateInRedisIsLoggedOncePerChange: a process logs what
// The admission script reports ignored once when it changes, not on every call.
func TestAnIgnoredRateInRedisIsLoggedOncePerChange(t *testing.T) {
	rdb := redistest.Client(t)
	ctx := context.Background()
	logger, h := newCountingLogger()
	cfg := slowConfig(t)
	cfg.Logger = logger
	l := newLimiter(t, rdb, cfg)
	a := l.base
	t.Cleanup(func() { rdb.Del(ctx, a.Override, a.Learned) })
	set := func(key, v string) {
		t.Helper()
		if err := rdb.Set(ctx, key, v, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		what  string
		do    func()
		lines int64
	}{
		{"nothing ignored", func() {}, 0},
		{"an override of 1e-14", func() { set(a.Override, "1e-14 0") }, 1},
		{"the same again", func() {}, 1},
		{"a duplicate's denial between (its reply reads no override)", func() {
			id := redistest.UniqueAccount(t)
			set(l.claims.Key(id), "sent:SM1")
			t.Cleanup(func() { rdb.Del(ctx, l.claims.Key(id)) })
			if d, err := l.Admit(ctx, Marketing, 1, time.Second, Claim{ID: id, Token: "b"}); err != nil || d.Reason != ReasonRecord {
				t.Fatalf("duplicate: %+v, %v; want a record's denial", d, err)
			}
		}, 1},
		{"a learned rate of 1e-14 as well", func() { set(a.Learned, "1e-14 0 0 0 P 0 0") }, 2},
		{"both gone", func() { rdb.Del(ctx, a.Override, a.Learned) }, 2},
	} {
		step.do()
		try(t, l, OTP)
		try(t, l, Marketing)
		if n := h.n.Load(); n != step.lines {
			t.Fatalf("%s: %d lines logged in all, want %d", step.what, n, step.lines)
		}
	}
}

// TestOverrideScriptIgnoresARateBelowTheMinimum: override.lua called with
// a rate below MinRPS (past Override's check) on an account with slots
// booked ahead neither fails nor rescales the TATs: the rate is not one
// The admission script would put in force.
func TestOverrideScriptIgnoresARateBelowTheMinimum(t *testing.T) {
	rdb := redistest.Client(t)
	scripts := loadScripts(t, rdb)
	ctx := context.Background()
	for _, rate := range []string{"1e-14", "1e-300", "-1", "nan", "inf"} {
		rec := &recorder{}
		l := newLimiter(t, rec, slowConfig(t))
		c := rec.take(t, func() error { return l.Override(ctx, 0.5, 0.5, time.Minute) })
		c.args[0], c.args[1] = rate, rate
		deleteKeysAtEnd(t, rdb, c)
		a := l.call(Marketing)
		ahead := fmt.Sprint(redisNow(t, rdb) + 4_000_000) // a burst at 1/s: 4 s booked
		if err := rdb.MSet(ctx, a.GlobalTAT, ahead, a.CeilingTAT, ahead).Err(); err != nil {
			t.Fatal(err)
		}
		if err := scripts.send(ctx, rdb, c, 0).Err(); err != nil {
			t.Errorf("override.lua with the rate %s: %v", rate, err)
			continue
		}
		for _, k := range []string{a.GlobalTAT, a.CeilingTAT} {
			if got := get(t, rdb, k); got != ahead {
				t.Errorf("override.lua with the rate %s: %s = %s, want %s as it was", rate, k, got, ahead)
			}
		}
	}
}
