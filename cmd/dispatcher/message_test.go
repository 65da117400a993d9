package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
	"smsdispatcher/provider"
	"smsdispatcher/status"
	"smsdispatcher/suppress"
)

// TestMessageAndStatusTellTheReceipts: a message sent with its story and
// folded to undelivered by a receipt reads back through `message` (text
// and --json) and counts in `status`'s delivery part; an id no account
// knows is said in one line with exit status 1, its JSON an empty list.
func TestMessageAndStatusTellTheReceipts(t *testing.T) {
	account := redistest.UniqueAccount(t)
	redisURL := "redis://" + redistest.Addr(t)
	t.Setenv("REDIS_URL", redisURL)
	t.Setenv("SMS_ACCOUNT", account)
	ctx := context.Background()
	cfg, err := loadConfig(map[string]string{"REDIS_URL": redisURL, "SMS_ACCOUNT": account})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := admission.New(redistest.Client(t), cfg.Limiter(cfg.Account))
	if err != nil {
		t.Fatal(err)
	}
	id := "login-" + account
	d, err := lim.Admit(ctx, admission.OTP, 1, time.Second, admission.Claim{ID: id, Token: "t1"})
	if err != nil || !d.Allowed {
		t.Fatalf("admit: %+v, %v", d, err)
	}
	story := ledger.Story{Class: "otp", Sender: "+15550000001", ProviderIDs: []string{"SM1"}}
	if err := lim.Settle(ctx, d, ledger.SentRecord("SM1"), admission.ResultOK, story); err != nil {
		t.Fatal(err)
	}
	fold, err := lim.Ledger().Receipt(ctx, ledger.Report{ProviderID: "SM1", Status: "undelivered", Final: true, ErrorCode: "30007"})
	if err != nil || !fold.Known || !fold.Final {
		t.Fatalf("receipt: %+v, %v", fold, err)
	}
	// Its delivery count written now, as the process's flush does within
	// the second (admission's counts.go), for status to read below.
	if err := lim.Ledger().FlushPublished(ctx); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	if err := run(ctx, []string{"message", id}, &out, io.Discard); err != nil {
		t.Fatalf("message: %v", err)
	}
	for _, want := range []string{"message " + id + "\n", "account " + account + ": sent, 1 attempt\n", "  class otp, sender +15550000001\n",
		", provider id SM1\n", "  receipt undelivered, error 30007, at "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("message printed:\n%s\nwant %q", out.String(), want)
		}
	}

	out.Reset()
	if err := run(ctx, []string{"message", id, "--json"}, &out, io.Discard); err != nil {
		t.Fatalf("message --json: %v", err)
	}
	var m status.Message
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("message --json printed %q: %v", out.String(), err)
	}
	if m.ID != id || len(m.Accounts) != 1 || m.Accounts[0].Status != "undelivered" || m.Accounts[0].ErrorCode != "30007" ||
		m.Accounts[0].ProviderIDs[0] != "SM1" || m.Accounts[0].SentAt == "" {
		t.Errorf("message --json: %+v", m)
	}

	out.Reset()
	err = run(ctx, []string{"message", "--json", "unknown-" + account}, &out, io.Discard)
	if err == nil || err.Error() != "no record of unknown-"+account+" on any account" {
		t.Errorf("unknown id: %v, want no record of it", err)
	}
	if strings.TrimSpace(out.String()) != `{"id":"unknown-`+account+`","accounts":[]}` {
		t.Errorf("unknown id --json printed %q", out.String())
	}
	if err := run(ctx, []string{"message"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "want one message id") {
		t.Errorf("no id: %v", err)
	}

	out.Reset()
	if err := run(ctx, []string{"status", "--json"}, &out, io.Discard); err != nil {
		t.Fatalf("status --json: %v", err)
	}
	var r status.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if d := r.Accounts[0].Delivery["otp"]; d == nil || d.Finals != 1 || d.Delivered != 0 || d.DeliveredRatio == nil || *d.DeliveredRatio != 0 {
		t.Errorf("status's otp delivery %+v, want 1 final, none delivered", d)
	}
	out.Reset()
	if err := run(ctx, []string{"status"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "delivery otp (last 5 min)") {
		t.Errorf("status printed:\n%s\nwant the delivery part", out.String())
	}
}

// TestMessageSaysItsSuppression: a message the suppression list stopped
// (it has no story on any account) reads back through `message` with
// when it was stopped and the change that did, its number masked, in
// text and --json.
func TestMessageSaysItsSuppression(t *testing.T) {
	redisURL := "redis://" + redistest.Addr(t)
	t.Setenv("REDIS_URL", redisURL)
	ctx := context.Background()
	rdb := redistest.Client(t)
	id := "promo-" + redistest.UniqueAccount(t)
	t.Cleanup(func() { rdb.Del(context.Background(), keys.Suppress().Refused(id)) })
	const number = "+819011119999"
	stop := time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	e := suppress.Entry{Number: number, Source: suppress.SourceInbound, Account: "otp", Reason: "replied STOP", At: stop}
	if err := suppress.NewStore(rdb, "", nil).Refused(ctx, id, stop.Add(time.Hour), e); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(ctx, []string{"message", id}, &out, io.Discard); err != nil {
		t.Fatalf("message: %v", err)
	}
	want := `suppressed at 2026-04-01T10:00:00Z: ` + provider.MaskNumber(number) + ` was on the suppression list since 2026-04-01T09:00:00Z (source inbound, through otp, reason "replied STOP")`
	if !strings.Contains(out.String(), want) || strings.Contains(out.String(), number) {
		t.Errorf("message printed:\n%s\nwant %q, the number masked", out.String(), want)
	}
	out.Reset()
	if err := run(ctx, []string{"message", id, "--json"}, &out, io.Discard); err != nil {
		t.Fatalf("message --json: %v", err)
	}
	var m messageJSON
	if err := json.Unmarshal(out.Bytes(), &m); err != nil || m.Suppressed == nil || !m.Suppressed.At.Equal(stop.Add(time.Hour)) ||
		m.Suppressed.By.Source != suppress.SourceInbound || !m.Suppressed.By.At.Equal(stop) || strings.Contains(out.String(), number) {
		t.Errorf("message --json printed %s (%v)", out.String(), err)
	}
}
