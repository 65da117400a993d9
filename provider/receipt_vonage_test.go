package provider

import (
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const vonageTestSigSecret = "sigS3cret-0123456789"

// newReceiptVonage returns a Vonage adapter verifying with secret (nil:
// none) by method.
func newReceiptVonage(t testing.TB, secret *Secret, method string) *Vonage {
	t.Helper()
	v, err := NewVonage(VonageConfig{APIKey: vonageTestKey, APISecret: StaticSecret(vonageTestSecret), From: vonageTestFrom,
		SignatureSecret: secret, SignatureMethod: method})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// vonageReceipt is a DLR of params signed by method with secret, posted
// as a form or as JSON.
func vonageReceipt(method, secret string, params map[string]string, asJSON bool) ReceiptRequest {
	p := map[string]string{"timestamp": "1764676800", "nonce": "6a1c9d0e-6ff1-4ec2-b0a4-8f5b3e1d7c21"}
	for k, v := range params {
		p[k] = v
	}
	p["sig"] = vonageSign(method, secret, p)
	return vonageDLR(p, asJSON)
}

// vonageDLR posts p as it is.
func vonageDLR(p map[string]string, asJSON bool) ReceiptRequest {
	if asJSON {
		b, _ := json.Marshal(p)
		return ReceiptRequest{URL: receiptURL, Header: header("Content-Type", "application/json"), Body: b}
	}
	form := url.Values{}
	for k, v := range p {
		form.Set(k, v)
	}
	return ReceiptRequest{URL: receiptURL, Header: header("Content-Type", "application/x-www-form-urlencoded"), Body: []byte(form.Encode())}
}

func TestVonageReceiptExample(t *testing.T) {
	var ex struct {
		Params map[string]string
		Want   DeliveryReport
	}
	readReceiptFile(t, "vonage_delivered.json", &ex)
	for _, method := range []string{"", "md5hash", "md5", "sha1", "sha256", "sha512"} {
		v := newReceiptVonage(t, StaticSecret(vonageTestSigSecret), method)
		for _, asJSON := range []bool{true, false} {
			got, err := v.ReadReceipt(vonageReceipt(method, vonageTestSigSecret, ex.Params, asJSON))
			if err != nil || got != ex.Want {
				t.Errorf("%q JSON %v: ReadReceipt = %+v, %v; want %+v", method, asJSON, got, err, ex.Want)
			}
		}
	}
}

// TestVonageReceiptForged checks that a DLR not signed with the account's
// signature secret and method is ErrForged.
func TestVonageReceiptForged(t *testing.T) {
	params := map[string]string{"messageId": "0B00000127FDBC63", "status": "delivered", "err-code": "0", "msisdn": "447547232824", "client-ref": "login-7f3a9c"}
	signed := func() map[string]string {
		p := map[string]string{"timestamp": "1764676800"}
		for k, v := range params {
			p[k] = v
		}
		p["sig"] = vonageSign("sha256", vonageTestSigSecret, p)
		return p
	}
	tests := []struct {
		name string
		edit func(p map[string]string)
		want error
	}{
		{"signed", func(map[string]string) {}, nil},
		{"sig in capitals", func(p map[string]string) { p["sig"] = strings.ToUpper(p["sig"]) }, nil},
		{"no sig", func(p map[string]string) { delete(p, "sig") }, ErrForged},
		{"empty sig", func(p map[string]string) { p["sig"] = "" }, ErrForged},
		{"sig not hex", func(p map[string]string) { p["sig"] = "zz" + p["sig"][2:] }, ErrForged},
		{"sig cut short", func(p map[string]string) { p["sig"] = p["sig"][:32] }, ErrForged},
		{"another secret", func(p map[string]string) { p["sig"] = vonageSign("sha256", "other", p) }, ErrForged},
		{"another method", func(p map[string]string) { p["sig"] = vonageSign("sha512", vonageTestSigSecret, p) }, ErrForged},
		{"a parameter added after signing", func(p map[string]string) { p["price"] = "0.03330000" }, ErrForged},
		{"a value changed", func(p map[string]string) { p["status"] = "failed" }, ErrForged},
		{"timestamp removed", func(p map[string]string) { delete(p, "timestamp") }, ErrForged},
	}
	v := newReceiptVonage(t, StaticSecret(vonageTestSigSecret), "sha256")
	for _, tt := range tests {
		for _, asJSON := range []bool{true, false} {
			p := signed()
			tt.edit(p)
			r := vonageDLR(p, asJSON)
			_, err := v.ReadReceipt(r)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("%s (JSON %v): %v, want %v", tt.name, asJSON, err, tt.want)
			}
			checkReceiptErr(t, err, tt.want, r, vonageTestSigSecret, "447547232824", "login-7f3a9c")
		}
	}
	t.Run("no signature secret", func(t *testing.T) {
		v := newReceiptVonage(t, nil, "")
		_, err := v.ReadReceipt(vonageDLR(signed(), false))
		if !errors.Is(err, ErrForged) {
			t.Fatalf("ReadReceipt without a secret: %v, want ErrForged", err)
		}
		// Not even a receipt signed with the empty secret.
		if _, err := v.ReadReceipt(vonageReceipt("md5hash", "", params, false)); !errors.Is(err, ErrForged) {
			t.Fatalf("ReadReceipt signed with no secret: %v, want ErrForged", err)
		}
	})
	t.Run("rotated secret", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "sig")
		os.WriteFile(path, []byte("old-secret\n"), 0o600)
		sec, err := FileSecret(path)
		if err != nil {
			t.Fatal(err)
		}
		v := newReceiptVonage(t, sec, "md5hash")
		os.WriteFile(path, []byte("new-secret\n"), 0o600)
		if _, err := sec.Reload(); err != nil {
			t.Fatal(err)
		}
		if _, err := v.ReadReceipt(vonageReceipt("md5hash", "new-secret", params, false)); err != nil {
			t.Errorf("signed with the new secret: %v", err)
		}
		if _, err := v.ReadReceipt(vonageReceipt("md5hash", "old-secret", params, false)); !errors.Is(err, ErrForged) {
			t.Errorf("signed with the old secret: %v, want ErrForged", err)
		}
	})
}

func TestVonageReceiptFields(t *testing.T) {
	at := time.Date(2026, 12, 2, 12, 5, 7, 0, time.UTC)
	tests := []struct {
		params map[string]string
		want   DeliveryReport
		err    error
	}{
		{params: map[string]string{"messageId": "p1", "status": "accepted"}, want: DeliveryReport{ProviderID: "p1", Status: StatusAccepted}},
		{params: map[string]string{"messageId": "p1", "status": "buffered"}, want: DeliveryReport{ProviderID: "p1", Status: StatusBuffered}},
		{params: map[string]string{"messageId": "p1", "status": "unknown", "err-code": "1"}, want: DeliveryReport{ProviderID: "p1", Status: StatusUnknown, ErrorCode: "1"}},
		{params: map[string]string{"messageId": "p1", "status": "delivered", "err-code": "0", "client-ref": "m-1", "message-timestamp": "2026-12-02 12:05:07"},
			want: DeliveryReport{ProviderID: "p1", Ref: "m-1", Status: StatusDelivered, At: at}},
		{params: map[string]string{"messageId": "p1", "status": "expired", "err-code": "2"}, want: DeliveryReport{ProviderID: "p1", Status: StatusExpired, ErrorCode: "2"}},
		{params: map[string]string{"messageId": "p1", "status": "failed", "err-code": "6"}, want: DeliveryReport{ProviderID: "p1", Status: StatusFailed, ErrorCode: "6", RouteFailed: true}},
		{params: map[string]string{"messageId": "p1", "status": "rejected", "err-code": "14"}, want: DeliveryReport{ProviderID: "p1", Status: StatusRejected, ErrorCode: "14"}},
		// err-code 9 on a failure: the recipient opted out of the sender.
		{params: map[string]string{"messageId": "p1", "status": "failed", "err-code": "9", "msisdn": "447547232824"}, want: DeliveryReport{ProviderID: "p1", Status: StatusFailed, ErrorCode: "9", OptedOut: "+447547232824"}},
		{params: map[string]string{"messageId": "p1", "status": "rejected", "err-code": "9", "msisdn": "447547232824"}, want: DeliveryReport{ProviderID: "p1", Status: StatusRejected, ErrorCode: "9", OptedOut: "+447547232824"}},
		{params: map[string]string{"messageId": "p1", "status": "expired", "err-code": "9", "msisdn": "447547232824"}, want: DeliveryReport{ProviderID: "p1", Status: StatusExpired, ErrorCode: "9"}},
		// A status Vonage may add later is not refused.
		{params: map[string]string{"messageId": "p1", "status": "read"}, want: DeliveryReport{ProviderID: "p1", Status: StatusUnknown}},
		// A time not in Vonage's layout is left to the fold's clock.
		{params: map[string]string{"messageId": "p1", "status": "delivered", "message-timestamp": "yesterday"}, want: DeliveryReport{ProviderID: "p1", Status: StatusDelivered}},
		{params: map[string]string{"messageId": "p1"}, err: ErrMalformed},
		{params: map[string]string{"status": "delivered"}, err: ErrMalformed},
		{params: map[string]string{"messageId": "p 1", "status": "delivered"}, err: ErrMalformed},
		{params: map[string]string{"messageId": "p1", "status": "delivered", "client-ref": "a\x00b"}, err: ErrMalformed},
	}
	v := newReceiptVonage(t, StaticSecret(vonageTestSigSecret), "")
	for _, tt := range tests {
		for _, asJSON := range []bool{true, false} {
			r := vonageReceipt("md5hash", vonageTestSigSecret, tt.params, asJSON)
			got, err := v.ReadReceipt(r)
			if tt.err != nil {
				checkReceiptErr(t, err, tt.err, r, vonageTestSigSecret)
				continue
			}
			if err != nil || got != tt.want {
				t.Errorf("%v (JSON %v): ReadReceipt = %+v, %v; want %+v", tt.params, asJSON, got, err, tt.want)
			}
		}
	}
}

// TestVonageReceiptBodies checks bodies that cannot be signed as Vonage
// signs: ErrForged when what they hold does not verify, so that an
// outsider learns nothing of the account's provider; ErrMalformed when it
// does.
func TestVonageReceiptBodies(t *testing.T) {
	v := newReceiptVonage(t, StaticSecret(vonageTestSigSecret), "")
	asForm, asJSON := "application/x-www-form-urlencoded", "application/json"
	p := map[string]string{"messageId": "p1", "status": "delivered"}
	sig := vonageSign("md5hash", vonageTestSigSecret, p)
	for _, tt := range []struct {
		name, contentType, body string
		want                    error
	}{
		{"form with a repeated name", asForm, "messageId=a&messageId=b&status=delivered&sig=00", ErrForged},
		{"form that does not parse", asForm, "messageId=%zz", ErrForged},
		{"JSON array", asJSON, `[1,2]`, ErrForged},
		{"JSON null", asJSON, `null`, ErrForged},
		{"JSON object value", asJSON, `{"messageId":{"a":1},"sig":"00"}`, ErrForged},
		{"JSON boolean", asJSON, `{"messageId":true,"sig":"00"}`, ErrForged},
		{"JSON with data after", asJSON, `{"sig":"00"} {}`, ErrForged},
		{"JSON cut", asJSON, `{"sig":"00"`, ErrForged},
		{"form with a repeated name, signed", asForm, "messageId=p1&status=delivered&sig=" + sig + "&messageId=p2", ErrMalformed},
		{"form that does not parse, signed", asForm, "messageId=p1&status=delivered&x=%zz&sig=" + sig, ErrMalformed},
		{"JSON object value, signed", asJSON, `{"messageId":"p1","status":"delivered","x":{"a":1},"sig":"` + sig + `"}`, ErrMalformed},
		{"JSON boolean, signed", asJSON, `{"messageId":"p1","status":"delivered","x":true,"sig":"` + sig + `"}`, ErrMalformed},
		{"JSON with data after, signed", asJSON, `{"messageId":"p1","status":"delivered","sig":"` + sig + `"} {}`, ErrMalformed},
	} {
		r := ReceiptRequest{URL: receiptURL, Header: header("Content-Type", tt.contentType), Body: []byte(tt.body)}
		if _, err := v.ReadReceipt(r); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	// A number is signed as it is written.
	p = map[string]string{"messageId": "p1", "status": "delivered", "timestamp": "1764676800"}
	body := `{"messageId":"p1","status":"delivered","timestamp":1764676800,"sig":"` + vonageSign("md5hash", vonageTestSigSecret, p) + `"}`
	if _, err := v.ReadReceipt(ReceiptRequest{Header: header("Content-Type", "application/json"), Body: []byte(body)}); err != nil {
		t.Errorf("JSON with a number: %v", err)
	}
}

func TestNewVonageSignatureMethod(t *testing.T) {
	for _, m := range []string{"", "md5hash", "md5", "sha1", "sha256", "sha512"} {
		if _, err := NewVonage(VonageConfig{APIKey: "k", APISecret: StaticSecret("s"), From: "f", SignatureMethod: m}); err != nil {
			t.Errorf("SignatureMethod %q: %v", m, err)
		}
	}
	for _, m := range []string{"SHA256", "hmac-sha256", "sha384", "md5 "} {
		_, err := NewVonage(VonageConfig{APIKey: "k", APISecret: StaticSecret("s"), From: "f", SignatureMethod: m})
		if !errors.Is(err, ErrInvalidSignatureMethod) || !strings.Contains(err.Error(), "SignatureMethod") {
			t.Errorf("SignatureMethod %q: %v, want ErrInvalidSignatureMethod naming the field", m, err)
		}
	}
}

// TestVonageE164: Vonage's numbers, written without the '+', read in
// E.164; one with its '+' already, or a name, as it is.
func TestVonageE164(t *testing.T) {
	for in, want := range map[string]string{"447547232824": "+447547232824", "+447547232824": "+447547232824", "Acme": "Acme", "": ""} {
		if got := vonageE164(in); got != want {
			t.Errorf("vonageE164(%q) = %q, want %q", in, got, want)
		}
	}
}
