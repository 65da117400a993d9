package config

import (
	"net"
	"net/url"
	"slices"
	"strings"

	"smsdispatcher/provider"
)

// Delivery receipts: the listener, the public URL the providers are told,
// and the secrets each account's receipts are verified with.

// ReceiptsPath is where an account's receipts are posted, below
// RECEIPTS_PUBLIC_URL: ReceiptsPath + <account>.
const ReceiptsPath = "/v1/receipts/"

// maxVonageCallback is the longest callback URL Vonage's SMS API takes.
const maxVonageCallback = 100

// signatureMethods are the ways a Vonage account may sign its receipts.
var signatureMethods = []string{"md5hash", "md5", "sha1", "sha256", "sha512"}

// ReceiptsOn reports whether p serves delivery receipts.
func (p Process) ReceiptsOn() bool { return p.ReceiptsAddr != "" }

// ReceiptsURL is the URL account's receipts are posted to, as its adapter
// tells the provider; "" with receipts off.
func (p Process) ReceiptsURL(account string) string {
	if !p.ReceiptsOn() {
		return ""
	}
	return p.ReceiptsPublicURL + ReceiptsPath + url.PathEscape(account)
}

// baseURL parses RECEIPTS_PUBLIC_URL: its trailing slashes are dropped,
// so that the account's path follows with one.
func baseURL(dst func(*Settings) *string) func(*Settings, string) error {
	return func(s *Settings, v string) error { *dst(s) = strings.TrimRight(v, "/"); return nil }
}

// checkReceipts reports a receipts setting of p that cannot work.
func (p Process) checkReceipts() error {
	if p.ReceiptsAddr == "" {
		if p.ReceiptsPublicURL != "" {
			return badf("RECEIPTS_PUBLIC_URL", "used only with RECEIPTS_ADDR, which is unset: set both to serve receipts")
		}
		return nil
	}
	if _, port, err := net.SplitHostPort(p.ReceiptsAddr); err != nil || port == "" {
		return badf("RECEIPTS_ADDR", "want host:port or :port, got %q", p.ReceiptsAddr)
	}
	if p.ReceiptsPublicURL == "" {
		return badf("RECEIPTS_PUBLIC_URL", "required with RECEIPTS_ADDR: the base URL the providers post receipts to")
	}
	u, err := url.Parse(p.ReceiptsPublicURL)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return badf("RECEIPTS_PUBLIC_URL", "want an absolute https:// URL, got %q", p.ReceiptsPublicURL)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(p.ReceiptsPublicURL, "?") || strings.HasSuffix(p.ReceiptsPublicURL, "#"):
		return badf("RECEIPTS_PUBLIC_URL", "want a base URL without credentials, query or fragment: receipts are posted to it followed by %s<account>", ReceiptsPath)
	case u.Scheme == "http" && !loopback(u.Hostname()):
		// Receipts carry message ids and statuses across the internet,
		// and Twilio signs the URL it was told: plain http would let
		// anyone on the path read and replay them.
		return badf("RECEIPTS_PUBLIC_URL", "want https:// (http:// only for a loopback host), got %q", p.ReceiptsPublicURL)
	}
	return nil
}

// loopback reports whether host names this machine.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkReceipts reports a receipts setting of a that cannot work under p;
// n says the settings its messages name.
func (a Account) checkReceipts(p Process, n names) error {
	method := a.VonageSignatureMethod
	if method != "" && !slices.Contains(signatureMethods, method) {
		return badf("VONAGE_SIGNATURE_METHOD", "want %s, got %q", strings.Join(signatureMethods, ", "), method)
	}
	if !p.ReceiptsOn() {
		return nil
	}
	switch a.Provider {
	case "vonage":
		if a.VonageSignatureSecretFile == "" {
			return badf("VONAGE_SIGNATURE_SECRET_FILE", "required with RECEIPTS_ADDR: Vonage's receipts are verified with the account's signature secret (signed webhooks on, the method in %s)", n("VONAGE_SIGNATURE_METHOD"))
		}
		if u := p.ReceiptsURL(a.Name); len(u) > maxVonageCallback {
			return badf("RECEIPTS_PUBLIC_URL", "the callback URL of account %q, %s, is %d characters: Vonage takes at most %d", a.Name, u, len(u), maxVonageCallback)
		}
	case "generic":
		if a.ReceiptSecretFile == "" {
			return badf("SMS_RECEIPT_SECRET_FILE", "required with RECEIPTS_ADDR: the generic API's receipts are verified with it (X-Signature)")
		}
	}
	return nil
}

// SignatureSecret is the secret Vonage signs a's receipts with, read from
// VONAGE_SIGNATURE_SECRET_FILE; nil: none.
func (a Account) SignatureSecret() *provider.Secret { return a.secrets["VONAGE_SIGNATURE_SECRET_FILE"] }

// ReceiptSecret is the generic API's receipt secret of a, read from
// SMS_RECEIPT_SECRET_FILE; nil: none.
func (a Account) ReceiptSecret() *provider.Secret { return a.secrets["SMS_RECEIPT_SECRET_FILE"] }

// UseReceiptSecret makes s the secret a's receipts are verified with, for
// an account whose provider is a simulator that signs with it (the demo):
// the generic API's receipt secret and Vonage's signature secret.
func (a *Account) UseReceiptSecret(s *provider.Secret) {
	if a.secrets == nil {
		a.secrets = map[string]*provider.Secret{}
	}
	a.secrets["SMS_RECEIPT_SECRET_FILE"], a.secrets["VONAGE_SIGNATURE_SECRET_FILE"] = s, s
}
