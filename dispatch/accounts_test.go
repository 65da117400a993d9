package dispatch

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/nack"
	"smsdispatcher/provider"
)

// twoAccounts makes h's instances send OTP on an account of its own
// ("otp", at otpRPS with BURST 1) and marketing on "bulk", which takes
// OTP's overflow; each account has its own simulator, returned.
func twoAccounts(t *testing.T, h *harness, otpRPS float64) (otpSim, bulkSim *provider.Simulator, limiters map[string][]*admission.Limiter) {
	t.Helper()
	otpSim, bulkSim = provider.NewSimulator(provider.SimConfig{}), provider.NewSimulator(provider.SimConfig{})
	urls := map[*provider.Simulator]string{}
	for _, sim := range []*provider.Simulator{otpSim, bulkSim} {
		srv := httptest.NewServer(sim)
		t.Cleanup(srv.Close)
		urls[sim] = srv.URL
	}
	otpName, bulkName := redistest.UniqueAccount(t)+"-otp", redistest.UniqueAccount(t)+"-bulk"
	limiters = map[string][]*admission.Limiter{}
	h.accounts = func(rdb redis.Scripter) []Account {
		var accts []Account
		for _, a := range []struct {
			name    string
			rps     float64
			sim     *provider.Simulator
			classes []admission.Class
		}{
			{"otp", otpRPS, otpSim, []admission.Class{admission.OTP}},
			{"bulk", 90, bulkSim, []admission.Class{admission.Marketing, admission.OTP}},
		} {
			cfg := h.limits
			cfg.Account, cfg.TargetRPS, cfg.MarketingRPS = bulkName, a.rps, 70
			if a.name == "otp" {
				cfg.Account, cfg.MarketingRPS, cfg.Burst = otpName, a.rps, 1
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
	return otpSim, bulkSim, limiters
}

// TestAnOTPOverflowsOnlyWhenItsAccountIsUnderAPenalty: OTP goes out on
// its own account; a burst beyond that account's rate waits for it (the
// bulk account's share is not touched); under a 429 penalty the OTP goes
// out on the bulk account, its send-once record still kept by its own;
// marketing never leaves the bulk account.
func TestAnOTPOverflowsOnlyWhenItsAccountIsUnderAPenalty(t *testing.T) {
	h := newHarness(t, provider.SimConfig{}, nil)
	otpSim, bulkSim, limiters := twoAccounts(t, h, 4)
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
			if ev.Outcome == nack.Denied {
				return true
			}
		}
		return false
	})
	if n := otpSim.Stats().Accepted; n != 8 {
		t.Fatalf("otp account sent %d, want 8: marketing overflowed", n)
	}
}
