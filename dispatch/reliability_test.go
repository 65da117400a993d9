package dispatch

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"smsdispatcher/admission"
	"smsdispatcher/internal/attr"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
	"smsdispatcher/nack"
)

// refuseIDs makes the provider refuse for good (422) every message whose
// id starts with prefix.
func refuseIDs(prefix string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.Header.Get("Idempotency-Key"), prefix) {
				http.Error(w, `{"error":"number blocked"}`, http.StatusUnprocessableEntity)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// deadLetterOutage makes pstest answer a publish to the dead-letter topic
// as Pub/Sub answers one to a deleted topic, while on.
type deadLetterOutage struct{ on atomic.Bool }

func (o *deadLetterOutage) React(req any) (bool, any, error) {
	if r, ok := req.(*pubsubpb.PublishRequest); ok && o.on.Load() && strings.HasSuffix(r.Topic, "/sms-dead-letter") {
		return true, nil, status.Errorf(codes.NotFound, "Resource not found (resource=sms-dead-letter).")
	}
	return false, nil, nil
}

// TestRefusedMessagesSurviveADeadLetterOutage: the dead-letter topic
// refuses publishes (NotFound, as when it was deleted) while 40 messages
// the provider refuses go through, and takes them again seconds later.
// Each ends in the inspect subscription with its reject_reason, none is
// lost (acked unsent), and none reaches the provider a second time: the
// send-once record keeps the refusal until its dead letter is out. (A
// deleted and re-created topic loses what is published before its
// subscription is re-created: a test of that would race with itself.)
func TestRefusedMessagesSurviveADeadLetterOutage(t *testing.T) {
	const n = 40
	var mu sync.Mutex
	posts := map[string]int{} // id -> POSTs; guarded by mu
	count := func(next http.Handler) http.Handler {
		refuse := refuseIDs("refused-")(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			posts[r.Header.Get("Idempotency-Key")]++
			mu.Unlock()
			refuse.ServeHTTP(w, r)
		})
	}
	outage := &deadLetterOutage{}
	outage.on.Store(true)
	h := newHarness(t, strict, count, pstest.ServerReactorOption{FuncName: "Publish", Reactor: outage})
	var ids []string
	for i := range n {
		ids = append(ids, h.publish(admission.Marketing, map[string]string{"id": fmt.Sprintf("refused-%d", i), "to": "+819012345678", "body": "sale"}))
	}
	h.start(2, Config{})

	// Every refused message has failed its dead letter at least once.
	h.waitUntil("every refused message nacked for want of its dead-letter topic", time.Minute, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		failed := map[string]bool{}
		for _, ev := range h.events {
			if ev.Outcome == nack.Rejected && ev.Action == nack.Nack {
				failed[ev.MessageID] = true
			}
		}
		return len(failed) == n
	})
	if got := h.endedCount(); got != 0 {
		t.Fatalf("%d messages acked while their dead-letter topic was gone, want 0: %v", got, h.ended)
	}
	time.Sleep(3 * time.Second) // the outage goes on: nothing to wait for

	outage.on.Store(false)
	for id, ev := range h.waitEnded(ids, time.Minute) {
		if ev.Outcome != nack.Rejected || ev.Action != nack.DeadLetter {
			t.Errorf("%s ended %v/%v, want rejected and dead-lettered", id, ev.Outcome, ev.Action)
		}
	}
	seen := map[string]bool{}
	for _, m := range h.deadLetters(n) {
		if r := m.Attributes[attr.RejectReason]; !strings.HasPrefix(r, "provider: ") || !strings.Contains(r, "422") {
			t.Errorf("dead letter %s: reject_reason %q, want the provider's refusal", m.Attributes[attr.OriginalMessageID], r)
		}
		seen[m.Attributes[attr.OriginalMessageID]] = true
	}
	for _, id := range ids {
		if !seen[id] {
			t.Errorf("message %s: no dead letter", id)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		if got := posts[fmt.Sprintf("refused-%d", i)]; got != 1 {
			t.Errorf("refused-%d reached the provider %d times, want 1", i, got)
		}
	}
}

// TestADuplicateOfAnExpiredCopyIsSent: two copies of one id are in the
// process at once. The first has a deadline that passes during its send
// (the provider is slow for it); the second, published meanwhile without a
// deadline, waits for it. The first ends expired, never sent, so the
// second must be sent, not acked as a duplicate.
func TestADuplicateOfAnExpiredCopyIsSent(t *testing.T) {
	inFirst := make(chan struct{})
	var once sync.Once
	slowFirst := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			first := false
			once.Do(func() { first = true })
			if first {
				close(inFirst)
				io.Copy(io.Discard, r.Body) // so that the server notices the client leaving
				<-r.Context().Done()        // held until the client gives up at the deadline
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	h := newHarness(t, strict, slowFirst)
	// A max wait past the first copy's deadline: the second waits in the
	// process for the first one's end, not in a nack-redelivery cycle.
	h.start(1, Config{OTPMaxWait: 5 * time.Second})
	early := h.publish(admission.OTP, map[string]string{
		"id": "login-dup", "to": "+819012345678", "body": "code",
		"deadline": time.Now().Add(3 * time.Second).Format(time.RFC3339Nano),
	})
	select {
	case <-inFirst:
	case <-time.After(30 * time.Second):
		t.Fatalf("the first copy never reached the provider: %v", outcomes(h.eventsOf(early)))
	}
	late := h.publish(admission.OTP, map[string]string{"id": "login-dup", "to": "+819012345678", "body": "code"})
	got := h.waitEnded([]string{early, late}, 30*time.Second)
	if ev := got[early]; ev.Outcome != nack.Expired {
		t.Fatalf("first copy: %v/%v, want expired", ev.Outcome, ev.Action)
	}
	if ev := got[late]; ev.Outcome != nack.Sent {
		t.Fatalf("second copy: %v/%v (%v), want sent: the first was never sent", ev.Outcome, ev.Action, outcomes(h.eventsOf(late)))
	}
	if n := h.sim.SentCount("login-dup"); n != 1 {
		t.Fatalf("provider accepted login-dup %d times, want 1", n)
	}
}

// TestASendCutOffByGraceIsShuttingDown: the provider holds a send past the
// shutdown's Grace. That is the shutdown, not the provider failing: the
// delivery ends shutting_down, charges no retry budget, and its claim is
// released so that the redelivery need not wait for it to expire.
func TestASendCutOffByGraceIsShuttingDown(t *testing.T) {
	inSend := make(chan struct{})
	var once sync.Once
	hold := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			once.Do(func() { close(inSend) })
			io.Copy(io.Discard, r.Body) // so that the server notices the client leaving
			<-r.Context().Done()
		})
	}
	h := newHarness(t, strict, hold)
	stop := h.start(1, Config{Grace: 200 * time.Millisecond})
	id := h.publish(admission.OTP, map[string]string{"id": "login-grace", "to": "+819012345678", "body": "code"})
	select {
	case <-inSend:
	case <-time.After(30 * time.Second):
		t.Fatalf("the message never reached the provider: %v", outcomes(h.eventsOf(id)))
	}
	before := h.dispatchers[0].BudgetTokens()
	stop()
	evs := h.eventsOf(id)
	if len(evs) != 1 || evs[0].Outcome != nack.ShuttingDown || evs[0].Action != nack.Nack {
		t.Fatalf("events %v, want one shutting_down/nack", outcomes(evs))
	}
	if after := h.dispatchers[0].BudgetTokens(); after != before {
		t.Errorf("retry budget %v -> %v: a send cut off by the shutdown charged it", before, after)
	}
	rdb := redistest.Client(t)
	claims := admission.NewClaims(rdb, h.account, 0, 0, 0, nil)
	// Given back, the record keeps only the count of sends: another
	// attempt claims the id at once.
	if rec, err := claims.Claim(context.Background(), "login-grace", "next", 0); err != nil || rec.State != ledger.Claimed {
		v, _ := rdb.Get(context.Background(), claims.Key("login-grace")).Result()
		t.Fatalf("another attempt's claim: %v, %v (record %q), want it claimed: the cut-off send's claim was left behind", rec.State, err, v)
	}
}

// TestRedisSlowNotDown: every Redis reply is held 80 ms (under
// REDIS_TIMEOUT) for 10 s while 3 pods drain a marketing backlog and OTP
// keeps arriving. No 429; no OTP holds its message much past OTP_MAX_WAIT
// (what its Redis calls may add on top); nothing is lost; and once Redis is
// fast again OTP latency is back to normal within a second.
func TestRedisSlowNotDown(t *testing.T) {
	h := newHarness(t, strict, nil)
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	h.redisAddr = proxy.Addr()
	// 80 ms is well under it even on a loaded machine under the race
	// detector, where a call that misses REDIS_TIMEOUT would put its pod in
	// the fallback and, on its return, behind the recovery floor.
	h.limits.RedisTimeout = 500 * time.Millisecond
	const delay = 80 * time.Millisecond
	cfg := Config{OTPMaxWait: time.Second}
	ids := h.flood("campaign", 1500)
	h.start(3, cfg)
	h.waitUntil("100 messages ended", time.Minute, func() bool { return h.endedCount() >= 100 })

	proxy.SetDelay(delay)
	slowFrom := time.Now()
	var otp []string
	publishOTP := func(d time.Duration, prefix string) {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
			otp = append(otp, h.publish(admission.OTP, map[string]string{"id": fmt.Sprintf("%s-%d", prefix, len(otp)), "to": "+819012345678", "body": "code"}))
		}
	}
	publishOTP(10*time.Second, "otp-slow")
	proxy.SetDelay(0)
	fastFrom := time.Now()
	publishOTP(3*time.Second, "otp-fast")

	for id, ev := range h.waitEnded(append(otp, ids...), 2*time.Minute) {
		if ev.Outcome != nack.Sent {
			t.Fatalf("%s ended %v, want sent", id, ev.Outcome)
		}
	}
	if st := h.sim.Stats(); st.Throttled != 0 {
		t.Fatalf("%d answers of 429 with a slow Redis, want 0", st.Throttled)
	}
	// A delivery's Redis calls outside the wait for a slot (claim, finish,
	// lease) each take the delay; the wait itself is bounded by the max
	// wait.
	// Until its slot (or its nack): the claim, then at most the max wait,
	// which a Redis call begun just before its end may overrun by one
	// delay; then the finish. Scheduling on a loaded machine gets 250 ms.
	bound := cfg.OTPMaxWait + 3*delay + 250*time.Millisecond
	var worst time.Duration
	var fast []time.Duration
	fallbacks := 0
	h.mu.Lock()
	for _, ev := range h.events {
		if ev.Decision.Source == admission.SourceFallback {
			fallbacks++
		}
		if ev.Class != admission.OTP || ev.Received.Before(slowFrom) {
			continue
		}
		end := ev.Finished
		if !ev.Admitted.IsZero() {
			end = ev.Admitted
		}
		held := end.Sub(ev.Received)
		worst = max(worst, held)
		if held > bound {
			t.Errorf("OTP %s waited %v for its slot (%v/%v), want at most %v", ev.ID, held, ev.Outcome, ev.Action, bound)
		}
		if ev.Received.After(fastFrom.Add(time.Second)) && ev.Outcome == nack.Sent {
			fast = append(fast, ev.Finished.Sub(ev.Received))
		}
	}
	h.mu.Unlock()
	med := median(fast)
	t.Logf("OTP with Redis 80 ms slow: longest wait for a slot %v; OTP median from 1 s after Redis is fast again: %v (%d sent); %d fallback decisions", worst, med, len(fast), fallbacks)
	if len(fast) == 0 || med >= delay {
		t.Fatalf("OTP median %v over %d sends 1 s after Redis is fast again, want under the %v delay", med, len(fast), delay)
	}
}

// TestOverrideUnderLoad: an operator lowers the rates to 1/s during a
// marketing flood at 3 pods. From 1 s after, no 1 s window of provider
// arrivals holds more than 1 + BURST, and no pod leaves Redis for its
// fallback (the override must not break the script); clearing it brings
// the configured rate back within 1 s.
func TestOverrideUnderLoad(t *testing.T) {
	h := newHarness(t, strict, nil)
	h.flood("campaign", 2000)
	h.start(3, Config{})
	h.waitUntil("200 messages ended", time.Minute, func() bool { return h.endedCount() >= 200 })

	op, err := admission.New(redistest.Client(t), h.limits)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := op.Override(ctx, 1, 1, 0); err != nil {
		t.Fatal(err)
	}
	set := time.Now()
	time.Sleep(5 * time.Second) // under the override: nothing to wait for
	if err := op.Override(ctx, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	cleared := time.Now()
	time.Sleep(2 * time.Second) // the span measured after clearing

	var under, after []time.Time
	for _, a := range h.sim.Arrivals() {
		switch {
		case a.At.After(set.Add(time.Second)) && a.At.Before(cleared):
			under = append(under, a.At)
		case a.At.After(cleared.Add(time.Second)) && a.At.Before(cleared.Add(2*time.Second)):
			after = append(after, a.At)
		}
	}
	burst := h.limits.Burst
	if most := mostInWindow(under, time.Second); most > 1+burst {
		t.Errorf("%d arrivals in one 1 s window under a 1/s override, want at most 1 + BURST = %d", most, 1+burst)
	}
	h.mu.Lock()
	for _, ev := range h.events {
		if ev.Decision.Source == admission.SourceFallback {
			t.Errorf("a pod decided in its Redis-down fallback at %v under the override", ev.Received.Sub(set))
			break
		}
	}
	h.mu.Unlock()
	for _, l := range h.limiters {
		if l.State().Fallback {
			t.Error("a pod is in its Redis-down fallback")
		}
	}
	t.Logf("override 1/s: %d arrivals in %v (from 1 s after it was set); cleared: %d arrivals in the second second after", len(under), cleared.Sub(set)-time.Second, len(after))
	if len(after) < 10*(1+burst) {
		t.Errorf("%d arrivals in the second after clearing (+1 s), want the configured rate back (%v/s marketing)", len(after), h.limits.MarketingRPS)
	}
}

// mostInWindow returns the most times of ts (sorted) within any window of
// length w.
func mostInWindow(ts []time.Time, w time.Duration) int {
	most, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= w {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
