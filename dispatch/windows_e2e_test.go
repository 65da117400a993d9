package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/config/policy"
	"smsdispatcher/deferral"
	"smsdispatcher/internal/attr"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
	"smsdispatcher/nack"
	"smsdispatcher/provider/providertest"
)

// opensAt is a send window closed until an instant the test sets.
type opensAt struct{ at atomic.Pointer[time.Time] }

func (o *opensAt) Next(_, _ string, t time.Time) time.Time {
	if at := *o.at.Load(); t.Before(at) {
		return at
	}
	return t
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// newWindowHarness is a harness of otp then a class of its own (a name
// no other test's deferral keys share) with sending's rules, each
// instance with a deferral store and its releaser.
func newWindowHarness(t *testing.T, sending policy.Sending, lease time.Duration) (*harness, admission.Class) {
	t.Helper()
	h := newHarness(t, providertest.Config{Limit: 1000, Window: time.Second}, nil)
	h.deferral = func(rdb redis.Scripter) *deferral.Store {
		s := deferral.New(rdb, nil, nil)
		s.Lease = lease
		return s
	}
	name := strings.ToLower(redistest.UniqueAccount(t))
	class := admission.Class("w" + name[max(0, len(name)-20):])
	class = admission.Class(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, string(class)))
	h.addClass(admission.OTP, 0)
	h.addClass(class, 0)
	h.limits.Classes = []admission.ClassLimit{{Name: admission.OTP}, {Name: class, RPS: 70}}
	h.lanes[1].Policy.Sending = sending
	return h, class
}

// campaign publishes n messages of class to to, with ids prefix-0..n-1.
func (h *harness) campaign(class admission.Class, prefix, to string, n int) []string {
	h.t.Helper()
	ids := make([]string, n)
	for i := range n {
		ids[i] = h.publish(class, map[string]string{"id": fmt.Sprintf("%s-%d", prefix, i), "to": to, "body": "sale"})
	}
	return ids
}

// TestWindowDefersACampaignUntilItOpens: a campaign published outside
// its window, across three processes, sends nothing until the window
// opens (every delivery is deferred, stored, acked), and all of it after,
// each message once, spread over the release spread.
func TestWindowDefersACampaignUntilItOpens(t *testing.T) {
	w := &opensAt{}
	open := time.Now().Add(3 * time.Second)
	w.at.Store(&open)
	h, class := newWindowHarness(t, policy.Sending{Window: w, ReleaseSpread: 500 * time.Millisecond}, 0)
	h.start(3, Config{})
	ids := h.campaign(class, "camp", "+819012345678", 30)
	for id, ev := range h.waitEnded(ids, 30*time.Second) {
		if ev.Outcome != nack.Deferred || ev.Action != nack.Ack {
			t.Errorf("%s before the window: %v/%v (%v), want deferred/ack", id, ev.Outcome, ev.Action, ev.Err)
		}
	}
	if time.Now().After(open) {
		t.Fatal("the campaign took longer than the window's closed time to be deferred: nothing is shown")
	}
	if n := h.sim.Stats().Accepted; n != 0 {
		t.Fatalf("%d messages sent before the window opened", n)
	}
	h.waitUntil("every message sent once the window opened", 30*time.Second, func() bool {
		for i := range 30 {
			if h.sim.SentCount(fmt.Sprintf("camp-%d", i)) == 0 {
				return false
			}
		}
		return true
	})
	for _, a := range h.sim.Arrivals() {
		if a.At.Before(open) {
			t.Errorf("%s reached the provider at %v, before the window opened at %v", a.ID, a.At, open)
		}
	}
	time.Sleep(500 * time.Millisecond) // a second release, if any, would show by now
	for i := range 30 {
		if n := h.sim.SentCount(fmt.Sprintf("camp-%d", i)); n != 1 {
			t.Errorf("camp-%d sent %d times, want once", i, n)
		}
	}
	h.waitUntil("the store emptied", 10*time.Second, func() bool {
		_, total, err := h.releasers[0].Store.List(context.Background(), class.String(), 0, 1)
		return err == nil && total == 0
	})
}

// TestAReleaserKilledMidReleaseLosesNothing: one releaser claims the due
// messages and dies, half of them after publishing them (before its
// remove), half before; the live processes release them at the claims'
// end, and each message is sent exactly once.
func TestAReleaserKilledMidReleaseLosesNothing(t *testing.T) {
	w := &opensAt{}
	open := time.Now().Add(6 * time.Second)
	w.at.Store(&open)
	h, class := newWindowHarness(t, policy.Sending{Window: w}, time.Second)
	h.start(3, Config{})
	ids := h.campaign(class, "kill", "+819012345678", 20)
	h.waitEnded(ids, 30*time.Second)

	// The process that dies: its own store, its clock just past the
	// opening, so that it claims every message before the live ones may;
	// its claims end a second later (by its clock).
	dying := deferral.New(redistest.Client(t), func() time.Time { return open.Add(time.Second) }, nil)
	dying.Lease = time.Second
	claimed, err := dying.Claim(context.Background(), class.String(), 100, "dying")
	if err != nil || len(claimed) != 20 {
		t.Fatalf("the dying releaser claimed %d (%v), want 20", len(claimed), err)
	}
	if time.Now().After(open) {
		t.Fatal("the campaign took longer than the window's closed time to be deferred: nothing is shown")
	}
	pub := h.admin.Publisher("sms-" + string(class))
	defer pub.Stop()
	for _, c := range claimed[:10] { // published, never removed: killed before its remove
		if _, err := pub.Publish(context.Background(), &pubsub.Message{Data: c.Data, Attributes: c.Attributes}).Get(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	h.waitUntil("every message sent", 30*time.Second, func() bool {
		for i := range 20 {
			if h.sim.SentCount(fmt.Sprintf("kill-%d", i)) == 0 {
				return false
			}
		}
		return true
	})
	h.waitUntil("the store emptied", 30*time.Second, func() bool {
		_, total, err := h.releasers[0].Store.List(context.Background(), class.String(), 0, 1)
		return err == nil && total == 0
	})
	time.Sleep(500 * time.Millisecond)
	for i := range 20 {
		if n := h.sim.SentCount(fmt.Sprintf("kill-%d", i)); n != 1 {
			t.Errorf("kill-%d sent %d times, want once", i, n)
		}
	}
}

// TestCapHoldsAcrossProcesses: three processes send a class capped at 3
// per hour to one number: exactly 3 are sent; with on_cap defer the rest
// are stored, due when the first place leaves the window; with drop they
// end capped. Another number is not held by the first's cap.
func TestCapHoldsAcrossProcesses(t *testing.T) {
	for _, drop := range []bool{false, true} {
		t.Run(fmt.Sprintf("drop=%v", drop), func(t *testing.T) {
			h, class := newWindowHarness(t, policy.Sending{Cap: policy.Cap{Count: 3, Per: time.Hour, Drop: drop}}, 0)
			h.start(3, Config{})
			ids := h.campaign(class, "cap", "+819012345678", 12)
			other := h.campaign(class, "other", "+819087654321", 2)
			evs := h.waitEnded(append(ids, other...), 30*time.Second)
			want := nack.Deferred
			if drop {
				want = nack.Capped
			}
			sent, held := 0, 0
			for _, id := range ids {
				switch evs[id].Outcome {
				case nack.Sent:
					sent++
				case want:
					held++
				default:
					t.Errorf("%s: %v (%v), want sent or %v", id, evs[id].Outcome, evs[id].Err, want)
				}
			}
			if sent != 3 || held != 9 {
				t.Errorf("%d sent and %d %v to one number, want 3 and 9", sent, held, want)
			}
			for _, id := range other {
				if evs[id].Outcome != nack.Sent {
					t.Errorf("another number's %s: %v, want sent", id, evs[id].Outcome)
				}
			}
			entries, total, err := h.releasers[0].Store.List(context.Background(), class.String(), 0, 20)
			switch {
			case err != nil:
				t.Fatal(err)
			case drop && total != 0:
				t.Errorf("%d stored with on_cap drop, want none", total)
			case !drop && total != 9:
				t.Errorf("%d stored with on_cap defer, want 9", total)
			}
			for _, e := range entries {
				if e.Due.Before(time.Now().Add(50*time.Minute)) || e.Reason != "cap" {
					t.Errorf("%s due %v (%s), want about an hour from now, for its cap", e.ID, e.Due, e.Reason)
				}
			}
		})
	}
}

// TestAResendAndAReplayAreHeldByTheirWindow: a failed OTP's resend and a
// replayed dead letter, each published again to its class's topic with
// its attributes, pass the window's check as a first send does, and are
// stored with their attributes.
func TestAResendAndAReplayAreHeldByTheirWindow(t *testing.T) {
	w := &opensAt{}
	open := time.Now().Add(time.Hour)
	w.at.Store(&open)
	h, class := newWindowHarness(t, policy.Sending{Window: w}, 0)
	h.start(1, Config{})
	var ids []string
	for _, m := range []*pubsub.Message{
		{Data: []byte(`{"id":"again-1","to":"+819012345678","body":"code 1"}`),
			Attributes: map[string]string{attr.ResendAvoid: "nobody", attr.ResendReason: "undelivered"}},
		{Data: []byte(`{"id":"replayed-1","to":"+819012345678","body":"sale"}`),
			Attributes: map[string]string{attr.Replays: "1"}},
	} {
		id, err := h.pubs[class].Publish(context.Background(), m).Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for id, ev := range h.waitEnded(ids, 30*time.Second) {
		if ev.Outcome != nack.Deferred {
			t.Errorf("%s outside its window: %v (%v), want deferred", id, ev.Outcome, ev.Err)
		}
	}
	store := h.releasers[0].Store
	again, ok1, err1 := store.Get(context.Background(), class.String(), ledger.ResendID("again-1"))
	replayed, ok2, err2 := store.Get(context.Background(), class.String(), "replayed-1")
	if !ok1 || !ok2 || err1 != nil || err2 != nil || again.Attributes[attr.ResendAvoid] != "nobody" || replayed.Attributes[attr.Replays] != "1" {
		t.Fatalf("stored %+v (%v) and %+v (%v), want the resend and the replay with their attributes", again, err1, replayed, err2)
	}
	if h.sim.Stats().Accepted != 0 {
		t.Error("a resend or a replay outside its window was sent")
	}
}

// TestADeferralTheStoreCannotTakeIsNotAcked: the ack-after-store rule. A
// message outside its window whose deferral the store cannot take (Redis
// unreachable) is nacked, every time, and comes back: never acked unsent.
func TestADeferralTheStoreCannotTakeIsNotAcked(t *testing.T) {
	w := &opensAt{}
	open := time.Now().Add(time.Hour)
	w.at.Store(&open)
	h, class := newWindowHarness(t, policy.Sending{Window: w}, 0)
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { down.Close() })
	h.deferral = func(redis.Scripter) *deferral.Store { return deferral.New(down, nil, nil) }
	h.start(1, Config{})
	id := h.publish(class, map[string]string{"id": "lost-1", "to": "+819012345678", "body": "sale"})
	h.waitUntil("two deliveries, or an ack", 30*time.Second, func() bool {
		evs := h.eventsOf(id)
		return len(evs) >= 2 || (len(evs) == 1 && evs[0].Action != nack.Nack)
	})
	for _, ev := range h.eventsOf(id) {
		if ev.Action != nack.Nack {
			t.Errorf("a deferral the store could not take: %v/%v (%v), want a nack", ev.Outcome, ev.Action, ev.Err)
		}
	}
}

// TestACapHoldsOnTheFailoverPath: an OTP class capped at one per hour
// per number, failing over past a degraded home: the first OTP goes out
// on the backup, the next ones to the number are capped on every
// account; a number of its own is not.
func TestACapHoldsOnTheFailoverPath(t *testing.T) {
	h := newHarness(t, providertest.Config{}, nil)
	primary, _, limiters := twoAccounts(t, h, false, nil)
	h.deferral = func(rdb redis.Scripter) *deferral.Store { return deferral.New(rdb, nil, nil) }
	h.addClass(admission.OTP, 0)
	h.addClass(admission.Marketing, 0)
	h.lanes[0].Policy.Sending = policy.Sending{Cap: policy.Cap{Count: 1, Per: time.Hour, Drop: true}}
	h.start(2, Config{OTPMaxWait: 500 * time.Millisecond})
	primary.FailFor(http.StatusServiceUnavailable, time.Minute)
	for i := 0; limiters["primary"][0].Health() != admission.Degraded; i++ {
		id := h.publish(admission.OTP, map[string]string{"id": fmt.Sprintf("warm-%d", i), "to": fmt.Sprintf("+8170%08d", i), "body": "code"})
		h.waitEnded([]string{id}, 10*time.Second)
		if i > 50 {
			t.Fatal("the primary never became degraded")
		}
	}
	number := fmt.Sprintf("+8190%08d", time.Now().UnixNano()%100000000)
	var ids []string
	for i := range 3 {
		ids = append(ids, h.publish(admission.OTP, map[string]string{"id": fmt.Sprintf("capped-%d-%s", i, number), "to": number, "body": "code"}))
	}
	sent, capped := 0, 0
	for id, ev := range h.waitEnded(ids, 20*time.Second) {
		switch {
		case ev.Outcome == nack.Sent && ev.Account == "backup":
			sent++
		case ev.Outcome == nack.Capped:
			capped++
		default:
			t.Errorf("%s: %v on %q (%v), want sent on the backup or capped", id, ev.Outcome, ev.Account, ev.Err)
		}
	}
	if sent != 1 || capped != 2 {
		t.Errorf("%d sent and %d capped to one number past a degraded home, want 1 and 2", sent, capped)
	}
	if n := primary.Stats().Accepted; n != 0 {
		t.Errorf("the failing primary accepted %d", n)
	}
}

// TestADeferringCapHoldsAcrossAccounts: marketing capped at 3 an hour per
// number with on_cap defer, served by two accounts (failing over past a
// degraded primary), on two processes: two sends to a number go out on
// the primary, then, the primary degraded, one on the backup; the cap
// counts the three across both accounts, and the next three to the
// number are deferred, due when the first place leaves the hour.
func TestADeferringCapHoldsAcrossAccounts(t *testing.T) {
	h := newHarness(t, providertest.Config{}, nil)
	primary, backup, limiters := twoAccounts(t, h, true, nil)
	h.deferral = func(rdb redis.Scripter) *deferral.Store { return deferral.New(rdb, nil, nil) }
	h.addClass(admission.OTP, 0)
	h.addClass(admission.Marketing, 0)
	h.lanes[1].Policy.Sending = policy.Sending{Cap: policy.Cap{Count: 3, Per: time.Hour}}
	h.start(2, Config{OTPMaxWait: 500 * time.Millisecond, MarketingMaxWait: 200 * time.Millisecond})
	number := fmt.Sprintf("+8190%08d", time.Now().UnixNano()%100000000)
	dataID := map[string]string{} // the messages' ids by their deliveries'
	publish := func(prefix string, n int) []string {
		ids := make([]string, n)
		for i := range n {
			id := fmt.Sprintf("%s-%d-%s", prefix, i, number)
			ids[i] = h.publish(admission.Marketing, map[string]string{"id": id, "to": number, "body": "sale"})
			dataID[ids[i]] = id
		}
		return ids
	}
	home := publish("home", 2)
	for id, ev := range h.waitEnded(home, 20*time.Second) {
		if ev.Outcome != nack.Sent || ev.Account != "primary" {
			t.Fatalf("%s: %v on %q (%v), want sent on the primary", id, ev.Outcome, ev.Account, ev.Err)
		}
	}

	primary.FailFor(http.StatusServiceUnavailable, time.Minute)
	degraded := func() bool {
		return limiters["primary"][0].Health() == admission.Degraded && limiters["primary"][1].Health() == admission.Degraded
	}
	for i := 0; !degraded(); i++ {
		id := h.publish(admission.OTP, map[string]string{"id": fmt.Sprintf("warm-%d-%s", i, number), "to": fmt.Sprintf("+8170%08d", i), "body": "code"})
		h.waitEnded([]string{id}, 10*time.Second)
		if i > 100 {
			t.Fatal("the primary never became degraded in both processes")
		}
	}
	away := publish("away", 4)
	evs := h.waitEnded(away, 30*time.Second)
	sent, deferred := 0, 0
	for _, id := range away {
		switch ev := evs[id]; {
		case ev.Outcome == nack.Sent && ev.Account == "backup":
			sent++
		case ev.Outcome == nack.Deferred:
			deferred++
		default:
			t.Errorf("%s: %v on %q (%v), want sent on the backup or deferred", id, ev.Outcome, ev.Account, ev.Err)
		}
	}
	if sent != 1 || deferred != 3 {
		t.Errorf("past the primary, %d sent on the backup and %d deferred, want 1 and 3: the cap counts both accounts' sends", sent, deferred)
	}
	total := 0
	for _, id := range append(home, away...) {
		id = dataID[id]
		n := primary.SentCount(id) + backup.SentCount(id)
		if n > 1 {
			t.Errorf("%s sent %d times", id, n)
		}
		total += n
	}
	if total != 3 {
		t.Errorf("%d of the number's messages reached a provider, want 3 (its cap)", total)
	}
	store := deferral.New(redistest.Client(t), nil, nil)
	for _, id := range away {
		if evs[id].Outcome != nack.Deferred {
			continue
		}
		e, found, err := store.Get(context.Background(), admission.Marketing.String(), dataID[id])
		if err != nil || !found || e.Reason != "cap" || e.Due.Before(time.Now().Add(50*time.Minute)) {
			t.Errorf("%s stored %+v (found %v, %v), want it due in about an hour, for its cap", dataID[id], e, found, err)
		}
		if _, err := store.Remove(context.Background(), admission.Marketing.String(), dataID[id], ""); err != nil {
			t.Error(err)
		}
	}
}
