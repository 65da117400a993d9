package provider

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"smsdispatcher/provider/internal/wire"
)

// DefaultTwilioURL is where Twilio's REST API lives.
const DefaultTwilioURL = "https://api.twilio.com"

// TwilioConfig configures a Twilio adapter.
type TwilioConfig struct {
	// AccountSID is the account (AC...): the Basic auth user and part of
	// the path.
	AccountSID string
	// AuthToken is the Basic auth password, read at every Send and
	// reloaded after an account-level failure.
	AuthToken *Secret
	// From is the sender (a Twilio number, a short code or an alphanumeric
	// sender ID). Exactly one of From and MessagingServiceSID is set. A
	// Message's own From replaces it.
	From string
	// MessagingServiceSID (MG...) lets Twilio pick the sender from the
	// service's pool, unless a Message names its From: both are then sent.
	MessagingServiceSID string
	// BaseURL is where the API lives; "" means DefaultTwilioURL. Same
	// rules as NewClient's baseURL; a path is kept as a prefix.
	BaseURL string
}

// Twilio sends one message per Send with Twilio's Programmable Messaging
// API (a Message resource created per send). It is safe for concurrent use
// and never retries.
type Twilio struct {
	conn
	cfg      TwilioConfig // read-only after NewTwilio
	endpoint string       // {base}/2010-04-01/Accounts/{AccountSID}/Messages.json
}

// NewTwilio returns a Twilio adapter. It returns an error naming the
// TwilioConfig field at fault (wrapping ErrInvalidURL or ErrInvalidToken
// where they apply, and never showing the token) when AccountSID or
// MessagingServiceSID is not ASCII letters and digits, AuthToken is nil,
// empty or cannot go in a header, not exactly one of From and
// MessagingServiceSID is set, or BaseURL cannot work.
func NewTwilio(cfg TwilioConfig, opts ...Option) (*Twilio, error) {
	if err := twilioSID("AccountSID", cfg.AccountSID); err != nil {
		return nil, err
	}
	if cfg.AuthToken == nil || cfg.AuthToken.Value() == "" {
		return nil, fmt.Errorf("provider: TwilioConfig.AuthToken: %w: empty", ErrInvalidToken)
	}
	if err := checkToken(cfg.AuthToken.Value()); err != nil {
		return nil, fmt.Errorf("provider: TwilioConfig.AuthToken: %w", err)
	}
	switch {
	case cfg.From == "" && cfg.MessagingServiceSID == "":
		return nil, errors.New("provider: TwilioConfig: set one of From and MessagingServiceSID")
	case cfg.From != "" && cfg.MessagingServiceSID != "":
		return nil, errors.New("provider: TwilioConfig: set only one of From and MessagingServiceSID")
	case cfg.MessagingServiceSID != "":
		if err := twilioSID("MessagingServiceSID", cfg.MessagingServiceSID); err != nil {
			return nil, err
		}
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultTwilioURL
	}
	endpoint, err := endpointURL(cfg.BaseURL, "2010-04-01", "Accounts", cfg.AccountSID, "Messages.json")
	if err != nil {
		return nil, fmt.Errorf("provider: TwilioConfig.BaseURL: %w", err)
	}
	return &Twilio{conn: newConn(opts), cfg: cfg, endpoint: endpoint}, nil
}

// twilioSID refuses a SID that is not ASCII letters and digits: it goes in
// a header, a path and, for AccountSID, before the ':' of Basic auth.
func twilioSID(field, sid string) error {
	if sid == "" {
		return fmt.Errorf("provider: TwilioConfig.%s: empty", field)
	}
	for i := 0; i < len(sid); i++ {
		if c := sid[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return fmt.Errorf("provider: TwilioConfig.%s: byte %d is not an ASCII letter or digit", field, i)
		}
	}
	return nil
}

// twilioValidityPeriod is the ValidityPeriod for a message due by deadline at now:
// the whole seconds left (rounded down, so that Twilio never sends after
// the deadline), within 1 to 36000.
func twilioValidityPeriod(deadline, now time.Time) int {
	left := deadline.Sub(now) / time.Second
	return int(min(max(left, 1), wire.TwilioMaxValidity))
}

// Send creates one Message resource for m: a POST of To, Body, From (m.From
// when set, else the configured From, if any), MessagingServiceSid (when
// configured, with or without m.From) and, when m.Deadline is set,
// ValidityPeriod (the whole seconds left, 1 to 36000: a message already
// past its deadline still gets 1, so drop those before Send) and, with
// WithStatusCallback, StatusCallback (the URL status callbacks go to).
// m.ID is not sent: Twilio has no field for it.
//
// It returns a Receipt with the Message's sid for a 2xx, and otherwise an
// *Error (Provider "twilio", Code the answer's Twilio code) whose Kind is:
//   - KindThrottled for HTTP 429 or code 21611, RetryAfter from
//     Retry-After (1 s when absent);
//   - KindAccount for HTTP 401, a 403 without a Twilio code, a 404 or 405
//     (the URL is wrong, not the message), or a code of a failing account
//     (20003, 20005, 10001, 20403, 90010); the token is then reloaded for
//     the next Send;
//   - KindRefused for any other 4xx;
//   - KindTemporary for anything else (5xx, a redirect).
//
// A transport or context error is wrapped as "provider send: ...", as
// Client.Send does. The auth token (as it is and in its Basic form) is
// redacted from Error.Message, as are m's number and body.
func (t *Twilio) Send(ctx context.Context, m Message) (Receipt, error) {
	token := t.cfg.AuthToken.Value()
	if err := checkToken(token); err != nil {
		// A token file replaced by one that cannot go in a header (Reload
		// never takes an empty one): the account's credential is broken,
		// not the message.
		t.cfg.AuthToken.Reload()
		return Receipt{}, &Error{Provider: "twilio", Kind: KindAccount, Message: err.Error()}
	}
	form := url.Values{"To": {m.To}, "Body": {m.Body}}
	// Twilio takes a MessagingServiceSid "either instead of or in addition
	// to a specific 'From'" (its error 21603): with both, the message goes
	// from From and keeps the service's features, and Twilio warns (21711)
	// if From is not in the service's sender pool. So m.From replaces the
	// configured From, and a configured service is still sent with it.
	if t.cfg.MessagingServiceSID != "" {
		form.Set("MessagingServiceSid", t.cfg.MessagingServiceSID)
	}
	switch {
	case m.From != "":
		form.Set("From", m.From)
	case t.cfg.MessagingServiceSID == "":
		form.Set("From", t.cfg.From)
	}
	if !m.Deadline.IsZero() {
		form.Set("ValidityPeriod", strconv.Itoa(twilioValidityPeriod(m.Deadline, t.now())))
	}
	if t.statusCallback != "" {
		form.Set("StatusCallback", t.statusCallback)
	}
	body := form.Encode()
	basic := base64.StdEncoding.EncodeToString([]byte(t.cfg.AccountSID + ":" + token))

	return t.do(ctx, func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.endpoint, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Basic "+basic)
		return req, nil
	}, func(resp *http.Response, head []byte) (Receipt, error) {
		return t.answer(resp, head, m, token, basic)
	})
}

// answer reads Twilio's answer to a create.
func (t *Twilio) answer(resp *http.Response, head []byte, m Message, token, basic string) (Receipt, error) {
	status := resp.StatusCode
	if status >= 200 && status < 300 {
		var sid string
		_ = json.Unmarshal(twilioField(head, "sid"), &sid) // a 2xx without a sid is still an acceptance
		return Receipt{ID: sid}, nil
	}
	code := twilioErrorCode(twilioField(head, "code"))
	e := &Error{Provider: "twilio", Status: status, Message: excerpt(head, m, token, basic)}
	n := 0
	if code != "" {
		e.Code = code
		n, _ = strconv.Atoi(code)
	}
	means := wire.TwilioCodes[n].Means
	switch {
	case status == http.StatusTooManyRequests || means == wire.TwilioThrottled:
		e.Kind = KindThrottled
		e.RetryAfter = retryAfter(resp.Header, t.now())
	case status == http.StatusUnauthorized || means == wire.TwilioAccount ||
		status == http.StatusForbidden && code == "" ||
		status == http.StatusNotFound || status == http.StatusMethodNotAllowed:
		// A 404 or 405 to a POST on Messages.json says the URL is wrong
		// (BaseURL, AccountSID): configuration, not this message.
		e.Kind = KindAccount
		t.cfg.AuthToken.Reload() // a fixed token file takes effect at the next Send
	case status >= 400 && status < 500:
		e.Kind = KindRefused
	default:
		e.Kind = KindTemporary
	}
	return Receipt{}, e
}

// twilioField returns the raw value of key in the JSON object that head
// begins with, or nil. It reads the object's members in order and stops at
// key, so that it finds a key that comes before the cut of an answer longer
// than what Send reads (a 201 echoes the whole body after the sid).
func twilioField(head []byte, key string) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(head))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		if k, _ := tok.(string); k == key {
			return v
		}
	}
	return nil
}

// twilioErrorCode returns the decimal digits of a Twilio error code, given
// as a JSON number or string, or "" for anything else (null, absent,
// garbage).
func twilioErrorCode(raw json.RawMessage) string {
	s := string(raw)
	if uq, err := strconv.Unquote(s); err == nil {
		s = uq
	}
	if s == "" || len(s) > 9 || !wire.AllDigits(s) {
		return ""
	}
	return s
}
