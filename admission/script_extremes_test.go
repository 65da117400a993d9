package admission

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
)

// clockLine is how the admission script and penalty.lua read Redis's clock. The
// test-clock variants read TIME's two fields from their last two ARGV
// instead: a test cannot set Redis's clock to the epoch or to the year
// 2200.
const (
	clockLine     = "local t = redis.call('TIME')\n"
	testClockLine = "local t = {ARGV[#ARGV - 1], ARGV[#ARGV]}\n"
)

// keepLine is how long the admission script keeps a sender's TAT key past the TAT, in
// Redis's clock. Under an injected clock Redis still expires keys by its
// own, which a long run of calls outpaces (24,000 calls take seconds of
// it, a second of theirs): the test-clock variant keeps them an hour.
const (
	keepLine     = "  local keep_ms = 1000\n"
	testKeepLine = "  local keep_ms = 3600000\n"
)

// Injected clocks, in microseconds since the epoch.
var (
	clockEpoch = int64(0)
	clock2200  = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
)

// testClockVariant returns src with its clock line replaced by
// testClockLine. It fails t unless the line occurs exactly once, so that a
// change to how the script reads the clock breaks the test instead of
// leaving it on Redis's clock.
func testClockVariant(t testing.TB, name, src string) *redis.Script {
	t.Helper()
	if n := strings.Count(src, clockLine); n != 1 {
		t.Fatalf("%s has %d lines %q, want exactly 1: update its test-clock variant", name, n, clockLine)
	}
	return redis.NewScript(strings.Replace(src, clockLine, testClockLine, 1))
}

// testKeepVariant returns the admission script src with its keepLine
// replaced by testKeepLine; it fails t unless the line occurs exactly once
// (a script without the pool has none, and keeps no sender's key).
func testKeepVariant(t testing.TB, src string) string {
	t.Helper()
	if n := strings.Count(src, keepLine); n > 1 || (n == 0 && strings.Contains(src, "-- pool.lua:")) {
		t.Fatalf("the admission script has %d lines %q, want exactly 1: update its test-clock variant", n, keepLine)
	}
	return strings.Replace(src, keepLine, testKeepLine, 1)
}

// testAdmitVariant returns the test-clock variant of the composed
// admission script whose SHA is sha, or nil if this process composed none.
func testAdmitVariant(t testing.TB, sha string) *redis.Script {
	t.Helper()
	src, ok := admitSource(sha)
	if !ok {
		return nil
	}
	return testClockVariant(t, "the admission script", testKeepVariant(t, src))
}

// clockArgs returns the injected clock us (microseconds since the epoch) as
// the two fields of TIME, to append to a test-clock variant's ARGV.
func clockArgs(us int64) []any { return []any{us / 1e6, us % 1e6} }

// A scriptCall is one script call as a client sent it.
type scriptCall struct {
	sha  string
	keys []string
	args []any
}

// admitArg returns ARGV[n] of c, a recorded call of a composed admission
// script, for a test to change: n is admitCall's (the full layout's),
// which the variant may send at another place, or not at all.
func (c scriptCall) admitArg(t testing.TB, n int) *any {
	t.Helper()
	v, ok := admitBySHA(c.sha)
	i := slices.Index(v.args, n)
	if !ok || i < 0 {
		t.Fatalf("ARGV[%d] is not sent to the admission script %s", n, c.sha)
	}
	return &c.args[i]
}

// admitKey returns KEYS[n] (one of the fixed keys, 1-based as in
// admitCall) of c, a recorded call of a composed admission script.
func (c scriptCall) admitKey(t testing.TB, n int) string {
	t.Helper()
	v, ok := admitBySHA(c.sha)
	i := slices.Index(v.keys, n)
	if !ok || i < 0 {
		t.Fatalf("KEYS[%d] is not sent to the admission script %s", n, c.sha)
	}
	return c.keys[i]
}

// A recorder is a redis.Scripter that records the script calls made on it
// instead of sending them, so that a test can replay the ARGV the product
// builds, in a pipeline and on a test-clock variant. It answers every call
// with a success of the script's shape (the admission script: allowed; penalty.lua:
// a 429's), so that no
// caller sees a failure, which would open its circuit or orphan a lease.
// Only EvalSha and Eval are implemented: Script.Run tries EvalSha first
// and, as it never fails, never falls back to Eval, which the admission
// script's first run sends (admitVariant.run); any other method panics (a
// test bug).
type recorder struct {
	redis.Scripter
	calls []scriptCall
}

var _ redis.Scripter = (*recorder)(nil)

func (r *recorder) EvalSha(_ context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	r.calls = append(r.calls, scriptCall{sha: sha, keys: slices.Clone(keys), args: slices.Clone(args)})
	if _, ok := admitSource(sha); ok {
		return redis.NewCmdResult([]any{int64(1), int64(0), int64(0), int64(0), int64(0), "", "", int64(0), int64(0), int64(0), int64(0)}, nil)
	}
	switch sha {
	case finishScript.Hash():
		return redis.NewCmdResult([]any{int64(1), int64(0)}, nil)
	case penaltyScript.Hash():
		return redis.NewCmdResult([]any{int64(1), "throttled"}, nil)
	}
	return redis.NewCmdResult(int64(1), nil)
}

// Eval records a script sent whole (a composed admission script's first
// run) as the EVALSHA of its SHA.
func (r *recorder) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return r.EvalSha(ctx, shaOf(script), keys, args...)
}

// take runs call, which must make exactly one script call on r, and returns
// that call.
func (r *recorder) take(t testing.TB, call func() error) scriptCall {
	t.Helper()
	r.calls = nil
	if err := call(); err != nil {
		t.Fatalf("recorded call: %v", err)
	}
	if len(r.calls) != 1 {
		t.Fatalf("recorded %d script calls, want 1", len(r.calls))
	}
	return r.calls[0]
}

// gcraCall returns the call to the admission script that l, built on rec, makes for one
// admission (booking a slot within lookahead, and taking claim's claim if
// it has a token), and the lease that call takes ("" without MaxInFlight).
func gcraCall(t testing.TB, l *Limiter, rec *recorder, class Class, recovering bool, tickets string, within, lookahead time.Duration, claim Claim) (scriptCall, string) {
	t.Helper()
	var lease string
	c := rec.take(t, func() error {
		d, err := l.eval(context.Background(), l.classes[class], 1, recovering, tickets, within, lookahead, claim)
		lease = d.Lease
		return err
	})
	return c, lease
}

// A scriptSet runs recorded calls on a real Redis: the admission
// scripts' and penalty.lua's on their test-clock variants, the others as
// they are.
type scriptSet struct {
	penalty *redis.Script
	admit   map[string]*redis.Script // the test-clock variants, by the product's hash; guarded by mu
	mu      *sync.Mutex              // parallel tests share the set
	product map[string]*redis.Script // by hash
	t       testing.TB
	rdb     *redis.Client // where a variant composed after loadScripts is loaded
}

// loadScripts returns the scriptSet of the tests, loaded on rdb so that
// pipelined calls find them.
func loadScripts(t testing.TB, rdb *redis.Client) scriptSet {
	t.Helper()
	s := scriptSet{
		penalty: testClockVariant(t, "penalty.lua", penaltyLua),
		admit:   map[string]*redis.Script{},
		mu:      &sync.Mutex{},
		product: map[string]*redis.Script{},
		t:       t,
		rdb:     rdb,
	}
	for _, sc := range []*redis.Script{overrideScript, claimScript, finishScript, releaseScript} {
		s.product[sc.Hash()] = sc
	}
	admitMu.RLock()
	for sha := range admitSHAs {
		s.admit[sha] = nil
	}
	admitMu.RUnlock()
	for sha := range s.admit {
		s.admit[sha] = testAdmitVariant(t, sha)
	}
	s.load(t, rdb)
	return s
}

// load loads every script of s on rdb.
func (s scriptSet) load(t testing.TB, rdb *redis.Client) {
	t.Helper()
	s.mu.Lock()
	admit := slices.Collect(maps.Values(s.admit))
	s.mu.Unlock()
	for _, sc := range slices.Concat(slices.Collect(maps.Values(s.product)), admit, []*redis.Script{s.penalty}) {
		if err := sc.Load(context.Background(), rdb).Err(); err != nil {
			t.Fatalf("SCRIPT LOAD: %v", err)
		}
	}
}

// send runs c on rdb (or queues it, on a pipeline) at the injected clock us.
func (s scriptSet) send(ctx context.Context, rdb redis.Scripter, c scriptCall, us int64) *redis.Cmd {
	s.mu.Lock()
	sc, ok := s.admit[c.sha]
	if !ok {
		// A variant composed since loadScripts: loaded now, outside any
		// pipeline.
		if sc = testAdmitVariant(s.t, c.sha); sc != nil {
			if err := sc.Load(ctx, s.rdb).Err(); err != nil {
				s.mu.Unlock()
				return redis.NewCmdResult(nil, err)
			}
			s.admit[c.sha], ok = sc, true
		}
	}
	s.mu.Unlock()
	if ok {
		return sc.Run(ctx, rdb, c.keys, slices.Concat(c.args, clockArgs(us))...)
	}
	switch c.sha {
	case penaltyScript.Hash():
		return s.penalty.Run(ctx, rdb, c.keys, slices.Concat(c.args, clockArgs(us))...)
	}
	if sc, ok := s.product[c.sha]; ok {
		return sc.Run(ctx, rdb, c.keys, c.args...)
	}
	return redis.NewCmdResult(nil, fmt.Errorf("no script %s in the test's set", c.sha))
}

// pipeline runs the calls build queues in one pipeline on rdb; the callers
// check each call's answer. What no script can cause is tried again, up to
// three times in all: another test may flush the shared Redis's script
// cache meanwhile (TestScriptSurvivesScriptFlush), and on a loaded machine
// a read may time out. The scripts are then loaded again and build runs
// again, and must then start afresh on new accounts.
func (s scriptSet) pipeline(t testing.TB, rdb *redis.Client, build func(p redis.Pipeliner)) {
	t.Helper()
	notTheScripts := func(c redis.Cmder) bool {
		var re redis.Error
		err := c.Err()
		return err != nil && (!errors.As(err, &re) || redis.HasErrorPrefix(err, "NOSCRIPT"))
	}
	for try := 1; ; try++ {
		p := rdb.Pipeline()
		build(p)
		cmds, _ := p.Exec(context.Background())
		i := slices.IndexFunc(cmds, notTheScripts)
		if i < 0 || try == 3 {
			return
		}
		t.Logf("pipeline try %d: %v; trying again", try, cmds[i].Err())
		s.load(t, rdb)
	}
}

// gcraReplyErr returns the error Redis answered to a call of the admission script, or
// the product's complaint about the reply: either makes the Limiter fall
// back as if Redis were down.
func gcraReplyErr(cmd *redis.Cmd) (Decision, error) {
	v, err := cmd.Slice()
	if err != nil {
		return Decision{}, err
	}
	return parseDecision(v)
}

// deleteKeysAtEnd deletes every key of calls when t ends: some lifetimes
// under test are centuries, or none, and tests share one Redis.
func deleteKeysAtEnd(t testing.TB, rdb *redis.Client, calls ...scriptCall) {
	t.Helper()
	var keys []string
	for _, c := range calls {
		keys = append(keys, c.keys...)
	}
	t.Cleanup(func() {
		if err := rdb.Del(context.Background(), keys...).Err(); err != nil {
			t.Errorf("DEL: %v", err)
		}
	})
}

// TestGCRAScriptNeverErrsAtExtremes runs the admission script with the ARGV the Limiter
// builds over extreme settings, wake-ticket modes and clocks (the epoch,
// now, the year 2200), and asserts that Redis never answers an error and
// the Limiter parses every reply. An error comes after the script has
// written the TAT and the lease (a script does not roll back), and the
// Limiter takes it for Redis down.
func TestGCRAScriptNeverErrsAtExtremes(t *testing.T) {
	rdb := redistest.Client(t)
	scripts := loadScripts(t, rdb)
	ctx := context.Background()

	rates := []float64{0.1, 1, 100, 10_000}
	bursts := []int{1, 5, 1000}
	overrides := []struct{ target, marketing float64 }{{0, 0}, {1, 0}, {0, 0.1}, {0.1, 0.1}}
	inFlight := []struct {
		max   int
		lease time.Duration
	}{{0, 0}, {2, time.Millisecond}}
	clocks := []struct {
		name string
		us   int64
	}{{"epoch", clockEpoch}, {"now", time.Now().UnixMicro()}, {"2200", clock2200}}
	// A burst at one instant, past BURST 5, then calls further on.
	offsets := []time.Duration{0, 0, 0, 0, 0, 0, time.Millisecond, 10 * time.Second}

	for _, rate := range rates {
		for _, burst := range bursts {
			for _, o := range overrides {
				name := fmt.Sprintf("rate=%v,burst=%d,override=%v:%v", rate, burst, o.target, o.marketing)
				t.Run(name, func(t *testing.T) {
					// Parallel: the Go side of one overlaps Redis's side of another.
					t.Parallel()
					type sent struct {
						what string
						cmd  *redis.Cmd
						gcra bool
					}
					var all []sent
					scripts.pipeline(t, rdb, func(p redis.Pipeliner) {
						all = all[:0]
						n := 0
						for _, tickets := range []string{ticketNone, ticketOnDenial, ticketAlways} {
							for _, floor := range []bool{false, true} {
								for _, f := range inFlight {
									for _, class := range []Class{OTP, Marketing} {
										for _, clock := range clocks {
											pc := propConfigs[n%len(propConfigs)] // each configuration in turn
											n++
											cfg := Config{Account: redistest.UniqueAccount(t), TargetRPS: rate, MarketingRPS: rate, Burst: burst, MaxInFlight: f.max, LeaseTTL: f.lease}
											pc.apply(&cfg, propSettings{rate: rate, marketingRate: rate})
											rec := &recorder{}
											l := newLimiter(t, rec, cfg)
											if len(cfg.Senders) > 0 {
												if err := l.pool.build(ctx, rdb); err != nil {
													t.Fatalf("the pool's indexes: %v", err)
												}
											}
											what := fmt.Sprintf("config=%s tickets=%s floor=%v max_in_flight=%d class=%v clock=%s", pc.name, tickets, floor, f.max, class, clock.name)
											if o.target > 0 || o.marketing > 0 {
												c := rec.take(t, func() error { return l.Override(ctx, o.target, o.marketing, time.Minute) })
												all = append(all, sent{what + " override", scripts.send(ctx, p, c, clock.us), false})
											}
											for i, off := range offsets {
												// Acquire passes what is left of its wait: none, or plenty.
												within := time.Duration(i%2) * time.Hour
												// Each with a claim living under a
												// millisecond, counted every other time.
												claim := Claim{ID: fmt.Sprint("m", i), Token: "t", TTL: time.Microsecond, Count: i%2 == 0}
												if class == OTP {
													claim.Prefix, claim.Failover = pc.claim.Prefix, pc.claim.Failover
												}
												c, _ := gcraCall(t, l, rec, class, floor && (i == 0 || i == 6), tickets, within, within, claim)
												all = append(all, sent{fmt.Sprintf("%s call %d at +%v", what, i+1, off), scripts.send(ctx, p, c, clock.us+off.Microseconds()), true})
											}
										}
									}
								}
							}
						}
					})
					failed := 0
					for _, s := range all {
						err := s.cmd.Err()
						if err == nil && s.gcra {
							_, err = gcraReplyErr(s.cmd)
						}
						if err != nil {
							if failed++; failed <= 3 {
								t.Errorf("%s: %v", s.what, err)
							}
						}
					}
					if failed > 3 {
						t.Errorf("... %d of %d script calls failed in all", failed, len(all))
					}
				})
			}
		}
	}
}

// TestPenaltyScriptNeverErrsAtExtremes runs penalty.lua with the ARGV the
// Limiter's ReportThrottled builds, and with lengths it never sends, at the
// epoch, now and in 2200, followed by an admission at the same instant, and
// asserts that Redis never answers an error.
func TestPenaltyScriptNeverErrsAtExtremes(t *testing.T) {
	rdb := redistest.Client(t)
	scripts := loadScripts(t, rdb)
	ctx := context.Background()
	clocks := []struct {
		name string
		us   int64
	}{{"epoch", clockEpoch}, {"now", time.Now().UnixMicro()}, {"2200", clock2200}}

	tests := []struct {
		name       string
		retryAfter time.Duration // what ReportThrottled is given
		ms         string        // if not "", ARGV[1] as sent instead
	}{
		{"1ns", time.Nanosecond, ""},
		{"1ms", time.Millisecond, ""},
		{"1h", time.Hour, ""},
		// ReportThrottled rounds it up to whole milliseconds, which
		// overflows: the script gets a negative length.
		{"longest duration", math.MaxInt64, ""},
		{"0ms", time.Second, "0"},
		{"-1ms", time.Second, "-1"},
		{"longest duration in ms", time.Second, fmt.Sprint(int64(math.MaxInt64 / time.Millisecond))},
		{"most negative", time.Second, fmt.Sprint(int64(math.MinInt64))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, clock := range clocks {
				for _, cfg := range []Config{testConfig(t), {Account: redistest.UniqueAccount(t), TargetRPS: 0.1, MarketingRPS: 0.1, Burst: 1000}} {
					cfg.MaxRetryAfter = math.MaxInt64 // the lengths as given reach the script
					rec := &recorder{}
					l := newLimiter(t, rec, cfg)
					pen := rec.take(t, func() error { return l.ReportThrottled(ctx, tt.retryAfter) })
					if tt.ms != "" {
						pen.args[0] = tt.ms
					}
					gcra, _ := gcraCall(t, l, rec, Marketing, false, ticketAlways, time.Hour, 0, Claim{})
					deleteKeysAtEnd(t, rdb, pen, gcra)
					if err := scripts.send(ctx, rdb, pen, clock.us).Err(); err != nil {
						t.Errorf("clock=%s rate=%v: penalty.lua with ARGV %v: %v", clock.name, cfg.TargetRPS, pen.args, err)
					}
					if _, err := gcraReplyErr(scripts.send(ctx, rdb, gcra, clock.us)); err != nil {
						t.Errorf("clock=%s rate=%v: The admission script after penalty.lua with ARGV %v: %v", clock.name, cfg.TargetRPS, pen.args, err)
					}
				}
			}
		})
	}
}

// TestScriptsNeverErrOnNonPositiveLifetimes runs claim.lua, finish.lua
// (writing a record, and giving back a claim that keeps its count) and
// override.lua with lifetimes of 1, 0 and negative
// milliseconds, and asserts that Redis never answers an error. Claims sends
// 0 for a lifetime under 1 ms (Duration.Milliseconds rounds down).
func TestScriptsNeverErrOnNonPositiveLifetimes(t *testing.T) {
	rdb := redistest.Client(t)
	scripts := loadScripts(t, rdb)
	ctx := context.Background()
	idKey := func(t *testing.T, kind string) []string {
		return []string{keys.For(redistest.UniqueAccount(t)).Prefix() + kind + ":1"}
	}

	// Each builds the script's call with lifetime ms, ARGV as its opening
	// comment has them.
	tests := []struct {
		name string
		call func(t *testing.T, ms string) scriptCall
	}{
		{"claim", func(t *testing.T, ms string) scriptCall {
			return scriptCall{claimScript.Hash(), idKey(t, "id"), []any{"token", ms}}
		}},
		{"finish", func(t *testing.T, ms string) scriptCall {
			k := idKey(t, "id")
			return scriptCall{finishScript.Hash(), append(k, k[0]+":leases", k[0]+":sent", k[0]+":health"), []any{ledger.RecordSent, ms, "", "1", "", ""}}
		}},
		{"finish counting a failure in the health", func(t *testing.T, ms string) scriptCall {
			k := idKey(t, "id")
			return scriptCall{finishScript.Hash(), append(k, k[0]+":leases", k[0]+":sent", k[0]+":health"),
				[]any{"", "1", "", "0", "fail", "10000000 1 3 3 1000000 " + strings.TrimPrefix(ms, "-")}}
		}},
		{"finish giving back a counted claim", func(t *testing.T, ms string) scriptCall {
			k := idKey(t, "id")
			if err := rdb.Set(ctx, k[0], "2#claim:token", 0).Err(); err != nil {
				t.Fatal(err)
			}
			return scriptCall{finishScript.Hash(), append(k, k[0]+":leases", k[0]+":sent", k[0]+":health"), []any{"", ms, "token", "0", "", ""}}
		}},
		{"override", func(t *testing.T, ms string) scriptCall {
			rec := &recorder{}
			l := newLimiter(t, rec, testConfig(t))
			c := rec.take(t, func() error { return l.Override(ctx, 0.1, 0.1, time.Minute) })
			c.args[2] = ms
			return c
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, ms := range []string{"1", "0", "-1", fmt.Sprint(int64(math.MinInt64))} {
				c := tt.call(t, ms)
				deleteKeysAtEnd(t, rdb, c)
				if err := scripts.send(ctx, rdb, c, 0).Err(); err != nil {
					t.Errorf("lifetime %s ms: ARGV %v: %v", ms, c.args, err)
				}
			}
		})
	}
}
