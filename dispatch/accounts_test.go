package dispatch

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/nack"
	"smsdispatcher/provider"
	"smsdispatcher/provider/providertest"
)

// threeAccounts makes h's instances send OTP on an account of its own
// ("otp", at otpRPS with BURST 1) and marketing on "bulk", which takes
// OTP's overflow; a third, "spare", serves marketing after bulk (which
// marketing must never overflow to). Each account has its own simulator.
func threeAccounts(t *testing.T, h *harness, otpRPS float64) (otpSim, bulkSim, spareSim *providertest.Simulator, limiters map[string][]*admission.Limiter) {
	t.Helper()
	otpSim, bulkSim, spareSim = providertest.NewGeneric(providertest.Config{}), providertest.NewGeneric(providertest.Config{}), providertest.NewGeneric(providertest.Config{})
	urls := map[*providertest.Simulator]string{}
	for _, sim := range []*providertest.Simulator{otpSim, bulkSim, spareSim} {
		srv := httptest.NewServer(sim)
		t.Cleanup(srv.Close)
		urls[sim] = srv.URL
	}
	names := map[string]string{}
	for _, n := range []string{"otp", "bulk", "spare"} {
		names[n] = redistest.UniqueAccount(t) + "-" + n
	}
	limiters = map[string][]*admission.Limiter{}
	h.accounts = func(rdb redis.Scripter) []Account {
		var accts []Account
		for _, a := range []struct {
			name    string
			rps     float64
			sim     *providertest.Simulator
			classes []admission.Class
		}{
			{"otp", otpRPS, otpSim, []admission.Class{admission.OTP}},
			{"bulk", 90, bulkSim, []admission.Class{admission.Marketing, admission.OTP}},
			{"spare", 90, spareSim, []admission.Class{admission.Marketing}},
		} {
			cfg := h.limits
			cfg.Account, cfg.TargetRPS, cfg.MarketingRPS = names[a.name], a.rps, 70
			if a.name == "otp" {
				cfg.MarketingRPS, cfg.Burst = a.rps, 1
			}
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
			accts = append(accts, Account{Name: a.name, Classes: a.classes, Limiter: lim, Claims: lim.Claims(), Sender: c})
		}
		return accts
	}
	return otpSim, bulkSim, spareSim, limiters
}

// TestAnOTPOverflowsOnlyWhenItsAccountIsUnderAPenalty: OTP goes out on
// its own account; a burst beyond that account's rate waits for it (the
// bulk account's share is not touched); under a 429 penalty the OTP goes
// out on the bulk account, its send-once record still kept by its own;
// marketing never leaves the bulk account.
func TestAnOTPOverflowsOnlyWhenItsAccountIsUnderAPenalty(t *testing.T) {
	h := newHarness(t, providertest.Config{}, nil)
	otpSim, bulkSim, spareSim, limiters := threeAccounts(t, h, 4)
	h.start(1, Config{OTPMaxWait: 100 * time.Millisecond})

	// Ordinary rate: 8 OTPs at once on an account of 4/s, BURST 1.
	var ids []string
	for i := range 8 {
		ids = append(ids, h.publish(admission.OTP, map[string]string{"id": "storm-" + string(rune('a'+i)), "to": "+819012345678", "body": "code"}))
	}
	for id, ev := range h.waitEnded(ids, 30*time.Second) {
		if ev.Outcome != nack.Sent || ev.Account != "otp" {
			t.Fatalf("%s: %v on %q, want sent on otp", id, ev.Outcome, ev.Account)
		}
	}
	denied := 0
	for _, id := range ids {
		for _, ev := range h.eventsOf(id) {
			if ev.Outcome == nack.Denied {
				denied++
			}
		}
	}
	if denied == 0 {
		t.Fatal("no OTP was denied for the otp account's rate: the storm did not press against it")
	}
	if n := bulkSim.Stats().Accepted; n != 0 {
		t.Fatalf("the bulk account sent %d messages of an OTP storm that only its own rate held back", n)
	}

	// A penalty on the otp account: the OTP overflows to bulk.
	if err := limiters["otp"][0].ReportThrottled(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	id := h.publish(admission.OTP, map[string]string{"id": "login-1", "to": "+819012345678", "body": "code"})
	if ev := h.waitEnded([]string{id}, 10*time.Second)[id]; ev.Outcome != nack.Sent || ev.Account != "bulk" {
		t.Fatalf("OTP under the otp account's penalty: %v on %q, want sent on bulk", ev.Outcome, ev.Account)
	}
	rdb := redistest.Client(t)
	if rec, err := rdb.Get(context.Background(), limiters["otp"][0].Claims().Key("login-1")).Result(); err != nil || !strings.HasPrefix(rec, "sent") {
		t.Fatalf("the otp account's record of login-1: %q, %v; want it sent (the home keeps the record)", rec, err)
	}
	again := h.publish(admission.OTP, map[string]string{"id": "login-1", "to": "+819012345678", "body": "code"})
	if ev := h.waitEnded([]string{again}, 10*time.Second)[again]; ev.Outcome != nack.Duplicate {
		t.Fatalf("the same id again: %v, want duplicate (the otp account keeps its record)", ev.Outcome)
	}
	if n := otpSim.Stats().Accepted; n != 8 {
		t.Fatalf("otp account sent %d, want the storm's 8", n)
	}

	// Marketing under a penalty on bulk waits: it never overflows.
	if err := limiters["bulk"][0].ReportThrottled(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	m := h.publish(admission.Marketing, map[string]string{"id": "sale-1", "to": "+819012345678", "body": "sale"})
	h.waitUntil("a marketing denial", 10*time.Second, func() bool {
		for _, ev := range h.eventsOf(m) {
			if ev.Outcome == nack.Denied || ev.Outcome == nack.Sent {
				return true // a send fails below at once
			}
		}
		return false
	})
	if n := otpSim.Stats().Accepted + spareSim.Stats().Accepted; n != 8 {
		t.Fatalf("otp and spare accounts sent %d, want the storm's 8: marketing overflowed", n)
	}
}
