package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	vonageTestKey    = "k3y0a1b2"
	vonageTestSecret = "Vs3cr3t-0123456789abc"
	vonageTestFrom   = "AcmeInc"
)

// newTestVonage returns a Vonage for baseURL with the test key, secret (a
// static vonageTestSecret when nil) and sender.
func newTestVonage(t *testing.T, baseURL string, secret *Secret, opts ...Option) *Vonage {
	t.Helper()
	if secret == nil {
		secret = StaticSecret(vonageTestSecret)
	}
	v, err := NewVonage(VonageConfig{APIKey: vonageTestKey, APISecret: secret, From: vonageTestFrom, BaseURL: baseURL}, opts...)
	if err != nil {
		t.Fatalf("NewVonage(%q): %v", baseURL, err)
	}
	t.Cleanup(v.CloseIdleConnections)
	return v
}

// vonageRequest is what a test server saw of one request.
type vonageRequest struct {
	method, path, contentType string
	form                      url.Values
}

// recordVonage returns a server answering every request with status and
// body, and the requests it saw.
func recordVonage(t *testing.T, status int, body string) (*httptest.Server, func() []vonageRequest) {
	t.Helper()
	var mu sync.Mutex
	var seen []vonageRequest
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		form, err := url.ParseQuery(string(b))
		if err != nil {
			t.Errorf("the body %q is not a form: %v", b, err)
		}
		mu.Lock()
		seen = append(seen, vonageRequest{r.Method, r.URL.Path, r.Header.Get("Content-Type"), form})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	return srv, func() []vonageRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]vonageRequest(nil), seen...)
	}
}

func readVonageFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "vonage", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestNewVonage(t *testing.T) {
	ok := VonageConfig{APIKey: vonageTestKey, APISecret: StaticSecret(vonageTestSecret), From: vonageTestFrom}
	tests := []struct {
		name     string
		edit     func(*VonageConfig)
		endpoint string // when it works
		is       error  // when it fails: the error it wraps, or nil for any
		field    string // when it fails: named in the error
	}{
		{name: "default URL", edit: func(*VonageConfig) {}, endpoint: "https://rest.nexmo.com/sms/json"},
		{name: "local URL", edit: func(c *VonageConfig) { c.BaseURL = "http://127.0.0.1:8080" }, endpoint: "http://127.0.0.1:8080/sms/json"},
		{name: "URL with a path", edit: func(c *VonageConfig) { c.BaseURL = "http://sim:8080/vonage/" }, endpoint: "http://sim:8080/vonage/sms/json"},
		{name: "no key", edit: func(c *VonageConfig) { c.APIKey = "" }, field: "APIKey"},
		{name: "no secret", edit: func(c *VonageConfig) { c.APISecret = nil }, is: ErrInvalidToken, field: "APISecret"},
		{name: "empty secret", edit: func(c *VonageConfig) { c.APISecret = StaticSecret("") }, is: ErrInvalidToken, field: "APISecret"},
		{name: "no sender", edit: func(c *VonageConfig) { c.From = "" }, field: "From"},
		{name: "ftp URL", edit: func(c *VonageConfig) { c.BaseURL = "ftp://rest.nexmo.com" }, is: ErrInvalidURL, field: "BaseURL"},
		{name: "URL with a password", edit: func(c *VonageConfig) { c.BaseURL = "https://u:" + vonageTestSecret + "@rest.nexmo.com" }, is: ErrInvalidURL, field: "BaseURL"},
		{name: "URL with a query", edit: func(c *VonageConfig) { c.BaseURL = "https://rest.nexmo.com?api_secret=" + vonageTestSecret }, is: ErrInvalidURL, field: "BaseURL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.edit(&cfg)
			v, err := NewVonage(cfg)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("NewVonage: %v", err)
				}
				if v.endpoint != tt.endpoint {
					t.Errorf("endpoint %q, want %q", v.endpoint, tt.endpoint)
				}
				return
			}
			if err == nil {
				t.Fatal("NewVonage accepted it")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %q does not wrap %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error %q does not name %s", err, tt.field)
			}
			if strings.Contains(err.Error(), vonageTestSecret) {
				t.Errorf("error %q shows the secret", err)
			}
		})
	}
}

func TestVonageRequest(t *testing.T) {
	clock := newFakeClock(t0)
	long := strings.Repeat("i", 128)
	cutInRune := strings.Repeat("a", 99) + "é" // the rune straddles byte 100
	tests := []struct {
		name      string
		m         Message
		typ       string // "" for none
		clientRef string
		ttl       string // "" for none
	}{
		{name: "plain ASCII", m: testMsg, clientRef: testMsg.ID},
		{name: "euro sign is GSM-7", m: Message{ID: "e", To: "+819012345678", Body: "Total: 5€ [ok]"}, clientRef: "e"},
		{name: "capital C cedilla is GSM-7", m: Message{ID: "c", To: "+819012345678", Body: "Ça va"}, clientRef: "c"},
		{name: "emoji", m: Message{ID: "u1", To: "+819012345678", Body: "Code 4829 👍"}, typ: "unicode", clientRef: "u1"},
		{name: "Japanese", m: Message{ID: "u2", To: "+819012345678", Body: "認証コード 482913"}, typ: "unicode", clientRef: "u2"},
		{name: "small c cedilla", m: Message{ID: "u3", To: "+33612345678", Body: "Reçu"}, typ: "unicode", clientRef: "u3"},
		{name: "to without plus", m: Message{ID: "n", To: "819012345678", Body: "x"}, clientRef: "n"},
		{name: "long ID cut to 100", m: Message{ID: long, To: "+819012345678", Body: "x"}, clientRef: long[:100]},
		{name: "ID cut at a rune", m: Message{ID: cutInRune, To: "+819012345678", Body: "x"}, clientRef: cutInRune[:99]},
		{name: "deadline", m: Message{ID: "d", To: "+819012345678", Body: "x", Deadline: t0.Add(90 * time.Second)}, clientRef: "d", ttl: "90000"},
		{name: "deadline soon", m: Message{ID: "d", To: "+819012345678", Body: "x", Deadline: t0.Add(5 * time.Second)}, clientRef: "d", ttl: "20000"},
		{name: "deadline past", m: Message{ID: "d", To: "+819012345678", Body: "x", Deadline: t0.Add(-time.Hour)}, clientRef: "d", ttl: "20000"},
		{name: "deadline far", m: Message{ID: "d", To: "+819012345678", Body: "x", Deadline: t0.Add(30 * 24 * time.Hour)}, clientRef: "d", ttl: "604800000"},
		{name: "From from the sender pool", m: Message{ID: "f", To: "+819012345678", Body: "x", From: "18885550100"}, clientRef: "f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, seen := recordVonage(t, 200, readVonageFile(t, "success.json"))
			v := newTestVonage(t, srv.URL, nil, WithClock(clock.Now))
			if _, err := v.Send(context.Background(), tt.m); err != nil {
				t.Fatalf("Send: %v", err)
			}
			reqs := seen()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.method != http.MethodPost || r.path != "/sms/json" || r.contentType != "application/x-www-form-urlencoded" {
				t.Errorf("%s %s (%s), want POST /sms/json (application/x-www-form-urlencoded)", r.method, r.path, r.contentType)
			}
			from := vonageTestFrom
			if tt.m.From != "" {
				from = tt.m.From
			}
			want := url.Values{
				"api_key":    {vonageTestKey},
				"api_secret": {vonageTestSecret},
				"from":       {from},
				"to":         {strings.TrimPrefix(tt.m.To, "+")},
				"text":       {tt.m.Body},
				"client-ref": {tt.clientRef},
			}
			if tt.typ != "" {
				want.Set("type", tt.typ)
			}
			if tt.ttl != "" {
				want.Set("ttl", tt.ttl)
			}
			if !reflect.DeepEqual(r.form, want) {
				t.Errorf("form\n got %v\nwant %v", r.form, want)
			}
		})
	}
}

// vonageCase is an answer and what Send must make of it.
type vonageCase struct {
	name    string
	status  int
	header  map[string]string
	body    string
	receipt string // the Receipt's ID when accepted
	kind    Kind   // KindByStatus: accepted
	code    string
	retry   time.Duration
	message string // a part of Error.Message
}

func TestVonageAnswers(t *testing.T) {
	file := func(name string) string { return readVonageFile(t, name) }
	tests := []vonageCase{
		{name: "0 one part", status: 200, body: file("success.json"), receipt: "0C000000217B7F02"},
		{name: "0 two parts", status: 200, body: file("multipart.json"), receipt: "62dfdf68-6c7c-479a-a190-5c52f798a787"},
		{name: "0 as a number", status: 200, body: `{"message-count":1,"messages":[{"status":0,"message-id":"n-1"}]}`, receipt: "n-1"},
		{name: "1 throttled", status: 200, body: file("status-1.json"), kind: KindThrottled, code: "1", retry: time.Second, message: "Throttled"},
		{name: "1 throttled, SDK's text", status: 200, body: file("throttled.json"), kind: KindThrottled, code: "1", retry: time.Second, message: "faster than the account limit"},
		{name: "1 with Retry-After", status: 200, header: map[string]string{"Retry-After": "3"}, body: file("status-1.json"), kind: KindThrottled, code: "1", retry: 3 * time.Second},
		{name: "10 too many binds", status: 200, body: file("status-10.json"), kind: KindThrottled, code: "10", retry: time.Second},
		// The first part went out: sending the message again would repeat it.
		{name: "second part throttled: sent", status: 200, body: file("partial.json"), receipt: "3295d748-4e14-4681-af78-166dca3c5aab"},
		{name: "4 invalid credentials", status: 200, body: file("status-4.json"), kind: KindAccount, code: "4", message: "Invalid Credentials"},
		{name: "4 bad credentials, no count", status: 200, body: file("bad-credentials.json"), kind: KindAccount, code: "4", message: "Bad Credentials"},
		{name: "8 account barred", status: 200, body: file("status-8.json"), kind: KindAccount, code: "8"},
		{name: "9 out of credit", status: 200, body: file("status-9.json"), kind: KindAccount, code: "9"},
		{name: "11 not enabled for HTTP", status: 200, body: file("status-11.json"), kind: KindAccount, code: "11"},
		{name: "14 invalid signature", status: 200, body: file("status-14.json"), kind: KindAccount, code: "14"},
		{name: "32 signature and secret", status: 200, body: file("status-32.json"), kind: KindAccount, code: "32"},
		{name: "2 missing parameters", status: 200, body: file("status-2.json"), kind: KindRefused, code: "2"},
		{name: "2 missing to, reference example", status: 200, body: file("missing-param.json"), kind: KindRefused, code: "2", message: "Missing to param"},
		{name: "3 invalid parameters", status: 200, body: file("status-3.json"), kind: KindRefused, code: "3"},
		{name: "6 invalid message", status: 200, body: file("status-6.json"), kind: KindRefused, code: "6"},
		{name: "7 number barred", status: 200, body: file("status-7.json"), kind: KindRefused, code: "7"},
		{name: "12 too long", status: 200, body: file("status-12.json"), kind: KindRefused, code: "12"},
		{name: "15 invalid sender", status: 200, body: file("status-15.json"), kind: KindRefused, code: "15"},
		{name: "17 blocked", status: 200, body: file("status-17.json"), kind: KindRefused, code: "17"},
		{name: "22 network code", status: 200, body: file("status-22.json"), kind: KindRefused, code: "22"},
		{name: "23 callback", status: 200, body: file("status-23.json"), kind: KindRefused, code: "23"},
		{name: "29 not whitelisted", status: 200, body: file("status-29.json"), kind: KindRefused, code: "29"},
		{name: "33 deactivated", status: 200, body: file("status-33.json"), kind: KindRefused, code: "33"},
		{name: "5 internal error", status: 200, body: file("status-5.json"), kind: KindTemporary, code: "5", message: "Internal Error"},
		{name: "unknown status", status: 200, body: `{"message-count":"1","messages":[{"status":"16","error-text":"value for ttl field out of range"}]}`, kind: KindTemporary, code: "16"},
		{name: "no error-text", status: 200, body: `{"message-count":"1","messages":[{"status":"3"}]}`, kind: KindRefused, code: "3", message: `"status":"3"`},
		{name: "no messages", status: 200, body: `{"message-count":"0","messages":[]}`, kind: KindTemporary},
		{name: "garbage", status: 200, body: "<html>Bad Gateway</html>", kind: KindTemporary, message: "Bad Gateway"},
		{name: "empty", status: 200, kind: KindTemporary},
		{name: "cut short", status: 200, body: file("success.json")[:60], kind: KindTemporary},
		{name: "HTTP 500", status: 500, body: "Internal Server Error", kind: KindTemporary},
		{name: "HTTP 503", status: 503, kind: KindTemporary},
		{name: "HTTP 429", status: 429, kind: KindThrottled, retry: time.Second},
		{name: "HTTP 429 with Retry-After", status: 429, header: map[string]string{"Retry-After": "2"}, kind: KindThrottled, retry: 2 * time.Second},
		{name: "HTTP 401", status: 401, kind: KindAccount},
		{name: "HTTP 403", status: 403, kind: KindAccount},
		{name: "HTTP 404", status: 404, body: "<html>404 Not Found</html>", kind: KindTemporary},
		{name: "HTTP 302 not followed", status: 302, header: map[string]string{"Location": "/elsewhere"}, kind: KindTemporary},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hits int
			var mu sync.Mutex
			srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				hits++
				mu.Unlock()
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			v := newTestVonage(t, srv.URL, nil)
			rc, err := v.Send(context.Background(), testMsg)
			checkVonageAnswer(t, tt, rc, err)
			if hits != 1 {
				t.Errorf("%d requests, want 1", hits)
			}
		})
	}
}

func checkVonageAnswer(t *testing.T, tt vonageCase, rc Receipt, err error) {
	t.Helper()
	if tt.kind == KindByStatus {
		if err != nil || rc.ID != tt.receipt {
			t.Fatalf("Send = %+v, %v; want Receipt %q", rc, err, tt.receipt)
		}
		return
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Send = %+v, %v; want an *Error", rc, err)
	}
	if e.Provider != "vonage" || e.Status != tt.status || e.Code != tt.code || e.Meaning() != tt.kind || e.RetryAfter != tt.retry {
		t.Errorf("error %+v (%s); want status %d code %q %s retry %v", e, e.Meaning(), tt.status, tt.code, tt.kind, tt.retry)
	}
	if !strings.Contains(e.Message, tt.message) {
		t.Errorf("Message %q does not hold %q", e.Message, tt.message)
	}
}

// TestVonageLongAnswer checks an answer longer than the 4 KiB read of an
// error: one entry per part of a long message.
func TestVonageLongAnswer(t *testing.T) {
	parts := func(n int, last string) string {
		var b strings.Builder
		fmt.Fprintf(&b, `{"message-count":"%d","messages":[`, n)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			status := "0"
			if i == n-1 {
				status = last
			}
			fmt.Fprintf(&b, `{"to":"819012345678","message-id":"aaaaaaaa-bbbb-cccc-dddd-%012d","status":"%s","remaining-balance":"3.14159265","message-price":"0.03330000","network":"12345","client-ref":"%s"}`,
				i, status, strings.Repeat("r", 100))
		}
		b.WriteString("]}")
		return b.String()
	}
	for _, tt := range []vonageCase{
		{name: "48 parts accepted", status: 200, body: parts(48, "0"), receipt: "aaaaaaaa-bbbb-cccc-dddd-000000000000"},
		{name: "last of 48 throttled: sent", status: 200, body: parts(48, "1"), receipt: "aaaaaaaa-bbbb-cccc-dddd-000000000000"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.body) <= maxBodyRead {
				t.Fatalf("the answer has %d bytes, not more than %d", len(tt.body), maxBodyRead)
			}
			srv, _ := recordVonage(t, tt.status, tt.body)
			rc, err := newTestVonage(t, srv.URL, nil).Send(context.Background(), testMsg)
			checkVonageAnswer(t, tt, rc, err)
		})
	}
}

// TestVonageReloadsSecret checks that an account failure re-reads the
// secret file, so that the Send after it uses the fixed secret, and that
// another failure does not.
func TestVonageReloadsSecret(t *testing.T) {
	const oldSecret, newSecret = "old-S3CRET-000001", "new-S3CRET-000002"
	tests := []struct {
		name   string
		status int
		body   string
		reload bool
	}{
		{name: "status 4", status: 200, body: readVonageFile(t, "status-4.json"), reload: true},
		{name: "status 8", status: 200, body: readVonageFile(t, "status-8.json"), reload: true},
		{name: "HTTP 401", status: 401, reload: true},
		{name: "HTTP 403", status: 403, reload: true},
		{name: "status 3", status: 200, body: readVonageFile(t, "status-3.json")},
		{name: "status 1", status: 200, body: readVonageFile(t, "status-1.json")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "secret")
			if err := os.WriteFile(path, []byte(oldSecret+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			secret, err := FileSecret(path)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var got []string
			srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r.ParseForm()
				mu.Lock()
				got = append(got, r.PostForm.Get("api_secret"))
				mu.Unlock()
				if r.PostForm.Get("api_secret") == newSecret {
					io.WriteString(w, readVonageFile(t, "success.json"))
					return
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			v := newTestVonage(t, srv.URL, secret)
			// The operator fixes the file; the process has read the old one.
			if err := os.WriteFile(path, []byte(newSecret+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := v.Send(context.Background(), testMsg); err == nil {
				t.Fatal("the first Send was accepted")
			}
			_, err = v.Send(context.Background(), testMsg)
			want := []string{oldSecret, oldSecret}
			if tt.reload {
				want[1] = newSecret
				if err != nil {
					t.Errorf("the second Send: %v", err)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("secrets sent %q, want %q", got, want)
			}
		})
	}
}

// TestVonageNoSecretsInErrors checks that neither the key, the secret, the
// number nor the body reach an error, even from an answer that echoes them.
func TestVonageNoSecretsInErrors(t *testing.T) {
	m := testMsg
	echo := fmt.Sprintf("api_key=%s api_secret=%s to=%s text=%s", vonageTestKey, vonageTestSecret, strings.TrimPrefix(m.To, "+"), m.Body)
	tests := []struct {
		name   string
		status int
		body   func(form string) string
	}{
		{name: "error-text", status: 200, body: func(string) string {
			return fmt.Sprintf(`{"message-count":"1","messages":[{"status":"4","error-text":%q}]}`, echo)
		}},
		{name: "error-text escaped", status: 200, body: func(string) string {
			return fmt.Sprintf(`{"message-count":"1","messages":[{"status":"3","error-text":"%s"}]}`,
				strings.ReplaceAll(echo, "a", `\u0061`))
		}},
		{name: "HTTP 500 echoing the form", status: 500, body: func(form string) string { return "bad request: " + form }},
		{name: "HTTP 401 echoing the form", status: 401, body: func(form string) string { return form }},
		{name: "garbage echoing the form", status: 200, body: func(form string) string { return "<" + form }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body(string(b)))
			}))
			_, err := newTestVonage(t, srv.URL, nil).Send(context.Background(), m)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Send: %v, want an *Error", err)
			}
			for _, s := range []string{err.Error(), e.Message, fmt.Sprintf("%+v", err)} {
				for _, secret := range []string{vonageTestKey, vonageTestSecret, "819012345678", m.Body, "482913"} {
					if strings.Contains(s, secret) {
						t.Errorf("%q shows %q", s, secret)
					}
				}
			}
		})
	}
}

// TestVonageReport checks that the Report an instrument reads says
// throttled for a throttle in a 200.
func TestVonageReport(t *testing.T) {
	srv, _ := recordVonage(t, 200, readVonageFile(t, "status-1.json"))
	var mu sync.Mutex
	var got *Report
	wrap := func(next http.RoundTripper) http.RoundTripper {
		return vonageRoundTrip(func(r *http.Request) (*http.Response, error) {
			resp, err := next.RoundTrip(r)
			if err == nil {
				resp.Body = &vonageCloseHook{ReadCloser: resp.Body, close: func() {
					mu.Lock()
					defer mu.Unlock()
					got = ReportOf(r.Context())
				}}
			}
			return resp, err
		})
	}
	v := newTestVonage(t, srv.URL, nil, WithTransportWrapper(wrap))
	if _, err := v.Send(context.Background(), testMsg); err == nil {
		t.Fatal("Send accepted a throttle")
	}
	mu.Lock()
	defer mu.Unlock()
	if got == nil || !got.Filled || got.Err == nil || !got.Err.Throttled() || got.Err.Status != 200 || got.Err.Code != "1" {
		t.Errorf("Report %+v; want a throttle in a 200, code 1", got)
	}
}

type vonageRoundTrip func(*http.Request) (*http.Response, error)

func (f vonageRoundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type vonageCloseHook struct {
	io.ReadCloser
	close func()
}

func (c *vonageCloseHook) Close() error {
	c.close()
	return c.ReadCloser.Close()
}

func TestVonageInvalidMessage(t *testing.T) {
	srv, seen := recordVonage(t, 200, readVonageFile(t, "success.json"))
	v := newTestVonage(t, srv.URL, nil)
	for _, id := range []string{"", "a\nb"} {
		_, err := v.Send(context.Background(), Message{ID: id, To: "+819012345678", Body: "x"})
		if !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("ID %q: %v, want ErrInvalidMessage", id, err)
		}
	}
	if n := len(seen()); n != 0 {
		t.Errorf("%d requests, want none", n)
	}
}

func TestVonageCanceled(t *testing.T) {
	srv, _ := recordVonage(t, 200, readVonageFile(t, "success.json"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := newTestVonage(t, srv.URL, nil).Send(ctx, testMsg)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Send: %v, want context.Canceled", err)
	}
}
