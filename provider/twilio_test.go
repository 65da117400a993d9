package provider

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	testTwilioSID  = "AC0123456789abcdef0123456789abcdef"
	testTwilioFrom = "+15005550006"
	testTwilioMG   = "MG0123456789abcdef0123456789abcdef"
)

// twMsg is testMsg with a number that shares no run of 5 digits with the
// documented answers (21211's "5551234567"), which excerpt would mask.
var twMsg = Message{ID: "login-7f3a9c", To: "+819087654321", Body: "Your code is 482913"}

var _ Sender = (*Twilio)(nil)

// newTestTwilio returns a Twilio for baseURL sending from testTwilioFrom
// with testToken, after edit (if any) changed the configuration.
func newTestTwilio(t *testing.T, baseURL string, edit func(*TwilioConfig), opts ...Option) *Twilio {
	t.Helper()
	cfg := TwilioConfig{AccountSID: testTwilioSID, AuthToken: StaticSecret(testToken), From: testTwilioFrom, BaseURL: baseURL}
	if edit != nil {
		edit(&cfg)
	}
	tw, err := NewTwilio(cfg, opts...)
	if err != nil {
		t.Fatalf("NewTwilio: %v", err)
	}
	t.Cleanup(tw.CloseIdleConnections)
	return tw
}

// twilioFixture returns a file of testdata/twilio (see its README for the
// page each comes from).
func twilioFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "twilio", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// seenRequest is what a test server saw of one request.
type seenRequest struct {
	method, path, contentType string
	user, pass                string
	basicOK                   bool
	form                      url.Values
	header                    http.Header
}

func TestTwilioRequest(t *testing.T) {
	clock := newFakeClock(t0)
	const poolFrom = "+18885550100"
	tests := []struct {
		name     string
		edit     func(*TwilioConfig)
		from     string // Message.From
		deadline time.Time
		wantPath string
		want     url.Values
	}{
		{name: "From, no deadline",
			want: url.Values{"To": {twMsg.To}, "Body": {twMsg.Body}, "From": {testTwilioFrom}}},
		{name: "MessagingServiceSid", edit: func(c *TwilioConfig) { c.From, c.MessagingServiceSID = "", testTwilioMG },
			want: url.Values{"To": {twMsg.To}, "Body": {twMsg.Body}, "MessagingServiceSid": {testTwilioMG}}},
		{name: "the Message's From replaces the configured one", from: poolFrom,
			want: url.Values{"To": {twMsg.To}, "Body": {twMsg.Body}, "From": {poolFrom}}},
		{name: "the Message's From goes with the Messaging Service", from: poolFrom,
			edit: func(c *TwilioConfig) { c.From, c.MessagingServiceSID = "", testTwilioMG },
			want: url.Values{"To": {twMsg.To}, "Body": {twMsg.Body}, "From": {poolFrom}, "MessagingServiceSid": {testTwilioMG}}},
		{name: "deadline in 90.7 s is 90 s, rounded down", deadline: t0.Add(90700 * time.Millisecond),
			want: url.Values{"To": {twMsg.To}, "Body": {twMsg.Body}, "From": {testTwilioFrom}, "ValidityPeriod": {"90"}}},
		{name: "deadline in 20 h is cut to 36000 s", deadline: t0.Add(20 * time.Hour),
			want: url.Values{"To": {twMsg.To}, "Body": {twMsg.Body}, "From": {testTwilioFrom}, "ValidityPeriod": {"36000"}}},
		{name: "deadline in 0.3 s is raised to 1 s", deadline: t0.Add(300 * time.Millisecond),
			want: url.Values{"To": {twMsg.To}, "Body": {twMsg.Body}, "From": {testTwilioFrom}, "ValidityPeriod": {"1"}}},
		{name: "deadline passed is 1 s", deadline: t0.Add(-time.Minute),
			want: url.Values{"To": {twMsg.To}, "Body": {twMsg.Body}, "From": {testTwilioFrom}, "ValidityPeriod": {"1"}}},
		{name: "base URL path is a prefix", edit: func(c *TwilioConfig) { c.BaseURL += "/proxy/" },
			wantPath: "/proxy/2010-04-01/Accounts/" + testTwilioSID + "/Messages.json",
			want:     url.Values{"To": {twMsg.To}, "Body": {twMsg.Body}, "From": {testTwilioFrom}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen []seenRequest
			var mu sync.Mutex
			srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				s := seenRequest{method: r.Method, path: r.URL.Path, contentType: r.Header.Get("Content-Type"), header: r.Header.Clone()}
				s.user, s.pass, s.basicOK = r.BasicAuth()
				r.ParseForm()
				s.form = r.PostForm
				mu.Lock()
				seen = append(seen, s)
				mu.Unlock()
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, twilioFixture(t, "message_created.json"))
			}))
			tw := newTestTwilio(t, srv.URL, tt.edit, WithClock(clock.Now))
			m := twMsg
			m.Deadline, m.From = tt.deadline, tt.from
			rc, err := tw.Send(context.Background(), m)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			if rc.ID != "SM1f0e8ae6ade43cb3c0ce4525424e404f" {
				t.Errorf("Receipt %+v, want the answer's sid", rc)
			}
			if len(seen) != 1 {
				t.Fatalf("%d requests, want 1", len(seen))
			}
			s := seen[0]
			wantPath := tt.wantPath
			if wantPath == "" {
				wantPath = "/2010-04-01/Accounts/" + testTwilioSID + "/Messages.json"
			}
			if s.method != http.MethodPost || s.path != wantPath {
				t.Errorf("request %s %s, want POST %s", s.method, s.path, wantPath)
			}
			if !s.basicOK || s.user != testTwilioSID || s.pass != testToken {
				t.Errorf("Basic auth (%q, %q, %v), want the account SID and the token", s.user, s.pass, s.basicOK)
			}
			if s.contentType != "application/x-www-form-urlencoded" {
				t.Errorf("Content-Type %q", s.contentType)
			}
			if fmt.Sprint(s.form) != fmt.Sprint(tt.want) {
				t.Errorf("form %v, want %v", s.form, tt.want)
			}
			for k := range s.header {
				if strings.Contains(strings.ToLower(k), "idempotency") {
					t.Errorf("header %s: Twilio has no idempotency key", k)
				}
			}
		})
	}
}

func TestTwilioAnswers(t *testing.T) {
	clock := newFakeClock(t0)
	sidFirst := `{"sid": "SM00000000000000000000000000000042", "body": "` + strings.Repeat("x", 8<<10) + `"}`
	tests := []struct {
		name    string
		status  int
		header  map[string]string
		body    string // a file of testdata/twilio, or the body itself
		receipt Receipt
		want    *Error // nil: accepted; Message is checked apart
	}{
		{name: "201 Message resource", status: 201, body: "message_created.json",
			receipt: Receipt{ID: "SM1f0e8ae6ade43cb3c0ce4525424e404f"}},
		{name: "200 is an acceptance too", status: 200, body: "message_created.json",
			receipt: Receipt{ID: "SM1f0e8ae6ade43cb3c0ce4525424e404f"}},
		{name: "201 longer than what Send reads, sid first", status: 201, body: sidFirst,
			receipt: Receipt{ID: "SM00000000000000000000000000000042"}},
		{name: "201 without a body", status: 201},

		{name: "429 20429 with Retry-After", status: 429, header: map[string]string{"Retry-After": "3"}, body: "20429_too_many_requests.json",
			want: &Error{Status: 429, Code: "20429", Kind: KindThrottled, RetryAfter: 3 * time.Second}},
		{name: "429 20429 without Retry-After", status: 429, body: "20429_too_many_requests.json",
			want: &Error{Status: 429, Code: "20429", Kind: KindThrottled, RetryAfter: time.Second}},
		{name: "429 without a body", status: 429,
			want: &Error{Status: 429, Kind: KindThrottled, RetryAfter: time.Second}},
		{name: "400 21611 queue full is a throttle", status: 400, body: "21611_queue_full.json",
			want: &Error{Status: 400, Code: "21611", Kind: KindThrottled, RetryAfter: time.Second}},

		{name: "401 20003", status: 401, body: "20003_authenticate.json",
			want: &Error{Status: 401, Code: "20003", Kind: KindAccount}},
		{name: "401 20005 account not active", status: 401, body: "20005_account_not_active.json",
			want: &Error{Status: 401, Code: "20005", Kind: KindAccount}},
		{name: "401 10001 account not active", status: 401, body: "10001_account_not_active.json",
			want: &Error{Status: 401, Code: "10001", Kind: KindAccount}},
		{name: "403 20403 suspended or closed", status: 403, body: "20403_forbidden.json",
			want: &Error{Status: 403, Code: "20403", Kind: KindAccount}},
		{name: "403 90010 suspended", status: 403, body: "90010_account_not_active.json",
			want: &Error{Status: 403, Code: "90010", Kind: KindAccount}},
		{name: "20005 whatever the status", status: 400, body: `{"code": 20005, "message": "Account not active", "status": 400}`,
			want: &Error{Status: 400, Code: "20005", Kind: KindAccount}},
		{name: "403 without a Twilio code", status: 403, body: "Forbidden",
			want: &Error{Status: 403, Kind: KindAccount}},
		{name: "404 20404: the URL is wrong", status: 404, body: "20404_not_found.json",
			want: &Error{Status: 404, Code: "20404", Kind: KindAccount}},
		{name: "405", status: 405,
			want: &Error{Status: 405, Kind: KindAccount}},

		{name: "400 21211", status: 400, body: "21211_invalid_to.json",
			want: &Error{Status: 400, Code: "21211", Kind: KindRefused}},
		{name: "400 21408", status: 400, body: "21408_region_not_enabled.json",
			want: &Error{Status: 400, Code: "21408", Kind: KindRefused}},
		{name: "400 21610", status: 400, body: "21610_unsubscribed.json",
			want: &Error{Status: 400, Code: "21610", Kind: KindRefused}},
		{name: "400 21614", status: 400, body: "21614_not_mobile.json",
			want: &Error{Status: 400, Code: "21614", Kind: KindRefused}},
		{name: "400 code as a string", status: 400, body: `{"code": "21614", "status": 400}`,
			want: &Error{Status: 400, Code: "21614", Kind: KindRefused}},
		{name: "400 code null", status: 400, body: `{"code": null, "message": "Bad Request", "status": 400}`,
			want: &Error{Status: 400, Kind: KindRefused}},
		{name: "400 ignores Retry-After", status: 400, header: map[string]string{"Retry-After": "9"}, body: "21211_invalid_to.json",
			want: &Error{Status: 400, Code: "21211", Kind: KindRefused}},

		{name: "500 20500", status: 500, body: "20500_internal_error.json",
			want: &Error{Status: 500, Code: "20500", Kind: KindTemporary}},
		{name: "503 without a body", status: 503,
			want: &Error{Status: 503, Kind: KindTemporary}},
		{name: "302 is not followed", status: 302, header: map[string]string{"Location": "/elsewhere"},
			want: &Error{Status: 302, Kind: KindTemporary}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.body
			if strings.HasSuffix(body, ".json") {
				body = twilioFixture(t, body)
			}
			srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, body)
			}))
			tw := newTestTwilio(t, srv.URL, nil, WithClock(clock.Now))
			rc, err := tw.Send(context.Background(), twMsg)
			checkNoSecrets(t, err, twMsg)
			if tt.want == nil {
				if err != nil || !reflect.DeepEqual(rc, tt.receipt) {
					t.Fatalf("Send = %+v, %v; want %+v, nil", rc, err, tt.receipt)
				}
				return
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Send = %v (%T), want *Error", err, err)
			}
			want := *tt.want
			want.Provider = "twilio"
			want.Message = strings.TrimSpace(body)
			if *pe != want {
				t.Errorf("Send = %#v,\nwant %#v", *pe, want)
			}
			if pe.Meaning() != want.Kind {
				t.Errorf("Meaning() = %v, want %v", pe.Meaning(), want.Kind)
			}
			// 21610 alone says the recipient opted out of the sender.
			if got, wantOut := pe.OptedOut(), want.Code == "21610"; got != wantOut {
				t.Errorf("OptedOut() = %v, want %v", got, wantOut)
			}
		})
	}
}

// TestTwilioReportsThrottleIn400 checks that a 21611 (a 400) reaches the
// instrument of the HTTP client as a throttle, so that metrics and traces
// count it as a 429.
func TestTwilioReportsThrottleIn400(t *testing.T) {
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, twilioFixture(t, "21611_queue_full.json"))
	}))
	var rep *Report
	wrap := func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			rep = ReportOf(r.Context())
			return next.RoundTrip(r)
		})
	}
	tw := newTestTwilio(t, srv.URL, nil, WithTransportWrapper(wrap))
	if _, err := tw.Send(context.Background(), twMsg); err == nil {
		t.Fatal("Send = nil, want a throttle")
	}
	if rep == nil || !rep.Filled || rep.Err == nil || !rep.Err.Throttled() || rep.Err.Code != "21611" {
		t.Errorf("Report = %+v, want a filled throttle with code 21611", rep)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestTwilioReloadsTokenOnAccountFailure checks that a 401 reloads the token
// file, so that the token fixed in it is used at the next Send, and that
// other answers do not.
func TestTwilioReloadsTokenOnAccountFailure(t *testing.T) {
	const oldToken, newToken = "old0token0000000000000", "new0token0000000000000"
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(oldToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secret, err := FileSecret(path)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var used []string
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pass, _ := r.BasicAuth()
		r.ParseForm()
		mu.Lock()
		used = append(used, pass)
		mu.Unlock()
		switch {
		case pass != newToken:
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, twilioFixture(t, "20003_authenticate.json"))
		case r.PostForm.Get("To") == "+15005550001":
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, twilioFixture(t, "21211_invalid_to.json"))
		default:
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, twilioFixture(t, "message_created.json"))
		}
	}))
	tw := newTestTwilio(t, srv.URL, func(c *TwilioConfig) { c.AuthToken = secret })

	// The operator fixes the file; the process still holds the old token.
	if err := os.WriteFile(path, []byte(newToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = tw.Send(context.Background(), twMsg)
	if pe, ok := errors.AsType[*Error](err); !ok || !pe.AccountFailure() || pe.Code != "20003" {
		t.Fatalf("Send with the old token = %v, want an account failure 20003", err)
	}
	if _, err := tw.Send(context.Background(), twMsg); err != nil {
		t.Fatalf("Send after the account failure = %v, want accepted with the reloaded token", err)
	}
	// A refusal of the message does not reload: a token written now is
	// not used.
	if err := os.WriteFile(path, []byte("later0token00000000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := twMsg
	bad.To = "+15005550001"
	if _, err := tw.Send(context.Background(), bad); !isKind(err, KindRefused) {
		t.Fatalf("Send to a bad number = %v, want refused", err)
	}
	if _, err := tw.Send(context.Background(), twMsg); err != nil {
		t.Fatalf("Send after a refusal = %v, want accepted with the token in use", err)
	}
	want := []string{oldToken, newToken, newToken, newToken}
	if !slices.Equal(used, want) {
		t.Errorf("tokens used %q, want %q", used, want)
	}
}

func isKind(err error, k Kind) bool {
	pe, ok := errors.AsType[*Error](err)
	return ok && pe.Meaning() == k
}

// TestTwilioBrokenTokenFile checks that a token file replaced by one that
// cannot go in a header is an account failure, sent nowhere.
func TestTwilioBrokenTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(testToken), 0o600); err != nil {
		t.Fatal(err)
	}
	secret, err := FileSecret(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("a request was sent with a broken token")
	}))
	tw := newTestTwilio(t, srv.URL, func(c *TwilioConfig) { c.AuthToken = secret })
	const broken = "tok with spaces 0123456789"
	if err := os.WriteFile(path, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := secret.Reload(); err != nil {
		t.Fatal(err)
	}
	_, err = tw.Send(context.Background(), twMsg)
	if !isKind(err, KindAccount) || !errors.Is(err, ErrInvalidToken) && !strings.Contains(err.Error(), "invalid token") {
		t.Errorf("Send = %v, want an account failure for an invalid token", err)
	}
	if err != nil && strings.Contains(err.Error(), broken) {
		t.Errorf("error %q shows the token", err)
	}
}

// TestTwilioNoCredentialsInErrors checks that neither the token nor the
// Basic credential reaches an error, even from an answer that echoes the
// Authorization header and the token.
func TestTwilioNoCredentialsInErrors(t *testing.T) {
	basic := base64.StdEncoding.EncodeToString([]byte(testTwilioSID + ":" + testToken))
	for _, status := range []int{400, 401, 403, 429, 500} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, pass, _ := r.BasicAuth()
				w.WriteHeader(status)
				fmt.Fprintf(w, `{"code": 20003, "message": "Authorization: %s; user:pass %s:%s; token %q", "status": %d}`,
					r.Header.Get("Authorization"), testTwilioSID, pass, pass, status)
			}))
			tw := newTestTwilio(t, srv.URL, nil)
			_, err := tw.Send(context.Background(), twMsg)
			pe, ok := errors.AsType[*Error](err)
			if !ok {
				t.Fatalf("Send = %v, want *Error", err)
			}
			for _, s := range []string{err.Error(), pe.Message, fmt.Sprintf("%#v", pe)} {
				for _, secret := range []string{testToken, basic, basic[len(basic)/2:]} {
					if strings.Contains(s, secret) {
						t.Errorf("%q holds %q", s, secret)
					}
				}
			}
			if !strings.Contains(pe.Message, "[redacted]") {
				t.Errorf("Message %q: want the echoes redacted, not dropped", pe.Message)
			}
		})
	}
}

func TestNewTwilioValidates(t *testing.T) {
	good := func() TwilioConfig {
		return TwilioConfig{AccountSID: testTwilioSID, AuthToken: StaticSecret(testToken), From: testTwilioFrom}
	}
	tests := []struct {
		name   string
		edit   func(*TwilioConfig)
		field  string // in the error; "" for success
		target error  // errors.Is, when not nil
	}{
		{name: "good, default URL", edit: func(*TwilioConfig) {}},
		{name: "good, messaging service", edit: func(c *TwilioConfig) { c.From, c.MessagingServiceSID = "", testTwilioMG }},
		{name: "good, base URL with a path", edit: func(c *TwilioConfig) { c.BaseURL = "http://127.0.0.1:8080/twilio" }},
		{name: "no account SID", edit: func(c *TwilioConfig) { c.AccountSID = "" }, field: "AccountSID"},
		{name: "account SID with a colon", edit: func(c *TwilioConfig) { c.AccountSID = "AC12:34" }, field: "AccountSID"},
		{name: "account SID with a slash", edit: func(c *TwilioConfig) { c.AccountSID = "AC12/34" }, field: "AccountSID"},
		{name: "account SID with a newline", edit: func(c *TwilioConfig) { c.AccountSID = "AC1234\n" }, field: "AccountSID"},
		{name: "nil token", edit: func(c *TwilioConfig) { c.AuthToken = nil }, field: "AuthToken", target: ErrInvalidToken},
		{name: "empty token", edit: func(c *TwilioConfig) { c.AuthToken = StaticSecret("") }, field: "AuthToken", target: ErrInvalidToken},
		{name: "token with a space", edit: func(c *TwilioConfig) { c.AuthToken = StaticSecret("s3cret token") }, field: "AuthToken", target: ErrInvalidToken},
		{name: "neither From nor service", edit: func(c *TwilioConfig) { c.From = "" }, field: "From and MessagingServiceSID"},
		{name: "both From and service", edit: func(c *TwilioConfig) { c.MessagingServiceSID = testTwilioMG }, field: "From and MessagingServiceSID"},
		{name: "service SID with a space", edit: func(c *TwilioConfig) { c.From, c.MessagingServiceSID = "", "MG 1" }, field: "MessagingServiceSID"},
		{name: "base URL ftp", edit: func(c *TwilioConfig) { c.BaseURL = "ftp://api.twilio.com" }, field: "BaseURL", target: ErrInvalidURL},
		{name: "base URL with user info", edit: func(c *TwilioConfig) { c.BaseURL = "https://u:" + testToken + "@api.twilio.com" }, field: "BaseURL", target: ErrInvalidURL},
		{name: "base URL with a query", edit: func(c *TwilioConfig) { c.BaseURL = "https://api.twilio.com/?x=1" }, field: "BaseURL", target: ErrInvalidURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good()
			tt.edit(&cfg)
			tw, err := NewTwilio(cfg)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("NewTwilio = %v", err)
				}
				tw.CloseIdleConnections()
				return
			}
			if err == nil {
				t.Fatal("NewTwilio = nil error")
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error %q does not name %s", err, tt.field)
			}
			if tt.target != nil && !errors.Is(err, tt.target) {
				t.Errorf("error %q is not %v", err, tt.target)
			}
			for _, secret := range []string{testToken, "s3cret token"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q shows the token", err)
				}
			}
		})
	}
}

func TestTwilioValidityPeriod(t *testing.T) {
	for _, tt := range []struct {
		left time.Duration
		want int
	}{
		{-time.Hour, 1}, {0, 1}, {999 * time.Millisecond, 1}, {time.Second, 1}, {1999 * time.Millisecond, 1},
		{2 * time.Second, 2}, {10 * time.Hour, 36000}, {10*time.Hour + time.Second, 36000}, {1 << 62, 36000},
	} {
		if got := twilioValidityPeriod(t0.Add(tt.left), t0); got != tt.want {
			t.Errorf("twilioValidityPeriod(now+%v) = %d, want %d", tt.left, got, tt.want)
		}
	}
}
