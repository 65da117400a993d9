package dispatch

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/nack"
	"smsdispatcher/provider"
	"smsdispatcher/provider/providertest"
)

// twoAccounts makes h's instances send on "primary" (OTP's and
// marketing's home) and "backup" (serving both after it), each with its
// own simulator; primary lets failover through for marketing when asked.
// Probes are 200 ms apart, so that failback takes a second, not three.
func twoAccounts(t *testing.T, h *harness, marketingFailsOver bool, wrapPrimary func(http.Handler) http.Handler) (primary, backup *providertest.Simulator, limiters map[string][]*admission.Limiter) {
	t.Helper()
	return twoWrappedAccounts(t, h, marketingFailsOver, wrapPrimary, nil)
}

// twoWrappedAccounts is twoAccounts with the backup's simulator wrapped
// too.
func twoWrappedAccounts(t *testing.T, h *harness, marketingFailsOver bool, wrapPrimary, wrapBackup func(http.Handler) http.Handler) (primary, backup *providertest.Simulator, limiters map[string][]*admission.Limiter) {
	t.Helper()
	primary, backup = providertest.NewGeneric(providertest.Config{}), providertest.NewGeneric(providertest.Config{})
	urls := map[*providertest.Simulator]string{}
	for _, sim := range []*providertest.Simulator{primary, backup} {
		var handler http.Handler = sim
		switch {
		case sim == primary && wrapPrimary != nil:
			handler = wrapPrimary(sim)
		case sim == backup && wrapBackup != nil:
			handler = wrapBackup(sim)
		}
		srv := httptest.NewServer(handler)
		t.Cleanup(srv.Close)
		urls[sim] = srv.URL
	}
	prefix := redistest.UniqueAccount(t)
	limiters = map[string][]*admission.Limiter{}
	h.accounts = func(rdb redis.Scripter) []Account {
		var accts []Account
		for _, a := range []struct {
			name string
			sim  *providertest.Simulator
		}{{"primary", primary}, {"backup", backup}} {
			cfg := h.limits
			cfg.Account, cfg.TargetRPS, cfg.MarketingRPS = prefix+"-"+a.name, 90, 70
			cfg.Health.ProbeEvery = 200 * time.Millisecond
			lim, err := admission.New(rdb, cfg)
			if err != nil {
				t.Fatal(err)
			}
			limiters[a.name] = append(limiters[a.name], lim)
			c, err := provider.NewClient(urls[a.sim], "")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.CloseIdleConnections)
			acct := Account{Name: a.name, Classes: []admission.Class{admission.OTP, admission.Marketing}, Limiter: lim, Claims: lim.Claims(), Sender: c}
			if a.name == "primary" && marketingFailsOver {
				acct.FailoverClasses = []admission.Class{admission.Marketing}
			}
			accts = append(accts, acct)
		}
		return accts
	}
	return primary, backup, limiters
}

// An OTP rides past a primary that answers 503: once its failures have
// made it degraded, every OTP goes out on the backup at once, its record
// kept on the primary; marketing (not allowed to fail over) stays on the
// primary, nacked meanwhile; the primary gets probes only, and takes OTP
// again soon after it answers again.
func TestAnOTPFailsOverPastADegradedHome(t *testing.T) {
	h := newHarness(t, providertest.Config{}, nil)
	primary, backup, limiters := twoAccounts(t, h, false, nil)
	h.start(3, Config{OTPMaxWait: 500 * time.Millisecond, MarketingMaxWait: 200 * time.Millisecond})
	h.flood("sale", 400) // keeps the primary busy: its failures come from marketing too

	primary.FailFor(http.StatusServiceUnavailable, time.Minute)
	h.waitUntil("the primary degraded", 20*time.Second, func() bool {
		return limiters["primary"][0].Health() == admission.Degraded || limiters["primary"][1].Health() == admission.Degraded
	})
	before, degradedAt := primary.Stats().Failed, time.Now()
	var ids []string
	for i := range 20 {
		ids = append(ids, h.publish(admission.OTP, map[string]string{"id": fmt.Sprintf("login-%d", i), "to": "+819012345678", "body": "code"}))
		time.Sleep(20 * time.Millisecond)
	}
	for id, ev := range h.waitEnded(ids, 8*time.Second) {
		if ev.Outcome != nack.Sent || ev.Account != "backup" {
			t.Fatalf("%s: %v on %q, want sent on backup while the primary is degraded", id, ev.Outcome, ev.Account)
		}
	}
	rec, err := redistest.Client(t).Get(context.Background(), limiters["primary"][0].Claims().Key("login-0")).Result()
	if err != nil || !strings.HasPrefix(rec, "sent") {
		t.Fatalf("the primary's record of login-0: %q, %v; want it sent (the home keeps the record)", rec, err)
	}
	if n := backup.Stats().Accepted; n != len(ids) {
		t.Fatalf("the backup accepted %d messages, want the %d OTPs: marketing failed over", n, len(ids))
	}
	// Probes only: one per 200 ms across the three instances, and the
	// sends that were in flight when it degraded.
	elapsed := time.Since(degradedAt)
	if got, most := primary.Stats().Failed-before, int(elapsed/(200*time.Millisecond))+1+3*h.limits.Burst; got > most {
		t.Fatalf("the degraded primary got %d requests in %v, want at most %d (probes)", got, elapsed, most)
	}

	// Failback: once it answers, probes succeed and OTP goes home.
	primary.FailFor(0, 0)
	healed := time.Now()
	for i := 0; ; i++ {
		id := h.publish(admission.OTP, map[string]string{"id": fmt.Sprintf("back-%d", i), "to": "+819012345678", "body": "code"})
		ev := h.waitEnded([]string{id}, 10*time.Second)[id]
		if ev.Account == "primary" {
			break
		}
		if time.Since(healed) > 5*time.Second {
			t.Fatalf("no OTP went back to the primary within 5 s of it answering again (last on %q)", ev.Account)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestADegradedHomeSendsAnOTPBurstStraightToTheBackup: an OTP that a
// degraded home denies goes to the next account at once, not after a
// failed probe of the home. Of a burst of 20 OTPs most never reach the
// home: it leaves its probes to the campaign, which cannot go elsewhere,
// and a hedged OTP takes one at most every 100 ms. Were the denial not
// failed over, each OTP would wait for a probe of its own, fail on the
// home and only then go to the backup (the test above cannot tell: its
// OTPs come 20 ms apart and its bound on the home's requests is by time).
func TestADegradedHomeSendsAnOTPBurstStraightToTheBackup(t *testing.T) {
	h := newHarness(t, providertest.Config{}, nil)
	primary, _, limiters := twoAccounts(t, h, false, nil)
	h.start(3, Config{OTPMaxWait: 500 * time.Millisecond, MarketingMaxWait: 200 * time.Millisecond})
	h.flood("sale", 400) // the campaign, which takes the home's probes
	primary.FailFor(http.StatusServiceUnavailable, time.Minute)
	h.waitUntil("the primary degraded", 20*time.Second, func() bool {
		return limiters["primary"][0].Health() == admission.Degraded || limiters["primary"][1].Health() == admission.Degraded
	})
	const n = 20
	ids := h.floodClass(admission.OTP, "burst", n)
	for id, ev := range h.waitEnded(ids, 8*time.Second) {
		if ev.Outcome != nack.Sent || ev.Account != "backup" {
			t.Fatalf("%s: %v on %q, want sent on backup while the primary is degraded", id, ev.Outcome, ev.Account)
		}
	}
	tried := 0
	for _, a := range primary.Arrivals() {
		if strings.HasPrefix(a.ID, "burst-") {
			tried++
		}
	}
	t.Logf("%d of the %d OTPs tried on the degraded primary first", tried, n)
	if tried > n*3/4 {
		t.Fatalf("%d of the %d OTPs were tried on the degraded primary before the backup, want most sent there at once", tried, n)
	}
}

// With failover_classes: [marketing] on the primary, a campaign rides past
// it as OTP does; without it (the test above) marketing waits.
func TestMarketingFailsOverOnlyWhereItsAccountAllows(t *testing.T) {
	h := newHarness(t, providertest.Config{}, nil)
	primary, backup, _ := twoAccounts(t, h, true, nil)
	primary.FailFor(http.StatusServiceUnavailable, time.Minute)
	h.start(2, Config{MarketingMaxWait: 500 * time.Millisecond})
	ids := h.flood("sale", 60)
	for id, ev := range h.waitEnded(ids, 30*time.Second) {
		if ev.Outcome != nack.Sent || ev.Account != "backup" {
			t.Fatalf("%s: %v on %q, want sent on backup", id, ev.Outcome, ev.Account)
		}
	}
	if n := backup.Stats().Accepted; n != len(ids) {
		t.Fatalf("the backup accepted %d, want %d", n, len(ids))
	}
}

// A primary that stops answering: three sends that time out make it
// degraded, and the OTPs after them go out on the backup.
func TestAnOTPFailsOverPastAHangingHome(t *testing.T) {
	h := newHarness(t, providertest.Config{}, nil)
	var hang atomic.Bool
	hang.Store(true)
	stuck := make(chan struct{}) // closed before the server's Close, which waits for its handlers
	_, backup, limiters := twoAccounts(t, h, false, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hang.Load() {
				select {
				case <-r.Context().Done():
				case <-stuck:
				}
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	t.Cleanup(func() { close(stuck) })
	h.start(1, Config{OTPMaxWait: 500 * time.Millisecond, SendTimeout: 200 * time.Millisecond})
	var ids []string
	for i := range 10 {
		ids = append(ids, h.publish(admission.OTP, map[string]string{"id": fmt.Sprintf("login-%d", i), "to": "+819012345678", "body": "code"}))
	}
	timedOut := 0
	for id, ev := range h.waitEnded(ids, 20*time.Second) {
		if ev.Outcome != nack.Sent || ev.Account != "backup" {
			t.Fatalf("%s: %v on %q, want sent on backup", id, ev.Outcome, ev.Account)
		}
	}
	for _, id := range ids {
		for _, ev := range h.eventsOf(id) {
			if ev.Outcome == nack.Transient {
				timedOut++
			}
		}
	}
	if h := limiters["primary"][0].Health(); h != admission.Degraded || timedOut > 3 {
		t.Fatalf("primary %v after %d sends timed out, want degraded after 3", h, timedOut)
	}
	if n := backup.Stats().Accepted; n != len(ids) {
		t.Fatalf("the backup accepted %d, want %d", n, len(ids))
	}
}

// 429s are the penalty's, never the health's: a storm of them leaves the
// account healthy and every message is sent on it.
func TestA429StormNeverDegradesTheAccount(t *testing.T) {
	h := newHarness(t, providertest.Config{}, nil)
	primary, backup, limiters := twoAccounts(t, h, false, nil)
	primary.ThrottleNext(40, 20*time.Millisecond)
	h.start(2, Config{OTPMaxWait: 500 * time.Millisecond})
	var ids []string
	for i := range 20 {
		ids = append(ids, h.publish(admission.OTP, map[string]string{"id": fmt.Sprintf("login-%d", i), "to": "+819012345678", "body": "code"}))
	}
	h.waitEnded(ids, 30*time.Second)
	for _, ev := range h.events {
		if ev.Decision.Reason == admission.ReasonDegraded {
			t.Fatalf("a 429 storm degraded the account: %+v", ev)
		}
	}
	if primary.Stats().Throttled < 10 || limiters["primary"][0].Health() != admission.Healthy {
		t.Fatalf("primary throttled %d, health %v: want a storm of 429s and a healthy account", primary.Stats().Throttled, limiters["primary"][0].Health())
	}
	_ = backup
}

// plantSkip skips the route of the account whose limiter is lim to
// prefix, its next probe in probeIn, as receipt.lua does when the first
// class's messages there stop arriving.
func plantSkip(t *testing.T, lim interface{ Account() string }, prefix string, probeIn time.Duration) string {
	t.Helper()
	rdb := redistest.Client(t)
	ctx := context.Background()
	key := keys.For(lim.Account()).Skip(prefix)
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, key, fmt.Sprint(now.Add(probeIn).UnixMicro()), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	return key
}

// An OTP to a prefix whose route the primary skips (its OTPs there stopped
// arriving) goes out on the backup at once; OTP to another prefix, and
// marketing to that one, stay on the primary.
func TestAnOTPToASkippedRouteFailsOverAndOthersStayHome(t *testing.T) {
	h := newHarness(t, providertest.Config{}, nil)
	_, _, limiters := twoAccounts(t, h, false, nil)
	h.start(1, Config{OTPMaxWait: 500 * time.Millisecond})
	plantSkip(t, limiters["primary"][0], "+62", time.Minute)
	want := map[string]string{}
	for i := range 4 {
		want[h.publish(admission.OTP, map[string]string{"id": fmt.Sprint("id-", i), "to": "+6281234567890", "body": "code"})] = "backup"
		want[h.publish(admission.OTP, map[string]string{"id": fmt.Sprint("jp-", i), "to": "+819012345678", "body": "code"})] = "primary"
	}
	want[h.publish(admission.Marketing, map[string]string{"id": "sale-id", "to": "+6281234567890", "body": "sale"})] = "primary"
	var ids []string
	for id := range want {
		ids = append(ids, id)
	}
	for id, ev := range h.waitEnded(ids, 10*time.Second) {
		if ev.Outcome != nack.Sent || ev.Account != want[id] {
			t.Fatalf("%s: %v on %q, want sent on %s", id, ev.Outcome, ev.Account, want[id])
		}
	}
}

// With no account to fail over to (the only one serving +62), OTPs to a
// skipped route are sent at once, as if nothing were skipped: a skip never
// leaves a prefix without an account. The route's probe stays as it was.
func TestOTPsWithNowhereElseAreSentThoughTheirRouteIsSkipped(t *testing.T) {
	h := newHarness(t, providertest.Config{}, nil)
	h.start(1, Config{OTPMaxWait: 500 * time.Millisecond})
	lim, err := admission.New(redistest.Client(t), h.limits) // the account's keys, as the instance's limiter has them
	if err != nil {
		t.Fatal(err)
	}
	key := plantSkip(t, lim, "+62", time.Minute)
	planted := redistest.Client(t).Get(context.Background(), key).Val()
	var ids []string
	for i := range 20 {
		ids = append(ids, h.publish(admission.OTP, map[string]string{"id": fmt.Sprint("id-", i), "to": "+6281234567890", "body": "code"}))
	}
	for id, ev := range h.waitEnded(ids, 10*time.Second) {
		if ev.Outcome != nack.Sent {
			t.Fatalf("%s: %v (%v), want sent: the only account serving +62 is never skipped", id, ev.Outcome, ev.Err)
		}
	}
	if next := redistest.Client(t).Get(context.Background(), key).Val(); next != planted {
		t.Fatalf("the skip's next probe %q after the sends, want %q: a send that could go nowhere else is no probe", next, planted)
	}
}
