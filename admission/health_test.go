package admission

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redisstats"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
)

// healthConfig admits as fast as a test asks: the account's health, not
// its rate, decides. Probes are 100 ms apart.
func healthConfig(t *testing.T) Config {
	c := testConfig(t)
	c.TargetRPS, c.MarketingRPS, c.Burst = 1e5, 1e5, 1000
	c.Health = HealthRule{ProbeEvery: 100 * time.Millisecond}
	return c
}

// sendOnce admits one OTP on l, waiting up to wait, and settles it as a
// send that came to result; it returns the admission's decision.
func sendOnce(t *testing.T, l *Limiter, result SendResult, wait time.Duration, failover bool) Decision {
	t.Helper()
	ctx := context.Background()
	d, err := l.Admit(ctx, OTP, 1, wait, Claim{Failover: failover})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allowed {
		return d
	}
	record := ""
	if result == ResultOK {
		record = ledger.RecordSent
	}
	if err := l.Settle(ctx, d, record, result, ledger.Story{}); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestFailuresInARowMakeAnAccountDegraded(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, healthConfig(t))
	for range 4 {
		sendOnce(t, l, ResultFailed, time.Second, false)
	}
	if h := l.Health(); h != Failing {
		t.Fatalf("after 4 failures health = %v, want failing", h)
	}
	sendOnce(t, l, ResultOK, time.Second, false) // the run ends
	if h := l.Health(); h != Healthy {
		t.Fatalf("after a success health = %v, want healthy", h)
	}
	if n := rdb.Exists(context.Background(), l.base.Health).Val(); n != 0 {
		t.Fatal("a healthy account with no run left its health key")
	}
	for range 4 {
		sendOnce(t, l, ResultFailed, time.Second, false)
	}
	if h := l.Health(); h != Failing {
		t.Fatalf("a run that a success ended counted on: health = %v after 4 more failures", h)
	}
	sendOnce(t, l, ResultFailed, time.Second, false)
	if h := l.Health(); h != Degraded {
		t.Fatalf("after 5 failures in a row health = %v, want degraded", h)
	}
	d := try(t, l, OTP)
	if d.Allowed || d.Reason != ReasonDegraded || d.RetryAfter <= 0 || d.RetryAfter > 100*time.Millisecond {
		t.Fatalf("a degraded account's next admission = %+v, want a denial for degraded until the probe", d)
	}
}

func TestTimeoutsInARowMakeAnAccountDegraded(t *testing.T) {
	l := newLimiter(t, redistest.Client(t), healthConfig(t))
	sendOnce(t, l, ResultTimedOut, time.Second, false)
	sendOnce(t, l, ResultTimedOut, time.Second, false)
	sendOnce(t, l, ResultFailed, time.Second, false) // a failure, not a timeout: 3 failures, the timeouts' run ends
	sendOnce(t, l, ResultTimedOut, time.Second, false)
	if h := l.Health(); h != Failing {
		t.Fatalf("health = %v, want failing (4 failures, 1 timeout in a row)", h)
	}
	sendOnce(t, l, ResultOK, time.Second, false)
	for range 3 {
		sendOnce(t, l, ResultTimedOut, time.Second, false)
	}
	if h := l.Health(); h != Degraded {
		t.Fatalf("after 3 timeouts in a row health = %v, want degraded", h)
	}
}

func TestAFailureRunOlderThanTheWindowStartsAgain(t *testing.T) {
	t.Parallel() // it waits on real probe intervals
	cfg := healthConfig(t)
	cfg.Health.Window = 200 * time.Millisecond
	l := newLimiter(t, redistest.Client(t), cfg)
	for range 4 {
		sendOnce(t, l, ResultFailed, time.Second, false)
	}
	time.Sleep(300 * time.Millisecond)
	for range 4 {
		sendOnce(t, l, ResultFailed, time.Second, false)
	}
	if h := l.Health(); h != Failing {
		t.Fatalf("4 failures, then 4 more a window later: health = %v, want failing", h)
	}
}

// One process's failures and successes among three, 1 % of them failing,
// as a provider's ordinary errors do: the account never degrades.
func TestOneFailureInAHundredNeverDegrades(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := healthConfig(t)
	pods := []*Limiter{newLimiter(t, rdb, cfg), newLimiter(t, rdb, cfg), newLimiter(t, rdb, cfg)}
	r := rand.New(rand.NewPCG(28, 1))
	for i := range 1500 {
		result := ResultOK
		if r.IntN(100) == 0 {
			result = ResultFailed
			if r.IntN(2) == 0 {
				result = ResultTimedOut
			}
		}
		d := sendOnce(t, pods[i%3], result, time.Second, false)
		if !d.Allowed || d.Health == Degraded {
			t.Fatalf("send %d: %+v: a 1 %% failure rate degraded the account", i, d)
		}
	}
}

// While degraded, an account takes at most one send per ProbeEvery,
// whatever the number of processes asking.
func TestADegradedAccountAdmitsOneProbePerInterval(t *testing.T) {
	t.Parallel() // it waits on real probe intervals
	rdb := redistest.Client(t)
	cfg := healthConfig(t)
	pods := []*Limiter{newLimiter(t, rdb, cfg), newLimiter(t, rdb, cfg), newLimiter(t, rdb, cfg)}
	for range 5 {
		sendOnce(t, pods[0], ResultFailed, time.Second, false)
	}
	start := time.Now()
	allowed := 0
	for time.Since(start) < time.Second {
		for _, p := range pods {
			if try(t, p, Marketing).Allowed {
				allowed++
			}
		}
	}
	most := int(time.Since(start)/cfg.Health.ProbeEvery) + 1
	if allowed > most || allowed < 3 {
		t.Fatalf("a degraded account admitted %d sends in %v, want 3 to %d (one per %v)", allowed, time.Since(start), most, cfg.Health.ProbeEvery)
	}
}

func TestSuccessfulProbesInARowMakeItHealthyAgain(t *testing.T) {
	t.Parallel() // it waits on real probe intervals
	l := newLimiter(t, redistest.Client(t), healthConfig(t))
	for range 5 {
		sendOnce(t, l, ResultFailed, time.Second, false)
	}
	probe := func(result SendResult) {
		t.Helper()
		if d := sendOnce(t, l, result, time.Second, false); !d.Allowed || d.Health != Degraded {
			t.Fatalf("probe: %+v, want an allowed send on a degraded account", d)
		}
	}
	probe(ResultOK)
	probe(ResultOK)
	probe(ResultFailed) // the count starts again
	probe(ResultOK)
	probe(ResultOK)
	if h := l.Health(); h != Degraded {
		t.Fatalf("after 2 successful probes in a row health = %v, want degraded", h)
	}
	probe(ResultOK)
	if h := l.Health(); h != Healthy {
		t.Fatalf("after 3 successful probes in a row health = %v, want healthy", h)
	}
	if d := try(t, l, OTP); !d.Allowed || d.Health != Healthy {
		t.Fatalf("a healthy account again: %+v", d)
	}
}

// A caller that can go elsewhere is denied at once, and takes a probe
// only once it has been due for an interval with no other taker: a home
// whose every caller fails over is still probed.
func TestAFailoverCallerLeavesTheProbeToOthers(t *testing.T) {
	t.Parallel() // it waits on real probe intervals
	cfg := healthConfig(t)
	cfg.Health.ProbeEvery = 300 * time.Millisecond
	l := newLimiter(t, redistest.Client(t), cfg)
	for range 5 {
		sendOnce(t, l, ResultFailed, time.Second, false)
	}
	start := time.Now()
	d := sendOnce(t, l, ResultOK, 2*time.Second, true)
	if d.Allowed || d.Reason != ReasonDegraded || time.Since(start) > 200*time.Millisecond {
		t.Fatalf("a failover caller on a degraded account: %+v after %v, want a denial at once", d, time.Since(start))
	}
	time.Sleep(time.Until(start.Add(cfg.Health.ProbeEvery + 50*time.Millisecond)))
	if d := sendOnce(t, l, ResultOK, time.Millisecond, true); d.Allowed {
		t.Fatal("a failover caller took a probe just due: callers that cannot go elsewhere come first")
	}
	if d := try(t, l, Marketing); !d.Allowed {
		t.Fatalf("a caller that cannot go elsewhere was denied the due probe: %+v", d)
	}
	time.Sleep(2*cfg.Health.ProbeEvery + 50*time.Millisecond)
	if d := sendOnce(t, l, ResultOK, time.Millisecond, true); !d.Allowed {
		t.Fatalf("a probe due for a whole interval was left untaken by a failover caller: %+v", d)
	}
}

// A provider failing half its sends at random: the account goes degraded
// and back, but never faster than the probes allow (Probes successes in a
// row, one per ProbeEvery).
func TestAFlappingProviderDegradesNoFasterThanTheProbesAllow(t *testing.T) {
	t.Parallel() // it waits on real probe intervals
	rdb := redistest.Client(t)
	cfg := healthConfig(t)
	cfg.Health.ProbeEvery = 50 * time.Millisecond
	pods := []*Limiter{newLimiter(t, rdb, cfg), newLimiter(t, rdb, cfg), newLimiter(t, rdb, cfg)}
	r := rand.New(rand.NewPCG(28, 2))
	start := time.Now()
	recoveries, degradedAt := 0, time.Time{}
	var shortest time.Duration
	// Until two recoveries, or 4 s: a recovery takes Probes probes in a
	// row, each a coin's toss, and the first may take a while.
	for i := 0; time.Since(start) < 4*time.Second && recoveries < 2; i++ {
		result := ResultOK
		if r.IntN(2) == 0 {
			result = ResultFailed
		}
		p := pods[i%3]
		d := sendOnce(t, p, result, time.Millisecond, false)
		switch {
		case !d.Allowed:
		case d.Health != Degraded && p.Health() == Degraded:
			degradedAt = time.Now()
		case d.Health == Degraded && p.Health() == Healthy:
			recoveries++
			if took := time.Since(degradedAt); shortest == 0 || took < shortest {
				shortest = took
			}
		}
	}
	if recoveries == 0 {
		t.Fatal("the account never recovered from a provider that answers half its sends")
	}
	// Probes successes at least ProbeEvery apart, the first ProbeEvery
	// after the account degraded (less the clocks' few milliseconds apart).
	if least := time.Duration(cfg.Health.Probes)*cfg.Health.ProbeEvery - 5*time.Millisecond; shortest < least {
		t.Fatalf("degraded for %v only once, want at least %v", shortest, least)
	}
}

// A success of a send admitted before the account degraded is no probe:
// it does not count toward the recovery.
func TestOnlyProbesEndADegradedState(t *testing.T) {
	l := newLimiter(t, redistest.Client(t), healthConfig(t))
	ctx := context.Background()
	var early []Decision
	for range 3 {
		d, err := l.Admit(ctx, OTP, 1, time.Second, Claim{})
		if err != nil || !d.Allowed {
			t.Fatal(d, err)
		}
		early = append(early, d)
	}
	for range 5 {
		sendOnce(t, l, ResultFailed, time.Second, false)
	}
	for _, d := range early {
		if err := l.Settle(ctx, d, ledger.RecordSent, ResultOK, ledger.Story{}); err != nil {
			t.Fatal(err)
		}
	}
	if h := l.Health(); h != Degraded {
		t.Fatalf("3 sends admitted before the account degraded, then accepted: health = %v, want still degraded", h)
	}
}

// Sends overlap: a run of failures counted while other sends are in
// flight ends at the next success of any of them, not only of one
// admitted after the run began. Three processes, 1 % of sends failing.
func TestOneFailureInAHundredNeverDegradesWithSendsInFlight(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := healthConfig(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for p := range 3 {
		l := newLimiter(t, rdb, cfg)
		wg.Go(func() {
			r := rand.New(rand.NewPCG(28, uint64(p)))
			var held []Decision // sends in flight, settled a few at a time
			for i := range 400 {
				d, err := l.Admit(ctx, OTP, 1, time.Second, Claim{})
				if err != nil || !d.Allowed {
					errs <- fmt.Errorf("send %d: %+v, %v: the account degraded", i, d, err)
					return
				}
				held = append(held, d)
				if len(held) < 8 {
					continue
				}
				for _, d := range held {
					result := ResultOK
					if r.IntN(100) == 0 {
						result = ResultFailed
					}
					if err := l.Settle(ctx, d, "", result, ledger.Story{}); err != nil {
						errs <- err
						return
					}
				}
				held = held[:0]
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// One process whose every send fails (its egress broken) among healthy
// ones: the healthy process's successes, admitted before the run of
// failures began and so before it could hear of it, end the run as they
// complete, fail, ok, fail, ok...; the account never degrades and the
// healthy process gets every OTP slot it asks for.
func TestABrokenProcessNeverDegradesAnAccountOthersSucceedOn(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := healthConfig(t)
	ctx := context.Background()
	broken, good := newLimiter(t, rdb, cfg), newLimiter(t, rdb, cfg)
	var held []Decision
	for range 20 {
		d, err := good.Admit(ctx, OTP, 1, time.Second, Claim{})
		if err != nil || !d.Allowed || d.Health != Healthy {
			t.Fatalf("the good process's admission: %+v, %v", d, err)
		}
		held = append(held, d)
	}
	for i, d := range held {
		sendOnce(t, broken, ResultFailed, time.Second, false)
		if err := good.Settle(ctx, d, ledger.RecordSent, ResultOK, ledger.Story{}); err != nil {
			t.Fatal(err)
		}
		if h := broken.Health(); h == Degraded {
			t.Fatalf("after %d failures each followed by another process's success the account degraded", i+1)
		}
	}
	got := 0
	for range 50 {
		d := try(t, good, OTP)
		if !d.Allowed {
			continue
		}
		got++
		if err := good.Settle(ctx, d, "", ResultOK, ledger.Story{}); err != nil {
			t.Fatal(err)
		}
	}
	if got != 50 {
		t.Fatalf("the good process got %d of 50 OTP slots, want 50", got)
	}
}

// Reporting every success costs a healthy account one GET in the call
// after the send, and nothing else: no TIME, no write
// (docs/measurements.md, "Two calls a message").
func TestASuccessOnAHealthyAccountCostsOneGet(t *testing.T) {
	o := redistest.Options(redistest.Private(t))
	o.Network = "unix"
	rdb := redis.NewClient(o)
	t.Cleanup(func() { rdb.Close() })
	l := newLimiter(t, rdb, healthConfig(t))
	ctx := context.Background()
	sendOnce(t, l, ResultOK, time.Second, false) // the scripts loaded
	for _, result := range []SendResult{ResultNone, ResultOK} {
		d, err := l.Admit(ctx, OTP, 1, time.Second, Claim{ID: fmt.Sprint("m", result), Token: "t"})
		if err != nil || !d.Allowed {
			t.Fatalf("admission: %+v, %v", d, err)
		}
		if err := redisstats.Reset(ctx, rdb); err != nil {
			t.Fatal(err)
		}
		if err := l.Settle(ctx, d, ledger.RecordSent, result, ledger.Story{}); err != nil {
			t.Fatal(err)
		}
		s, err := redisstats.Read(ctx, rdb)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("result %d: %d commands executed (%v)", result, s.Executed(), s)
		want := map[string]int64{"evalsha": 1, "set": 1, "incrby": 1} // the record, the count of sends
		if result == ResultOK {
			want["get"] = 1
		}
		for name, n := range s {
			if base, _, _ := strings.Cut(name, "|"); slices.Contains(redisstats.NotWork, base) || name == "pexpire" {
				continue // the measurement, and the count's lifetime (once a second)
			}
			if n != want[name] {
				t.Fatalf("result %d: %d %s, want %d (%v)", result, n, name, want[name], s)
			}
		}
	}
}

// TestRefreshHealthTellsAProcessTheHealth: a process that sends nothing
// on the account learns the health another process's failures wrote from
// its next RefreshHealth, and again once the key says otherwise; a value
// of another shape reads as healthy, as the admission script reads it.
func TestRefreshHealthTellsAProcessTheHealth(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := testConfig(t)
	sender, idle := newLimiter(t, rdb, cfg), newLimiter(t, rdb, cfg)
	ctx := context.Background()
	if idle.healthAge() < time.Hour {
		t.Fatalf("health age %v before any reply, want the longest", idle.healthAge())
	}
	beat := func() Health {
		t.Helper()
		if _, err := idle.RefreshHealth(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if idle.healthAge() > time.Minute {
			t.Fatalf("health age %v just after a refresh", idle.healthAge())
		}
		return idle.Health()
	}
	if h := beat(); h != Healthy {
		t.Fatalf("no health key: %v, want healthy", h)
	}
	for i := range DefaultHealthFailures {
		d, err := sender.Admit(ctx, OTP, 1, time.Second, Claim{})
		if err != nil || !d.Allowed {
			t.Fatalf("send %d: %+v, %v", i, d, err)
		}
		if err := sender.Settle(ctx, d, "", ResultFailed, ledger.Story{}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if h := beat(); h != Failing {
				t.Fatalf("after one failure: %v, want failing", h)
			}
		}
	}
	if sender.Health() != Degraded {
		t.Fatalf("the sender after %d failures: %v, want degraded", DefaultHealthFailures, sender.Health())
	}
	if h := idle.Health(); h != Failing {
		t.Fatalf("before its next beat: %v, want what its last beat said (failing)", h)
	}
	if h := beat(); h != Degraded {
		t.Fatalf("after its next beat: %v, want degraded", h)
	}
	key := keys.For(cfg.Account).Health()
	if err := rdb.Set(ctx, key, "d 5 0 1 x 2 3", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if h := beat(); h != Healthy {
		t.Fatalf("a value of another shape: %v, want healthy", h)
	}
	if err := rdb.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if h := beat(); h != Healthy {
		t.Fatalf("the key gone: %v, want healthy", h)
	}
}
