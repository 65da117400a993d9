package providertest

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"smsdispatcher/provider"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// t0 is the fixed instant the tests count from: a whole second, so fixed
// windows with Phase 0 start on it.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// fakeClock is a clock the test moves by hand. It is safe for concurrent
// use because handlers may read it on server goroutines.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time // guarded by mu
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// The credentials and senders the simulators expect and the adapters send.
const (
	testToken        = "tok-S3CRET-0123456789"
	testTwilioSID    = "AC0123456789abcdef0123456789abcdef"
	testTwilioFrom   = "+15005550006"
	testTwilioMG     = "MG0123456789abcdef0123456789abcdef"
	vonageTestKey    = "k3y0a1b2"
	vonageTestSecret = "Vs3cr3t-0123456789abc"
	vonageTestFrom   = "AcmeInc"
)

var testMsg = provider.Message{ID: "login-7f3a9c", To: "+819012345678", Body: "Your code is 482913"}

// twMsg is testMsg with a number that shares no run of 5 digits with
// Twilio's documented answers, which the adapter's excerpt would mask.
var twMsg = provider.Message{ID: "login-7f3a9c", To: "+819087654321", Body: "Your code is 482913"}

func newServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// newTestClient returns a generic Client for baseURL with testToken that
// closes its idle connections when the test ends.
func newTestClient(t *testing.T, baseURL string, opts ...provider.Option) *provider.Client {
	t.Helper()
	c, err := provider.NewClient(baseURL, testToken, opts...)
	if err != nil {
		t.Fatalf("NewClient(%q): %v", baseURL, err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// newTestTwilio returns a Twilio for baseURL sending from testTwilioFrom
// with testToken, after edit (if any) changed the configuration.
func newTestTwilio(t *testing.T, baseURL string, edit func(*provider.TwilioConfig), opts ...provider.Option) *provider.Twilio {
	t.Helper()
	cfg := provider.TwilioConfig{AccountSID: testTwilioSID, AuthToken: provider.StaticSecret(testToken), From: testTwilioFrom, BaseURL: baseURL}
	if edit != nil {
		edit(&cfg)
	}
	tw, err := provider.NewTwilio(cfg, opts...)
	if err != nil {
		t.Fatalf("NewTwilio: %v", err)
	}
	t.Cleanup(tw.CloseIdleConnections)
	return tw
}

// newTestVonage returns a Vonage for baseURL with the test key, secret (a
// static vonageTestSecret when nil) and sender.
func newTestVonage(t *testing.T, baseURL string, secret *provider.Secret, opts ...provider.Option) *provider.Vonage {
	t.Helper()
	if secret == nil {
		secret = provider.StaticSecret(vonageTestSecret)
	}
	v, err := provider.NewVonage(provider.VonageConfig{APIKey: vonageTestKey, APISecret: secret, From: vonageTestFrom, BaseURL: baseURL}, opts...)
	if err != nil {
		t.Fatalf("NewVonage(%q): %v", baseURL, err)
	}
	t.Cleanup(v.CloseIdleConnections)
	return v
}

// checkNoSecrets fails if err's text holds the token, the number or the body.
func checkNoSecrets(t *testing.T, err error, m provider.Message) {
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

func isKind(err error, k provider.Kind) bool {
	pe, ok := errors.AsType[*provider.Error](err)
	return ok && pe.Meaning() == k
}
