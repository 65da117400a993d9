package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultTimeout caps one Send when WithTimeout is not given.
const DefaultTimeout = 10 * time.Second

const (
	// maxBodyRead is how much of an answer Send reads before closing it:
	// enough for any error JSON, small enough that a huge body costs nothing.
	maxBodyRead = 4 << 10
	// maxMessageLen is how much of the answer an *Error keeps.
	maxMessageLen = 256
)

var (
	// ErrInvalidURL reports a base URL that cannot work; the wrapping error
	// names the problem (never the URL's user info).
	ErrInvalidURL = errors.New("provider: invalid base URL")
	// ErrInvalidToken reports a token that cannot go in a header; the
	// wrapping error never shows the token.
	ErrInvalidToken = errors.New("provider: invalid token")
	// ErrInvalidMessage reports a Message that Send cannot put on the wire.
	// Nothing was sent, and nothing will change if it is sent again: the
	// error Send returns says Permanent, like a provider's refusal.
	ErrInvalidMessage = errors.New("provider: invalid message")
)

// Message is what is sent. ID is the idempotency key: it goes in the
// Idempotency-Key header and as client_ref. To and Body are sent as they are;
// the provider judges them.
//
// Message's String and LogValue mask To and leave Body out, so a Message
// printed or logged by mistake leaks neither.
type Message struct {
	ID, To, Body string
}

// String returns the ID, the masked number and the body's length.
func (m Message) String() string {
	return fmt.Sprintf("provider.Message{ID:%q To:%s Body:(%d bytes)}", m.ID, MaskNumber(m.To), len(m.Body))
}

// LogValue logs the ID, the masked number and the body's length.
func (m Message) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("id", m.ID),
		slog.String("to", MaskNumber(m.To)),
		slog.Int("body_bytes", len(m.Body)),
	)
}

// MaskNumber replaces every byte of a phone number but the last 4 with '*',
// the form in which a number may be logged (docs/design.md, Conventions,
// rule 6). A number of 4
// bytes or fewer is masked entirely.
func MaskNumber(to string) string {
	if len(to) <= 4 {
		return strings.Repeat("*", len(to))
	}
	return strings.Repeat("*", len(to)-4) + to[len(to)-4:]
}

// Error is the provider's answer to a Send when it is not 2xx.
type Error struct {
	// Status is the HTTP status code.
	Status int
	// RetryAfter is set for 429 only: the parsed Retry-After, never
	// negative, at most MaxRetryAfter; DefaultRetryAfter when the header is
	// missing or does not parse; 0 for a date in the past.
	RetryAfter time.Duration
	// Message is the first 256 bytes (or fewer) of the answer's body, with
	// invalid UTF-8 dropped and, should the provider echo them as they are,
	// JSON-escaped or in part, the token replaced by "[redacted]", the
	// message's body (4 bytes or longer) by "[body]", and the digits of its
	// number (but the last 4) and of the body's digit groups by '*' (see
	// redact.go for the exact rule). Should the result still show one of
	// them, which takes a body built to collide with those placeholders,
	// Message is a fixed placeholder instead. It never holds the request.
	Message string
}

// Error describes the answer.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("provider: status ")
	b.WriteString(strconv.Itoa(e.Status))
	if e.Throttled() {
		b.WriteString(" (retry after ")
		b.WriteString(e.RetryAfter.String())
		b.WriteString(")")
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Throttled reports whether the provider answered 429: the account is over
// its rate and nobody should send on it for RetryAfter.
func (e *Error) Throttled() bool { return e.Status == http.StatusTooManyRequests }

// Backoff returns how long the provider asked every sender to wait:
// RetryAfter.
func (e *Error) Backoff() time.Duration { return e.RetryAfter }

// Permanent reports whether the provider refused this message for good: a
// 4xx other than 429. Sending it again will not help.
func (e *Error) Permanent() bool {
	return e.Status >= 400 && e.Status < 500 && !e.Throttled()
}

// Temporary reports whether the answer is worth another try later: a 5xx,
// or any other status that is neither 2xx nor 4xx (a redirect, which the
// default Client does not follow, or a status no provider should send).
func (e *Error) Temporary() bool {
	return !(e.Status >= 200 && e.Status < 300) && !(e.Status >= 400 && e.Status < 500)
}

// Client sends one message per Send call to the provider's generic JSON API
// (docs/contract.md section 3). It is safe for concurrent use. It does not retry:
// the one layer that retries is Pub/Sub redelivery.
type Client struct {
	// All fields are set by NewClient and only read afterwards.
	endpoint string // {base}/v1/messages
	token    string
	auth     string // "Bearer " + token; empty when token is empty
	hc       *http.Client
	timeout  time.Duration
	now      func() time.Time
	wrap     func(http.RoundTripper) http.RoundTripper // applied to the default client's transport
}

// An Option configures an optional dependency of a Client.
type Option func(*Client)

// WithHTTPClient makes the Client send through hc. If hc is nil, or the
// option is not given, the Client uses a dedicated http.Client whose
// Transport keeps up to 64 idle connections to the provider, has no
// Client.Timeout (each Send's timeout comes from its context) and does not
// follow redirects.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.hc = hc }
}

// WithTimeout caps each Send at d. The effective cap is the earlier of d and
// the deadline of the context passed to Send. If d is zero or negative,
// DefaultTimeout (10s) is used.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithClock makes the Client read the time from now, which only matters for
// a Retry-After given as an HTTP date. If now is nil, time.Now is used.
func WithClock(now func() time.Time) Option {
	return func(c *Client) {
		if now != nil {
			c.now = now
		}
	}
}

// NewClient returns a Client that posts to baseURL + "/v1/messages" with
// token as its bearer token. baseURL must be an absolute http or https URL
// with a host and no user info, query or fragment; a path is kept as a
// prefix. An empty token sends no Authorization header. It returns an error
// wrapping ErrInvalidURL or ErrInvalidToken that names the problem.
func NewClient(baseURL, token string, opts ...Option) (*Client, error) {
	endpoint, err := endpointURL(baseURL)
	if err != nil {
		return nil, err
	}
	for i := 0; i < len(token); i++ {
		if token[i] <= ' ' || token[i] >= 0x7f {
			return nil, fmt.Errorf("%w: byte %d is a space, control or non-ASCII character", ErrInvalidToken, i)
		}
	}
	c := &Client{
		endpoint: endpoint,
		token:    token,
		timeout:  DefaultTimeout,
		now:      time.Now,
	}
	if token != "" {
		c.auth = "Bearer " + token
	}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = defaultHTTPClient()
		if c.wrap != nil {
			c.hc.Transport = c.wrap(c.hc.Transport)
		}
	}
	return c, nil
}

// WithTransportWrapper wraps the default client's tuned transport, for
// instrumentation (tracing, metrics). It is ignored with WithHTTPClient.
// The wrapper must not read the Idempotency-Key header by its canonical
// name (see Send).
func WithTransportWrapper(wrap func(http.RoundTripper) http.RoundTripper) Option {
	return func(c *Client) { c.wrap = wrap }
}

func endpointURL(baseURL string) (string, error) {
	if baseURL == "" {
		return "", fmt.Errorf("%w: empty", ErrInvalidURL)
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		// *url.Error repeats the whole URL, which may hold a password.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("%w: does not parse: %v", ErrInvalidURL, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%w: scheme %q is not http or https", ErrInvalidURL, u.Scheme)
	case u.Opaque != "" || u.Host == "":
		return "", fmt.Errorf("%w: no host (want http(s)://host[:port][/path])", ErrInvalidURL)
	case u.User != nil:
		return "", fmt.Errorf("%w: user info is not allowed (the token is passed on its own)", ErrInvalidURL)
	case u.RawQuery != "" || u.ForceQuery:
		return "", fmt.Errorf("%w: a query is not allowed", ErrInvalidURL)
	case u.Fragment != "":
		return "", fmt.Errorf("%w: a fragment is not allowed", ErrInvalidURL)
	}
	return u.JoinPath("v1", "messages").String(), nil
}

func defaultHTTPClient() *http.Client {
	var tr *http.Transport
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		tr = dt.Clone() // keeps proxy from environment, dial and TLS timeouts, HTTP/2
	} else {
		tr = &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}
	}
	tr.MaxIdleConns = 128
	tr.MaxIdleConnsPerHost = 64
	// Shorter than most servers' keep-alive timeout, so that a request
	// rarely meets a connection the provider is closing.
	tr.IdleConnTimeout = 30 * time.Second
	return &http.Client{
		Transport: tr,
		// A POST redirected is a POST we did not mean to send; the 3xx
		// comes back as a Temporary *Error.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// CloseIdleConnections closes the idle connections of the Client's
// http.Client. Call it at shutdown; the Client stays usable.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// wireMessage is the request body of docs/contract.md section 3.
type wireMessage struct {
	To        string `json:"to"`
	Body      string `json:"body"`
	ClientRef string `json:"client_ref"`
}

// Send posts m to the provider once and reports the answer: nil for 2xx, an
// *Error for any other status, and otherwise a transport or context error
// wrapped as "provider send: ...", which satisfies
// errors.Is(err, context.DeadlineExceeded) when the timeout fired (the
// context's deadline or the Client's cap, whichever came first). A Message
// with an empty ID, or an ID that cannot go in a header, is not sent: Send
// returns an error wrapping ErrInvalidMessage.
//
// Send reads at most 4 KiB of the answer and closes it, so connections are
// reused.
func (c *Client) Send(ctx context.Context, m Message) error {
	if err := checkID(m.ID); err != nil {
		return err
	}
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false) // send "<" and "&" as they are; the provider may count bytes
	if err := enc.Encode(wireMessage{To: m.To, Body: m.Body, ClientRef: m.ID}); err != nil {
		return invalidMessage("encode: %v", err)
	}

	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, &body)
	if err != nil {
		return fmt.Errorf("provider send: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	// Set under a non-canonical key on purpose: net/http treats a request
	// whose Header map holds "Idempotency-Key" as replayable and silently
	// resends it when a reused connection fails after the request may have
	// reached the provider. That resend would skip admission. Field names
	// are case-insensitive on the wire (and lower case in HTTP/2), so the
	// provider sees the same header.
	req.Header["idempotency-key"] = []string{m.ID}

	resp, err := c.hc.Do(req)
	if err != nil {
		return sendError(ctx, err)
	}
	head, _ := io.ReadAll(io.LimitReader(resp.Body, maxBodyRead))
	resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	e := &Error{Status: resp.StatusCode, Message: c.excerpt(head, m)}
	if e.Throttled() {
		ra, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), c.now())
		if !ok {
			ra = DefaultRetryAfter
		}
		e.RetryAfter = ra
	}
	return e
}

// sendError wraps a failed round trip so that errors.Is finds the context's
// error even if the transport reported the cancellation in its own words.
func sendError(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("provider send: %w: %w", cerr, err)
	}
	return fmt.Errorf("provider send: %w", err)
}

func checkID(id string) error {
	if id == "" {
		return invalidMessage("empty ID")
	}
	for i := 0; i < len(id); i++ {
		if b := id[i]; (b < ' ' && b != '\t') || b == 0x7f {
			return invalidMessage("ID has a control character at byte %d", i)
		}
	}
	return nil
}

// excerpt turns the start of an answer body into Error.Message. Providers
// do echo what they refuse ("+8190... is not a valid number"), so the token,
// m's number and m's body are taken out before the text can reach a log.
func (c *Client) excerpt(head []byte, m Message) string {
	sec := newSecrets(c.token, m)
	// Invalid UTF-8 is dropped first, so that it cannot split an echo in two.
	s := sec.redact(strings.ToValidUTF8(string(head), ""))
	if len(s) > maxMessageLen {
		s = s[:maxMessageLen] // a rune cut in half is dropped just below
	}
	s = strings.TrimSpace(strings.ToValidUTF8(s, ""))
	if !sec.shows(s) {
		return s
	}
	if !sec.shows(withheld) {
		return withheld
	}
	return "" // a body built to hold the placeholder itself
}

// invalidMessageError is a Message Send refused before sending it. It is
// ErrInvalidMessage and, since sending it again cannot help, Permanent.
type invalidMessageError struct{ detail string }

func invalidMessage(format string, args ...any) error {
	return invalidMessageError{fmt.Sprintf(format, args...)}
}

func (e invalidMessageError) Error() string        { return ErrInvalidMessage.Error() + ": " + e.detail }
func (e invalidMessageError) Is(target error) bool { return target == ErrInvalidMessage }

// Permanent reports true: the message will never go on the wire.
func (e invalidMessageError) Permanent() bool { return true }
