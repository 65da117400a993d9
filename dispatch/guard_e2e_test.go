package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
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
	for _, r := range ranges {
		clearRange(t, r)
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
			// Poll left at its default: the 1 s promise is tested as it runs.
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

// clearRange forgets OTP's block and counts of range r, of an earlier
// run.
func clearRange(t *testing.T, r string) {
	k, rdb := keys.GuardOf(string(admission.OTP)), redistest.Client(t)
	rdb.HDel(context.Background(), k.Blocks(), r)
	rdb.Del(context.Background(), k.Prefix()+"rate:"+r, k.Prefix()+"conv:"+r, k.Prefix()+"verified:"+r)
}

// listed returns OTP's blocks in force of the ranges beginning with
// prefix.
func listed(t *testing.T, prefix string) []guard.Block {
	t.Helper()
	all, err := guard.List(context.Background(), redistest.Client(t), string(admission.OTP), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var out []guard.Block
	for _, b := range all {
		if strings.HasPrefix(b.Range, prefix) {
			out = append(out, b)
		}
	}
	return out
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
		if want == nack.Blocked && (ev.Blocked != guard.ReasonGeo || ev.BlockedCountry != "7" || ev.Decision.Source != "") {
			t.Fatalf("%s: blocked %q in country %q after admission %q, want geo in 7 before any admission", what, ev.Blocked, ev.BlockedCountry, ev.Decision.Source)
		}
	}
	check("a first send", h.publish(admission.OTP, map[string]string{"id": "geo-1", "to": denied, "body": "code"}), nack.Blocked, "primary")
	check("an allowed first send", h.publish(admission.OTP, map[string]string{"id": "ok-1", "to": allowed, "body": "code"}), nack.Sent, "primary")

	// The home under a penalty: OTP overflows to the backup.
	if err := limiters["primary"][1].ReportThrottled(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	check("an overflow", h.publish(admission.OTP, map[string]string{"id": "geo-2", "to": denied, "body": "code"}), nack.Blocked, "primary")
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
	check("a resend", resend("geo-1", denied), nack.Blocked, "backup") // its route without primary: backup is its home
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
	homes := map[string][]string{"geo-1": {"primary", "backup"}, "geo-2": {"primary"}, "geo-dl": {"primary"}} // geo-1's resend avoids primary
	for id, want := range homes {
		evs := g.blockedEvents(id)
		if len(evs) != len(want) {
			t.Fatalf("%s has %d blocked events, want %d", id, len(evs), len(want))
		}
		for i, ev := range evs {
			if ev.Status != guard.StatusBlocked || ev.Reason != guard.ReasonGeo || ev.Class != "otp" || ev.Account != want[i] || ev.StatusAt == "" {
				t.Fatalf("%s's status event %+v, want blocked, geo, otp, its route's home %s", id, ev, want[i])
			}
		}
	}
}

// sendsTo counts the sends among events whose id begins with prefix: the
// deliveries that reached a provider, whatever its answer.
func (h *harness) sendsTo(prefix string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, ev := range h.events {
		if len(ev.ID) >= len(prefix) && ev.ID[:len(prefix)] == prefix && !ev.Admitted.IsZero() && ev.Outcome != nack.Expired && ev.Outcome != nack.Blocked {
			n++
		}
	}
	return n
}

// A flood to one range passes max_per_prefix's count by at most a few
// sends across three processes: the range is blocked on every process
// within a second of the block, its messages acked blocked meanwhile
// while another range's go out, and released after block_for.
func TestARangeOverItsBrakeIsBlockedOnEveryProcessAndReleased(t *testing.T) {
	h := newHarness(t, providertest.Config{}, nil)
	const count = 20
	rules := &policy.Guard{MaxPerPrefix: policy.PrefixRate{Digits: 6, Count: count, Per: 2 * time.Second, BlockFor: 4 * time.Second}}
	g := guardOTP(t, h, rules, "447700")
	for i := range 3 * count {
		clearRange(t, fmt.Sprintf("4478%02d", i))
	}
	h.start(3, Config{OTPMaxWait: time.Second})

	var ids []string
	for i := range 3 * count {
		ids = append(ids, h.publish(admission.OTP, map[string]string{"id": fmt.Sprintf("atk-%d", i), "to": fmt.Sprintf("+4477009%05d", i), "body": "code"}))
		ids = append(ids, h.publish(admission.OTP, map[string]string{"id": fmt.Sprintf("ok-%d", i), "to": fmt.Sprintf("+4478%02d9%05d", i, i), "body": "code"}))
	}
	got := h.waitEnded(ids, 20*time.Second)
	blocks := append(listed(t, "4477"), listed(t, "4478")...)
	if len(blocks) != 1 || blocks[0].Range != "447700" || blocks[0].Reason != guard.ReasonPrefixRate {
		t.Fatalf("the blocks: %+v; want 447700's, prefix_rate", blocks)
	}
	set := blocks[0].Until.Add(-rules.MaxPerPrefix.BlockFor)
	t.Logf("the attacked range: %d sends for a count of %d", h.sendsTo("atk-"), count)
	if n := h.sendsTo("atk-"); n < count || n > count+5 {
		t.Fatalf("the attacked range had %d sends, want %d to %d (its count, and at most 5 in flight)", n, count, count+5)
	}
	blocked := 0
	for _, ev := range got {
		switch {
		case ev.ID[:3] == "ok-" && ev.Outcome != nack.Sent:
			t.Fatalf("%s, to another range: %v (%v), want sent", ev.ID, ev.Outcome, ev.Err)
		case ev.Outcome == nack.Blocked:
			blocked++
			if ev.Blocked != guard.ReasonPrefixRate || ev.BlockedCountry != "44" {
				t.Fatalf("%s blocked for %q in %q, want prefix_rate in 44", ev.ID, ev.Blocked, ev.BlockedCountry)
			}
		}
	}
	if blocked+h.sendsTo("atk-") != 3*count || len(g.events) != blocked {
		t.Fatalf("%d blocked, %d sent, %d status events; want the %d attack messages sent or blocked, an event each", blocked, h.sendsTo("atk-"), len(g.events), 3*count)
	}
	// Every process holds the block within a second of its setting.
	for i, gd := range g.guards {
		h.waitUntil(fmt.Sprintf("process %d holds the block", i), time.Until(set.Add(time.Second)), func() bool {
			return gd.Held()[guard.ReasonPrefixRate] == 1
		})
	}
	// Still blocked before its end, released after.
	id := h.publish(admission.OTP, map[string]string{"id": "atk-during", "to": "+447700912345", "body": "code"})
	if ev := h.waitEnded([]string{id}, 10*time.Second)[id]; ev.Outcome != nack.Blocked {
		t.Fatalf("during the block: %v, want blocked", ev.Outcome)
	}
	time.Sleep(time.Until(blocks[0].Until) + 300*time.Millisecond)
	id = h.publish(admission.OTP, map[string]string{"id": "atk-after", "to": "+447700912345", "body": "code"})
	if ev := h.waitEnded([]string{id}, 10*time.Second)[id]; ev.Outcome != nack.Sent {
		t.Fatalf("after block_for: %v (%v), want sent", ev.Outcome, ev.Err)
	}
}

// A range whose codes are not used is blocked (conversion) once enough
// of its sends are older than the grace; a range as busy whose codes are
// used is not. The applications' verifications come through the
// verifications topic.
func TestARangeWhoseCodesAreNotUsedIsBlocked(t *testing.T) {
	h := newHarness(t, providertest.Config{}, nil)
	h.topic("sms-verifications", "sms-verifications-dispatcher")
	verifications := h.publisher("sms-verifications")
	const minSends = 10
	rules := &policy.Guard{MinConversion: policy.Conversion{Ratio: 0.5, MinSends: minSends, Digits: 5, Per: time.Minute, Grace: time.Second, BlockFor: time.Minute}}
	g := guardOTP(t, h, rules, "44701", "44702")
	h.start(3, Config{OTPMaxWait: time.Second})
	for _, gd := range g.guards {
		sub := h.client().Subscriber("sms-verifications-dispatcher")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); gd.Listen(ctx, sub, nil) }()
		t.Cleanup(func() { cancel(); <-done })
	}

	send := func(id, to string) Event {
		t.Helper()
		sid := h.publish(admission.OTP, map[string]string{"id": id, "to": to, "body": "code"})
		return h.waitEnded([]string{sid}, 10*time.Second)[sid]
	}
	for i := range minSends + 2 {
		used := fmt.Sprintf("used-%d", i)
		if ev := send(used, fmt.Sprintf("+4470100%05d", i)); ev.Outcome != nack.Sent {
			t.Fatalf("%s: %v", used, ev.Outcome)
		}
		if ev := send(fmt.Sprintf("unused-%d", i), fmt.Sprintf("+4470200%05d", i)); ev.Outcome != nack.Sent {
			t.Fatalf("unused-%d: %v", i, ev.Outcome)
		}
		data, _ := json.Marshal(guard.Verification{ID: used})
		if _, err := verifications.Publish(context.Background(), &pubsub.Message{Data: data}).Get(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	unknown, _ := json.Marshal(guard.Verification{ID: "never-sent"})
	verifications.Publish(context.Background(), &pubsub.Message{Data: unknown})
	// Within the grace nothing is judged.
	if ev := send("unused-young", "+447020099999"); ev.Outcome != nack.Sent {
		t.Fatalf("within the grace: %v, want sent", ev.Outcome)
	}
	time.Sleep(rules.MinConversion.Grace + 200*time.Millisecond)
	// The next sends judge both ranges: the unused one is blocked from
	// then on, the used one never.
	send("used-late", "+447010088888")
	send("unused-late", "+447020088888")
	h.waitUntil("the unused range blocked", 2*time.Second, func() bool {
		return len(listed(t, "4470")) > 0
	})
	for i, gd := range g.guards { // every process holds it
		h.waitUntil(fmt.Sprintf("process %d holds the block", i), 2*time.Second, func() bool {
			return gd.Held()[guard.ReasonConversion] == 1
		})
	}
	if ev := send("unused-after", "+447020077777"); ev.Outcome != nack.Blocked || ev.Blocked != guard.ReasonConversion {
		t.Fatalf("the unused range after: %v %q, want blocked for conversion", ev.Outcome, ev.Blocked)
	}
	if ev := send("used-after", "+447010077777"); ev.Outcome != nack.Sent {
		t.Fatalf("the used range after: %v %q, want sent", ev.Outcome, ev.Blocked)
	}
	if blocks := listed(t, "4470"); len(blocks) != 1 || blocks[0].Range != "44702" || blocks[0].Sends < minSends || blocks[0].Verified != 0 {
		t.Fatalf("the blocks: %+v; want 44702's alone, with its sends and none verified", blocks)
	}
}
