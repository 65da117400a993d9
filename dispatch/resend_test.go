package dispatch

import (
	"cmp"
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/internal/attr"
	"smsdispatcher/ledger"
	"smsdispatcher/nack"
	"smsdispatcher/provider"
	"smsdispatcher/provider/providertest"
)

// What a sent message's record keeps for its receipts (ledger.Story):
// a first-class message's data for one resend, until its deadline or 5
// minutes after its acceptance, with the id and that deadline written
// into it when it has none, unless it opted out, is a resend itself, or
// receipts are off; every part's provider id; the destination's prefix
// (its route's receipts are counted by it).
func TestTheStoryASentMessageKeeps(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	allowed := admission.Decision{Allowed: true, Source: admission.SourceRedis, Sender: "+18885550100"}
	const in5Minutes = `{"deadline":"2026-11-29T12:05:00Z","id":"login-1","to":"+819012345678","body":"code 482913"}`
	tests := []struct {
		name    string
		class   admission.Class // "": otp
		fields  string          // more JSON fields of the message
		attrs   map[string]string
		off     bool // Config.Receipts false
		receipt provider.Receipt
		sendErr error
		noID    bool          // the data has no id: its Pub/Sub message ID, m1, stands in
		resend  bool          // the story keeps the message's data
		payload string        // the data kept, if not the message's own
		until   time.Duration // its ResendUntil, from t0
		ids     []string      // its ProviderIDs
		noStory bool          // Settle keeps no story
		reason  string        // Event.ResendReason
		outcome nack.Outcome
		unsent  bool          // no send
		takes   time.Duration // the clock moves this much while the provider answers
	}{
		{name: "an OTP with a deadline: resent until it", fields: `,"deadline":"2026-11-29T12:00:30Z"`,
			receipt: provider.Receipt{ID: "p1"}, resend: true, until: 30 * time.Second, ids: []string{"p1"}},
		{name: "an OTP without a deadline: resent within 5 minutes of its acceptance, the deadline written",
			receipt: provider.Receipt{ID: "p1"}, resend: true, until: 5 * time.Minute, ids: []string{"p1"},
			payload: in5Minutes},
		{name: "an OTP without an id: its stand-in id written", noID: true, fields: `,"deadline":"2026-11-29T12:00:30Z"`,
			receipt: provider.Receipt{ID: "p1"}, resend: true, until: 30 * time.Second, ids: []string{"p1"},
			payload: `{"id":"m1","to":"+819012345678","body":"code 482913","deadline":"2026-11-29T12:00:30Z"}`},
		{name: "an OTP without an id or a deadline: both written", noID: true,
			receipt: provider.Receipt{ID: "p1"}, resend: true, until: 5 * time.Minute, ids: []string{"p1"},
			payload: `{"id":"m1","deadline":"2026-11-29T12:05:00Z","to":"+819012345678","body":"code 482913"}`},
		{name: "an OTP accepted past its deadline: nothing to resend", fields: `,"deadline":"2026-11-29T12:00:01Z"`, takes: 2 * time.Second,
			receipt: provider.Receipt{ID: "p1"}, ids: []string{"p1"}},
		{name: "every part's provider id", receipt: provider.Receipt{ID: "p1", Parts: []string{"p1", "p2", "p3"}},
			resend: true, until: 5 * time.Minute, ids: []string{"p1", "p2", "p3"}, payload: in5Minutes},
		{name: "no provider id: none kept", resend: true, until: 5 * time.Minute, payload: in5Minutes},
		{name: "resend_on_failure false: no payload", fields: `,"resend_on_failure":false`,
			receipt: provider.Receipt{ID: "p1"}, ids: []string{"p1"}},
		{name: "marketing is never resent", class: admission.Marketing, receipt: provider.Receipt{ID: "p1"}, ids: []string{"p1"}},
		{name: "a resend is not resent again", attrs: map[string]string{attr.ResendAvoid: "b", attr.ResendReason: "undelivered 30007"},
			receipt: provider.Receipt{ID: "p2"}, ids: []string{"p2"}, reason: "undelivered 30007"},
		{name: "a resend's reason is cut to printable ASCII", attrs: map[string]string{attr.ResendAvoid: "b", attr.ResendReason: "failed\x1b[2J " + strings.Repeat("9", 80)},
			receipt: provider.Receipt{ID: "p2"}, ids: []string{"p2"}, reason: ("failed[2J " + strings.Repeat("9", 80))[:maxResendReason]},
		{name: "a resend every account of its route sent: acked unsent", attrs: map[string]string{attr.ResendAvoid: "b, a", attr.ResendReason: "failed"},
			noStory: true, reason: "failed", outcome: nack.Duplicate, unsent: true},
		{name: "receipts off: the record alone", off: true, receipt: provider.Receipt{ID: "p1"}, noStory: true},
		{name: "refused: no story", sendErr: &provider.Error{Status: 422, Message: "number blocked"}, noStory: true, outcome: nack.Rejected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.class = cmp.Or(tt.class, admission.OTP)
			clock := &fixedClock{t: t0}
			claims := &fakeClaims{}
			lim := &fakeLimiter{dec: allowed, claims: claims}
			sender, obs := &fakeSender{err: tt.sendErr, receipt: tt.receipt, onSend: func() { clock.Add(tt.takes) }}, &eventLog{}
			both := []admission.Class{admission.OTP, admission.Marketing}
			d := unitDispatcher(t, Config{Receipts: !tt.off}, Deps{
				Accounts:   []Account{{Name: "a", Classes: both, Limiter: lim, Claims: claims, Sender: sender}},
				DeadLetter: &fakeDLQ{}, Observer: obs, Clock: clock,
			})
			id, data := "login-1", []byte(`{"id":"login-1","to":"+819012345678","body":"code 482913"`+tt.fields+`}`)
			if tt.noID {
				id, data = "m1", []byte(`{"to":"+819012345678","body":"code 482913"`+tt.fields+`}`)
			}
			d.handle(context.Background(), tt.class, "sub", &pubsub.Message{ID: "m1", Data: data, Attributes: tt.attrs})

			ev := obs.evs[0]
			if ev.Outcome != tt.outcome || ev.ResendReason != tt.reason {
				t.Fatalf("event %v (%v), resend reason %q; want %v, %q", ev.Outcome, ev.Err, ev.ResendReason, tt.outcome, tt.reason)
			}
			if want := map[bool]int{false: 1, true: 0}[tt.unsent]; sender.sends != want {
				t.Fatalf("%d sends, want %d", sender.sends, want)
			}
			if tt.noStory {
				if len(lim.stories) != 0 {
					t.Fatalf("Settle kept %+v, want no story", lim.stories)
				}
				return
			}
			if len(lim.stories) != 1 {
				t.Fatalf("%d stories kept, want 1", len(lim.stories))
			}
			want := ledger.Story{ID: id, Class: tt.class.String(), Sender: allowed.Sender, ProviderIDs: tt.ids, Prefix: "+81", To: "+819012345678"}
			if tt.resend {
				want.Resend, want.ResendUntil = data, t0.Add(tt.until)
				if tt.payload != "" {
					want.Resend = []byte(tt.payload)
				}
			}
			if got := lim.stories[0]; !reflect.DeepEqual(got, want) {
				t.Fatalf("story %+v, want %+v", got, want)
			}
		})
	}
}

// storyLog records what each account's Settle kept, around the
// real limiter that keeps it.
type storyLog struct {
	mu      sync.Mutex
	stories map[string][]ledger.Story // by account; guarded by mu
}

type storyLimiter struct {
	Limiter
	account string
	log     *storyLog
}

func (l storyLimiter) Settle(ctx context.Context, d admission.Decision, record string, result admission.SendResult, s ledger.Story) error {
	if s.Class != "" { // a story kept: every story names its class
		l.log.mu.Lock()
		l.log.stories[l.account] = append(l.log.stories[l.account], s)
		l.log.mu.Unlock()
	}
	return l.Limiter.Settle(ctx, d, record, result, s)
}

// of returns the stories account kept of the provider id pid.
func (l *storyLog) of(account, pid string) []ledger.Story {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []ledger.Story
	for _, s := range l.stories[account] {
		if slices.Contains(s.ProviderIDs, pid) {
			out = append(out, s)
		}
	}
	return out
}

// A failed OTP's resend, on real Redis and Pub/Sub: it goes through the
// account after the one that sent the original (whose record says sent),
// is offered no payload to be resent again, and carries its reason; a
// resend that every account sent is acked unsent; an OTP that overflows
// keeps its story on the account that sent it.
func TestAResendSkipsTheAccountThatSentTheOriginal(t *testing.T) {
	h := newHarness(t, providertest.Config{}, nil)
	primary, backup, limiters := twoAccounts(t, h, false, nil)
	log := &storyLog{stories: map[string][]ledger.Story{}}
	build := h.accounts
	h.accounts = func(rdb redis.Scripter) []Account {
		accts := build(rdb)
		for i, a := range accts {
			accts[i].Limiter = storyLimiter{Limiter: a.Limiter, account: a.Name, log: log}
		}
		return accts
	}
	h.start(1, Config{OTPMaxWait: 500 * time.Millisecond, Receipts: true})

	deadline := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
	login := []byte(`{"id":"login-1","to":"+819012345678","body":"code","deadline":"` + deadline.Format(time.RFC3339Nano) + `"}`)
	first := h.publishRaw(admission.OTP, login)
	optOut := h.publishRaw(admission.OTP, []byte(`{"id":"login-2","to":"+819012345678","body":"code","resend_on_failure":false}`))
	sale := h.publish(admission.Marketing, map[string]string{"id": "sale-1", "to": "+819012345678", "body": "sale"})
	got := h.waitEnded([]string{first, optOut, sale}, 10*time.Second)
	for _, id := range []string{first, optOut, sale} {
		if ev := got[id]; ev.Outcome != nack.Sent || ev.Account != "primary" {
			t.Fatalf("%s: %v on %q, want sent on primary", ev.ID, ev.Outcome, ev.Account)
		}
	}
	s := log.of("primary", got[first].ProviderID)
	if len(s) != 1 || !slices.Equal(s[0].Resend, login) || !s[0].ResendUntil.Equal(deadline) || s[0].Class != "otp" {
		t.Fatalf("the OTP's story on primary: %+v; want its data, resent until its deadline %v", s, deadline)
	}
	if s := log.of("primary", got[optOut].ProviderID); len(s) != 1 || s[0].Resend != nil || !s[0].ResendUntil.IsZero() {
		t.Fatalf("the story of an OTP with resend_on_failure false: %+v; want no payload", s)
	}
	if s := log.of("primary", got[sale].ProviderID); len(s) != 1 || s[0].Resend != nil || s[0].Class != "marketing" {
		t.Fatalf("marketing's story: %+v; want no payload", s)
	}

	// The receipts endpoint's resend of the OTP: the same data, avoiding
	// primary. On primary its record would make it a duplicate.
	resend := func(avoid string) string {
		id, err := h.pubs[admission.OTP].Publish(context.Background(), &pubsub.Message{Data: login,
			Attributes: map[string]string{attr.ResendAvoid: avoid, attr.ResendReason: "undelivered 30007"}}).Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	again := resend("primary")
	ev := h.waitEnded([]string{again}, 10*time.Second)[again]
	if ev.Outcome != nack.Sent || ev.Account != "backup" || ev.ResendReason != "undelivered 30007" {
		t.Fatalf("the resend: %v (%v) on %q, reason %q; want sent on backup with its reason", ev.Outcome, ev.Err, ev.Account, ev.ResendReason)
	}
	if s := log.of("backup", ev.ProviderID); len(s) != 1 || s[0].Resend != nil || len(s[0].ProviderIDs) != 1 {
		t.Fatalf("the resend's story on backup: %+v; want its provider id and no payload", s)
	}
	none := resend("primary,backup")
	if ev := h.waitEnded([]string{none}, 10*time.Second)[none]; ev.Outcome != nack.Duplicate || ev.Action != nack.Ack || !errors.Is(ev.Err, errResendNoAccount) {
		t.Fatalf("a resend with no account left: %v/%v (%v), want acked as a duplicate, resend_no_account", ev.Outcome, ev.Action, ev.Err)
	}
	if n := primary.Stats().Accepted + backup.Stats().Accepted; n != 4 {
		t.Fatalf("the providers accepted %d messages, want 4 (3, then the one resend)", n)
	}

	// Under a penalty on primary, an OTP overflows to backup: backup,
	// which sent it, keeps its story (and its payload).
	if err := limiters["primary"][0].ReportThrottled(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	over := h.publish(admission.OTP, map[string]string{"id": "login-3", "to": "+819012345678", "body": "code"})
	ev = h.waitEnded([]string{over}, 10*time.Second)[over]
	if s := log.of("backup", ev.ProviderID); ev.Account != "backup" || len(s) != 1 || s[0].Resend == nil {
		t.Fatalf("an overflowed OTP on %q: story on backup %+v; want it kept there with its payload", ev.Account, s)
	}
}

// A resend avoids the accounts its attribute names, spaces around the
// commas ignored; an empty name matches no account, not the unnamed one of
// Deps' Limiter, Claims and Sender.
func TestAvoiding(t *testing.T) {
	a, b, unnamed := &account{Account: Account{Name: "a"}}, &account{Account: Account{Name: "b"}}, &account{}
	tests := []struct {
		avoid string
		r     []*account
		want  []*account
	}{
		{"a", []*account{a, b}, []*account{b}},
		{" b , a ", []*account{a, b}, nil},
		{"c", []*account{a, b}, []*account{a, b}},
		{"", []*account{unnamed}, []*account{unnamed}},
		{",a,", []*account{unnamed, a}, []*account{unnamed}},
	}
	for _, tt := range tests {
		if got := avoiding(tt.r, tt.avoid); !slices.Equal(got, tt.want) {
			t.Errorf("avoiding(%q) kept %d accounts, want %d", tt.avoid, len(got), len(tt.want))
		}
	}
}
