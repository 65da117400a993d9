package admission

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
)

// routeConfig admits as fast as a test asks, and probes a skipped route
// every 100 ms.
func routeConfig(t *testing.T) Config {
	c := healthConfig(t)
	c.Route = RouteRule{ProbeEvery: 100 * time.Millisecond}
	return c
}

// finals sends n first-class messages to prefix on l, each to a number of
// its own, and folds a final receipt of each: the first delivered ones
// delivered, the rest undelivered for the route (Twilio's 30007).
func finals(t *testing.T, l *Limiter, prefix string, n, delivered int) {
	t.Helper()
	for i := range n {
		status, code := "undelivered", "30007"
		if i < delivered {
			status, code = "delivered", ""
		}
		final(t, l, prefix, newNumber(prefix), status, code, code != "")
	}
}

// numbers counts the numbers newNumber handed out.
var numbers atomic.Int64

// newNumber returns a number under prefix no other call returned.
func newNumber(prefix string) string {
	return fmt.Sprintf("%s%09d", prefix, numbers.Add(1))
}

// final sends one first-class message to to (under prefix) on l and folds
// its final receipt: status, code, and whether the code names the route.
func final(t *testing.T, l *Limiter, prefix, to, status, code string, routeFailed bool) {
	t.Helper()
	id := fmt.Sprintf("%s-%d", prefix, numbers.Add(1))
	keepStory(t, l, id, ledger.Story{Class: "otp", Prefix: prefix, To: to, ProviderIDs: []string{"p" + id}})
	r := report("p"+id, status, code)
	r.RouteFailed = routeFailed
	if f := fold(t, l, r); !f.Owed {
		t.Fatalf("the final of %s owed no event: %+v", id, f)
	}
}

// admitTo asks l at once for a slot of class to prefix; failover says the
// caller can go elsewhere.
func admitTo(t *testing.T, l *Limiter, class Class, prefix string, failover bool) Decision {
	t.Helper()
	d, err := l.Admit(context.Background(), class, 1, time.Millisecond, Claim{Prefix: prefix, Failover: failover})
	if err != nil {
		t.Fatalf("Admit(%v, %q): %v", class, prefix, err)
	}
	return d
}

// skipped reports whether l's route to prefix is skipped (its key lives).
func skipped(t *testing.T, l *Limiter, prefix string) bool {
	t.Helper()
	return redistest.Client(t).Exists(context.Background(), l.skipKey(prefix)).Val() == 1
}

// TestARouteIsSkippedUnderTheRatioWithEnoughFinals: route failures to
// fewer than 10 numbers skip nothing; at 10 numbers a ratio of exactly 0.5
// is not under it; one more failure is.
func TestARouteIsSkippedUnderTheRatioWithEnoughFinals(t *testing.T) {
	l := newLimiter(t, redistest.Client(t), routeConfig(t))
	finals(t, l, "+62", 9, 0)
	if skipped(t, l, "+62") {
		t.Fatal("9 route failures skipped the route: want at least 10 numbers")
	}
	finals(t, l, "+62", 1, 0)
	if !skipped(t, l, "+62") {
		t.Fatal("10 undelivered finals of 10 did not skip the route")
	}
	finals(t, l, "+63", 20, 10)
	if skipped(t, l, "+63") {
		t.Fatal("10 delivered of 20 (the ratio itself) skipped the route")
	}
	finals(t, l, "+63", 1, 0)
	if !skipped(t, l, "+63") {
		t.Fatal("10 delivered of 21 (under the ratio) did not skip the route")
	}
}

// TestASkippedRouteDeniesTheFirstClassToItsPrefixOnly: the first class to
// the skipped prefix, from a caller that can send elsewhere, is denied
// route_skipped until its probe; another prefix, no prefix and marketing
// to that prefix go as before.
func TestASkippedRouteDeniesTheFirstClassToItsPrefixOnly(t *testing.T) {
	cfg := routeConfig(t)
	cfg.Route.ProbeEvery = time.Minute // no probe due during the test
	l := newLimiter(t, redistest.Client(t), cfg)
	finals(t, l, "+62", 10, 0)
	if d := admitTo(t, l, OTP, "+62", true); d.Allowed || d.Reason != ReasonRouteSkipped || d.RetryAfter <= 0 || d.RetryAfter > 2*time.Minute {
		t.Fatalf("OTP to the skipped +62: %+v, want a denial route_skipped until the probe", d)
	}
	for _, c := range []struct {
		class  Class
		prefix string
	}{{OTP, "+63"}, {OTP, ""}, {Marketing, "+62"}} {
		if d := admitTo(t, l, c.class, c.prefix, true); !d.Allowed {
			t.Fatalf("%v to %q while +62 is skipped: %+v, want allowed", c.class, c.prefix, d)
		}
	}
}

// TestASkippedRouteAdmitsOneProbePerIntervalAcrossProcesses: three
// processes asking as fast as they can, each able to send elsewhere, get
// one first-class send to the skipped prefix per probe interval between
// them.
func TestASkippedRouteAdmitsOneProbePerIntervalAcrossProcesses(t *testing.T) {
	t.Parallel() // it waits on real probe intervals
	rdb := redistest.Client(t)
	cfg := routeConfig(t)
	pods := []*Limiter{newLimiter(t, rdb, cfg), newLimiter(t, rdb, cfg), newLimiter(t, rdb, cfg)}
	finals(t, pods[0], "+62", 10, 0)
	start := time.Now()
	allowed := 0
	for time.Since(start) < 600*time.Millisecond {
		for _, p := range pods {
			if admitTo(t, p, OTP, "+62", true).Allowed {
				allowed++
			}
		}
	}
	most := int(time.Since(start)/cfg.Route.ProbeEvery) + 1
	if allowed > most || allowed < 3 {
		t.Fatalf("a skipped route admitted %d sends in %v, want 3 to %d (one per %v)", allowed, time.Since(start), most, cfg.Route.ProbeEvery)
	}
}

// TestADeliveredProbeClearsTheSkip: a delivered message sent before the
// skip does not clear it, a failed probe keeps it, and a delivered probe
// (a message sent since) clears it and the route's counts.
func TestADeliveredProbeClearsTheSkip(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := routeConfig(t)
	cfg.Route.ProbeEvery = time.Minute // the test makes the probe due by hand
	l := newLimiter(t, rdb, cfg)
	ctx := context.Background()
	keepStory(t, l, "early", ledger.Story{Class: "otp", Prefix: "+62", ProviderIDs: []string{"p-early"}})
	finals(t, l, "+62", 10, 0)
	if !skipped(t, l, "+62") {
		t.Fatal("10 undelivered finals did not skip the route")
	}
	fold(t, l, report("p-early", "delivered", ""))
	if !skipped(t, l, "+62") {
		t.Fatal("a message sent before the skip, delivered, cleared it: not a probe")
	}
	probe := func(id, status string) {
		t.Helper()
		if err := rdb.Set(ctx, l.skipKey("+62"), strconv.FormatInt(redisNow(t, rdb), 10), plantedSkipTTL).Err(); err != nil {
			t.Fatal(err)
		}
		d, err := l.Admit(ctx, OTP, 1, time.Millisecond, Claim{ID: id, Token: "t-" + id, Prefix: "+62", Failover: true})
		if err != nil || !d.Allowed {
			t.Fatalf("the due probe: %+v %v", d, err)
		}
		if err := l.Settle(ctx, d, ledger.SentRecord("p-"+id), ResultOK, ledger.Story{Class: "otp", Prefix: "+62", To: newNumber("+62"), ProviderIDs: []string{"p-" + id}}); err != nil {
			t.Fatal(err)
		}
		r := report("p-"+id, status, "")
		if status != "delivered" {
			r.ErrorCode, r.RouteFailed = "30007", true
		}
		fold(t, l, r)
	}
	probe("probe-1", "undelivered")
	if !skipped(t, l, "+62") {
		t.Fatal("an undelivered probe cleared the skip")
	}
	probe("probe-2", "delivered")
	if skipped(t, l, "+62") {
		t.Fatal("a delivered probe left the route skipped")
	}
	if n := rdb.Exists(ctx, l.key.Route("+62")).Val(); n != 0 {
		t.Fatal("a delivered probe left the route's counts: the next failure would skip it again at once")
	}
	if d := admitTo(t, l, OTP, "+62", true); !d.Allowed {
		t.Fatalf("OTP to +62 after its delivered probe: %+v, want allowed", d)
	}
}

// plantedSkipTTL is how long a skip planted by hand lives.
const plantedSkipTTL = time.Minute

// TestTheRouteRuleOffCountsNothing: a negative ratio turns the rule off:
// no prefix kept, nothing counted, nothing skipped.
func TestTheRouteRuleOffCountsNothing(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := routeConfig(t)
	cfg.Route.MinDeliveredRatio = -1
	l := newLimiter(t, rdb, cfg)
	finals(t, l, "+62", 12, 0)
	if skipped(t, l, "+62") || rdb.Exists(context.Background(), l.key.Route("+62")).Val() != 0 {
		t.Fatal("the rule turned off counted or skipped the route")
	}
}

// TestRouteFieldsStayBounded: a route's counts keep the window's six
// buckets, the last MinNumbers numbers that failed and its skip, and drop
// older buckets and numbers as new ones come.
func TestRouteFieldsStayBounded(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := routeConfig(t)
	cfg.Route.Window = 6 * time.Second // 1 s buckets
	cfg.Route.MinNumbers = 4
	l := newLimiter(t, rdb, cfg)
	ctx := context.Background()
	key := l.key.Route("+62")
	// Buckets from long ago, as a route left for a while leaves them.
	for b := range 20 {
		if err := rdb.HSet(ctx, key, fmt.Sprint("f", b), 3, fmt.Sprint("d", b), 0, fmt.Sprintf("n%06x", b), b).Err(); err != nil {
			t.Fatal(err)
		}
	}
	finals(t, l, "+62", 1, 0)
	if n := rdb.HLen(ctx, key).Val(); n != 2 {
		t.Fatalf("the route's counts hold %d fields after one final, want 2 (its bucket and its number; the old ones dropped): %v", n, rdb.HGetAll(ctx, key).Val())
	}
	if skipped(t, l, "+62") {
		t.Fatal("old buckets counted: one final skipped the route")
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > cfg.Route.Window {
		t.Fatalf("the route's counts live %v, want at most the window", ttl)
	}
	finals(t, l, "+62", 3*cfg.Route.MinNumbers, 0)
	kept := 0
	for k := range rdb.HGetAll(ctx, key).Val() {
		if strings.HasPrefix(k, "n") {
			kept++
		}
	}
	if kept != cfg.Route.MinNumbers {
		t.Fatalf("the route's counts hold %d numbers after failures to %d, want %d (MinNumbers)", kept, 3*cfg.Route.MinNumbers, cfg.Route.MinNumbers)
	}
}

// TestTheRouteRuleIsValidated: a ratio above 1, a window under six
// seconds or more numbers than a route's counts hold cannot work.
func TestTheRouteRuleIsValidated(t *testing.T) {
	for _, r := range []RouteRule{{MinDeliveredRatio: 1.5}, {Window: time.Second}, {MinNumbers: maxRouteNumbers + 1}} {
		c := testConfig(t)
		c.Route = r
		if err := c.Validate(); err == nil {
			t.Fatalf("Validate accepted %+v", r)
		}
	}
}

// TestOnlyRouteFailuresCountAgainstTheRoute: failures for the recipient
// (a handset off, a number that does not exist, an invalid one: what
// anyone can cause by asking for OTPs to such numbers) count nowhere,
// however many, to however many numbers; failures for the route do.
func TestOnlyRouteFailuresCountAgainstTheRoute(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, routeConfig(t))
	for i, code := range []string{"30003", "30005", "21211", "30006", "30004", "30008", ""} {
		for range 5 {
			status := []string{"undelivered", "failed"}[i%2]
			final(t, l, "+62", newNumber("+62"), status, code, false)
		}
	}
	if skipped(t, l, "+62") || rdb.Exists(context.Background(), l.key.Route("+62")).Val() != 0 {
		t.Fatal("35 failures for their recipients (30003, 30005, 21211...) counted against the route")
	}
	finals(t, l, "+62", 10, 0)
	if !skipped(t, l, "+62") {
		t.Fatal("10 route failures (30007) to 10 numbers did not skip the route")
	}
}

// TestARouteSkipNeedsFailuresToManyNumbers: route failures to the same few
// numbers, however many, do not skip the route; the 10th number does.
func TestARouteSkipNeedsFailuresToManyNumbers(t *testing.T) {
	l := newLimiter(t, redistest.Client(t), routeConfig(t))
	few := []string{newNumber("+62"), newNumber("+62"), newNumber("+62")}
	for i := range 30 {
		final(t, l, "+62", few[i%len(few)], "undelivered", "30007", true)
	}
	finals(t, l, "+62", 6, 0)
	if skipped(t, l, "+62") {
		t.Fatal("36 route failures to 9 numbers skipped the route: want 10 numbers")
	}
	finals(t, l, "+62", 1, 0)
	if !skipped(t, l, "+62") {
		t.Fatal("route failures to 10 numbers did not skip the route")
	}
}

// TestTheLastAccountOfARouteIsNeverSkipped: a skipped route denies callers
// that can send elsewhere, but one that cannot (the account is the last of
// the message's route, or the only one serving the prefix) gets every
// send it asks for, as if nothing were skipped, and moves no probe.
func TestTheLastAccountOfARouteIsNeverSkipped(t *testing.T) {
	cfg := routeConfig(t)
	cfg.Route.ProbeEvery = time.Minute // no probe due during the test
	l := newLimiter(t, redistest.Client(t), cfg)
	finals(t, l, "+62", 10, 0)
	if !skipped(t, l, "+62") {
		t.Fatal("10 route failures did not skip the route")
	}
	allowed := 0
	for range 20 {
		if d := admitTo(t, l, OTP, "+62", false); d.Allowed {
			allowed++
		}
	}
	if allowed != 20 {
		t.Fatalf("the last account of +62's route admitted %d of 20 OTPs while the route is skipped, want 20", allowed)
	}
	if d := admitTo(t, l, OTP, "+62", true); d.Allowed || d.Reason != ReasonRouteSkipped {
		t.Fatalf("an OTP that can go elsewhere: %+v, want route_skipped", d)
	}
}

// TestAHealthyHistoryOlderThanTheWindowIsForgotten: at the default rule, a
// route delivered 2 OTP/s for 100 s until 20 s ago, then filtered, is
// skipped by the failures of the last seconds alone: the history of a
// route no longer delays its skip (2 minutes of it did, by as long).
func TestAHealthyHistoryOlderThanTheWindowIsForgotten(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, routeConfig(t))
	ctx := context.Background()
	bucket := DefaultRouteWindow.Milliseconds() / routeBuckets
	now := redisNow(t, rdb) / 1000
	history := map[string]int{}
	for ms := now - 120_000; ms < now-20_000; ms += 500 {
		history[fmt.Sprint("d", ms/bucket)]++
	}
	for k, n := range history {
		if err := rdb.HIncrBy(ctx, l.key.Route("+62"), k, int64(n)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	finals(t, l, "+62", 10, 0)
	if !skipped(t, l, "+62") {
		t.Fatalf("200 deliveries that ended 20 s ago outweighed 10 route failures now (window %v): the route moves only once the history ages out", DefaultRouteWindow)
	}
}
