package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/pstest"

	"smsdispatcher/config"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/provider/providertest"
)

// TestMain lets a test run the real main in a child process.
func TestMain(m *testing.M) {
	if os.Getenv("DISPATCHER_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		env  map[string]string
		args []string
		want string // the variable the one line must name
	}{
		{map[string]string{"MARKETING_RPS": "95"}, nil, "MARKETING_RPS"},
		{map[string]string{"TARGET_RPS": "120"}, nil, "TARGET_RPS"},
		{nil, []string{"--target-rps", "101"}, "TARGET_RPS"},
		{map[string]string{"BURST": "0"}, nil, "BURST"},
		{map[string]string{"BURST": "five"}, nil, "BURST"},
		{map[string]string{"MAX_SENDERS": "0"}, nil, "MAX_SENDERS"},
		{map[string]string{"OTP_MAX_WAIT": "-1s"}, nil, "OTP_MAX_WAIT"},
		{map[string]string{"REDIS_URL": "http://user:hunter2@redis:6379"}, nil, "REDIS_URL"},
		{map[string]string{"SMS_PROVIDER_URL": "not a url"}, nil, "SMS_PROVIDER_URL"},
		{map[string]string{"SMS_PROVIDER_URL": ""}, nil, "SMS_PROVIDER_URL"}, // serve needs one
		{map[string]string{"SMS_PROVIDER_URL": "http://p", "REDIS_URL": ""}, nil, "REDIS_URL"},
		{map[string]string{"SMS_PROVIDER": "sinch"}, nil, "SMS_PROVIDER"},
		{map[string]string{"SMS_PROVIDER": "twilio", "REDIS_URL": ""}, nil, "TWILIO_ACCOUNT_SID"},
		{map[string]string{"SMS_PROVIDER": "twilio", "TWILIO_ACCOUNT_SID": "AC1"}, nil, "TWILIO_AUTH_TOKEN"},
		{map[string]string{"SMS_PROVIDER": "twilio", "TWILIO_ACCOUNT_SID": "AC1", "TWILIO_AUTH_TOKEN": "hunter2"}, nil, "TWILIO_FROM"},
		{map[string]string{"TWILIO_FROM": "+15005550006", "TWILIO_MESSAGING_SERVICE_SID": "MG1"}, nil, "TWILIO_MESSAGING_SERVICE_SID"},
		{map[string]string{"TWILIO_AUTH_TOKEN": "hunter2", "TWILIO_AUTH_TOKEN_FILE": "/x"}, nil, "TWILIO_AUTH_TOKEN_FILE"},
		{map[string]string{"SMS_PROVIDER": "twilio", "TWILIO_ACCOUNT_SID": "AC1", "TWILIO_AUTH_TOKEN_FILE": "/nonexistent/token",
			"TWILIO_FROM": "+15005550006", "REDIS_URL": "redis://127.0.0.1:1"}, nil, "TWILIO_AUTH_TOKEN_FILE"},
		{map[string]string{"TWILIO_API_URL": "ftp://x"}, nil, "TWILIO_API_URL"},
		{map[string]string{"SMS_PROVIDER": "vonage"}, nil, "VONAGE_API_KEY"},
		{map[string]string{"SMS_PROVIDER": "vonage", "VONAGE_API_KEY": "k", "VONAGE_API_SECRET": "hunter2"}, nil, "VONAGE_FROM"},
		{map[string]string{"VONAGE_API_SECRET": "hunter2", "VONAGE_API_SECRET_FILE": "/x"}, nil, "VONAGE_API_SECRET_FILE"},
		{map[string]string{"RATE_UNIT": "segments"}, nil, "RATE_UNIT"},
		{map[string]string{"MAX_SEGMENTS": "0"}, nil, "MAX_SEGMENTS"},
		// 90 × 1.02 + 5 + 7 - 1 > 100: the longest body could break the contract.
		{map[string]string{"RATE_UNIT": "segment", "MAX_SEGMENTS": "7"}, nil, "MAX_SEGMENTS"},
		// 96 × 1.02 + 5 = 102.92: admissions bunched by the arrival jitter
		// could break the contract.
		{map[string]string{"TARGET_RPS": "96"}, nil, "TARGET_RPS"},
		{map[string]string{"PROVIDER_ARRIVAL_JITTER": "-1ms"}, nil, "PROVIDER_ARRIVAL_JITTER"},
		{nil, []string{"--provider-arrival-jitter", "2s"}, "PROVIDER_ARRIVAL_JITTER"},
		{map[string]string{"ACCOUNT_PAUSE": "0s"}, nil, "ACCOUNT_PAUSE"},
		{map[string]string{"MAX_RETRY_AFTER": "500ms"}, nil, "MAX_RETRY_AFTER"},
		{nil, []string{"--max-retry-after", "25h"}, "MAX_RETRY_AFTER"},
	}
	for _, tt := range tests {
		t.Run(tt.want+fmt.Sprint(tt.env, tt.args), func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			err := run(context.Background(), append([]string{"serve"}, tt.args...), io.Discard, io.Discard)
			var ce *config.Error
			if !errors.As(err, &ce) || ce.Env != tt.want {
				t.Fatalf("run = %v, want a configuration error naming %s", err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error %q: want one line, never a secret", err)
			}
		})
	}
}

func TestBadConfigExitsTwoWithOneLine(t *testing.T) {
	cmd := exec.Command(os.Args[0], "serve")
	cmd.Env = append(os.Environ(), "DISPATCHER_RUN_MAIN=1", "MARKETING_RPS=95")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("exit: %v, want status 2", err)
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "MARKETING_RPS") {
		t.Fatalf("stderr %q: want one line naming MARKETING_RPS", stderr.String())
	}
}

// TestServeSetupPublishAndSIGTERM runs the real serve, setup and publish
// commands against pstest (through PUBSUB_EMULATOR_HOST), the test Redis
// and the provider simulator, then ends serve as SIGTERM would.
func TestServeSetupPublishAndSIGTERM(t *testing.T) {
	ps := pstest.NewServer()
	defer ps.Close()
	sim := providertest.NewGeneric(providertest.Config{Token: "s3cret"})
	simSrv := httptest.NewServer(sim)
	defer simSrv.Close()
	addr := freeAddr(t)
	t.Setenv("PUBSUB_EMULATOR_HOST", ps.Addr)
	t.Setenv("PUBSUB_PROJECT_ID", "proj")
	t.Setenv("REDIS_URL", "redis://"+redistest.Addr(t))
	t.Setenv("SMS_ACCOUNT", redistest.UniqueAccount(t))
	t.Setenv("SMS_PROVIDER_URL", simSrv.URL)
	t.Setenv("SMS_PROVIDER_TOKEN", "s3cret")
	t.Setenv("HTTP_ADDR", addr)
	ctx := context.Background()

	for i, want := range []string{"created", "exists"} { // idempotent
		var out bytes.Buffer
		if err := run(ctx, []string{"setup"}, &out, io.Discard); err != nil {
			t.Fatalf("setup #%d: %v", i+1, err)
		}
		if strings.Count(out.String(), want) != 14 { // with the suppression list's, the inbound messages' and the verifications' topics and subscriptions
			t.Fatalf("setup #%d printed %q, want 14 resources %s", i+1, out.String(), want)
		}
	}

	serveCtx, sigterm := context.WithCancel(ctx)
	var logs bytes.Buffer
	served := make(chan error, 1)
	go func() { served <- run(serveCtx, []string{"serve"}, io.Discard, &logs) }()

	if err := run(ctx, []string{"publish", "--class", "otp", "--to", "+819012345678", "--body", "Your code is 482913", "--id", "login-1"}, io.Discard, io.Discard); err != nil {
		t.Fatalf("publish: %v", err)
	}
	if err := run(ctx, []string{"publish", "--class", "otp", "--to", "12", "--body", "x"}, io.Discard, io.Discard); err == nil {
		t.Fatal("publish of an invalid message: want an error")
	}
	waitFor(t, func() bool { return sim.SentCount("login-1") == 1 })
	waitFor(t, func() bool { return get(t, "http://"+addr+"/readyz") == http.StatusOK })
	if code := get(t, "http://"+addr+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d", code)
	}
	if code := get(t, "http://"+addr+"/metrics"); code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}

	sigterm()
	if err := <-served; err != nil {
		t.Fatalf("serve after SIGTERM: %v, want nil (exit 0)", err)
	}
	if strings.Contains(logs.String(), "s3cret") || strings.Contains(logs.String(), "9012345678") {
		t.Fatal("logs hold the token or a phone number")
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitFor waits for cond, checking it each time the simulator or the
// server could have moved; it fails after 30s (a hang bound).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	waitWithin(t, 30*time.Second, "condition", cond)
}

// waitWithin waits for cond, checked every 20ms, and fails t after bound: a
// hang bound, not a speed assertion.
func waitWithin(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not met within %v", what, bound)
		}
		<-tick.C
	}
}

func TestDemoSmallRun(t *testing.T) {
	var out bytes.Buffer
	// A loaded CI machine is not a Redis outage: a generous Redis timeout.
	args := []string{"demo", "--campaign", "150", "--otp-rate", "10", "--instances", "2", "--progress", "off", "--redis-timeout", "2s"}
	err := run(context.Background(), args, &out, io.Discard)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, want := range []string{"marketing 150)", "429 answers                      0", "expired / dead-lettered          0 / 0",
		"script calls per sent message    n/a: miniredis", "deliveries per published message"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestDemoReportsRedisFigures runs the demo on a real Redis of its own
// (the demo resets its INFO commandstats, which other packages' tests
// read on the shared one), whose figures are Redis's own: at least one
// script call and more commands than script calls per sent message, and
// every published message delivered at least once.
func TestDemoReportsRedisFigures(t *testing.T) {
	t.Setenv("REDIS_URL", "unix://"+redistest.Private(t))
	t.Setenv("SMS_ACCOUNT", redistest.UniqueAccount(t))
	var out bytes.Buffer
	args := []string{"demo", "--campaign", "60", "--otp-rate", "10", "--instances", "2", "--progress", "off", "--redis-timeout", "2s"}
	if err := run(context.Background(), args, &out, io.Discard); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	var scripts, executed, deliveries float64
	var published int
	for line := range strings.Lines(out.String()) {
		fields := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "  script calls per sent message "):
			fmt.Sscan(fields[5], &scripts)
		case strings.HasPrefix(line, "  Redis executed per sent message "):
			fmt.Sscan(fields[5], &executed)
		case strings.HasPrefix(line, "  deliveries per published message "):
			fmt.Sscan(fields[4], &deliveries)
			fmt.Sscan(fields[7], &published)
		}
	}
	if scripts < 1 || executed <= scripts || deliveries < 1 || published < 60 {
		t.Errorf("script calls %v, executed %v per sent message, %v deliveries per message of %d published; want ≥ 1, more, ≥ 1, ≥ 60:\n%s",
			scripts, executed, deliveries, published, out.String())
	}
}

// TestHelpListsTheCommandsAndEachCommandItsFlags: help lists every
// command, a line each; a command's -h shows the flags it reads, and serve's
// all of them.
func TestHelpListsTheCommandsAndEachCommandItsFlags(t *testing.T) {
	for _, arg := range []string{"help", "-h", "--help"} {
		var out bytes.Buffer
		if err := run(context.Background(), []string{arg}, &out, io.Discard); err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		for _, c := range commands {
			if !strings.Contains(out.String(), "\n  "+c.name+" ") {
				t.Errorf("%s: no line for %s in\n%s", arg, c.name, out.String())
			}
		}
	}
	help := func(cmd ...string) string {
		var out bytes.Buffer
		err := run(context.Background(), append(cmd, "-h"), io.Discard, &out)
		if !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("%s -h: %v", cmd, err)
		}
		return out.String()
	}
	for _, f := range []string{"-marketing-max-wait", "-account-pause", "-http-addr", "-twilio-auth-token"} {
		if strings.Contains(help("status"), f+" ") {
			t.Errorf("status -h shows %s, which status never reads", f)
		}
		if !strings.Contains(help("serve"), f+" ") {
			t.Errorf("serve -h lacks %s", f)
		}
	}
	if s := help("status"); !strings.Contains(s, "-redis-url ") || !strings.Contains(s, "[TARGET_RPS]") {
		t.Errorf("status -h lacks its Redis or its rates:\n%s", s)
	}
	list := help("deadletters", "list")
	for _, f := range []string{"-dead-letter-topic", "-dead-letter-retention", "-otp-topic", "-marketing-topic"} {
		if strings.Contains(list, f+" ") {
			t.Errorf("deadletters list -h shows %s, which list never reads", f)
		}
	}
	for _, f := range []string{"-project", "-otp-subscription", "-marketing-subscription", "-dead-letter-subscription"} {
		if !strings.Contains(list, f+" ") {
			t.Errorf("deadletters list -h lacks %s", f)
		}
	}
}
