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
	"strings"
	"time"
)

// DefaultTimeout caps one Send when WithTimeout is not given.
const DefaultTimeout = 10 * time.Second

const (
	// maxBodyRead is how much of an answer Send reads before closing it:
	// enough for any error JSON, small enough that a huge body costs nothing.
	maxBodyRead = 4 << 10
	// maxAcceptRead is how much of a 2xx answer is read: an acceptance
	// echoes the message (Twilio's resource puts its sid after a body of
	// up to 1,600 characters, escaped) or lists its parts (Vonage answers
	// one entry per segment, up to 49), and cutting it would lose the
	// provider's id or read an acceptance as an error.
	maxAcceptRead = 64 << 10
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
// Idempotency-Key header and as client_ref (Twilio has no such field;
// Vonage's client-ref). To and Body are sent as they are; the provider
// judges them. Deadline, when set, is when the message stops being worth
// delivering: an adapter whose provider can drop a late message (Twilio's
// ValidityPeriod) passes it on.
//
// Message's String and LogValue mask To and leave Body out, so a Message
// printed or logged by mistake leaks neither.
type Message struct {
	ID, To, Body string
	Deadline     time.Time
	// From is the sender to send from, chosen from the account's sender
	// pool; empty: the adapter's configured sender. Each adapter sends it
	// as its provider names the sender (the generic API's "from", Twilio's
	// From, Vonage's from); like To, the provider judges it.
	From string
}

// Receipt is the provider's acceptance of a Message.
type Receipt struct {
	// ID is the provider's id of the message (Twilio's sid, Vonage's
	// message-id, the generic API's id); empty when the answer had none.
	ID string
	// Parts is every part's id, in order, when the provider names the
	// parts of a long message (Vonage: each part has its own message-id
	// and its own delivery receipt); nil otherwise. ID is still the
	// first part's that the provider accepted.
	Parts []string
}

// Sender sends one Message per call, never retrying: Client, Twilio and
// Vonage.
type Sender interface {
	Send(ctx context.Context, m Message) (Receipt, error)
	// CloseIdleConnections closes idle keep-alive connections; the Sender
	// stays usable.
	CloseIdleConnections()
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

// MaskNumber returns a phone number in the form in which it may be logged
// or shown (docs/design.md, Conventions, rule 6): every character but the
// last 4 becomes '*' and a leading '+' stays, so "+819012345678" reads
// "+********5678". A value of 6 characters or fewer is masked whole, and
// at most 15 '*' stand for the rest.
func MaskNumber(to string) string {
	r := []rune(to)
	if len(r) <= 6 {
		return strings.Repeat("*", len(r))
	}
	prefix := ""
	if r[0] == '+' {
		prefix, r = "+", r[1:]
	}
	return prefix + strings.Repeat("*", min(len(r)-4, 15)) + string(r[len(r)-4:])
}

// Client sends one message per Send call to the provider's generic JSON API
// (docs/contract.md section 3). It is safe for concurrent use. It does not retry:
// the one layer that retries is Pub/Sub redelivery.
type Client struct {
	conn
	endpoint string // {base}/v1/messages; set by NewClient, only read afterwards
}

// conn is what every adapter shares: how it reaches its provider. All
// fields are set by the adapter's constructor and only read afterwards.
type conn struct {
	hc      *http.Client
	timeout time.Duration
	now     func() time.Time
	wrap    func(http.RoundTripper) http.RoundTripper // applied to the default client's transport
	secret  *Secret                                   // WithTokenSecret

	statusCallback string  // WithStatusCallback; "" asks for no receipts
	receiptSecret  *Secret // WithReceiptSecret (the generic Client's)
}

func newConn(opts []Option) conn {
	c := conn{timeout: DefaultTimeout, now: time.Now}
	for _, o := range opts {
		o(&c)
	}
	if c.hc == nil {
		c.hc = defaultHTTPClient()
		if c.wrap != nil {
			c.hc.Transport = c.wrap(c.hc.Transport)
		}
	}
	return c
}

// An Option configures an optional dependency of an adapter (Client,
// Twilio, Vonage).
type Option func(*conn)

// WithHTTPClient makes the Client send through hc. If hc is nil, or the
// option is not given, the Client uses a dedicated http.Client whose
// Transport keeps up to 64 idle connections to the provider, has no
// Client.Timeout (each Send's timeout comes from its context) and does not
// follow redirects.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *conn) { c.hc = hc }
}

// WithTimeout caps each Send at d. The effective cap is the earlier of d and
// the deadline of the context passed to Send. If d is zero or negative,
// DefaultTimeout (10s) is used.
func WithTimeout(d time.Duration) Option {
	return func(c *conn) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithClock makes the Client read the time from now, which only matters for
// a Retry-After given as an HTTP date. If now is nil, time.Now is used.
func WithClock(now func() time.Time) Option {
	return func(c *conn) {
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
	endpoint, err := endpointURL(baseURL, "v1", "messages")
	if err != nil {
		return nil, err
	}
	c := &Client{conn: newConn(opts), endpoint: endpoint}
	if c.secret == nil {
		c.secret = StaticSecret(token)
	}
	if err := checkToken(c.secret.Value()); err != nil {
		return nil, err
	}
	return c, nil
}

// WithTokenSecret makes the generic Client read its token from s at each
// Send, in place of the token given to NewClient: a token file fixed while
// the process runs takes effect with s.Reload. Twilio and Vonage take
// their Secret in their configuration and ignore it.
func WithTokenSecret(s *Secret) Option {
	return func(c *conn) {
		if s != nil {
			c.secret = s
		}
	}
}

// checkToken refuses a token that cannot go in a header, without showing it.
func checkToken(token string) error {
	for i := 0; i < len(token); i++ {
		if token[i] <= ' ' || token[i] >= 0x7f {
			return fmt.Errorf("%w: byte %d is a space, control or non-ASCII character", ErrInvalidToken, i)
		}
	}
	return nil
}

// WithTransportWrapper wraps the default client's tuned transport, for
// instrumentation (tracing, metrics). It is ignored with WithHTTPClient.
// The wrapper must not read the Idempotency-Key header by its canonical
// name (see Send).
func WithTransportWrapper(wrap func(http.RoundTripper) http.RoundTripper) Option {
	return func(c *conn) { c.wrap = wrap }
}

// endpointURL checks a provider's base URL (absolute http or https, a
// host, no user info, query or fragment; a path is kept as a prefix) and
// returns it joined with elem.
func endpointURL(baseURL string, elem ...string) (string, error) {
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
	return u.JoinPath(elem...).String(), nil
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

// CloseIdleConnections closes the idle connections of the adapter's
// http.Client. Call it at shutdown; the adapter stays usable.
func (c *conn) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// wireMessage is the request body of docs/contract.md section 3.
type wireMessage struct {
	To        string `json:"to"`
	Body      string `json:"body"`
	ClientRef string `json:"client_ref"`
	// From is left out when empty, so that a message without a sender of
	// its own goes out byte for byte as before and the provider uses the
	// account's default sender.
	From string `json:"from,omitempty"`
	// StatusCallback is where the provider posts delivery receipts
	// (WithStatusCallback); left out when empty, like From.
	StatusCallback string `json:"status_callback,omitempty"`
}

// Send posts m to the provider once and reports the answer: a Receipt
// (with the answer's "id", when it has one) for 2xx, an *Error for any
// other status, and otherwise a transport or context error wrapped as
// "provider send: ...", which satisfies errors.Is(err,
// context.DeadlineExceeded) when the timeout fired (the context's deadline
// or the Client's cap, whichever came first). A Message with an empty ID,
// or an ID that cannot go in a header, is not sent: Send returns an error
// wrapping ErrInvalidMessage. The body holds to, body, client_ref (m.ID),
// only when m.From is set, from, and only with WithStatusCallback,
// status_callback.
//
// Send reads at most 4 KiB of the answer and closes it, so connections are
// reused.
func (c *Client) Send(ctx context.Context, m Message) (Receipt, error) {
	if err := checkID(m.ID); err != nil {
		return Receipt{}, err
	}
	token := c.secret.Value()
	if err := checkToken(token); err != nil {
		// A token file replaced by one that cannot go in a header: the
		// account's credential is broken, not the message.
		return Receipt{}, &Error{Kind: KindAccount, Message: err.Error()}
	}
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false) // send "<" and "&" as they are; the provider may count bytes
	if err := enc.Encode(wireMessage{To: m.To, Body: m.Body, ClientRef: m.ID, From: m.From, StatusCallback: c.statusCallback}); err != nil {
		return Receipt{}, invalidMessage("encode: %v", err)
	}

	return c.do(ctx, func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, &body)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		// Set under a non-canonical key on purpose: net/http treats a
		// request whose Header map holds "Idempotency-Key" as replayable
		// and silently resends it when a reused connection fails after the
		// request may have reached the provider. That resend would skip
		// admission. Field names are case-insensitive on the wire (and
		// lower case in HTTP/2), so the provider sees the same header.
		req.Header["idempotency-key"] = []string{m.ID}
		return req, nil
	}, func(resp *http.Response, head []byte) (Receipt, error) {
		return c.answer(resp, head, m, token)
	})
}

// do makes the one request of a Send, built by newReq with a context that
// carries the adapter's timeout and a Report, and turns its answer into a
// Receipt or an error with read, which sees at most the first 64 KiB of a
// 2xx answer's body and 4 KiB of any other's. The Report is filled before the body is closed. A failed round
// trip is a transport or context error wrapped by sendError.
func (c *conn) do(ctx context.Context, newReq func(context.Context) (*http.Request, error),
	read func(*http.Response, []byte) (Receipt, error)) (Receipt, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	ctx, rep := withReport(ctx)
	req, err := newReq(ctx)
	if err != nil {
		return Receipt{}, fmt.Errorf("provider send: %w", err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return Receipt{}, sendError(ctx, err)
	}
	limit := int64(maxBodyRead)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		limit = maxAcceptRead
	}
	head, _ := io.ReadAll(io.LimitReader(resp.Body, limit))
	rc, err := read(resp, head)
	rep.fill(rc, err)
	resp.Body.Close()
	return rc, err
}

// answer reads the generic API's answer: 2xx accepts, anything else is an
// *Error whose kind follows from its status.
func (c *Client) answer(resp *http.Response, head []byte, m Message, token string) (Receipt, error) {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		var a struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(head, &a) // the id is optional; an answer without one is still an acceptance
		return Receipt{ID: a.ID}, nil
	}
	e := &Error{Status: resp.StatusCode, Message: excerpt(head, m, token)}
	if e.Throttled() {
		e.RetryAfter = retryAfter(resp.Header, c.now())
	}
	if e.Permanent() {
		var a struct {
			Code string `json:"code"`
		}
		// Only the one code the contract names is kept: any other is the
		// provider's own, and the message's excerpt shows it.
		if json.Unmarshal(head, &a) == nil && a.Code == GenericOptedOut {
			e.Code = GenericOptedOut
		}
	}
	return Receipt{}, e
}

// retryAfter reads a throttle's Retry-After header: DefaultRetryAfter when
// it is missing or does not parse.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if ra, ok := ParseRetryAfter(h.Get("Retry-After"), now); ok {
		return ra
	}
	return DefaultRetryAfter
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
// do echo what they refuse ("+8190... is not a valid number"), so the
// secrets (token, API key), m's number and m's body are taken out before
// the text can reach a log.
func excerpt(head []byte, m Message, secrets ...string) string {
	sec := newSecrets(m, secrets...)
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
