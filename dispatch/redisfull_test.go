package dispatch

import (
	"context"
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/nack"
)

// TestAFullRedisNacksMarketingAndLosesNothing: on a Redis at its maxmemory
// under noeviction, a campaign is nacked, not sent and not acked (its
// send-once records cannot be kept); once Redis has room, each message is
// sent, once.
func TestAFullRedisNacksMarketingAndLosesNothing(t *testing.T) {
	h := newHarness(t, strict, nil)
	socket := redistest.Private(t)
	h.redisAddr = socket
	h.limits.MaxInFlight = 10 // the script trims expired leases before its first write that grows memory
	ctl := redistest.ClientOf(t, socket)
	ctx := context.Background()
	for _, kv := range [][2]string{{"maxmemory-policy", admission.NoEviction}, {"maxmemory", "1"}} {
		if err := ctl.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	ids := h.flood("full", 5)
	h.start(1, Config{})

	nacked := func(id string) bool {
		for _, ev := range h.eventsOf(id) {
			if ev.Outcome == nack.Denied && ev.Action == nack.Nack && ev.Decision.Reason == admission.ReasonNoRecord {
				return true
			}
		}
		return false
	}
	h.waitUntil("every message nacked for its record", time.Minute, func() bool {
		if h.sim.Stats().Accepted > 0 {
			return true // sent: failed below
		}
		for _, id := range ids {
			if !nacked(id) {
				return false
			}
		}
		return true
	})
	if n := h.endedCount(); n != 0 {
		t.Fatalf("%d messages acked or dead-lettered while Redis was full, want none", n)
	}
	if st := h.sim.Stats(); st.Accepted != 0 {
		t.Fatalf("%d sent while Redis was full, want none", st.Accepted)
	}

	if err := ctl.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	for id, ev := range h.waitEnded(ids, time.Minute) {
		if ev.Outcome != nack.Sent {
			t.Errorf("%s ended %v, want sent", id, ev.Outcome)
		}
	}
	if st := h.sim.Stats(); st.Accepted != len(ids) {
		t.Errorf("the provider accepted %d, want %d: each message once", st.Accepted, len(ids))
	}
}
