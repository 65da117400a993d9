package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc/codes"

	"smsdispatcher/config"
	"smsdispatcher/internal/pullwatch"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/provider/providertest"
)

// setVar sets *p to v for the test.
func setVar[T any](t *testing.T, p *T, v T) {
	t.Helper()
	old := *p
	*p = v
	t.Cleanup(func() { *p = old })
}

// serveEnv sets what serve needs besides Pub/Sub: Redis, a provider, an
// HTTP address; it returns the address.
func serveEnv(t *testing.T, providerURL string) string {
	t.Helper()
	addr := freeAddr(t)
	t.Setenv("REDIS_URL", "redis://"+redistest.Addr(t))
	t.Setenv("SMS_ACCOUNT", redistest.UniqueAccount(t))
	t.Setenv("SMS_PROVIDER_URL", providerURL)
	t.Setenv("SMS_PROVIDER_TOKEN", "s3cret")
	t.Setenv("HTTP_ADDR", addr)
	return addr
}

// readyz returns /readyz's status and body; 0 if it did not answer.
func readyz(addr string) (int, string) {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeChecksItsSubscriptions: a subscription serve cannot pull stops
// it at start with one line naming the subscription and the project, as
// an operator meets them: Pub/Sub unreachable (a wrong
// PUBSUB_EMULATOR_HOST: nothing listens), a wrong project, a missing
// subscription, a denied role.
func TestServeChecksItsSubscriptions(t *testing.T) {
	setVar(t, &subscriptionCheckTimeout, 2*time.Second)
	ctx := context.Background()
	tests := []struct {
		name    string
		server  func(t *testing.T) string // Pub/Sub's address
		project string
		otpSub  string
		config  bool   // a configuration error (exit 2), naming the variable
		want    string // in the line, besides the subscription and project
	}{
		{"nothing listens", func(t *testing.T) string { return freeAddr(t) }, "proj", "sms-otp-dispatcher", false, "no answer within 2s"},
		{"wrong project", setUpPubsub(), "other", "sms-otp-dispatcher", true, "not found"},
		{"missing subscription", setUpPubsub(), "proj", "sms-otp-typo", true, "not found"},
		{"denied role", setUpPubsub(pstest.WithErrorInjection("GetSubscription", codes.PermissionDenied, "User not authorized to perform this action.")), "proj", "sms-otp-dispatcher", true, "may not pull it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PUBSUB_EMULATOR_HOST", tt.server(t))
			t.Setenv("PUBSUB_PROJECT_ID", tt.project)
			t.Setenv("OTP_SUBSCRIPTION", tt.otpSub)
			serveEnv(t, "http://127.0.0.1:1")
			var logs killBuffer
			// A hang bound: without the check, serve would run deaf.
			serveCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			err := run(serveCtx, []string{"serve"}, io.Discard, &logs)
			if err == nil {
				t.Fatal("serve started")
			}
			line := err.Error()
			var ce *config.Error
			if tt.config && (!errors.As(err, &ce) || ce.Env != "OTP_SUBSCRIPTION") {
				t.Errorf("error %q: want a configuration error naming OTP_SUBSCRIPTION", line)
			}
			for _, w := range []string{`"` + tt.otpSub + `"`, `project "` + tt.project + `"`, tt.want} {
				if !strings.Contains(line, w) {
					t.Errorf("error %q does not say %q", line, w)
				}
			}
			if strings.Contains(line, "\n") {
				t.Errorf("error %q is not one line", line)
			}
			if strings.Contains(logs.String(), "dispatcher serving") {
				t.Error("serve said it was serving")
			}
		})
	}
}

// setUpPubsub returns a function starting a pstest server with opts on
// which setup has run, in project proj.
func setUpPubsub(opts ...pstest.ServerReactorOption) func(t *testing.T) string {
	return func(t *testing.T) string {
		t.Helper()
		ps := pstest.NewServer(opts...)
		t.Cleanup(func() { ps.Close() })
		t.Setenv("PUBSUB_EMULATOR_HOST", ps.Addr)
		t.Setenv("PUBSUB_PROJECT_ID", "proj")
		if err := run(context.Background(), []string{"setup"}, io.Discard, io.Discard); err != nil {
			t.Fatalf("setup: %v", err)
		}
		return ps.Addr
	}
}

// TestServeUnreadyAtSIGTERM: from SIGTERM on, /readyz fails, while the
// process still finishes a send in flight: the Service stops sending it
// probes' traffic at once, not when the process is gone.
func TestServeUnreadyAtSIGTERM(t *testing.T) {
	release := make(chan struct{})
	reached := make(chan struct{}, 1)
	sim := providertest.NewGeneric(providertest.Config{Token: "s3cret"})
	holding := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case reached <- struct{}{}:
		default:
		}
		<-release
		sim.ServeHTTP(w, r)
	}))
	defer holding.Close()
	defer close(release) // before the server closes: the handler returns
	setUpPubsub()(t)
	addr := serveEnv(t, holding.URL)
	t.Setenv("SHUTDOWN_GRACE", "60s") // a hang bound: the test releases the send

	serveCtx, sigterm := context.WithCancel(context.Background())
	defer sigterm()
	served := make(chan error, 1)
	go func() { served <- run(serveCtx, []string{"serve"}, io.Discard, io.Discard) }()
	waitWithin(t, 30*time.Second, "ready", func() bool { code, _ := readyz(addr); return code == http.StatusOK })
	if err := run(context.Background(), []string{"publish", "--class", "otp", "--to", "+819012345678", "--body", "Your code is 482913", "--id", "held-1"}, io.Discard, io.Discard); err != nil {
		t.Fatalf("publish: %v", err)
	}
	<-reached // the send is in flight, held

	sigterm()
	code, body := readyz(addr)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Fatalf("/readyz after SIGTERM, a send in flight: %d %q, want 503 shutting down", code, body)
	}
	release <- struct{}{}
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if sim.SentCount("held-1") != 1 {
		t.Fatal("the send in flight at SIGTERM was not finished")
	}
}

// TestServeWhenPubsubStopsMidRun: Pub/Sub goes away under a serving
// process (the pstest server stopped: an outage, egress cut). The pod
// turns unready, counts the failed pulls by code, logs why, and on
// SIGTERM stops within SHUTDOWN_GRACE and the stop bound although the
// client's Receive retries Pub/Sub for ever.
func TestServeWhenPubsubStopsMidRun(t *testing.T) {
	setVar(t, &pullwatch.Silence, time.Second)
	setVar(t, &stopBound, time.Second)
	sim := providertest.NewGeneric(providertest.Config{Token: "s3cret"})
	simSrv := httptest.NewServer(sim)
	defer simSrv.Close()
	ps := pstest.NewServer()
	closed := false
	defer func() {
		if !closed {
			ps.Close()
		}
	}()
	t.Setenv("PUBSUB_EMULATOR_HOST", ps.Addr)
	t.Setenv("PUBSUB_PROJECT_ID", "proj")
	if err := run(context.Background(), []string{"setup"}, io.Discard, io.Discard); err != nil {
		t.Fatalf("setup: %v", err)
	}
	addr := serveEnv(t, simSrv.URL)
	t.Setenv("SHUTDOWN_GRACE", "1s")

	serveCtx, sigterm := context.WithCancel(context.Background())
	defer sigterm()
	var logs killBuffer
	served := make(chan error, 1)
	go func() { served <- run(serveCtx, []string{"serve"}, io.Discard, &logs) }()
	if err := run(context.Background(), []string{"publish", "--class", "otp", "--to", "+819012345678", "--body", "Your code is 482913", "--id", "before-1"}, io.Discard, io.Discard); err != nil {
		t.Fatalf("publish: %v", err)
	}
	waitFor(t, func() bool { return sim.SentCount("before-1") == 1 })
	waitWithin(t, 30*time.Second, "ready", func() bool { code, _ := readyz(addr); return code == http.StatusOK })

	ps.Close()
	closed = true
	waitWithin(t, 60*time.Second, "/readyz failing on Pub/Sub's silence", func() bool {
		code, body := readyz(addr)
		return code == http.StatusServiceUnavailable && strings.Contains(body, "no answer from Pub/Sub on projects/proj/subscriptions/sms-")
	})
	waitWithin(t, 60*time.Second, "sms_pull_errors_total counting Unavailable", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `sms_pull_errors_total{code="Unavailable"`)
	})
	waitWithin(t, 60*time.Second, "the silence logged", func() bool {
		return strings.Contains(logs.String(), "no answer from Pub/Sub on the subscription")
	})

	sigterm()
	if code, body := readyz(addr); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Errorf("/readyz after SIGTERM: %d %q, want 503 shutting down", code, body)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(time.Minute): // a hang bound, far above 1s + 1s
		t.Fatalf("serve still running a minute after SIGTERM\n%s", logs.tail())
	}
}

// TestServeSIGTERMInAPubsubOutage: SIGTERM comes while Pub/Sub is gone but
// not yet for pullwatch.Silence, the lanes' Receive retrying it for ever. /readyz
// fails at once, and the process exits within SHUTDOWN_GRACE and the stop
// bound, not when Kubernetes kills it.
func TestServeSIGTERMInAPubsubOutage(t *testing.T) {
	setVar(t, &pullwatch.Silence, time.Hour) // the outage is not yet long enough to show
	setVar(t, &stopBound, 3*time.Second)
	sim := providertest.NewGeneric(providertest.Config{Token: "s3cret"})
	simSrv := httptest.NewServer(sim)
	defer simSrv.Close()
	ps := pstest.NewServer()
	closed := false
	defer func() {
		if !closed {
			ps.Close()
		}
	}()
	t.Setenv("PUBSUB_EMULATOR_HOST", ps.Addr)
	t.Setenv("PUBSUB_PROJECT_ID", "proj")
	if err := run(context.Background(), []string{"setup"}, io.Discard, io.Discard); err != nil {
		t.Fatalf("setup: %v", err)
	}
	addr := serveEnv(t, simSrv.URL)
	t.Setenv("SHUTDOWN_GRACE", "1s")

	serveCtx, sigterm := context.WithCancel(context.Background())
	defer sigterm()
	var logs killBuffer
	served := make(chan error, 1)
	go func() { served <- run(serveCtx, []string{"serve"}, io.Discard, &logs) }()
	// Both streams answered: messages of each class went through.
	for _, class := range []string{"otp", "marketing"} {
		if err := run(context.Background(), []string{"publish", "--class", class, "--to", "+819012345678", "--body", "Hello", "--id", class + "-1"}, io.Discard, io.Discard); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	waitFor(t, func() bool { return sim.SentCount("otp-1") == 1 && sim.SentCount("marketing-1") == 1 })
	waitWithin(t, 30*time.Second, "ready", func() bool { code, _ := readyz(addr); return code == http.StatusOK })

	ps.Close()
	closed = true
	waitWithin(t, 60*time.Second, "the pulls failing", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `sms_pull_errors_total{code="Unavailable"`)
	})

	sigterm()
	if code, body := readyz(addr); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz after SIGTERM: %d %q, want 503", code, body)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(time.Minute): // a hang bound, far above 1s + 3s
		t.Fatalf("serve still running a minute after SIGTERM\n%s", logs.tail())
	}
	if !strings.Contains(logs.String(), "pulls did not stop within SHUTDOWN_GRACE") {
		t.Errorf("serve did not say it left the pulls behind\n%s", logs.tail())
	}
}
