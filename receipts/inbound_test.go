package receipts

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"smsdispatcher/provider"
	"smsdispatcher/provider/providertest"
)

// inboundLog is an InboundHandler that keeps what it was given.
type inboundLog struct {
	mu       sync.Mutex
	got      []provider.Inbound
	optedOut []string // account and number
	unread   []string // account and outcome
}

func (l *inboundLog) Inbound(_ context.Context, account string, in provider.Inbound) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	in.To = account + " " + in.To
	l.got = append(l.got, in)
	return nil
}

func (l *inboundLog) OptedOut(_ context.Context, number, account string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.optedOut = append(l.optedOut, account+" "+number)
	return nil
}

func (l *inboundLog) SettledSuppressed(_ context.Context, id, class, number string) {}

func (l *inboundLog) Unread(account, outcome string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unread = append(l.unread, account+" "+outcome)
}

func (l *inboundLog) all() []provider.Inbound {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]provider.Inbound(nil), l.got...)
}

// TestInboundVerifiedAsReceiptsAre: each provider's simulator posts a
// signed inbound message to /v1/inbound/<account>: verified, it is handed
// over (Twilio answered an empty TwiML); signed with another secret, 403
// and nothing handed over; too large, 413; verified but without an id,
// 400.
func TestInboundVerifiedAsReceiptsAre(t *testing.T) {
	const twilioToken, vonageSecret, genericSecret = "twilio-T0KEN", "vonage-S1G", "generic-S1G"
	const sid = "AC0123456789abcdef0123456789abcdef"
	tw, err := provider.NewTwilio(provider.TwilioConfig{AccountSID: sid, AuthToken: provider.StaticSecret(twilioToken), From: "+15005550006"})
	if err != nil {
		t.Fatal(err)
	}
	vo, err := provider.NewVonage(provider.VonageConfig{APIKey: "k", APISecret: provider.StaticSecret("s"), From: "A", SignatureSecret: provider.StaticSecret(vonageSecret)})
	if err != nil {
		t.Fatal(err)
	}
	ge, err := provider.NewClient("https://sms.example.com", "tok", provider.WithReceiptSecret(provider.StaticSecret(genericSecret)))
	if err != nil {
		t.Fatal(err)
	}
	var handler http.Handler
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(ts.Close)
	log := &inboundLog{}
	srv, err := New(Config{
		PublicURL: ts.URL, Deadline: payloadDeadline,
		Accounts: []Account{
			{Name: "tw", Reader: tw, Ledger: newTestLedger()},
			{Name: "vo", Reader: vo, Ledger: newTestLedger()},
			{Name: "ge", Reader: ge, Ledger: newTestLedger()},
		},
		Status:  testPublisher{"sms-status", &publishLog{}},
		Resend:  testPublisher{"sms-otp", &publishLog{}},
		Inbound: log,
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	handler = srv.Handler()
	ctx := context.Background()
	sims := map[string]*providertest.Simulator{
		"tw": providertest.NewTwilio(providertest.Config{}, sid),
		"vo": providertest.NewVonage(providertest.Config{}, "k"),
		"ge": providertest.NewGeneric(providertest.Config{}),
	}
	secrets := map[string]string{"tw": twilioToken, "vo": vonageSecret, "ge": genericSecret}
	for _, name := range []string{"tw", "vo", "ge"} {
		target := InboundURL(ts.URL, name)
		m := providertest.Inbound{ID: "MO-" + name, From: "+819011112222", To: "+15005550006", Body: "Stop. Thank you"}
		status, body, err := sims[name].PostInbound(ctx, target, m, "wrong-"+secrets[name], "")
		if err != nil || status != http.StatusForbidden {
			t.Fatalf("%s, forged: %d, %v; want 403", name, status, err)
		}
		if n := len(log.all()); n != 0 {
			t.Fatalf("%s: a forged message was handed over", name)
		}
		status, body, err = sims[name].PostInbound(ctx, target, m, secrets[name], "")
		if err != nil || status != http.StatusOK {
			t.Fatalf("%s, signed: %d %q, %v; want 200", name, status, body, err)
		}
		if name == "tw" && !strings.Contains(body, "<Response/>") {
			t.Errorf("twilio's answer %q, want an empty TwiML response", body)
		}
		got := log.all()
		want := provider.Inbound{ID: "MO-" + name, From: "+819011112222", To: name + " " + m.To, Body: m.Body}
		if len(got) != 1 || got[0] != want {
			t.Fatalf("%s: handed over %+v, want %+v", name, got, want)
		}
		log.got = nil

		m.ID = ""
		if status, _, err := sims[name].PostInbound(ctx, target, m, secrets[name], ""); err != nil || status != http.StatusBadRequest {
			t.Fatalf("%s, signed without an id: %d, %v; want 400", name, status, err)
		}
		m.ID, m.Body = "MO-big", strings.Repeat("x", MaxBodyBytes)
		if status, _, err := sims[name].PostInbound(ctx, target, m, secrets[name], ""); err != nil || status != http.StatusRequestEntityTooLarge {
			t.Fatalf("%s, too large: %d, %v; want 413", name, status, err)
		}
		if n := len(log.all()); n != 0 {
			t.Fatalf("%s: a refused message was handed over", name)
		}
	}
	want := []string{"tw forged", "tw malformed", "tw too_large", "vo forged", "vo malformed", "vo too_large", "ge forged", "ge malformed", "ge too_large"}
	if !slices.Equal(log.unread, want) {
		t.Errorf("the posts refused unread were counted %q, want %q", log.unread, want)
	}
}

// optedOutReader is a receipt reader that reads every receipt as
// Vonage's err-code 9 for number.
type optedOutReader struct{ number string }

func (r optedOutReader) ReadReceipt(provider.ReceiptRequest) (provider.DeliveryReport, error) {
	return provider.DeliveryReport{ProviderID: "p1", Status: provider.StatusFailed, ErrorCode: "9", OptedOut: r.number}, nil
}

// TestAReceiptOfAnOptOutSuppresses: a receipt that says the recipient
// opted out (Vonage's err-code 9) puts the number on the list, through
// the account, before it is folded.
func TestAReceiptOfAnOptOutSuppresses(t *testing.T) {
	log := &inboundLog{}
	srv, err := New(Config{
		PublicURL: testPublicURL, Deadline: payloadDeadline,
		Accounts: []Account{{Name: "vo", Reader: optedOutReader{"+447547232824"}, Ledger: newTestLedger()}},
		Status:   testPublisher{"sms-status", &publishLog{}},
		Resend:   testPublisher{"sms-otp", &publishLog{}},
		Inbound:  log,
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	srv.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/receipts/vo", strings.NewReader("x")))
	if w.Code != http.StatusOK || len(log.optedOut) != 1 || log.optedOut[0] != "vo +447547232824" {
		t.Fatalf("answered %d, opted out %v; want 200 and vo +447547232824", w.Code, log.optedOut)
	}
}
