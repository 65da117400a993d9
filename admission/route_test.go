package admission

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"smsdispatcher/internal/redistest"
)

// routeConfig admits as fast as a test asks, and probes a skipped route
// every 100 ms.
func routeConfig(t *testing.T) Config {
	c := healthConfig(t)
	c.Route = RouteRule{ProbeEvery: 100 * time.Millisecond}
	return c
}

// finals sends n first-class messages to prefix on l and folds a final
// receipt of each: the first delivered ones delivered, the rest
// undelivered (Twilio's 30007).
func finals(t *testing.T, l *Limiter, prefix string, n, delivered int) {
	t.Helper()
	for i := range n {
		id := fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), i)
		keepStory(t, l, id, Story{Class: "otp", Prefix: prefix, ProviderIDs: []string{"p" + id}})
		status, code := "undelivered", "30007"
		if i < delivered {
			status, code = "delivered", ""
		}
		if f := fold(t, l, report("p"+id, status, code)); !f.Owed {
			t.Fatalf("the final of %s owed no event: %+v", id, f)
		}
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

// TestARouteIsSkippedUnderTheRatioWithEnoughFinals: fewer than 10 finals
// skip nothing however many failed; at 10 a ratio of exactly 0.5 is not
// under it; one more failure is.
func TestARouteIsSkippedUnderTheRatioWithEnoughFinals(t *testing.T) {
	l := newLimiter(t, redistest.Client(t), routeConfig(t))
	finals(t, l, "+62", 9, 0)
	if skipped(t, l, "+62") {
		t.Fatal("9 undelivered finals skipped the route: want at least 10")
	}
	finals(t, l, "+62", 1, 0)
	if !skipped(t, l, "+62") {
		t.Fatal("10 undelivered finals of 10 did not skip the route")
	}
	finals(t, l, "+63", 10, 5)
	if skipped(t, l, "+63") {
		t.Fatal("5 delivered of 10 (the ratio itself) skipped the route")
	}
	finals(t, l, "+63", 1, 0)
	if !skipped(t, l, "+63") {
		t.Fatal("5 delivered of 11 (under the ratio) did not skip the route")
	}
}

// TestASkippedRouteDeniesTheFirstClassToItsPrefixOnly: the first class to
// the skipped prefix is denied route_skipped until its probe; another
// prefix, no prefix and marketing to that prefix go as before.
func TestASkippedRouteDeniesTheFirstClassToItsPrefixOnly(t *testing.T) {
	cfg := routeConfig(t)
	cfg.Route.ProbeEvery = time.Minute // no probe due during the test
	l := newLimiter(t, redistest.Client(t), cfg)
	finals(t, l, "+62", 10, 0)
	for _, failover := range []bool{true, false} {
		d := admitTo(t, l, OTP, "+62", failover)
		if d.Allowed || d.Reason != ReasonRouteSkipped || d.RetryAfter <= 0 || d.RetryAfter > 2*time.Minute {
			t.Fatalf("OTP to the skipped +62 (failover %t): %+v, want a denial route_skipped until the probe", failover, d)
		}
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
// processes asking as fast as they can get one first-class send to the
// skipped prefix per probe interval between them.
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
			if admitTo(t, p, OTP, "+62", false).Allowed {
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
	keepStory(t, l, "early", Story{Class: "otp", Prefix: "+62", ProviderIDs: []string{"p-early"}})
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
		d, err := l.Admit(ctx, OTP, 1, time.Millisecond, Claim{ID: id, Token: "t-" + id, Prefix: "+62"})
		if err != nil || !d.Allowed {
			t.Fatalf("the due probe: %+v %v", d, err)
		}
		if err := l.SettleStory(ctx, d, SentRecord("p-"+id), ResultOK, Story{Class: "otp", Prefix: "+62", ProviderIDs: []string{"p-" + id}}); err != nil {
			t.Fatal(err)
		}
		fold(t, l, report("p-"+id, status, ""))
	}
	probe("probe-1", "undelivered")
	if !skipped(t, l, "+62") {
		t.Fatal("an undelivered probe cleared the skip")
	}
	probe("probe-2", "delivered")
	if skipped(t, l, "+62") {
		t.Fatal("a delivered probe left the route skipped")
	}
	if n := rdb.Exists(ctx, l.tag+":route:+62").Val(); n != 0 {
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
	if skipped(t, l, "+62") || rdb.Exists(context.Background(), l.tag+":route:+62").Val() != 0 {
		t.Fatal("the rule turned off counted or skipped the route")
	}
}

// TestRouteFieldsStayBounded: a route's counts keep the window's six
// buckets and its skip, and drop older buckets as new ones start.
func TestRouteFieldsStayBounded(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := routeConfig(t)
	cfg.Route.Window = 6 * time.Second // 1 s buckets
	l := newLimiter(t, rdb, cfg)
	ctx := context.Background()
	key := l.tag + ":route:+62"
	// Buckets from long ago, as a route left for a while leaves them.
	for b := range 20 {
		if err := rdb.HSet(ctx, key, fmt.Sprint("f", b), 3, fmt.Sprint("d", b), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	finals(t, l, "+62", 1, 0)
	if n := rdb.HLen(ctx, key).Val(); n != 1 {
		t.Fatalf("the route's counts hold %d fields after one final, want 1 (the old buckets dropped): %v", n, rdb.HGetAll(ctx, key).Val())
	}
	if skipped(t, l, "+62") {
		t.Fatal("old buckets counted: one final skipped the route")
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > cfg.Route.Window {
		t.Fatalf("the route's counts live %v, want at most the window", ttl)
	}
}

// TestTheRouteRuleIsValidated: a ratio above 1 or a window under six
// seconds cannot work.
func TestTheRouteRuleIsValidated(t *testing.T) {
	for _, r := range []RouteRule{{MinDeliveredRatio: 1.5}, {Window: time.Second}} {
		c := testConfig(t)
		c.Route = r
		if err := c.Validate(); err == nil {
			t.Fatalf("Validate accepted %+v", r)
		}
	}
}
