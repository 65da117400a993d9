package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/redis/go-redis/v9"

	"smsdispatcher/config"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/internal/topology"
	"smsdispatcher/provider"
	"smsdispatcher/suppress"
)

// TestAnInboundSTOPSuppressesAndASTARTLifts: a STOP replied through one
// account puts the sender on the list (source inbound, through it), a
// START through another takes it off; every inbound message, keyword or
// not, is published to INBOUND_TOPIC once per provider id, and every
// change to SUPPRESSIONS_TOPIC.
func TestAnInboundSTOPSuppressesAndASTARTLifts(t *testing.T) {
	l := newTestList(t, true)
	s, ps, store, rdb, names, ctx := l.suppressions, l.ps, l.store, l.rdb, l.names, context.Background()
	var counted []string // sms_inbound_total's increments
	s.counted = func(account, keyword, outcome string) { counted = append(counted, account+" "+keyword+" "+outcome) }
	var counts []string // sms_suppression_changes_total's increments
	s.changed = func(source, action, account string) { counts = append(counts, source+" "+action+" "+account) }
	t.Cleanup(func() {
		rdb.Del(context.Background(), names.Inbound("otp", "SM1"), names.Inbound("otp", "SM2"), names.Inbound("bulk", "SM3"), names.Refused("msg-1"))
	})
	const from = "+819011112222"
	stop := provider.Inbound{ID: "SM1", From: from, To: "+15005550006", Body: "stop please"}
	for range 2 { // the webhook redelivered
		if err := s.Inbound(ctx, "otp", stop); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Inbound(ctx, "otp", provider.Inbound{ID: "SM2", From: from, To: "+15005550006", Body: "what is this?"}); err != nil {
		t.Fatal(err)
	}
	e, ok, err := store.Get(ctx, from)
	if err != nil || !ok || e.Source != suppress.SourceInbound || e.Account != "otp" {
		t.Fatalf("after STOP: %+v, %v, %v; want on the list, source inbound, through otp", e, ok, err)
	}
	if src, ok := s.Suppressed(from); !ok || src != suppress.SourceInbound {
		t.Fatalf("this process's copy after STOP: %q, %v", src, ok)
	}
	s.recordRefusal(ctx, "msg-1", from, suppress.SourceInbound) // a message to from, stopped
	if at, e, ok, err := store.Refusal(ctx, "msg-1"); err != nil || !ok || at.IsZero() || e.Number != from || e.Source != suppress.SourceInbound || e.Account != "otp" || e.At.IsZero() {
		t.Fatalf("the record of a stopped message: %v %+v %v %v; want when, and the STOP's entry through otp", at, e, ok, err)
	}
	if err := s.Inbound(ctx, "bulk", provider.Inbound{ID: "SM3", From: from, To: "+15005550007", Body: "START"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := store.Get(ctx, from); err != nil || ok {
		t.Fatalf("after START through another account: on the list %v, %v", ok, err)
	}
	if want := []string{"otp stop changed", "otp stop duplicate", "otp none unchanged", "bulk start changed"}; !slices.Equal(counted, want) {
		t.Errorf("sms_inbound_total counted %q, want %q", counted, want)
	}
	if want := []string{"inbound add otp", "inbound remove bulk"}; !slices.Equal(counts, want) {
		t.Errorf("sms_suppression_changes_total counted %q, want %q (each change through its account)", counts, want)
	}
	var got []inboundEvent
	for _, m := range ps.Messages() {
		if m.Topic != "projects/proj/topics/sms-inbound" {
			continue
		}
		var ev inboundEvent
		if err := json.Unmarshal(m.Data, &ev); err != nil || ev.Keyword != m.Attributes["keyword"] || ev.Account != m.Attributes["account"] || ev.ReceivedAt == "" {
			t.Fatalf("published %s %v (%v)", m.Data, m.Attributes, err)
		}
		got = append(got, ev)
	}
	if len(got) != 3 || got[0].ID != "SM1" || got[0].Keyword != "stop" || got[1].Keyword != "none" || got[2].Keyword != "start" || got[2].Account != "bulk" {
		t.Fatalf("published to sms-inbound: %+v; want SM1 (stop) once, SM2 (none), SM3 (start)", got)
	}
	changes := 0
	for _, m := range ps.Messages() {
		if m.Topic == "projects/proj/topics/sms-suppressions" {
			changes++
		}
	}
	if changes != 2 {
		t.Fatalf("%d changes published to sms-suppressions, want 2 (the add, the remove)", changes)
	}
}

// TestAnAccountsOwnKeywords: an account's own opt_out_keywords say STOP
// through it (and replace the defaults there), an account without them
// reads the defaults, and its help_keywords left out stay the defaults.
func TestAnAccountsOwnKeywords(t *testing.T) {
	ps := pstest.NewServer()
	t.Cleanup(func() { ps.Close() })
	ctx := context.Background()
	client, err := topology.NewClient(ctx, "proj", ps.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	if err := topology.Setup(ctx, client, topology.Topology{OTPTopic: "sms-otp", MarketingTopic: "sms-marketing", DeadLetterTopic: "dl",
		OTPSubscription: "o", MarketingSubscription: "m", DeadLetterInspect: "dli", DeadLetterRetention: time.Hour, WithoutDeadLetterPolicy: true,
		Inspected: []topology.Inspected{{Topic: "sms-inbound", Inspect: "sms-inbound-inspect"}, {Topic: "sms-suppressions", Inspect: "sms-suppressions-inspect"}},
	}, func(string, string, string) {}); err != nil {
		t.Fatal(err)
	}
	rdb := redistest.Client(t)
	names := keys.Suppressions("{sms:suppress:" + redistest.UniqueAccount(t) + "}")
	mirror := &suppress.TopicMirror{Publisher: client.Publisher("sms-suppressions")}
	store := suppress.NewStore(rdb, names, mirror)
	s := &suppressions{list: suppress.NewList(store, nil), store: store, mirror: mirror, inbound: client.Publisher("sms-inbound"), logger: slog.New(slog.DiscardHandler),
		keywords: accountKeywords([]Account{{Setup: config.Account{Name: "fr", OptOutKeywords: []string{"ARRET"}}}, {Setup: config.Account{Name: "us"}}})}
	const a, b, c = "+33611112222", "+33611113333", "+14155550100"
	t.Cleanup(func() {
		mirror.Publisher.Stop()
		s.inbound.Stop()
		rdb.Del(context.Background(), names.List(), names.Log(), names.Seq(), names.Inbound("fr", "F1"), names.Inbound("fr", "F2"), names.Inbound("us", "U1"), names.Inbound("fr", "F3"))
	})
	for _, in := range []struct {
		account string
		msg     provider.Inbound
	}{
		{"fr", provider.Inbound{ID: "F1", From: a, Body: "Arret merci"}},
		{"fr", provider.Inbound{ID: "F2", From: b, Body: "STOP"}},
		{"us", provider.Inbound{ID: "U1", From: c, Body: "arret"}},
		{"fr", provider.Inbound{ID: "F3", From: c, Body: "help"}},
	} {
		if err := s.Inbound(ctx, in.account, in.msg); err != nil {
			t.Fatal(err)
		}
	}
	for number, want := range map[string]bool{a: true, b: false, c: false} {
		if _, ok, err := store.Get(ctx, number); err != nil || ok != want {
			t.Errorf("%s on the list: %v (%v), want %v", number, ok, err, want)
		}
	}
	kw := map[string]string{}
	for _, m := range ps.Messages() {
		if m.Topic == "projects/proj/topics/sms-inbound" {
			var ev inboundEvent
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				t.Fatal(err)
			}
			kw[ev.ID] = ev.Keyword
		}
	}
	if want := map[string]string{"F1": "stop", "F2": "none", "U1": "none", "F3": "help"}; !maps.Equal(kw, want) {
		t.Errorf("keywords published: %v, want %v", kw, want)
	}
}

// TestARetriedSTOPPublishesItsChangeAgain: a STOP whose change could not
// be published (SUPPRESSIONS_TOPIC missing) is answered with an error
// (the webhook's 503), though the list changed; the provider's retry
// finds the number on the list already and publishes the change all the
// same, with the first entry: the mirror is at least once, never missing
// a change for good.
func TestARetriedSTOPPublishesItsChangeAgain(t *testing.T) {
	l := newTestList(t, false) // no SUPPRESSIONS_TOPIC yet: the first publish fails
	s, ps, client, store, rdb, names, topics, ctx := l.suppressions, l.ps, l.client, l.store, l.rdb, l.names, l.topics, context.Background()
	t.Cleanup(func() { rdb.Del(context.Background(), names.Inbound("otp", "SM1")) })
	const from = "+819011112222"
	stop := provider.Inbound{ID: "SM1", From: from, To: "+15005550006", Body: "STOP"}
	if err := s.Inbound(ctx, "otp", stop); err == nil {
		t.Fatal("a STOP whose change was not published: no error, so no 503 and no retry")
	}
	first, ok, err := store.Get(ctx, from)
	if err != nil || !ok {
		t.Fatalf("after the first delivery: on the list %v, %v; want on it", ok, err)
	}
	topics.Inspected = append(topics.Inspected, topology.Inspected{Topic: "sms-suppressions", Inspect: "sms-suppressions-inspect"})
	if err := topology.Setup(ctx, client, topics, func(string, string, string) {}); err != nil {
		t.Fatal(err)
	}
	if err := s.Inbound(ctx, "otp", stop); err != nil { // the provider's retry
		t.Fatalf("the retry: %v", err)
	}
	var got []suppress.Entry
	for _, m := range ps.Messages() {
		if m.Topic != "projects/proj/topics/sms-suppressions" || m.Attributes[suppress.AttrAction] == "" {
			continue
		}
		var e suppress.Entry
		if err := json.Unmarshal(m.Data, &e); err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	if len(got) != 1 || got[0].Number != from || got[0].Action != suppress.ActionAdd || !got[0].At.Equal(first.At) || got[0].Source != suppress.SourceInbound {
		t.Fatalf("published to sms-suppressions: %+v; want the STOP's add once, with its first entry (at %v)", got, first.At)
	}
}

// testList is the server's suppressions on a list under the test's own
// names in the test Redis, and a pstest holding the topics it publishes
// to: INBOUND_TOPIC (sms-inbound) and, when mirrored, SUPPRESSIONS_TOPIC
// (sms-suppressions; without it, every mirror publish fails). Its
// publishers stop and its list's keys go when the test ends.
type testList struct {
	*suppressions
	ps     *pstest.Server
	client *pubsub.Client
	store  *suppress.Store
	rdb    *redis.Client
	names  keys.Suppressions
	topics topology.Topology // as Setup made them
}

func newTestList(t *testing.T, mirrored bool) testList {
	t.Helper()
	ps := pstest.NewServer()
	t.Cleanup(func() { ps.Close() })
	ctx := context.Background()
	client, err := topology.NewClient(ctx, "proj", ps.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	inspected := []topology.Inspected{{Topic: "sms-inbound", Inspect: "sms-inbound-inspect"}}
	if mirrored {
		inspected = append(inspected, topology.Inspected{Topic: "sms-suppressions", Inspect: "sms-suppressions-inspect"})
	}
	topics := topology.Topology{OTPTopic: "sms-otp", MarketingTopic: "sms-marketing", DeadLetterTopic: "dl",
		OTPSubscription: "o", MarketingSubscription: "m", DeadLetterInspect: "dli", DeadLetterRetention: time.Hour, WithoutDeadLetterPolicy: true,
		Inspected: inspected,
	}
	if err := topology.Setup(ctx, client, topics, func(string, string, string) {}); err != nil {
		t.Fatal(err)
	}
	rdb := redistest.Client(t)
	names := keys.Suppressions("{sms:suppress:" + redistest.UniqueAccount(t) + "}")
	mirror := &suppress.TopicMirror{Publisher: client.Publisher("sms-suppressions")}
	store := suppress.NewStore(rdb, names, mirror)
	s := &suppressions{list: suppress.NewList(store, nil), store: store, mirror: mirror, inbound: client.Publisher("sms-inbound"), logger: slog.New(slog.DiscardHandler)}
	t.Cleanup(func() {
		mirror.Publisher.Stop()
		s.inbound.Stop()
		rdb.Del(context.Background(), names.List(), names.Log(), names.Seq())
	})
	return testList{suppressions: s, ps: ps, client: client, store: store, rdb: rdb, names: names, topics: topics}
}
