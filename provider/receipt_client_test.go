package provider

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testReceiptSecret = "rcpt-S3CRET-0123456789"

func newReceiptClient(t testing.TB, secret *Secret) *Client {
	t.Helper()
	c, err := NewClient("https://sms.example.com", testToken, WithReceiptSecret(secret))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func clientReceiptRequest(secret, body string) ReceiptRequest {
	return ReceiptRequest{URL: receiptURL, Header: header("Content-Type", "application/json", "X-Signature", clientSign(secret, []byte(body))), Body: []byte(body)}
}

func TestClientReceipt(t *testing.T) {
	at := time.Date(2026, 12, 2, 12, 5, 7, 250e6, time.UTC)
	tests := []struct {
		name, body string
		want       DeliveryReport
		err        error
	}{
		{name: "delivered", body: `{"id":"p-1","client_ref":"login-7f3a9c","status":"delivered","timestamp":"2026-12-02T12:05:07.25Z"}`,
			want: DeliveryReport{ProviderID: "p-1", Ref: "login-7f3a9c", Status: StatusDelivered, At: at}},
		{name: "undelivered with a code", body: `{"id":"p-1","status":"undelivered","error_code":"30007","extra":[1]}`,
			want: DeliveryReport{ProviderID: "p-1", Status: StatusUndelivered, ErrorCode: "30007"}},
		{name: "an offset", body: `{"id":"p-1","status":"sent","timestamp":"2026-12-02T21:05:07.25+09:00"}`,
			want: DeliveryReport{ProviderID: "p-1", Status: StatusSent, At: at}},
		{name: "a status none of the 11", body: `{"id":"p-1","status":"read"}`, err: ErrMalformed},
		{name: "no status", body: `{"id":"p-1"}`, err: ErrMalformed},
		{name: "no id", body: `{"status":"delivered"}`, err: ErrMalformed},
		{name: "a bad timestamp", body: `{"id":"p-1","status":"delivered","timestamp":"2026-12-02 12:05"}`, err: ErrMalformed},
		{name: "a number for a string", body: `{"id":1,"status":"delivered"}`, err: ErrMalformed},
		{name: "not JSON", body: `id=p-1`, err: ErrMalformed},
	}
	c := newReceiptClient(t, StaticSecret(testReceiptSecret))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := clientReceiptRequest(testReceiptSecret, tt.body)
			got, err := c.ReadReceipt(r)
			checkReceiptErr(t, err, tt.err, r, testReceiptSecret)
			if tt.err == nil && (!got.At.Equal(tt.want.At) || got.ProviderID != tt.want.ProviderID || got.Ref != tt.want.Ref ||
				got.Status != tt.want.Status || got.ErrorCode != tt.want.ErrorCode) {
				t.Errorf("ReadReceipt = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestClientReceiptForged(t *testing.T) {
	const body = `{"id":"p-1","client_ref":"login-7f3a9c","status":"delivered"}`
	signed := clientReceiptRequest(testReceiptSecret, body)
	tests := []struct {
		name string
		r    ReceiptRequest
		want error
	}{
		{"signed", signed, nil},
		{"hex in capitals", ReceiptRequest{Header: header("X-Signature", "sha256="+strings.ToUpper(strings.TrimPrefix(signed.Header.Get("X-Signature"), "sha256="))), Body: signed.Body}, nil},
		{"no signature", ReceiptRequest{Body: signed.Body}, ErrForged},
		{"no sha256= prefix", ReceiptRequest{Header: header("X-Signature", strings.TrimPrefix(signed.Header.Get("X-Signature"), "sha256=")), Body: signed.Body}, ErrForged},
		{"sha1=", ReceiptRequest{Header: header("X-Signature", strings.Replace(signed.Header.Get("X-Signature"), "sha256", "sha1", 1)), Body: signed.Body}, ErrForged},
		{"another secret", clientReceiptRequest("other", body), ErrForged},
		{"the body changed", ReceiptRequest{Header: signed.Header, Body: []byte(strings.Replace(body, "delivered", "failed", 1))}, ErrForged},
		{"a field added", ReceiptRequest{Header: signed.Header, Body: []byte(strings.Replace(body, "}", `,"error_code":"1"}`, 1))}, ErrForged},
		{"garbage signed wrong", ReceiptRequest{Header: header("X-Signature", "sha256=00"), Body: []byte("{")}, ErrForged},
	}
	c := newReceiptClient(t, StaticSecret(testReceiptSecret))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.ReadReceipt(tt.r)
			checkReceiptErr(t, err, tt.want, tt.r, testReceiptSecret, "login-7f3a9c")
		})
	}
	t.Run("no receipt secret", func(t *testing.T) {
		c := newTestClient(t, "https://sms.example.com")
		if _, err := c.ReadReceipt(signed); !errors.Is(err, ErrForged) {
			t.Fatalf("ReadReceipt without WithReceiptSecret: %v, want ErrForged", err)
		}
		if _, err := newReceiptClient(t, StaticSecret("")).ReadReceipt(clientReceiptRequest("", body)); !errors.Is(err, ErrForged) {
			t.Fatalf("ReadReceipt with an empty secret: %v, want ErrForged", err)
		}
	})
	t.Run("rotated secret", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "secret")
		os.WriteFile(path, []byte("old-secret\n"), 0o600)
		sec, err := FileSecret(path)
		if err != nil {
			t.Fatal(err)
		}
		c := newReceiptClient(t, sec)
		os.WriteFile(path, []byte("new-secret\n"), 0o600)
		if _, err := sec.Reload(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ReadReceipt(clientReceiptRequest("new-secret", body)); err != nil {
			t.Errorf("signed with the new secret: %v", err)
		}
		if _, err := c.ReadReceipt(clientReceiptRequest("old-secret", body)); !errors.Is(err, ErrForged) {
			t.Errorf("signed with the old secret: %v, want ErrForged", err)
		}
	})
}
