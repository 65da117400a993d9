package provider

// Vonage's SMS API (not its Messages API), as documented by Vonage:
//
//   - the request and the answer: https://developer.vonage.com/en/api/sms
//     (the OpenAPI description, version 1.5.1: "Send an SMS", POST
//     /sms/{format}, application/x-www-form-urlencoded, schemas NewMessage,
//     SMS, Message, Error and ErrorMessage);
//   - the statuses: https://developer.vonage.com/en/api-errors/sms and the
//     table of https://developer.vonage.com/en/messaging/sms/guides/troubleshooting-sms;
//   - a long message answered part by part:
//     https://developer.vonage.com/en/messaging/sms/guides/concatenation-and-encoding.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"smsdispatcher/provider/internal/wire"
)

// DefaultVonageURL is the SMS API's base URL.
const DefaultVonageURL = "https://rest.nexmo.com"

// VonageConfig configures a Vonage adapter.
type VonageConfig struct {
	APIKey    string
	APISecret *Secret
	From      string // sender id or number; a Message's own From replaces it
	BaseURL   string // "" means DefaultVonageURL
	// SignatureSecret is the account's signature secret, which Vonage
	// signs its webhooks (delivery receipts) with; read at each
	// ReadReceipt. Nil: no receipt verifies.
	SignatureSecret *Secret
	// SignatureMethod is how the webhooks are signed, as set in Vonage's
	// dashboard: md5hash, md5, sha1, sha256 or sha512; "" means md5hash.
	SignatureMethod string
}

// Vonage sends one message per Send call to Vonage's SMS API. It is safe
// for concurrent use. It does not retry and does not follow redirects.
type Vonage struct {
	conn
	cfg      VonageConfig
	endpoint string // {BaseURL}/sms/json; set by NewVonage, only read afterwards
}

// NewVonage returns a Vonage adapter. APIKey, APISecret (non-nil, with a
// non-empty value) and From are required; BaseURL, when given, follows
// NewClient's rules; SignatureMethod, when given, is one of md5hash, md5,
// sha1, sha256 and sha512 (an error wrapping ErrInvalidSignatureMethod).
// An error names the field and never shows the secret.
func NewVonage(cfg VonageConfig, opts ...Option) (*Vonage, error) {
	switch {
	case cfg.APIKey == "":
		return nil, errors.New("provider: vonage: APIKey is empty")
	case cfg.APISecret == nil:
		return nil, fmt.Errorf("%w: vonage: APISecret is nil", ErrInvalidToken)
	case cfg.APISecret.Value() == "":
		return nil, fmt.Errorf("%w: vonage: APISecret is empty", ErrInvalidToken)
	case cfg.From == "":
		return nil, errors.New("provider: vonage: From is empty")
	}
	method, err := vonageSignatureMethod(cfg.SignatureMethod)
	if err != nil {
		return nil, err
	}
	cfg.SignatureMethod = method
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultVonageURL
	}
	endpoint, err := endpointURL(cfg.BaseURL, "sms", "json")
	if err != nil {
		return nil, fmt.Errorf("vonage BaseURL: %w", err)
	}
	return &Vonage{conn: newConn(opts), cfg: cfg, endpoint: endpoint}, nil
}

// Send posts m to Vonage once, as a form: api_key, api_secret (read from
// the Secret at each call), from (m.From when set, else the configured
// From), to (m.To without its '+'), text,
// type=unicode when Segments says the body is not GSM-7 (the default type,
// text, otherwise), client-ref (m.ID, cut to 100 bytes), when m has a
// Deadline, ttl (the time left, within 20 s and 7 days) and, with
// WithStatusCallback, callback (the URL delivery receipts go to).
//
// Vonage answers 200 with a status per part of the message. Send returns a
// Receipt with the first part's message-id, and every part's in Parts,
// when every part's status is "0"; otherwise an *Error (Provider "vonage", Code the status) for the
// first part that is not, of the kind vonageKinds gives. A known limit:
// the parts accepted before it may have gone out, and a message sent again
// after such an answer may be delivered in part twice.
//
// Any other HTTP status is an *Error without Code: 429 throttled, 401 and
// 403 account failures, anything else temporary (Vonage refuses a message
// in a 200, so another status says nothing against the message). After an
// account failure Send calls APISecret.Reload, so that a fixed secret file
// is used by the next Send. A Message with an empty ID is not sent (see
// Client.Send); transport errors are wrapped as Client.Send wraps them.
func (v *Vonage) Send(ctx context.Context, m Message) (Receipt, error) {
	if err := checkID(m.ID); err != nil {
		return Receipt{}, err
	}
	secret := v.cfg.APISecret.Value()
	from := v.cfg.From
	if m.From != "" {
		from = m.From // the sender the limiter chose from the account's pool
	}
	form := url.Values{
		"api_key":    {v.cfg.APIKey},
		"api_secret": {secret},
		"from":       {from},
		"to":         {strings.TrimPrefix(m.To, "+")},
		"text":       {m.Body},
		"client-ref": {vonageClientRef(m.ID)},
	}
	if _, enc := Segments(m.Body); enc != GSM7 {
		form.Set("type", "unicode")
	}
	if !m.Deadline.IsZero() {
		ttl := min(max(m.Deadline.Sub(v.now()).Milliseconds(), wire.VonageTTLMin), wire.VonageTTLMax)
		form.Set("ttl", strconv.FormatInt(ttl, 10))
	}
	if v.statusCallback != "" {
		form.Set("callback", v.statusCallback)
	}
	body := form.Encode()

	return v.do(ctx, func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, v.endpoint, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		return req, nil
	}, func(resp *http.Response, head []byte) (Receipt, error) {
		return v.answer(resp, head, m, secret)
	})
}

// vonageClientRef returns id cut to wire.VonageClientRefMax bytes at a rune
// boundary. A message ID may be up to 128 characters, so a longer one is
// sent as its first 100 bytes: the client-ref then names the message
// without being it.
func vonageClientRef(id string) string {
	if len(id) <= wire.VonageClientRefMax {
		return id
	}
	cut := wire.VonageClientRefMax
	for cut > 0 && !utf8.RuneStart(id[cut]) {
		cut--
	}
	return id[:cut]
}

// vonageKinds is what each documented status means; a status not in it
// (and an answer that does not parse) is temporary. Source:
// https://developer.vonage.com/en/api-errors/sms.
var vonageKinds = map[string]Kind{
	// The account's rate, not the message.
	"1":  KindThrottled, // Throttled: faster than the account limit
	"10": KindThrottled, // Too Many Existing Binds: "Back-off and retry"
	// This message, for good.
	"2":  KindRefused, // Missing Parameters
	"3":  KindRefused, // Invalid Parameters
	"6":  KindRefused, // Invalid Message, e.g. an unrecognized number prefix
	"7":  KindRefused, // Number Barred
	"12": KindRefused, // Message Too Long
	"15": KindRefused, // Invalid Sender Address (for this destination)
	"17": KindRefused, // Message Blocked by Provider
	"22": KindRefused, // Invalid Network Code
	"23": KindRefused, // Invalid Callback Url
	"29": KindRefused, // Non-Whitelisted Destination (demo account)
	"33": KindRefused, // Number De-activated
	// The account cannot send at all.
	"4":  KindAccount, // Invalid Credentials
	"8":  KindAccount, // Partner Account Barred: the account is suspended
	"9":  KindAccount, // Partner Quota Violation: out of credit
	"11": KindAccount, // Account Not Enabled For HTTP
	"14": KindAccount, // Invalid Signature
	"32": KindAccount, // Signature And API Secret Disallowed
	// Worth another try.
	"5": KindTemporary, // Internal Error
}

// vonageAnswer is the SMS API's JSON answer (schemas SMS and Error).
type vonageAnswer struct {
	Messages []struct {
		Status    vonageString `json:"status"`
		MessageID string       `json:"message-id"`
		ErrorText string       `json:"error-text"`
	} `json:"messages"`
}

// vonageString is a JSON string that also reads a number: the documented
// statuses are strings, and one given as a number means the same.
type vonageString string

func (s *vonageString) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err == nil {
		*s = vonageString(n)
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return err
	}
	*s = vonageString(str)
	return nil
}

// vonageParts is every part's message-id, in order: a delivery receipt
// names its part by it alone. A part refused with no id is left out; one
// refused with an id stays, so a message some of whose parts never went
// is not read as delivered when the others are.
func vonageParts(a vonageAnswer) []string {
	var ids []string
	for _, p := range a.Messages {
		if p.MessageID != "" {
			ids = append(ids, p.MessageID)
		}
	}
	return ids
}

// answer reads Vonage's answer; see Send.
func (v *Vonage) answer(resp *http.Response, head []byte, m Message, secret string) (Receipt, error) {
	e := &Error{Provider: "vonage", Status: resp.StatusCode}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		e.Message = excerpt(head, m, secret, v.cfg.APIKey)
		switch resp.StatusCode {
		case http.StatusTooManyRequests:
			e.Kind, e.RetryAfter = KindThrottled, retryAfter(resp.Header, v.now())
		case http.StatusUnauthorized, http.StatusForbidden:
			e.Kind = KindAccount
			v.cfg.APISecret.Reload() // on an error the secret read before is kept
		default:
			e.Kind = KindTemporary
		}
		return Receipt{}, e
	}
	var a vonageAnswer
	if err := json.Unmarshal(head, &a); err != nil || len(a.Messages) == 0 {
		e.Kind, e.Message = KindTemporary, excerpt(head, m, secret, v.cfg.APIKey)
		return Receipt{}, e
	}
	for _, p := range a.Messages {
		if p.Status == "0" {
			// Parts are answered one by one: once one went out, the
			// message is sent (sending it again would repeat that part),
			// whatever became of the others.
			return Receipt{ID: p.MessageID, Parts: vonageParts(a)}, nil
		}
	}
	for _, p := range a.Messages {
		kind, ok := vonageKinds[string(p.Status)]
		if !ok {
			kind = KindTemporary
		}
		e.Code, e.Kind = string(p.Status), kind
		text := []byte(p.ErrorText)
		if p.ErrorText == "" {
			text = head
		}
		e.Message = excerpt(text, m, secret, v.cfg.APIKey)
		switch kind {
		case KindThrottled:
			e.RetryAfter = retryAfter(resp.Header, v.now())
		case KindAccount:
			v.cfg.APISecret.Reload()
		}
		return Receipt{}, e
	}
	return Receipt{ID: a.Messages[0].MessageID}, nil
}
