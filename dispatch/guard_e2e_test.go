package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/config/policy"
	"smsdispatcher/deadletter"
	"smsdispatcher/guard"
	"smsdispatcher/internal/attr"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/nack"
	"smsdispatcher/provider/providertest"
)

// guarded is the pumping guard of each of a harness's instances, on OTP,
// and the status events they published.
type guarded struct {
	mu     sync.Mutex
	guards []*guard.Guard
	events []guard.Event
}

// guardOTP makes h's instances guard OTP by rules, each with its own
// guard.Guard running until the test ends. ranges are the ranges the
// test blocks: their blocks and counts of an earlier run are cleared.
func guardOTP(t *testing.T, h *harness, rules *policy.Guard, ranges ...string) *guarded {
	t.Helper()
	g := &guarded{}
	class := string(admission.OTP)
	k := keys.GuardOf(class)
	for _, r := range ranges {
		rdb := redistest.Client(t)
		rdb.HDel(context.Background(), k.Blocks(), r)
		rdb.Del(context.Background(), k.Prefix()+"rate:"+r, k.Prefix()+"conv:"+r, k.Prefix()+"verified:"+r)
	}
	h.guard = func(rdb *redis.Client) Guard {
		gd := guard.New(rdb, map[string]*policy.Guard{class: rules}, fmt.Sprintf("p%d", len(g.guards)), guard.Options{
			Publish: func(_ context.Context, data []byte, _ map[string]string) error {
				var ev guard.Event
				if err := json.Unmarshal(data, &ev); err != nil {
					return err
				}
				g.mu.Lock()
				g.events = append(g.events, ev)
				g.mu.Unlock()
				return nil
			},
			Poll: 200 * time.Millisecond,
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); gd.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		g.mu.Lock()
		g.guards = append(g.guards, gd)
		g.mu.Unlock()
		return gd
	}
	return g
}

// blockedEvents returns the status events published for id.
func (g *guarded) blockedEvents(id string) []guard.Event {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []guard.Event
	for _, ev := range g.events {
		if ev.ID == id {
			out = append(out, ev)
		}
	}
	return out
}

// A number of a denied country is acked blocked, never sent: as a first
// send, as an overflow past a home under a penalty, as a resend, and as
// a replayed dead letter; numbers of other countries go out on each of
// those paths.
func TestAGeoDeniedNumberIsNeverSentOnAnyPath(t *testing.T) {
	h := newHarness(t, providertest.Config{}, nil)
	primary, backup, limiters := twoAccounts(t, h, false, nil)
	const denied, allowed = "+79161234567", "+819012345678"
	cfg := Config{OTPMaxWait: 500 * time.Millisecond}

	// Before the guard: the provider refuses a message to the denied
	// number, and it is dead-lettered.
	primary.RefuseNumber(denied)
	stop := h.start(1, cfg)
	dl := h.publish(admission.OTP, map[string]string{"id": "geo-dl", "to": denied, "body": "code"})
	if ev := h.waitEnded([]string{dl}, 10*time.Second)[dl]; ev.Outcome != nack.Rejected {
		t.Fatalf("before the guard: %v, want refused and dead-lettered", ev.Outcome)
	}
	stop()
	refused := primary.Stats().Rejected

	g := guardOTP(t, h, &policy.Guard{DenyCountries: []string{"+7"}})
	h.start(3, cfg)
	check := func(what, id string, want nack.Outcome, account string) {
		t.Helper()
		ev := h.waitEnded([]string{id}, 10*time.Second)[id]
		if ev.Outcome != want || ev.Action != nack.Ack || (account != "" && ev.Account != account) {
			t.Fatalf("%s: %v/%v on %q (%v), want %v on %q", what, ev.Outcome, ev.Action, ev.Account, ev.Err, want, account)
		}
		if want == nack.Blocked && (ev.Blocked != guard.ReasonGeo || ev.BlockedCountry != "7") {
			t.Fatalf("%s: blocked %q in country %q, want geo in 7", what, ev.Blocked, ev.BlockedCountry)
		}
	}
	check("a first send", h.publish(admission.OTP, map[string]string{"id": "geo-1", "to": denied, "body": "code"}), nack.Blocked, "primary")
	check("an allowed first send", h.publish(admission.OTP, map[string]string{"id": "ok-1", "to": allowed, "body": "code"}), nack.Sent, "primary")

	// The home under a penalty: OTP overflows to the backup.
	if err := limiters["primary"][1].ReportThrottled(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	check("an overflow", h.publish(admission.OTP, map[string]string{"id": "geo-2", "to": denied, "body": "code"}), nack.Blocked, "")
	check("an allowed overflow", h.publish(admission.OTP, map[string]string{"id": "ok-2", "to": allowed, "body": "code"}), nack.Sent, "backup")

	// A resend after a failed receipt, avoiding the home.
	resend := func(id, to string) string {
		data, _ := json.Marshal(map[string]string{"id": id, "to": to, "body": "code"})
		sid, err := h.pubs[admission.OTP].Publish(context.Background(), &pubsub.Message{Data: data,
			Attributes: map[string]string{attr.ResendAvoid: "primary", attr.ResendReason: "undelivered"}}).Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return sid
	}
	check("a resend", resend("geo-1", denied), nack.Blocked, "")
	check("an allowed resend", resend("ok-3", allowed), nack.Sent, "backup")

	// deadletters replay republishes the refused message.
	var replayed []deadletter.Result
	_, err := deadletter.Replay(context.Background(), h.admin, deadletter.ReplayOptions{
		Inspect: deadletter.Inspect{Subscription: "sms-dead-letter-inspect", Wait: 700 * time.Millisecond},
		Topics:  map[admission.Class]string{admission.OTP: "sms-otp"},
		Records: func(context.Context, admission.Class, string) (deadletter.Records, error) {
			return limiters["primary"][0].Claims(), nil
		},
		Decode: func(data []byte, standIn string) (string, string, error) {
			m, err := Decode(data, standIn)
			return m.ID, m.To, err
		},
		WithID:     func(data []byte, id string) []byte { return WithID(data, id, time.Time{}) },
		MaxReplays: 3,
	}, func(r deadletter.Result) { replayed = append(replayed, r) })
	if err != nil || len(replayed) != 1 || replayed[0].Action != deadletter.Replayed {
		t.Fatalf("replay: %+v, %v; want the dead letter republished", replayed, err)
	}
	h.waitUntil("the replayed message blocked", 10*time.Second, func() bool { return len(g.blockedEvents("geo-dl")) == 1 })

	if p, b := primary.Stats(), backup.Stats(); p.Accepted != 1 || b.Accepted != 2 || p.Rejected != refused || b.Rejected != 0 {
		t.Fatalf("the providers took primary %+v, backup %+v; want only the allowed messages (1 and 2), no request to the denied number", p, b)
	}
	for _, id := range []string{"geo-1", "geo-2", "geo-dl"} {
		for _, ev := range g.blockedEvents(id) {
			if ev.Status != guard.StatusBlocked || ev.Reason != guard.ReasonGeo || ev.Class != "otp" || (ev.Account != "primary" && ev.Account != "backup") || ev.StatusAt == "" {
				t.Fatalf("%s's status event %+v, want blocked, geo, otp, its route's home", id, ev)
			}
		}
	}
	if n := len(g.blockedEvents("geo-1")); n != 2 {
		t.Fatalf("geo-1 has %d blocked events, want 2 (the send and its resend)", n)
	}
}
