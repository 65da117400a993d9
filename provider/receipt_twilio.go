package provider

// Twilio's message status callbacks, as documented by Twilio
// (https://www.twilio.com/docs/messaging/guides/track-outbound-message-status)
// and signed as its SDKs' request validators check (twilio-go
// client/request_validator.go, twilio-python twilio/request_validator.py).

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
)

// twilioStatuses maps each MessageStatus Twilio documents for an outbound
// message. A status not in it is read as StatusUnknown: Twilio adds
// values without notice, and a verified receipt is never refused for one.
var twilioStatuses = map[string]DeliveryStatus{
	"queued":              StatusQueued,
	"accepted":            StatusAccepted,
	"scheduled":           StatusAccepted, // a Messaging Service's scheduled send
	"sending":             StatusSending,
	"sent":                StatusSent,
	"delivered":           StatusDelivered,
	"read":                StatusDelivered, // comes after delivered (WhatsApp)
	"undelivered":         StatusUndelivered,
	"failed":              StatusFailed,
	"canceled":            StatusFailed, // a scheduled message canceled: it never went
	"partially_delivered": StatusUnknown,
}

// ReadReceipt verifies and reads one of Twilio's message status callbacks:
// a form POST signed in X-Twilio-Signature with the account's auth token
// (read at each call, so a reloaded token works). The signature is
// base64(HMAC-SHA1) of r.URL followed by every POST parameter, sorted by
// name, each name then value (a repeated name's values sorted and
// de-duplicated); r.URL is tried with and without its port, as Twilio's
// validators do, and compared in constant time. A URL whose query holds
// bodySHA256 is Twilio's JSON variant: the signature covers the URL alone
// and the body's SHA-256 must match. A body that is no form is
// ErrMalformed once the pairs of it that parse verify, else ErrForged.
//
// The report is MessageSid (or SmsSid), MessageStatus (or SmsStatus)
// mapped to a DeliveryStatus (an unrecognised one is StatusUnknown; the
// inbound receiving and received are ErrMalformed) and ErrorCode; At is
// zero, Twilio gives no time zone for RawDlrDoneDate.
func (t *Twilio) ReadReceipt(r ReceiptRequest) (DeliveryReport, error) {
	form, err := twilioVerify(t.cfg.AuthToken.Value(), r)
	if err != nil {
		return DeliveryReport{}, err
	}
	return twilioReport(form)
}

// twilioVerify checks r's signature and returns its form, parsed.
func twilioVerify(token string, r ReceiptRequest) (url.Values, error) {
	sig := r.Header.Get("X-Twilio-Signature")
	switch {
	case sig == "":
		return nil, fmt.Errorf("%w: twilio: no X-Twilio-Signature", ErrForged)
	case token == "":
		return nil, fmt.Errorf("%w: twilio: no auth token", ErrForged)
	}
	u, err := url.Parse(r.URL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%w: twilio: the receipt URL is not absolute", ErrForged)
	}
	var signed url.Values // nil for the JSON variant: the URL alone is signed
	var notForm error
	if hash := u.Query().Get("bodySHA256"); hash != "" {
		sum := sha256.Sum256(r.Body)
		if !hexMACEqual(sum[:], hash) {
			return nil, fmt.Errorf("%w: twilio: the body does not match bodySHA256", ErrForged)
		}
	} else {
		// The pairs that parse are verified, and only a body that
		// verifies is told it is no form: an unsigned one is forged,
		// whatever it holds.
		signed, notForm = url.ParseQuery(string(r.Body))
	}
	ok := 0
	for _, variant := range []string{twilioWithPort(u, r.URL), twilioWithoutPort(u, r.URL)} {
		want := base64.StdEncoding.EncodeToString(twilioMAC(token, variant, signed))
		ok |= subtle.ConstantTimeCompare([]byte(want), []byte(sig))
	}
	if ok != 1 {
		return nil, fmt.Errorf("%w: twilio: X-Twilio-Signature does not match", ErrForged)
	}
	if signed == nil {
		signed, notForm = url.ParseQuery(string(r.Body))
	}
	if notForm != nil {
		return nil, fmt.Errorf("%w: twilio: the body is not a form", ErrMalformed)
	}
	return signed, nil
}

// twilioMAC is HMAC-SHA1, keyed by token, of rawURL followed by each
// parameter's name and value in name order; a repeated name's values are
// sorted and de-duplicated, as twilio-python and twilio-node do (twilio-go
// keeps the first only; status callbacks repeat no name).
func twilioMAC(token, rawURL string, params url.Values) []byte {
	mac := hmac.New(sha1.New, []byte(token))
	mac.Write([]byte(rawURL))
	names := make([]string, 0, len(params))
	for name := range params {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		values := slices.Clone(params[name])
		slices.Sort(values)
		for _, v := range slices.Compact(values) {
			mac.Write([]byte(name))
			mac.Write([]byte(v))
		}
	}
	return mac.Sum(nil)
}

// twilioWithPort is rawURL with the scheme's default port when it names
// none (https :443, any other :80), else rawURL as it is.
func twilioWithPort(u *url.URL, rawURL string) string {
	if u.Port() != "" {
		return rawURL
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	v := *u
	v.Host = net.JoinHostPort(u.Hostname(), port)
	return v.String()
}

// twilioWithoutPort is rawURL without its port, whichever it is, or
// rawURL as it is when it names none.
func twilioWithoutPort(u *url.URL, rawURL string) string {
	if u.Port() == "" {
		return rawURL
	}
	v := *u
	v.Host = u.Hostname()
	if strings.Contains(v.Host, ":") {
		v.Host = "[" + v.Host + "]" // an IPv6 literal keeps its brackets
	}
	return v.String()
}

// twilioReport reads a verified callback's form.
func twilioReport(form url.Values) (DeliveryReport, error) {
	sid, err := formField(form, "MessageSid", "SmsSid")
	if err != nil {
		return DeliveryReport{}, err
	}
	status, err := formField(form, "MessageStatus", "SmsStatus")
	if err != nil {
		return DeliveryReport{}, err
	}
	code, err := formField(form, "ErrorCode")
	if err != nil {
		return DeliveryReport{}, err
	}
	d := DeliveryReport{ProviderID: sid, ErrorCode: code}
	switch status {
	case "":
		return DeliveryReport{}, fmt.Errorf("%w: twilio: no MessageStatus", ErrMalformed)
	case "receiving", "received":
		return DeliveryReport{}, fmt.Errorf("%w: twilio: an inbound message's status", ErrMalformed)
	}
	var ok bool
	if d.Status, ok = twilioStatuses[status]; !ok {
		d.Status = StatusUnknown
	}
	d.RouteFailed = routeFailed(d, twilioRouteCodes)
	if err := checkReport(d); err != nil {
		return DeliveryReport{}, fmt.Errorf("twilio: %w", err)
	}
	return d, nil
}

// formField returns the value of the first of names that form holds, ""
// when it holds none. A name given twice is ErrMalformed: which of its
// values the provider meant is not known.
func formField(form url.Values, names ...string) (string, error) {
	for _, name := range names {
		switch v := form[name]; len(v) {
		case 0:
			continue
		case 1:
			return v[0], nil
		default:
			return "", fmt.Errorf("%w: %s given %d times", ErrMalformed, name, len(v))
		}
	}
	return "", nil
}
