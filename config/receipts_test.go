package config

import (
	"errors"
	"strings"
	"testing"
)

// TestReceiptsSettings: RECEIPTS_PUBLIC_URL is required with RECEIPTS_ADDR
// and refused without it, https unless its host is loopback, a base URL
// (no query, fragment or credentials) whose trailing slash is dropped;
// with receipts on, a generic account needs its receipt secret and a
// Vonage account its signature secret and a callback URL Vonage takes.
// Each refusal is one line naming the variable.
func TestReceiptsSettings(t *testing.T) {
	secret := writeFile(t, "receipt-secret", "k\n")
	generic := map[string]string{"SMS_RECEIPT_SECRET_FILE": secret}
	vonage := map[string]string{"SMS_PROVIDER": "vonage", "VONAGE_API_KEY": "k", "VONAGE_API_SECRET": "s", "VONAGE_FROM": "A",
		"VONAGE_SIGNATURE_SECRET_FILE": secret}
	with := func(base map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	long := "https://receipts.example.com/" + strings.Repeat("a", 60)
	tests := []struct {
		name string
		env  map[string]string
		err  string // the variable the error names; "": none
		url  string // with no error: ReceiptsURL("default")
	}{
		{"off", nil, "", ""},
		{"off, no secret needed", with(nil, "SMS_PROVIDER", "vonage"), "", ""},
		{"https", with(generic, "RECEIPTS_ADDR", ":8443", "RECEIPTS_PUBLIC_URL", "https://r.example.com/base/"), "", "https://r.example.com/base/v1/receipts/default"},
		{"loopback http", with(generic, "RECEIPTS_ADDR", "127.0.0.1:0", "RECEIPTS_PUBLIC_URL", "http://127.0.0.1:8081"), "", "http://127.0.0.1:8081/v1/receipts/default"},
		{"localhost http", with(generic, "RECEIPTS_ADDR", "127.0.0.1:0", "RECEIPTS_PUBLIC_URL", "http://localhost:8081"), "", "http://localhost:8081/v1/receipts/default"},
		{"ipv6 loopback http", with(generic, "RECEIPTS_ADDR", "[::1]:0", "RECEIPTS_PUBLIC_URL", "http://[::1]:8081"), "", "http://[::1]:8081/v1/receipts/default"},
		{"public url without the listener", with(generic, "RECEIPTS_PUBLIC_URL", "https://r.example.com"), "RECEIPTS_PUBLIC_URL", ""},
		{"listener without the public url", with(generic, "RECEIPTS_ADDR", ":8443"), "RECEIPTS_PUBLIC_URL", ""},
		{"listener not host:port", with(generic, "RECEIPTS_ADDR", "8443", "RECEIPTS_PUBLIC_URL", "https://r.example.com"), "RECEIPTS_ADDR", ""},
		{"plain http on the internet", with(generic, "RECEIPTS_ADDR", ":8443", "RECEIPTS_PUBLIC_URL", "http://r.example.com"), "RECEIPTS_PUBLIC_URL", ""},
		{"not absolute", with(generic, "RECEIPTS_ADDR", ":8443", "RECEIPTS_PUBLIC_URL", "r.example.com"), "RECEIPTS_PUBLIC_URL", ""},
		{"another scheme", with(generic, "RECEIPTS_ADDR", ":8443", "RECEIPTS_PUBLIC_URL", "ftp://r.example.com"), "RECEIPTS_PUBLIC_URL", ""},
		{"a query", with(generic, "RECEIPTS_ADDR", ":8443", "RECEIPTS_PUBLIC_URL", "https://r.example.com/?a=b"), "RECEIPTS_PUBLIC_URL", ""},
		{"credentials", with(generic, "RECEIPTS_ADDR", ":8443", "RECEIPTS_PUBLIC_URL", "https://u:p@r.example.com"), "RECEIPTS_PUBLIC_URL", ""},
		{"generic without its receipt secret", with(nil, "RECEIPTS_ADDR", ":8443", "RECEIPTS_PUBLIC_URL", "https://r.example.com"), "SMS_RECEIPT_SECRET_FILE", ""},
		{"vonage", with(vonage, "RECEIPTS_ADDR", ":8443", "RECEIPTS_PUBLIC_URL", "https://r.example.com"), "", "https://r.example.com/v1/receipts/default"},
		{"vonage without its signature secret", with(vonage, "VONAGE_SIGNATURE_SECRET_FILE", "", "RECEIPTS_ADDR", ":8443", "RECEIPTS_PUBLIC_URL", "https://r.example.com"), "VONAGE_SIGNATURE_SECRET_FILE", ""},
		{"vonage's callback over 100 characters", with(vonage, "RECEIPTS_ADDR", ":8443", "RECEIPTS_PUBLIC_URL", long), "RECEIPTS_PUBLIC_URL", ""},
		{"generic takes a long url", with(generic, "RECEIPTS_ADDR", ":8443", "RECEIPTS_PUBLIC_URL", long), "", long + "/v1/receipts/default"},
		{"vonage signature method", with(vonage, "VONAGE_SIGNATURE_METHOD", "sha256"), "", ""},
		{"unknown vonage signature method", with(vonage, "VONAGE_SIGNATURE_METHOD", "sha384"), "VONAGE_SIGNATURE_METHOD", ""},
		{"unreadable secret file", with(generic, "SMS_RECEIPT_SECRET_FILE", secret+".missing"), "SMS_RECEIPT_SECRET_FILE", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadConfig(tt.env)
			if tt.err != "" {
				var ce *Error
				if !errors.As(err, &ce) || ce.Env != tt.err {
					t.Fatalf("err %v, want a configuration error naming %s", err, tt.err)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Fatalf("err %q: want one line", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.ReceiptsURL("default"); got != tt.url {
				t.Fatalf("ReceiptsURL = %q, want %q", got, tt.url)
			}
		})
	}
}

// TestReceiptsSecretsAreRead: the secrets' files are read at start into
// the account (and never into an error).
func TestReceiptsSecretsAreRead(t *testing.T) {
	secret := writeFile(t, "signature-secret", "sig-s3cret\n")
	c, err := loadConfig(map[string]string{"SMS_PROVIDER": "vonage", "VONAGE_API_KEY": "k", "VONAGE_API_SECRET": "s", "VONAGE_FROM": "A",
		"VONAGE_SIGNATURE_SECRET_FILE": secret, "SMS_RECEIPT_SECRET_FILE": secret})
	if err != nil {
		t.Fatal(err)
	}
	if s := c.SignatureSecret(); s == nil || s.Value() != "sig-s3cret" {
		t.Fatalf("SignatureSecret %v, want the file's secret", s)
	}
	if s := c.ReceiptSecret(); s == nil || s.Value() != "sig-s3cret" {
		t.Fatalf("ReceiptSecret %v, want the file's secret", s)
	}
	c.ForgetFiles()
	if c.SignatureSecret() != nil || c.ReceiptSecret() != nil || c.VonageSignatureSecretFile != "" || c.ReceiptSecretFile != "" {
		t.Fatal("ForgetFiles kept a receipt secret")
	}
}

// TestAccountsFileReceipts: the file's keys receipt_secret_file,
// signature_secret_file and signature_method; with receipts on an account
// without its secret is refused naming the account and the key, while the
// single-account variables (unused with the file) need none.
func TestAccountsFileReceipts(t *testing.T) {
	secret := writeFile(t, "secret", "k\n")
	on := map[string]string{"RECEIPTS_ADDR": ":8443", "RECEIPTS_PUBLIC_URL": "https://r.example.com"}
	base, err := loadConfig(on)
	var ce *Error
	if !errors.As(err, &ce) || ce.Env != "SMS_RECEIPT_SECRET_FILE" {
		t.Fatalf("single account with receipts on and no secret: %v", err)
	}
	on["ACCOUNTS_FILE"] = writeFile(t, "empty.yaml", "accounts:\n"+okOTP+okBulk)
	if base, err = loadConfig(on); err != nil {
		t.Fatalf("with ACCOUNTS_FILE the single account's receipt secret is not needed: %v", err)
	}
	vonage := "  - name: vo\n    provider: vonage\n    vonage: {api_key: k, api_secret: s, from: A, signature_secret_file: " + secret + ", signature_method: sha512}\n    classes: [marketing]\n"
	genericOTP := "  - name: otp\n    provider: generic\n    generic: {url: https://a.example, token: t1, receipt_secret_file: " + secret + "}\n    classes: [otp]\n"
	path := writeFile(t, "accounts.yaml", "accounts:\n"+genericOTP+vonage)
	accounts, err := accountsOf(base.Process, path)
	if err != nil {
		t.Fatal(err)
	}
	if a := accounts[0]; a.ReceiptSecretFile != secret || a.ReceiptSecret() == nil || a.ReceiptSecret().Value() != "k" {
		t.Fatalf("generic account: receipt secret file %q", a.ReceiptSecretFile)
	}
	if a := accounts[1]; a.VonageSignatureSecretFile != secret || a.VonageSignatureMethod != "sha512" || a.SignatureSecret() == nil {
		t.Fatalf("vonage account: signature secret file %q, method %q", a.VonageSignatureSecretFile, a.VonageSignatureMethod)
	}

	for _, tt := range []struct{ name, content, want string }{
		{"generic without its secret", "accounts:\n" + okOTP + vonage, `account "otp": generic.receipt_secret_file: required with RECEIPTS_ADDR`},
		{"vonage without its secret", "accounts:\n" + genericOTP + strings.Replace(vonage, "signature_secret_file: "+secret+", ", "", 1), `account "vo": vonage.signature_secret_file: required with RECEIPTS_ADDR`},
		{"unknown method", "accounts:\n" + genericOTP + strings.Replace(vonage, "sha512", "sha1024", 1), `account "vo": vonage.signature_method: want md5hash, md5, sha1, sha256, sha512, got "sha1024"`},
		{"vonage's callback too long", "accounts:\n" + genericOTP + strings.Replace(vonage, "name: vo", "name: "+strings.Repeat("v", 70), 1), `RECEIPTS_PUBLIC_URL: the callback URL of account`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := accountsOf(base.Process, writeFile(t, "accounts.yaml", tt.content))
			var ce *Error
			if !errors.As(err, &ce) || ce.Env != "ACCOUNTS_FILE" || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want an ACCOUNTS_FILE error holding %q", err, tt.want)
			}
		})
	}
}
