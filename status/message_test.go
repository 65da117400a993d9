package status

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
)

// TestMessageText: a message's story says each account's record,
// attempts, class, sender, sending time, provider ids, receipt with its
// error and time, parts, and whether the event is owed or the message was
// resent; none found says so in one line.
func TestMessageText(t *testing.T) {
	sent := time.Date(2026, 12, 2, 12, 0, 0, 123e6, time.UTC)
	m := Message{ID: "otp-1", Accounts: []MessageStory{
		{Account: "primary", Record: "sent", Attempts: 1, Class: "otp", ProviderIDs: []string{"SM1"}, SentAt: stamp(sent),
			Status: "undelivered", ErrorCode: "30007", StatusAt: stamp(sent.Add(2 * time.Second)), Owed: true, Resent: true},
		{Account: "backup", Record: "sent", Attempts: 2, Class: "otp", Sender: "+15550000001", ProviderIDs: []string{"a", "b"},
			SentAt: stamp(sent.Add(3 * time.Second)), Status: "failed", Parts: map[string]string{"b": "failed", "a": "delivered"}},
		{Account: "other", Record: "claim", Attempts: 1},
	}}
	var out bytes.Buffer
	m.WriteText(&out)
	for _, want := range []string{
		"message otp-1\n",
		"account primary: sent, 1 attempt\n  class otp, sender the adapter's\n  sent at 2026-12-02T12:00:00.123Z, provider id SM1\n  receipt undelivered, error 30007, at 2026-12-02T12:00:02.123Z\n  status event owed: not yet published\n  resent once through the next account\n",
		"account backup: sent, 2 attempts\n  class otp, sender +15550000001\n  sent at 2026-12-02T12:00:03.123Z, provider ids a, b\n  receipt failed\n  parts a delivered, b failed\n",
		"account other: claim, 1 attempt\n  receipt none yet\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printed:\n%s\nwant:\n%s", out.String(), want)
		}
	}

	out.Reset()
	Message{ID: "x-9", Accounts: []MessageStory{}}.WriteText(&out)
	if out.String() != "no record of x-9 on any account\n" {
		t.Errorf("none found printed %q", out.String())
	}
}

// TestMessageJSON: `message --json` is {"id", "accounts"}, an empty list
// when none holds the id, and times in RFC 3339 UTC with milliseconds.
func TestMessageJSON(t *testing.T) {
	b, err := json.Marshal(Message{ID: "x", Accounts: []MessageStory{}})
	if err != nil || string(b) != `{"id":"x","accounts":[]}` {
		t.Fatalf("none found: %s, %v", b, err)
	}
	b, err = json.Marshal(MessageStory{Account: "a", Record: "sent", Attempts: 1, Class: "otp", ProviderIDs: []string{"p"},
		SentAt: stamp(time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))), Status: "delivered"})
	want := `{"account":"a","record":"sent","attempts":1,"class":"otp","provider_ids":["p"],"sent_at":"2026-01-02T02:04:05.000Z","status":"delivered","owed":false,"resent":false,"resend":false}`
	if err != nil || string(b) != want {
		t.Fatalf("story JSON %s (%v), want %s", b, err, want)
	}
}

// TestDeliveryPart: the delivery part of an account says its finals, the
// delivered ratio and the delivery p50/p99 per class; no finals is no
// ratio (null in JSON), not 0 %.
func TestDeliveryPart(t *testing.T) {
	a := Account{Classes: []string{"otp", "marketing"}, Delivery: map[string]*Delivery{
		"otp":       deliveryOf(40, 38, 1200*time.Millisecond, 4500*time.Millisecond),
		"marketing": deliveryOf(0, 0, 0, 0),
	}}
	var out bytes.Buffer
	tw := tabwriter.NewWriter(&out, 0, 0, 1, ' ', 0)
	a.writeDelivery(tw)
	tw.Flush()
	for _, want := range []string{
		"delivery otp (last 5 min)       40 finals, 95.0% delivered, p50 1.2 s, p99 4.5 s\n",
		"delivery marketing (last 5 min) no final receipts\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printed:\n%s\nwant %q", out.String(), want)
		}
	}
	b, _ := json.Marshal(a.Delivery["marketing"])
	if string(b) != `{"finals":0,"delivered":0,"delivered_ratio":null,"p50_seconds":0,"p99_seconds":0}` {
		t.Errorf("no finals: %s", b)
	}
	b, _ = json.Marshal(a.Delivery["otp"])
	if string(b) != `{"finals":40,"delivered":38,"delivered_ratio":0.95,"p50_seconds":1.2,"p99_seconds":4.5}` {
		t.Errorf("otp: %s", b)
	}
	out.Reset()
	tw = tabwriter.NewWriter(&out, 0, 0, 1, ' ', 0)
	Account{}.writeDelivery(tw)
	tw.Flush()
	if out.Len() != 0 {
		t.Errorf("no delivery read printed %q", out.String())
	}
}

// TestReadMessageFindsAResendsOwnRecord: the account that sent a resend
// keeps the message's story under its id and its send-once record under
// the resend's (ledger.ResendID): `dispatcher message` shows both, the
// record marked as the resend's.
func TestReadMessageFindsAResendsOwnRecord(t *testing.T) {
	ctx := context.Background()
	account := redistest.UniqueAccount(t)
	lim, err := admission.New(redistest.Client(t), admission.Config{Account: account, TargetRPS: 90, MarketingRPS: 70, Burst: 5, MaxSenders: 3, RedisTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := lim.Settle(ctx, admission.Decision{}, ledger.SentRecord("p1"), admission.ResultNone,
		ledger.Story{ID: "m1", Class: "otp", ProviderIDs: []string{"p1"}}); err != nil {
		t.Fatal(err)
	}
	if err := lim.Claims().Finish(ctx, ledger.ResendID("m1"), ledger.SentRecord("p1")); err != nil {
		t.Fatal(err)
	}
	m, err := ReadMessage(ctx, []Setup{{Account: config.Account{Name: account}, Limiter: lim}}, "m1")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Accounts) != 1 || m.Accounts[0].Record != "sent" || !m.Accounts[0].Resend || m.Accounts[0].Class != "otp" {
		t.Fatalf("ReadMessage: %+v, want the story with the resend's sent record", m.Accounts)
	}
}
