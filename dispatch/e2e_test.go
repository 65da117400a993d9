package dispatch

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/internal/attr"
	"smsdispatcher/nack"
	"smsdispatcher/provider/providertest"
)

var strict = providertest.Config{Limit: 100, Window: time.Second}

// accepted returns the times the simulator accepted a message.
func accepted(sim *providertest.Simulator) []time.Time {
	var ts []time.Time
	for _, a := range sim.Arrivals() {
		if a.Status/100 == 2 {
			ts = append(ts, a.At)
		}
	}
	return ts
}

func TestNoThrottleUnderMarketingFloodAtThreeInstances(t *testing.T) {
	h := newHarness(t, strict, nil)
	ids := h.flood("campaign", 400)
	h.start(3, Config{})
	ends := h.waitEndedUnless(ids, time.Minute, func() string {
		if st := h.sim.Stats(); st.Throttled != 0 {
			return fmt.Sprintf("the provider answered 429 (%+v)", st)
		}
		return ""
	})

	for id, ev := range ends {
		if ev.Outcome != nack.Sent {
			t.Fatalf("message %s ended %v, want sent", id, ev.Outcome)
		}
	}
	st := h.sim.Stats()
	if st.Throttled != 0 || st.Accepted != 400 {
		t.Fatalf("simulator: %+v; want 400 accepted and no 429", st)
	}
	// The limiter bounds admissions (MARKETING_RPS·1s + BURST in any second
	// of Redis time); arrivals at the provider also carry the senders'
	// scheduling jitter, which on a loaded test machine can be tens of
	// milliseconds. The contract's strict window (above: no 429) is the
	// promise; this is for the log.
	t.Logf("most marketing arrivals in any second: %d (MARKETING_RPS+BURST = 75)", providertest.MaxInAnyWindow(accepted(h.sim), time.Second))
}

func TestOTPIsNeverHeldBackByAMarketingFlood(t *testing.T) {
	h := newHarness(t, strict, nil)
	mkt := h.flood("campaign", 300)
	h.start(3, Config{})
	// Logins arrive at 10/s, well inside the 20/s the marketing cap
	// leaves: the producer's pace, not a wait for something to happen.
	var otp []string
	pace := time.NewTicker(100 * time.Millisecond)
	defer pace.Stop()
	for i := range 20 {
		<-pace.C
		otp = append(otp, h.publish(admission.OTP, map[string]string{"id": fmt.Sprintf("otp-%d", i), "to": "+819012345678", "body": "code 123456"}))
	}
	ends := h.waitEnded(otp, time.Minute)
	var waits []time.Duration
	first := 0
	for _, ev := range ends {
		if ev.Outcome != nack.Sent {
			t.Fatalf("OTP ended %v, want sent", ev.Outcome)
		}
		// The marketing cap and the slot of the burst kept for OTP leave
		// it room: its first admission answer is a yes, so it waits one
		// round trip, not a slot. (On a starved machine two OTPs can reach
		// admission together; the second then waits one slot.)
		if ev.Decision.Tries == 1 {
			first++
		}
		waits = append(waits, ev.Admitted.Sub(ev.Received))
	}
	if first < len(ends)*9/10 {
		t.Errorf("%d of %d OTPs were admitted on the first answer while marketing saturated, want at least 90%%", first, len(ends))
	}
	slices.Sort(waits)
	t.Logf("OTP admission wait p50 %v max %v (informational)", waits[len(waits)/2], waits[len(waits)-1])
	h.waitEnded(mkt, time.Minute)
}

func TestA429StopsEveryInstanceForRetryAfter(t *testing.T) {
	h := newHarness(t, strict, nil)
	ids := h.flood("campaign", 150)
	const retryAfter = 2 * time.Second
	h.sim.ThrottleNext(1, retryAfter)
	h.start(3, Config{})
	h.waitEnded(ids, time.Minute)

	arr := h.sim.Arrivals()
	i := slices.IndexFunc(arr, func(a providertest.Arrival) bool { return a.Status == http.StatusTooManyRequests })
	if i < 0 {
		t.Fatal("the forced 429 never happened")
	}
	t429 := arr[i].At
	// Sends admitted before the penalty was recorded may still land just
	// after the 429; after that, silence until Retry-After ends.
	var during []time.Duration
	for _, a := range arr[i+1:] {
		if d := a.At.Sub(t429); d > 50*time.Millisecond && d < retryAfter {
			during = append(during, d)
		}
	}
	if len(during) > 0 {
		t.Fatalf("%d requests reached the provider during the 429's Retry-After (at %v after it)", len(during), during)
	}
	if st := h.sim.Stats(); st.Throttled != 1 || st.Accepted != 150 {
		t.Fatalf("simulator %+v: want exactly the one forced 429 and every message accepted", st)
	}
}

func TestExpiredMessageIsNeverSent(t *testing.T) {
	h := newHarness(t, strict, nil)
	id := h.publish(admission.OTP, map[string]string{"id": "late", "to": "+819012345678", "body": "code", "deadline": time.Now().Add(-time.Second).UTC().Format(time.RFC3339)})
	h.start(1, Config{})
	// Its first handling is its end: expired and acked, not asked for a
	// slot it has no time left for.
	var ev Event
	h.waitUntil("the late OTP handled", 30*time.Second, func() bool {
		evs := h.eventsOf(id)
		if len(evs) > 0 {
			ev = evs[0]
		}
		return len(evs) > 0
	})
	if ev.Outcome != nack.Expired || ev.Action != nack.Ack {
		t.Fatalf("late OTP's first handling: %v/%v (%v), want expired and acked", ev.Outcome, ev.Action, ev.Err)
	}
	if n := h.sim.SentCount("late"); n != 0 {
		t.Fatalf("an expired message reached the provider %d times", n)
	}
}

func TestMalformedMessageIsDeadLetteredAndNeverSent(t *testing.T) {
	h := newHarness(t, strict, nil)
	bad := []string{
		h.publishRaw(admission.Marketing, []byte("not json")),
		h.publish(admission.OTP, map[string]string{"id": "bad-to", "to": "09012345678", "body": "x"}),
	}
	h.start(1, Config{})
	for id, ev := range h.waitEnded(bad, 30*time.Second) {
		if ev.Outcome != nack.Invalid || ev.Action != nack.DeadLetter {
			t.Fatalf("%s: %v/%v, want invalid and dead-lettered", id, ev.Outcome, ev.Action)
		}
	}
	if st := h.sim.Stats(); st.Accepted+st.Rejected+st.Throttled+st.Failed != 0 {
		t.Fatalf("a malformed message reached the provider: %+v", st)
	}
	reasons := map[string]string{}
	for _, m := range h.deadLetters(2) {
		reasons[m.Attributes[attr.OriginalMessageID]] = m.Attributes[attr.RejectReason]
		if m.Attributes[attr.Class] == "" {
			t.Errorf("dead letter without a class attribute: %v", m.Attributes)
		}
	}
	for _, id := range bad {
		if reasons[id] == "" {
			t.Errorf("message %s: no dead letter with a reject_reason (got %v)", id, reasons)
		}
	}
}

func TestProviderRejectionIsDeadLettered(t *testing.T) {
	reject := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Idempotency-Key") == "refused" {
				http.Error(w, `{"error":"number blocked"}`, http.StatusUnprocessableEntity)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	h := newHarness(t, strict, reject)
	id := h.publish(admission.OTP, map[string]string{"id": "refused", "to": "+819012345678", "body": "code"})
	h.start(1, Config{})
	ev := h.waitEnded([]string{id}, 30*time.Second)[id]
	if ev.Outcome != nack.Rejected || ev.Action != nack.DeadLetter {
		t.Fatalf("refused message: %v/%v, want rejected and dead-lettered", ev.Outcome, ev.Action)
	}
	if got := h.deadLetters(1)[0].Attributes[attr.RejectReason]; got == "" {
		t.Fatal("dead letter without reject_reason")
	}
}

func TestTransientFailureIsNackedAndRetried(t *testing.T) {
	h := newHarness(t, strict, nil)
	h.sim.FailFor(http.StatusServiceUnavailable, 300*time.Millisecond)
	id := h.publish(admission.OTP, map[string]string{"id": "retry-me", "to": "+819012345678", "body": "code"})
	h.start(1, Config{})
	ev := h.waitEnded([]string{id}, 30*time.Second)[id]
	if ev.Outcome != nack.Sent {
		t.Fatalf("after the 5xx spell: %v, want sent", ev.Outcome)
	}
	evs := h.eventsOf(id)
	if len(evs) < 2 || evs[0].Outcome != nack.Transient || evs[0].Action != nack.Nack {
		t.Fatalf("events %v: want a transient nack before the send", outcomes(evs))
	}
	if n := h.sim.SentCount("retry-me"); n != 1 {
		t.Fatalf("sent %d times, want 1", n)
	}
}

func TestShutdownMidFloodLosesNothing(t *testing.T) {
	h := newHarness(t, strict, nil)
	ids := h.flood("campaign", 200)
	stop := h.start(2, Config{Grace: 5 * time.Second})
	h.waitUntil("60 messages ended", time.Minute, func() bool { return h.endedCount() >= 60 }) // part of the flood out
	stop()
	h.mu.Lock()
	endedAtStop := len(h.ended)
	h.mu.Unlock()
	if endedAtStop >= len(ids) {
		t.Fatal("the flood finished before the shutdown; nothing was tested")
	}

	h.start(2, Config{})
	restart := time.Now()
	// A message pulled while a stream closed comes back when its lease
	// ends (10s at most, see newLane).
	for id, ev := range h.waitEnded(ids, time.Minute) {
		// An ack lost in the shutdown brings a sent message back once:
		// the send-once record turns it into a duplicate, not a re-send.
		if ev.Outcome != nack.Sent && ev.Outcome != nack.Duplicate {
			t.Fatalf("%s ended %v after the restart, want sent", id, ev.Outcome)
		}
	}
	t.Logf("all ended %v after the restart", time.Since(restart))
	for i := range len(ids) {
		if n := h.sim.SentCount(fmt.Sprintf("campaign-%d", i)); n != 1 {
			t.Fatalf("campaign-%d sent %d times across the shutdown, want exactly 1", i, n)
		}
	}
}

func TestDuplicateDeliveryIsNotSentTwice(t *testing.T) {
	h := newHarness(t, strict, nil)
	// The same id published 10 times (a producer retrying), pulled by
	// three instances at once.
	var ids []string
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range 10 {
		wg.Go(func() {
			id := h.publish(admission.OTP, map[string]string{"id": "login-7f3a9c", "to": "+819012345678", "body": "code"})
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
		})
	}
	wg.Wait()
	h.start(3, Config{})
	sent := 0
	for _, ev := range h.waitEnded(ids, 30*time.Second) {
		switch ev.Outcome {
		case nack.Sent:
			sent++
		case nack.Duplicate:
		default:
			t.Fatalf("a copy ended %v, want sent or duplicate", ev.Outcome)
		}
	}
	if n := h.sim.SentCount("login-7f3a9c"); n != 1 || sent != 1 {
		t.Fatalf("id sent %d times (%d sent outcomes), want once", n, sent)
	}
}

func outcomes(evs []Event) []string {
	var s []string
	for _, ev := range evs {
		s = append(s, ev.Outcome.String()+"/"+ev.Action.String())
	}
	return s
}
