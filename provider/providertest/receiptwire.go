package providertest

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Each dialect's receipt: its body and headers (receiptBody), the failure
// a message that is not delivered gets by default (receiptFailure) and
// the provider's ids of an accepted message (parts). The signatures are
// written here from the providers' documents, not taken from package
// provider, so that the adapters' verifiers are checked against a second
// implementation.

// genericReceipt is the generic API's receipt (docs/contract.md section 3).
type genericReceipt struct {
	ID        string `json:"id"`
	ClientRef string `json:"client_ref"`
	Status    string `json:"status"`
	ErrorCode string `json:"error_code"`
	Timestamp string `json:"timestamp"`
}

func (genericDialect) receiptBody(r receiptRequest) ([]byte, http.Header) {
	body, _ := json.Marshal(genericReceipt{
		ID: r.step.part, ClientRef: r.msg.ref, Status: r.step.status, ErrorCode: r.step.errorCode,
		Timestamp: r.at.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
	})
	h := receiptHeader("application/json")
	if r.cfg.Secret != "" {
		h.Set("X-Signature", genericSignature(r.signingKey(r.cfg.Secret), body))
	}
	return body, h
}

// genericSignature is X-Signature's value: sha256= and the hex HMAC-SHA256
// of body keyed by secret.
func genericSignature(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func (genericDialect) receiptFailure() (status, code string) { return "undelivered", "" }

func (genericDialect) parts(id string, _ int) []string { return []string{id} }

func (d *twilioDialect) receiptBody(r receiptRequest) ([]byte, http.Header) {
	e, _ := r.msg.echo.(twilioEcho)
	st := r.step.status
	f := url.Values{}
	f.Set("AccountSid", d.accountSID)
	f.Set("ApiVersion", "2010-04-01")
	f.Set("MessageSid", r.step.part)
	f.Set("SmsSid", r.step.part)
	f.Set("MessageStatus", st)
	f.Set("SmsStatus", st)
	f.Set("To", r.msg.to)
	if e.From != "" {
		f.Set("From", e.From)
	}
	if e.Service != "" {
		f.Set("MessagingServiceSid", e.Service)
	}
	if (st == "undelivered" || st == "failed") && r.step.errorCode != "" {
		f.Set("ErrorCode", r.step.errorCode)
	}
	if st == "delivered" || st == "undelivered" {
		// The carrier's done date: to the minute, with no time zone.
		f.Set("RawDlrDoneDate", r.at.UTC().Format("0601021504"))
	}
	h := receiptHeader("application/x-www-form-urlencoded")
	h.Set("X-Twilio-Signature", twilioSignature(r.signingKey(r.token), r.msg.callback, f))
	return []byte(f.Encode()), h
}

// twilioSignature is X-Twilio-Signature: the base64 HMAC-SHA1 keyed by
// token of rawURL followed by each parameter's name and value, sorted by
// name (a repeated name's values sorted, each once), as Twilio's
// validators compute it.
func twilioSignature(token, rawURL string, params url.Values) string {
	var b strings.Builder
	b.WriteString(rawURL)
	for _, name := range slices.Sorted(maps.Keys(params)) {
		values := slices.Compact(slices.Sorted(slices.Values(params[name])))
		for _, v := range values {
			b.WriteString(name)
			b.WriteString(v)
		}
	}
	mac := hmac.New(sha1.New, []byte(token))
	mac.Write([]byte(b.String()))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func (*twilioDialect) receiptFailure() (status, code string) { return "undelivered", "30007" }

func (*twilioDialect) parts(id string, _ int) []string { return []string{id} }

func (d vonageDialect) receiptBody(r receiptRequest) ([]byte, http.Header) {
	e, _ := r.msg.echo.(vonageEcho)
	at := r.at.UTC()
	code := "0"
	if r.step.errorCode != "" {
		code = r.step.errorCode
	}
	p := map[string]string{
		"msisdn":            strings.TrimPrefix(r.msg.to, "+"),
		"to":                r.msg.from, // the sender, as Vonage names it
		"network-code":      "12345",
		"messageId":         r.step.part,
		"price":             "0.03330000",
		"status":            r.step.status,
		"scts":              at.Format("0601021504"),
		"err-code":          code,
		"api-key":           d.apiKey,
		"message-timestamp": at.Format(time.DateTime),
	}
	if len(e.ref) > 0 {
		p["client-ref"] = e.ref[0]
	}
	if secret := r.cfg.Secret; secret != "" {
		p["timestamp"] = strconv.FormatInt(at.Unix(), 10)
		p["nonce"] = nonce()
		p["sig"] = vonageSignature(r.cfg.SignatureMethod, r.signingKey(secret), p)
	}
	if r.cfg.JSON {
		body, _ := json.Marshal(p)
		return body, receiptHeader("application/json")
	}
	f := url.Values{}
	for k, v := range p {
		f.Set(k, v)
	}
	return []byte(f.Encode()), receiptHeader("application/x-www-form-urlencoded")
}

// vonageSignature is the sig of Vonage's signed webhooks: every parameter
// but sig, sorted by name, each value's '&' and '=' replaced by '_',
// joined as "&name=value…"; md5hash (or "") is the hex MD5 of that with
// secret appended, md5, sha1, sha256 and sha512 the hex HMAC keyed by
// secret. Any other method signs nothing: "".
func vonageSignature(method, secret string, params map[string]string) string {
	clean := strings.NewReplacer("&", "_", "=", "_")
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(params)) {
		if name == "sig" {
			continue
		}
		b.WriteString("&" + name + "=" + clean.Replace(params[name]))
	}
	var h hash.Hash
	switch method {
	case "", "md5hash":
		sum := md5.Sum([]byte(b.String() + secret))
		return hex.EncodeToString(sum[:])
	case "md5":
		h = hmac.New(md5.New, []byte(secret))
	case "sha1":
		h = hmac.New(sha1.New, []byte(secret))
	case "sha256":
		h = hmac.New(sha256.New, []byte(secret))
	case "sha512":
		h = hmac.New(sha512.New, []byte(secret))
	default:
		return ""
	}
	h.Write([]byte(b.String()))
	return hex.EncodeToString(h.Sum(nil))
}

// nonce is a random string for a signed Vonage receipt.
func nonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (vonageDialect) receiptFailure() (status, code string) { return "rejected", "6" }

// optOutReceipt is Vonage's receipt of a message to a number that opted
// out of the sender ("Messaging Opted-out Numbers"): failed, err-code 9.
func (vonageDialect) optOutReceipt() (status, code string) { return "failed", "9" }

// parts returns the id of each of a message's n parts, as write answers
// them.
func (vonageDialect) parts(id string, n int) []string {
	ids := make([]string, max(n, 1))
	for i := range ids {
		ids[i] = vonagePartID(id, i)
	}
	return ids
}

// vonagePartID is the message-id of the i-th part (from 0) of the message
// whose id is id.
func vonagePartID(id string, i int) string { return fmt.Sprintf("%s%X", id, i+1) }
