package admission

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/redistest"
)

// propertySeedEnv names the environment variable that picks another seed
// for TestGCRAScriptNeverAdmitsMoreThanRateTimesWindowPlusBurst.
const propertySeedEnv = "SMS_SCRIPT_PROPERTY_SEED"

// propertySeed is the fixed seed: a failure reproduces on every run.
const propertySeed = 20261129

// propSettings are the settings of one sequence, constant within it.
type propSettings struct {
	rate, marketingRate float64
	burst               int
	// reserve replaces the OTP reserve the Limiter sends (ARGV[7]), in
	// microseconds; negative keeps the Limiter's own.
	reserve                   int64
	overrideTarget, overrideM float64 // 0: none
	maxInFlight               int
	leaseTTL                  time.Duration
	// maxCost is the largest cost a call of the sequence may have (1:
	// rates count messages); it may exceed burst.
	maxCost int
}

func (s propSettings) String() string {
	return fmt.Sprintf("rate=%v marketing=%v burst=%d reserve=%d override=%v:%v max_in_flight=%d lease_ttl=%v max_cost=%d",
		s.rate, s.marketingRate, s.burst, s.reserve, s.overrideTarget, s.overrideM, s.maxInFlight, s.leaseTTL, s.maxCost)
}

// effective returns the rate in force: the configured one, or the
// override where it is lower.
func effective(rate, override float64) float64 {
	if override > 0 {
		return min(rate, override)
	}
	return rate
}

// propCall is one call of a sequence.
type propCall struct {
	at         int64 // injected clock, microseconds since the epoch
	class      Class
	tickets    string
	recovering bool
	within     time.Duration
	release    bool // release the previous call's lease first
	cost       int  // units the send takes (ARGV[14])
	// lookahead is how far ahead a slot may be booked (ARGV[15]); an
	// admission's send counts at its slot, the call's instant plus the
	// wait the reply gives.
	lookahead time.Duration
}

func (c propCall) String() string {
	return fmt.Sprintf("at=%dµs class=%v tickets=%s recovering=%v within=%v release=%v cost=%d lookahead=%v", c.at, c.class, c.tickets, c.recovering, c.within, c.release, c.cost, c.lookahead)
}

// logUniform returns a number between lo and hi, as likely in each decade.
func logUniform(rng *rand.Rand, lo, hi float64) float64 {
	return math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo)))
}

// randomSequence returns the settings and n calls of one sequence.
func randomSequence(rng *rand.Rand, n int) (propSettings, []propCall) {
	s := propSettings{rate: logUniform(rng, 0.1, 10_000), burst: int(logUniform(rng, 1, 1001)), reserve: -1}
	s.marketingRate = max(s.rate*logUniform(rng, 0.01, 1), MinRPS)
	if rng.IntN(2) == 0 {
		// Whole intervals of the tolerance, from none to all of it.
		s.reserve = rng.Int64N(int64(s.burst)) * interval(s.rate).Microseconds()
	}
	switch rng.IntN(4) {
	case 1:
		s.overrideTarget = logUniform(rng, 0.1, 2*s.rate) // may lie above: ignored
	case 2:
		s.overrideM = logUniform(rng, 0.1, 2*s.marketingRate)
	case 3:
		s.overrideTarget, s.overrideM = logUniform(rng, 0.1, 2*s.rate), logUniform(rng, 0.1, 2*s.marketingRate)
	}
	s.maxCost = 1
	if rng.IntN(3) == 0 {
		// Rates in segments: costs up to twice BURST and more, so that
		// some sends are too big for the tolerance.
		s.maxCost = 1 + rng.IntN(min(2*s.burst+3, 50))
	}
	if rng.IntN(2) == 0 {
		s.maxInFlight = 1 + rng.IntN(5)
		s.leaseTTL = time.Duration(logUniform(rng, 1e3, 2e6)) * time.Microsecond
	}

	step := interval(effective(s.rate, s.overrideTarget)).Microseconds()
	pMarketing := rng.Float64()
	// t0 stands for now: a seed gives the same clocks on every run.
	at := [...]int64{clockEpoch, t0.UnixMicro(), clock2200}[rng.IntN(3)]
	calls := make([]propCall, n)
	for i := range calls {
		switch r := rng.Float64(); {
		case r < 0.3: // same instant
		case r < 0.95:
			at += rng.Int64N(3*step + 1)
		default: // a quiet spell of seconds
			at += 1e6 + rng.Int64N(9e6)
		}
		c := propCall{at: at, class: OTP, tickets: [...]string{ticketNone, ticketOnDenial, ticketAlways}[rng.IntN(3)]}
		if rng.Float64() < pMarketing {
			c.class = Marketing
		}
		c.recovering = rng.IntN(50) == 0
		switch rng.IntN(3) {
		case 1:
			c.within = time.Duration(rng.Int64N(10*step+1)) * time.Microsecond
		case 2:
			c.within = time.Hour
		}
		c.release = s.maxInFlight > 0 && rng.IntN(2) == 0
		c.cost = 1 + rng.IntN(s.maxCost)
		switch rng.IntN(3) {
		case 1:
			c.lookahead = time.Duration(rng.Int64N(3*step+1)) * time.Microsecond
		case 2:
			c.lookahead = time.Hour
		}
		calls[i] = c
	}
	return s, calls
}

// overWindow returns the first window [a, a+w] (microseconds) of the sorted
// instants holding more than rate×w + burst of them, and how many it holds.
// A send of cost units is that many instants.
func overWindow(instants []int64, w int64, rate float64, burst int) (a int64, n int, over bool) {
	// The bound is a whole number of slots when w is whole intervals:
	// 1e-9 keeps a float product a hair below it from failing the test.
	bound := rate*float64(w)/1e6 + float64(burst) + 1e-9
	j := 0
	for i, a := range instants {
		for j < len(instants) && instants[j] <= a+w {
			j++
		}
		if float64(j-i) > bound {
			return a, j - i, true
		}
	}
	return 0, 0, false
}

// TestGCRAScriptNeverAdmitsMoreThanRateTimesWindowPlusBurst runs random
// sequences of calls of gcra.lua, with the ARGV the Limiter builds, on a
// random non-decreasing injected clock, and asserts that the script never
// errs, never books a slot beyond the caller's lookahead, and that no
// window [a, a+W] starting at a send (at its slot) holds more than
// rate×W + BURST - 1 + the largest cost units (a send of cost c is c units):
// all classes against the global rate in force,
// marketing against the marketing rate in force (each the configured rate,
// or the override where lower). The settings (rates, BURST, OTP reserve,
// override, in-flight limit) are constant within a sequence.
func TestGCRAScriptNeverAdmitsMoreThanRateTimesWindowPlusBurst(t *testing.T) {
	seed := uint64(propertySeed)
	if v := os.Getenv(propertySeedEnv); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", propertySeedEnv, v, err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d; %s=<seed> runs another", seed, propertySeedEnv)
		}
	})
	rdb := redistest.Client(t)
	scripts := loadScripts(t, rdb)

	// Every sequence is drawn first, on this goroutine, so that a seed
	// always gives the same sequences however the parts interleave.
	const sequences, calls, parts = 200, 200, 4
	rng := rand.New(rand.NewPCG(seed, seed))
	settings := make([]propSettings, sequences)
	plans := make([][]propCall, sequences)
	for i := range sequences {
		settings[i], plans[i] = randomSequence(rng, calls)
	}
	for part := range parts {
		t.Run(fmt.Sprintf("part=%d", part), func(t *testing.T) {
			// Parallel: the Go side of one part overlaps Redis's side of
			// another.
			t.Parallel()
			const maxReports = 10
			reports := 0
			report := func(format string, args ...any) {
				t.Helper()
				if reports++; reports <= maxReports {
					t.Errorf(format, args...)
				}
			}
			for seq := part; seq < sequences; seq += parts {
				s, plan := settings[seq], plans[seq]
				for _, msg := range runSequence(t, rdb, scripts, s, plan) {
					report("sequence %d (%v): %s", seq, s, msg)
				}
			}
			if reports > maxReports {
				t.Errorf("... %d failures in all", reports)
			}
		})
	}
}

// runSequence runs plan with settings s on a new account and returns what
// went wrong, if anything.
func runSequence(t *testing.T, rdb *redis.Client, scripts scriptSet, s propSettings, plan []propCall) []string {
	t.Helper()
	ctx := context.Background()
	// Every call of the sequence goes in one pipeline: the calls do not
	// depend on the answers, and the keys' real lifetimes (1 s at least)
	// then outlast the sequence however loaded the machine is.
	cmds := make([]*redis.Cmd, len(plan))
	scripts.pipeline(t, rdb, func(p redis.Pipeliner) {
		cfg := Config{
			Account: redistest.UniqueAccount(t), TargetRPS: s.rate, MarketingRPS: s.marketingRate,
			Burst: s.burst, MaxInFlight: s.maxInFlight, LeaseTTL: s.leaseTTL,
		}
		rec := &recorder{}
		l := newLimiter(t, rec, cfg)
		if s.overrideTarget > 0 || s.overrideM > 0 {
			c := rec.take(t, func() error { return l.Override(ctx, s.overrideTarget, s.overrideM, time.Minute) })
			scripts.send(ctx, p, c, plan[0].at)
		}
		lease := ""
		for i, c := range plan {
			if c.release && lease != "" {
				r := rec.take(t, func() error { return l.Release(ctx, lease) })
				scripts.send(ctx, p, r, c.at)
			}
			var g scriptCall
			g, lease = gcraCall(t, l, rec, c.class, c.recovering, c.tickets, c.within, c.lookahead, Claim{})
			if s.reserve >= 0 {
				g.args[6] = strconv.FormatInt(s.reserve, 10) // ARGV[7]
			}
			g.args[13] = strconv.Itoa(max(c.cost, 1))                      // ARGV[14]
			g.args[14] = strconv.FormatInt(c.lookahead.Microseconds(), 10) // ARGV[15]
			cmds[i] = scripts.send(ctx, p, g, c.at)
		}
	})

	var failures []string
	var all, marketing []int64
	for i, cmd := range cmds {
		d, err := gcraReplyErr(cmd)
		if err != nil {
			failures = append(failures, fmt.Sprintf("call %d (%v): %v", i+1, plan[i], err))
			continue
		}
		if d.Allowed && d.RetryAfter > plan[i].lookahead {
			failures = append(failures, fmt.Sprintf("call %d (%v): a slot booked %v ahead, beyond the lookahead", i+1, plan[i], d.RetryAfter))
		}
		slot := plan[i].at + d.RetryAfter.Microseconds()
		for range max(plan[i].cost, 1) {
			if !d.Allowed {
				break
			}
			all = append(all, slot)
			if plan[i].class == Marketing {
				marketing = append(marketing, slot)
			}
		}
	}
	slices.Sort(all)
	slices.Sort(marketing)
	for _, lim := range []struct {
		name     string
		instants []int64
		rate     float64
		burst    int
	}{
		{"all classes", all, effective(s.rate, s.overrideTarget), s.burst},
		// The marketing level's own burst is at least 2 (limiter.go).
		{"marketing", marketing, effective(s.marketingRate, s.overrideM), max(s.burst, 2)},
	} {
		slot := interval(lim.rate).Microseconds()
		for _, w := range []int64{slot, 10 * slot, 1e6, 1e7} {
			if a, n, over := overWindow(lim.instants, w, lim.rate, lim.burst-1+s.maxCost); over {
				failures = append(failures, fmt.Sprintf("%s: %d units in [%d, %d+%dµs], more than %v/s × %dµs + burst %d - 1 + cost %d",
					lim.name, n, a, a, w, lim.rate, w, lim.burst, s.maxCost))
			}
		}
	}
	return failures
}
