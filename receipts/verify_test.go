package receipts

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"smsdispatcher/provider"
)

// TestReceiptVerifiedBeforeItIsParsed posts bodies that do not parse, or
// repeat a parameter, to accounts of each provider's adapter: unsigned,
// every one is answered 403 and counted forged, so that an outsider
// learns nothing of an account's provider; signed, 400 and malformed.
func TestReceiptVerifiedBeforeItIsParsed(t *testing.T) {
	const twilioToken, vonageSecret, genericSecret = "twilio-T0KEN", "vonage-S1G", "generic-S1G"
	tw, err := provider.NewTwilio(provider.TwilioConfig{AccountSID: "AC0123456789abcdef0123456789abcdef", AuthToken: provider.StaticSecret(twilioToken), From: "+15005550006"})
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
	metrics := &testMetrics{}
	srv, err := New(Config{
		PublicURL: testPublicURL, Deadline: payloadDeadline,
		Accounts: []Account{
			{Name: "tw", Reader: tw, Ledger: newTestLedger()},
			{Name: "vo", Reader: vo, Ledger: newTestLedger()},
			{Name: "ge", Reader: ge, Ledger: newTestLedger()},
		},
		Status:  testPublisher{"sms-status", &publishLog{}},
		Resend:  testPublisher{"sms-otp", &publishLog{}},
		Metrics: metrics,
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}

	// The signatures of what parses of each signed body: Twilio's over
	// the URL and no parameter, Vonage's md5hash over no parameter.
	twSig := func() string {
		m := hmac.New(sha1.New, []byte(twilioToken))
		m.Write([]byte(CallbackURL(testPublicURL, "tw")))
		return base64.StdEncoding.EncodeToString(m.Sum(nil))
	}()
	voSum := md5.Sum([]byte(vonageSecret))
	voSig := hex.EncodeToString(voSum[:])
	geSig := func(body string) string {
		m := hmac.New(sha256.New, []byte(genericSecret))
		m.Write([]byte(body))
		return "sha256=" + hex.EncodeToString(m.Sum(nil))
	}

	tests := []struct {
		name, account, body string
		header              []string // name, value
		want                int
		outcome             string
	}{
		{"twilio, not a form", "tw", "%zz", nil, 403, OutcomeForged},
		{"twilio, not a form, a wrong signature", "tw", "%zz", []string{"X-Twilio-Signature", "AAAA"}, 403, OutcomeForged},
		{"twilio, a name twice", "tw", "MessageSid=a&MessageSid=b&MessageStatus=sent", []string{"X-Twilio-Signature", "AAAA"}, 403, OutcomeForged},
		{"vonage, not a form", "vo", "%zz", nil, 403, OutcomeForged},
		{"vonage, a name twice", "vo", "messageId=a&messageId=b&status=delivered&sig=00", nil, 403, OutcomeForged},
		{"vonage, not JSON", "vo", "{", []string{"Content-Type", "application/json"}, 403, OutcomeForged},
		{"generic, not JSON", "ge", "%zz", nil, 403, OutcomeForged},
		{"generic, not JSON, a wrong signature", "ge", "%zz", []string{"X-Signature", "sha256=00"}, 403, OutcomeForged},
		{"twilio, not a form, signed", "tw", "%zz", []string{"X-Twilio-Signature", twSig}, 400, OutcomeMalformed},
		{"vonage, not a form, signed", "vo", "sig=" + voSig + "&%zz", nil, 400, OutcomeMalformed},
		{"vonage, a name twice, signed", "vo", "sig=" + voSig + "&sig=" + voSig, nil, 400, OutcomeMalformed},
		{"generic, not JSON, signed", "ge", "%zz", []string{"X-Signature", geSig("%zz")}, 400, OutcomeMalformed},
	}
	for _, tt := range tests {
		before := len(metrics.get())
		req := httptest.NewRequest("POST", "http://10.0.0.7:8081/v1/receipts/"+tt.account, strings.NewReader(tt.body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for i := 0; i+1 < len(tt.header); i += 2 {
			req.Header.Set(tt.header[i], tt.header[i+1])
		}
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, req)
		if w.Code != tt.want {
			t.Errorf("%s: answer %d, want %d", tt.name, w.Code, tt.want)
		}
		want := []string{"receipt " + tt.account + "   " + tt.outcome}
		if got := metrics.get()[before:]; !slices.Equal(got, want) {
			t.Errorf("%s: counted %q, want %q", tt.name, got, want)
		}
	}
}
