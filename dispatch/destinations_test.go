package dispatch

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/internal/attr"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/nack"
	"smsdispatcher/provider"
	"smsdispatcher/provider/providertest"
)

// Each destination goes through the account that serves it: "jp" and its
// backup "jp2" serve +81, "world" +1 and +44; a number none serves is
// dead-lettered invalid: no_route, named by its country code; an OTP to
// +81 overflows only to an account serving +81.
func TestEachDestinationGoesThroughTheAccountThatServesIt(t *testing.T) {
	h := newHarness(t, providertest.Config{}, nil)
	prefix := redistest.UniqueAccount(t)
	type acct struct {
		name         string
		classes      []admission.Class
		destinations []string
	}
	accts := []acct{
		{"jp", []admission.Class{admission.OTP, admission.Marketing}, []string{"+81"}},
		{"world", []admission.Class{admission.OTP, admission.Marketing}, []string{"+1", "+44"}},
		{"jp2", []admission.Class{admission.OTP}, []string{"+81"}},
	}
	sims := map[string]*providertest.Simulator{}
	urls := map[string]string{}
	for _, a := range accts {
		sims[a.name] = providertest.NewGeneric(providertest.Config{})
		srv := httptest.NewServer(sims[a.name])
		t.Cleanup(srv.Close)
		urls[a.name] = srv.URL
	}
	limiters := map[string]*admission.Limiter{}
	h.accounts = func(rdb redis.Scripter) []Account {
		var out []Account
		for _, a := range accts {
			cfg := h.limits
			cfg.Account = prefix + "-" + a.name
			lim, err := admission.New(rdb, cfg)
			if err != nil {
				t.Fatal(err)
			}
			limiters[a.name] = lim
			c, err := provider.NewClient(urls[a.name], "")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.CloseIdleConnections)
			out = append(out, Account{Name: a.name, Classes: a.classes, Destinations: a.destinations, Limiter: lim, Claims: lim.Claims(), Sender: c})
		}
		return out
	}
	h.start(1, Config{OTPMaxWait: 500 * time.Millisecond})

	want := map[string]string{} // Pub/Sub ID -> account
	for i, c := range []struct{ to, account string }{
		{"+819012345678", "jp"}, {"+14155550100", "world"}, {"+447700900123", "world"}, {"+81312345678", "jp"},
	} {
		want[h.publish(admission.OTP, map[string]string{"id": fmt.Sprintf("otp-%d", i), "to": c.to, "body": "code"})] = c.account
	}
	m := h.publish(admission.Marketing, map[string]string{"id": "sale-jp", "to": "+819012345678", "body": "sale"})
	want[m] = "jp"
	lost := h.publish(admission.OTP, map[string]string{"id": "nowhere", "to": "+99912345678", "body": "code"})
	ids := []string{lost}
	for id := range want {
		ids = append(ids, id)
	}
	got := h.waitEnded(ids, 20*time.Second)
	for id, account := range want {
		if ev := got[id]; ev.Outcome != nack.Sent || ev.Account != account {
			t.Fatalf("%s: %v on %q, want sent on %q", ev.ID, ev.Outcome, ev.Account, account)
		}
	}
	if ev := got[lost]; ev.Outcome != nack.Invalid || ev.Action != nack.DeadLetter || ev.NoRoute != "999" {
		t.Fatalf("a number no account serves: %v, %v, country %q; want dead-lettered invalid with country 999", ev.Outcome, ev.Action, ev.NoRoute)
	}
	if r := h.deadLetters(1)[0].Attributes[attr.RejectReason]; !strings.HasPrefix(r, "invalid: no_route") || strings.Contains(r, "12345678") {
		t.Fatalf("its dead letter's reason = %q, want invalid: no_route without the number", r)
	}

	// Under a penalty, an OTP to +81 overflows to jp2, never to world.
	if err := limiters["jp"].ReportThrottled(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	id := h.publish(admission.OTP, map[string]string{"id": "otp-over", "to": "+819012345678", "body": "code"})
	if ev := h.waitEnded([]string{id}, 10*time.Second)[id]; ev.Outcome != nack.Sent || ev.Account != "jp2" {
		t.Fatalf("an OTP to +81 under jp's penalty: %v on %q, want sent on jp2", ev.Outcome, ev.Account)
	}
	if n := sims["world"].Stats().Accepted; n != 2 {
		t.Fatalf("world accepted %d, want its 2 OTPs: a +81 message went through it", n)
	}
}
