package dispatch

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/nack"
	"smsdispatcher/provider"
	"smsdispatcher/provider/providertest"
)

// hang makes every request to the handler it wraps go unanswered until
// its client hangs up; hung counts those not yet ended, seen all of them.
func hang(hung, seen *atomic.Int64) func(http.Handler) http.Handler {
	return func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen.Add(1)
			hung.Add(1)
			defer hung.Add(-1)
			io.Copy(io.Discard, r.Body) // net/http notices a client that hangs up only once the body is read
			<-r.Context().Done()
		})
	}
}

// An OTP whose home hangs goes out on the next account within the
// hedge's bound (at most HedgeCeiling), not the send's timeout (the
// provider client's 10 s, under SEND_TIMEOUT's minute); the home keeps
// the id's record, the abandoned requests end, and the sends abandoned for
// want of an answer make the home degraded.
func TestAnOTPIsHedgedPastAHangingHome(t *testing.T) {
	var hung, seen atomic.Int64
	h := newHarness(t, providertest.Config{}, nil)
	_, backup, limiters := twoAccounts(t, h, false, hang(&hung, &seen))
	h.start(1, Config{OTPMaxWait: 2 * time.Second, SendTimeout: time.Minute})

	var ids []string
	for i := range 3 {
		ids = append(ids, h.publish(admission.OTP, map[string]string{"id": fmt.Sprintf("login-%d", i), "to": "+819012345678", "body": "code"}))
	}
	for id, ev := range h.waitEnded(ids, provider.DefaultTimeout-2*time.Second) {
		if ev.Outcome != nack.Sent || ev.Account != "backup" || ev.HedgedFrom != "primary" {
			t.Fatalf("%s: %v on %q (hedged from %q), want sent on the backup, hedged from the primary", id, ev.Outcome, ev.Account, ev.HedgedFrom)
		}
	}
	if n := backup.Stats().Accepted; n != len(ids) {
		t.Fatalf("the backup accepted %d, want %d", n, len(ids))
	}
	rec, err := redistest.Client(t).Get(context.Background(), limiters["primary"][0].Claims().Key("login-0")).Result()
	if err != nil || !strings.HasPrefix(rec, "sent") {
		t.Fatalf("the primary's record of login-0: %q, %v; want it sent (the home keeps the record)", rec, err)
	}
	h.waitUntil("the abandoned requests to the primary ended", 10*time.Second, func() bool { return hung.Load() == 0 })
	if got := limiters["primary"][0].Health(); got != admission.Degraded {
		t.Fatalf("the primary after %d sends abandoned unanswered: %v, want degraded", len(ids), got)
	}
}

// A home that answers after the bound, before the next account, keeps
// the message: the hedge's send is abandoned, and its request ends.
func TestAHomeThatAnswersFirstAbandonsTheHedge(t *testing.T) {
	var hung, seen atomic.Int64
	slow := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(HedgeCeiling + 500*time.Millisecond): // the provider's latency
				next.ServeHTTP(w, r)
			case <-r.Context().Done():
			}
		})
	}
	h := newHarness(t, providertest.Config{}, nil)
	primary, backup, _ := twoWrappedAccounts(t, h, false, slow, hang(&hung, &seen))
	h.start(1, Config{OTPMaxWait: 2 * time.Second})
	id := h.publish(admission.OTP, map[string]string{"id": "login-0", "to": "+819012345678", "body": "code"})
	if ev := h.waitEnded([]string{id}, 8*time.Second)[id]; ev.Outcome != nack.Sent || ev.Account != "primary" {
		t.Fatalf("%v on %q, want sent on the primary", ev.Outcome, ev.Account)
	}
	// The hedge's client has hung up by now, but the backup's handler
	// notices only when its connection's read sees the close, after the
	// message's last event.
	h.waitUntil("the hedge's request to the backup came and ended", 5*time.Second, func() bool { return seen.Load() > 0 && hung.Load() == 0 })
	if n := seen.Load(); n != 1 {
		t.Fatalf("the backup got %d requests, want the hedge's 1", n)
	}
	if p, b := primary.Stats().Accepted, backup.Stats().Accepted; p != 1 || b != 0 {
		t.Fatalf("primary accepted %d, backup %d; want 1 and 0", p, b)
	}
}

// A home that answers within the bound is not hedged: nothing goes to
// the next account.
func TestAnOTPWhoseHomeAnswersIsNotHedged(t *testing.T) {
	h := newHarness(t, providertest.Config{}, nil)
	primary, backup, _ := twoAccounts(t, h, false, nil)
	h.start(1, Config{OTPMaxWait: 2 * time.Second})
	var ids []string
	for i := range 5 {
		ids = append(ids, h.publish(admission.OTP, map[string]string{"id": fmt.Sprintf("login-%d", i), "to": "+819012345678", "body": "code"}))
	}
	for id, ev := range h.waitEnded(ids, 20*time.Second) {
		if ev.Outcome != nack.Sent || ev.Account != "primary" || ev.HedgedFrom != "" {
			t.Fatalf("%s: %v on %q (hedged from %q), want sent on the primary, not hedged", id, ev.Outcome, ev.Account, ev.HedgedFrom)
		}
	}
	if p, b := primary.Stats().Accepted, backup.Stats().Accepted; p != len(ids) || b != 0 {
		t.Fatalf("primary accepted %d, backup %d; want %d and 0", p, b, len(ids))
	}
}

// The bound is the 99th percentile of the account's last answers, within
// its floor and ceiling; a timeout is no answer.
func TestTheHedgeBoundFollowsTheAnswers(t *testing.T) {
	var a answers
	for range hedgeMinSamples - 1 {
		a.observe(time.Millisecond, nil)
	}
	if got := a.hedgeAfter(); got != HedgeCeiling {
		t.Fatalf("with %d answers: %v, want the ceiling %v", hedgeMinSamples-1, got, HedgeCeiling)
	}
	for i := range hedgeSamples {
		a.observe(time.Duration(i)*time.Millisecond, nil) // 0 to 199 ms
	}
	if got := a.hedgeAfter(); got != HedgeFloor {
		t.Fatalf("answers within 199 ms: %v, want the floor %v", got, HedgeFloor)
	}
	for range hedgeSamples / 10 {
		a.observe(time.Second, nil)
		a.observe(time.Minute, context.DeadlineExceeded) // not an answer
	}
	if got := a.hedgeAfter(); got != time.Second {
		t.Fatalf("a tenth of answers at 1 s: %v, want 1s", got)
	}
	for range hedgeSamples {
		a.observe(5*time.Second, nil)
	}
	if got := a.hedgeAfter(); got != HedgeCeiling {
		t.Fatalf("answers at 5 s: %v, want the ceiling %v", got, HedgeCeiling)
	}
}
