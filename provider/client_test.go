package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const testToken = "tok-S3CRET-0123456789"

// newTestClient returns a Client for srv that closes its idle connections
// when the test ends.
func newTestClient(t *testing.T, baseURL string, opts ...Option) *Client {
	t.Helper()
	c, err := NewClient(baseURL, testToken, opts...)
	if err != nil {
		t.Fatalf("NewClient(%q): %v", baseURL, err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func newServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// checkNoSecrets fails if err's text holds the token, the number or the body.
func checkNoSecrets(t *testing.T, err error, m Message) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
		for _, secret := range []string{testToken, m.To, m.Body} {
			if secret != "" && strings.Contains(s, secret) {
				t.Errorf("error %q holds a secret %q", s, secret)
			}
		}
	}
}

var testMsg = Message{ID: "login-7f3a9c", To: "+819012345678", Body: "Your code is 482913"}

func TestClientSendAnswers(t *testing.T) {
	clock := newFakeClock(t0)
	long := strings.Repeat("x", 300) + "é" // the 2-byte rune straddles byte 300, not 256
	tests := []struct {
		name   string
		status int
		header map[string]string
		body   string
		want   *Error // nil: Send must return nil
	}{
		{name: "200", status: 200, body: `{"id":"p-1"}`},
		{name: "202", status: 202},
		{name: "204", status: 204},
		{name: "2xx with a huge body", status: 200, body: strings.Repeat("y", 1<<20)},
		{name: "429 integer", status: 429, header: map[string]string{"Retry-After": "3"},
			want: &Error{Status: 429, RetryAfter: 3 * time.Second}},
		{name: "429 decimal", status: 429, header: map[string]string{"Retry-After": "0.5"},
			want: &Error{Status: 429, RetryAfter: 500 * time.Millisecond}},
		{name: "429 HTTP date", status: 429, header: map[string]string{"Retry-After": t0.Add(7 * time.Second).Format(http.TimeFormat)},
			want: &Error{Status: 429, RetryAfter: 7 * time.Second}},
		{name: "429 date in the past", status: 429, header: map[string]string{"Retry-After": t0.Add(-time.Minute).Format(http.TimeFormat)},
			want: &Error{Status: 429, RetryAfter: 0}},
		{name: "429 zero", status: 429, header: map[string]string{"Retry-After": "0"},
			want: &Error{Status: 429, RetryAfter: 0}},
		{name: "429 missing", status: 429,
			want: &Error{Status: 429, RetryAfter: time.Second}},
		{name: "429 unparseable", status: 429, header: map[string]string{"Retry-After": "soon"},
			want: &Error{Status: 429, RetryAfter: time.Second}},
		{name: "429 negative", status: 429, header: map[string]string{"Retry-After": "-5"},
			want: &Error{Status: 429, RetryAfter: time.Second}},
		{name: "429 absurd", status: 429, header: map[string]string{"Retry-After": "31536000"},
			want: &Error{Status: 429, RetryAfter: 24 * time.Hour}},
		{name: "429 with body", status: 429, header: map[string]string{"Retry-After": "2"}, body: `{"error":"slow down"}`,
			want: &Error{Status: 429, RetryAfter: 2 * time.Second, Message: `{"error":"slow down"}`}},
		{name: "400", status: 400, body: "invalid number\n",
			want: &Error{Status: 400, Message: "invalid number"}},
		{name: "400 ignores Retry-After", status: 400, header: map[string]string{"Retry-After": "9"},
			want: &Error{Status: 400}},
		{name: "401", status: 401, want: &Error{Status: 401}},
		{name: "503", status: 503, body: "maintenance", header: map[string]string{"Retry-After": "30"},
			want: &Error{Status: 503, Message: "maintenance"}},
		{name: "500", status: 500, want: &Error{Status: 500}},
		{name: "302 is not followed", status: 302, header: map[string]string{"Location": "/elsewhere"},
			want: &Error{Status: 302}},
		{name: "message capped at 256 bytes", status: 400, body: long,
			want: &Error{Status: 400, Message: strings.Repeat("x", 256)}},
		{name: "invalid UTF-8 dropped", status: 400, body: "bad\xff\xfenumber",
			want: &Error{Status: 400, Message: "badnumber"}},
		{name: "echoed token redacted", status: 401, body: "token " + testToken + " is unknown",
			want: &Error{Status: 401, Message: "token [redacted] is unknown"}},
		{name: "echoed number masked", status: 400, body: `{"error":"+819012345678 (819012345678) is not mobile"}`,
			want: &Error{Status: 400, Message: `{"error":"+********5678 (********5678) is not mobile"}`}},
		{name: "echoed body redacted", status: 400, body: `body "Your code is 482913" has a bad word`,
			want: &Error{Status: 400, Message: `body "[body]" has a bad word`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			c := newTestClient(t, srv.URL, WithClock(clock.Now))
			_, err := c.Send(context.Background(), testMsg)
			checkNoSecrets(t, err, testMsg)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Send = %v, want nil", err)
				}
				return
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Send = %v (%T), want *Error", err, err)
			}
			if *pe != *tt.want {
				t.Errorf("Send = %#v, want %#v", *pe, *tt.want)
			}
		})
	}
}

func TestErrorClass(t *testing.T) {
	tests := []struct {
		e    Error
		want Kind
	}{
		{Error{Status: 429}, KindThrottled},
		{Error{Status: 400}, KindRefused},
		{Error{Status: 401}, KindAccount}, // the credential, not the message
		{Error{Status: 403}, KindAccount},
		{Error{Status: 404}, KindRefused},
		{Error{Status: 413}, KindRefused},
		{Error{Status: 499}, KindRefused},
		{Error{Status: 500}, KindTemporary},
		{Error{Status: 502}, KindTemporary},
		{Error{Status: 503}, KindTemporary},
		{Error{Status: 599}, KindTemporary},
		{Error{Status: 302}, KindTemporary},
		{Error{Status: 101}, KindTemporary},
		{Error{Status: 600}, KindTemporary},
		// An adapter's own reading wins over the status.
		{Error{Status: 200, Code: "1", Kind: KindThrottled}, KindThrottled},
		{Error{Status: 400, Code: "21211", Kind: KindRefused}, KindRefused},
		{Error{Status: 200, Code: "9", Kind: KindAccount}, KindAccount},
		{Error{Status: 200, Code: "5", Kind: KindTemporary}, KindTemporary},
	}
	for _, tt := range tests {
		e := tt.e
		got := []bool{e.Throttled(), e.Permanent(), e.AccountFailure(), e.Temporary()}
		want := []bool{tt.want == KindThrottled, tt.want == KindRefused, tt.want == KindAccount, tt.want == KindTemporary}
		if e.Meaning() != tt.want || !slices.Equal(got, want) {
			t.Errorf("%+v: Meaning %v, Throttled, Permanent, AccountFailure, Temporary = %v; want %v, %v", e, e.Meaning(), got, tt.want, want)
		}
	}
}

func TestErrorText(t *testing.T) {
	tests := []struct {
		e    Error
		want string
	}{
		{Error{Status: 429, RetryAfter: 1500 * time.Millisecond}, "provider: status 429 (retry after 1.5s)"},
		{Error{Status: 400, Message: "bad number"}, "provider: status 400: bad number"},
		{Error{Status: 503}, "provider: status 503"},
		{Error{Provider: "twilio", Status: 429, Code: "20429", Kind: KindThrottled, RetryAfter: time.Second, Message: "Too Many Requests"},
			"provider: twilio status 429 code 20429 (retry after 1s): Too Many Requests"},
		{Error{Provider: "vonage", Status: 200, Code: "4", Kind: KindAccount, Message: "Bad Credentials"}, "provider: vonage status 200 code 4: Bad Credentials"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

// capture is what a handler saw of a request.
type capture struct {
	method, path string
	header       http.Header
	body         []byte
}

func TestClientRequest(t *testing.T) {
	tests := []struct {
		name     string
		base     string // appended to the server's URL
		token    string
		msg      Message
		wantPath string
	}{
		{"plain", "", testToken, testMsg, "/v1/messages"},
		{"base with path", "/sms/", testToken, testMsg, "/sms/v1/messages"},
		{"base with path, no slash", "/sms", testToken, testMsg, "/sms/v1/messages"},
		{"no token", "", "", testMsg, "/v1/messages"},
		{"HTML and unicode kept as they are", "", testToken,
			Message{ID: "m-<1>", To: "+12025550123", Body: "a<b & c>d 日本 \"q\""}, "/v1/messages"},
		{"from the sender pool", "", testToken,
			Message{ID: "pool-1", To: "+819012345678", Body: "Your code is 482913", From: "+18885550100"}, "/v1/messages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make(chan capture, 1)
			srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got <- capture{r.Method, r.URL.Path, r.Header.Clone(), b}
				w.WriteHeader(http.StatusAccepted)
			}))
			c, err := NewClient(srv.URL+tt.base, tt.token)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.CloseIdleConnections)
			if _, err := c.Send(context.Background(), tt.msg); err != nil {
				t.Fatalf("Send: %v", err)
			}
			var req capture
			select {
			case req = <-got:
			default:
				t.Fatal("the server saw no request")
			}
			if req.method != http.MethodPost || req.path != tt.wantPath {
				t.Errorf("request %s %s, want POST %s", req.method, req.path, tt.wantPath)
			}
			wantHeader := map[string]string{
				"Content-Type":    "application/json",
				"Idempotency-Key": tt.msg.ID,
				"Authorization":   "Bearer " + tt.token,
			}
			if tt.token == "" {
				wantHeader["Authorization"] = ""
			}
			for k, want := range wantHeader {
				if got := req.header.Get(k); got != want {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
			if n := len(req.header.Values("Idempotency-Key")); n != 1 {
				t.Errorf("Idempotency-Key sent %d times, want once", n)
			}
			var body map[string]any
			if err := json.Unmarshal(req.body, &body); err != nil {
				t.Fatalf("body %q is not JSON: %v", req.body, err)
			}
			want := map[string]any{"to": tt.msg.To, "body": tt.msg.Body, "client_ref": tt.msg.ID}
			if tt.msg.From != "" {
				want["from"] = tt.msg.From // and absent otherwise: the maps must match
			}
			if fmt.Sprint(body) != fmt.Sprint(want) {
				t.Errorf("body = %v, want %v", body, want)
			}
			if !strings.Contains(string(req.body), tt.msg.Body[:min(len(tt.msg.Body), 8)]) {
				t.Errorf("body %q escapes the text", req.body)
			}
		})
	}
}

// TestClientFromOnlyWhenSet checks the body byte for byte: without a
// From it is what it was before senders had pools, and a From is added
// after the rest.
func TestClientFromOnlyWhenSet(t *testing.T) {
	tests := []struct {
		name string
		from string
		want string
	}{
		{"no From", "", `{"to":"+819012345678","body":"Your code is 482913","client_ref":"login-7f3a9c"}` + "\n"},
		{"From", "+18885550100", `{"to":"+819012345678","body":"Your code is 482913","client_ref":"login-7f3a9c","from":"+18885550100"}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make(chan string, 1)
			srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got <- string(b)
			}))
			m := testMsg
			m.From = tt.from
			if _, err := newTestClient(t, srv.URL).Send(context.Background(), m); err != nil {
				t.Fatalf("Send: %v", err)
			}
			if body := <-got; body != tt.want {
				t.Errorf("body %q, want %q", body, tt.want)
			}
		})
	}
}

func TestClientTimeout(t *testing.T) {
	tests := []struct {
		name     string
		opts     []Option
		ctx      func() (context.Context, context.CancelFunc)
		wantErr  error
		noSecret bool
	}{
		{
			name:    "client cap",
			opts:    []Option{WithTimeout(30 * time.Millisecond)},
			ctx:     func() (context.Context, context.CancelFunc) { return context.Background(), func() {} },
			wantErr: context.DeadlineExceeded,
		},
		{
			name: "context deadline shorter than the cap",
			opts: []Option{WithTimeout(time.Hour)},
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 30*time.Millisecond)
			},
			wantErr: context.DeadlineExceeded,
		},
		{
			name: "context already past its deadline",
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
			},
			wantErr: context.DeadlineExceeded,
		},
		{
			name: "context cancelled",
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx, cancel
			},
			wantErr: context.Canceled,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// A provider that reads the request and never answers. The
				// body must be read: only then does net/http watch the
				// connection and end r.Context() when the client goes.
				io.Copy(io.Discard, r.Body)
				<-r.Context().Done()
			}))
			c := newTestClient(t, srv.URL, tt.opts...)
			ctx, cancel := tt.ctx()
			defer cancel()
			_, err := c.Send(ctx, testMsg)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Send = %v, want errors.Is %v", err, tt.wantErr)
			}
			var pe *Error
			if errors.As(err, &pe) {
				t.Errorf("Send = %v: a timeout must not be an *Error", err)
			}
			if !strings.HasPrefix(err.Error(), "provider send: ") {
				t.Errorf("Send = %q, want it wrapped as provider send: ...", err)
			}
			checkNoSecrets(t, err, testMsg)
		})
	}
}

func TestClientConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now
	c := newTestClient(t, url)
	_, err := c.Send(context.Background(), testMsg)
	if err == nil {
		t.Fatal("Send to a closed port = nil")
	}
	var pe *Error
	if errors.As(err, &pe) {
		t.Errorf("Send = %v: a connection error must not be an *Error", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Send = %v: not a timeout", err)
	}
	if !strings.HasPrefix(err.Error(), "provider send: ") {
		t.Errorf("Send = %q, want it wrapped as provider send: ...", err)
	}
	checkNoSecrets(t, err, testMsg)
}

// TestClientNoReplay checks that when a reused connection dies after the
// request went out, Send reports the error instead of letting net/http
// resend it (which it does for requests carrying Idempotency-Key).
func TestClientNoReplay(t *testing.T) {
	var (
		mu       sync.Mutex
		seen     = map[string]int{} // requests per client connection
		arrivals atomic.Int64
	)
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrivals.Add(1)
		mu.Lock()
		seen[r.RemoteAddr]++
		again := seen[r.RemoteAddr] > 1
		mu.Unlock()
		if !again {
			w.WriteHeader(http.StatusOK)
			return
		}
		// The request reached us on a reused connection: hang up unanswered.
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	c := newTestClient(t, srv.URL)
	for range 50 {
		var reused []bool
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = append(reused, info.Reused) },
		})
		before := arrivals.Load()
		_, err := c.Send(ctx, testMsg)
		after := arrivals.Load()
		if len(reused) == 0 || !reused[0] {
			continue // a fresh connection: nothing to test this time
		}
		if err == nil || after-before != 1 || len(reused) != 1 {
			t.Fatalf("on a dying reused connection: Send = %v, arrivals %d, connections %d; want an error, 1, 1",
				err, after-before, len(reused))
		}
		return
	}
	t.Fatal("no Send went out on a reused connection in 50 tries")
}

func TestClientInvalidMessage(t *testing.T) {
	var hits atomic.Int64
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	c := newTestClient(t, srv.URL)
	for _, id := range []string{"", "a\nb", "a\rb", "nul\x00", "del\x7f"} {
		m := testMsg
		m.ID = id
		_, err := c.Send(context.Background(), m)
		if p, ok := errors.AsType[interface {
			error
			Permanent() bool
		}](err); !errors.Is(err, ErrInvalidMessage) || !ok || !p.Permanent() {
			t.Errorf("Send with ID %q = %v, want ErrInvalidMessage, permanent", id, err)
		}
		checkNoSecrets(t, err, m)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server saw %d requests, want 0", n)
	}
}

func TestNewClient(t *testing.T) {
	tests := []struct {
		base, token string
		wantErr     error
		wantText    string // in the error
	}{
		{base: "http://127.0.0.1:8080", token: testToken},
		{base: "https://api.example.com/sms/", token: testToken},
		{base: "http://localhost", token: ""},
		{base: "", wantErr: ErrInvalidURL, wantText: "empty"},
		{base: "api.example.com", wantErr: ErrInvalidURL, wantText: `scheme "" is not http or https`},
		{base: "/v1", wantErr: ErrInvalidURL, wantText: `scheme ""`},
		{base: "localhost:8080", wantErr: ErrInvalidURL, wantText: `scheme "localhost"`},
		{base: "ftp://example.com", wantErr: ErrInvalidURL, wantText: `scheme "ftp"`},
		{base: "http://", wantErr: ErrInvalidURL, wantText: "no host"},
		{base: "http:example.com", wantErr: ErrInvalidURL, wantText: "no host"},
		{base: "http://user:hunter2@example.com", wantErr: ErrInvalidURL, wantText: "user info"},
		{base: "http://example.com?k=v", wantErr: ErrInvalidURL, wantText: "query"},
		{base: "http://example.com#top", wantErr: ErrInvalidURL, wantText: "fragment"},
		{base: "http://hunter2@exa mple.com", wantErr: ErrInvalidURL, wantText: "does not parse"},
		{base: "http://x.com", token: "two words", wantErr: ErrInvalidToken, wantText: "byte 3"},
		{base: "http://x.com", token: "tok\r\nX-Evil: 1", wantErr: ErrInvalidToken},
		{base: "http://x.com", token: "naïve", wantErr: ErrInvalidToken},
	}
	for _, tt := range tests {
		c, err := NewClient(tt.base, tt.token)
		if tt.wantErr == nil {
			if err != nil || c == nil {
				t.Errorf("NewClient(%q) = %v, %v; want a Client", tt.base, c, err)
			}
			continue
		}
		if !errors.Is(err, tt.wantErr) || !strings.Contains(fmt.Sprint(err), tt.wantText) {
			t.Errorf("NewClient(%q) = %v; want %v naming %q", tt.base, err, tt.wantErr, tt.wantText)
		}
		if err != nil && (strings.Contains(err.Error(), "hunter2") || (tt.token != "" && strings.Contains(err.Error(), tt.token))) {
			t.Errorf("NewClient(%q) error %q shows a secret", tt.base, err)
		}
	}
}

func TestMessageHidesSecrets(t *testing.T) {
	m := testMsg
	var b strings.Builder
	fmt.Fprintf(&b, "%v %+v %s", m, m, m)
	b.WriteString(m.LogValue().String())
	out := b.String()
	for _, secret := range []string{m.To, m.Body} {
		if strings.Contains(out, secret) {
			t.Errorf("%q shows %q", out, secret)
		}
	}
	if !strings.Contains(out, "5678") || !strings.Contains(out, m.ID) {
		t.Errorf("%q lost the ID or the last 4 digits", out)
	}
}

func TestMaskNumber(t *testing.T) {
	for in, want := range map[string]string{
		"+819012345678": "+********5678",
		"1234":          "****",
		"":              "",
		"+12":           "***",
	} {
		if got := MaskNumber(in); got != want {
			t.Errorf("MaskNumber(%q) = %q, want %q", in, got, want)
		}
	}
}
