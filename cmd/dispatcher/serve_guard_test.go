package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/pstest"

	"smsdispatcher/guard"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/provider/providertest"
)

// TestServeGuardsTheClassesThatAskForIt: serve builds the guard of an
// ACCOUNTS_FILE class's keys: an OTP to a denied country is acked, never
// sent, its status event published blocked and counted in
// sms_blocked_total by its country code, and `dispatcher message` tells
// why; an allowed one is sent, and marketing, unguarded, goes to any
// country.
func TestServeGuardsTheClassesThatAskForIt(t *testing.T) {
	ps := pstest.NewServer()
	defer ps.Close()
	sim := providertest.NewGeneric(providertest.Config{Token: "s3cret"})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	file := writeFile(t, "accounts.yaml", fmt.Sprintf(`classes:
  - name: otp
    deny_countries: ["+7"]
    max_per_prefix: {digits: 6, count: 300, per: 10m, block_for: 1h}
    min_conversion: {ratio: 0.2, min_sends: 50, per: 30m, digits: 5, block_for: 1h}
  - name: marketing
accounts:
  - name: %s
    provider: generic
    generic: {url: %s, token: s3cret}
    classes: [otp, marketing]
`, redistest.UniqueAccount(t), srv.URL))
	addr := freeAddr(t)
	t.Setenv("PUBSUB_EMULATOR_HOST", ps.Addr)
	t.Setenv("PUBSUB_PROJECT_ID", "proj")
	t.Setenv("REDIS_URL", "redis://"+redistest.Addr(t))
	t.Setenv("ACCOUNTS_FILE", file)
	t.Setenv("HTTP_ADDR", addr)
	ctx := context.Background()
	if err := run(ctx, []string{"setup"}, io.Discard, io.Discard); err != nil {
		t.Fatalf("setup: %v", err)
	}
	serveCtx, sigterm := context.WithCancel(ctx)
	var logs bytes.Buffer
	served := make(chan error, 1)
	go func() { served <- run(serveCtx, []string{"serve"}, io.Discard, &logs) }()

	for _, m := range [][]string{
		{"--class", "otp", "--id", "denied-1", "--to", "+79161234567"},
		{"--class", "otp", "--id", "login-1", "--to", "+819012345678"},
		{"--class", "marketing", "--id", "sale-1", "--to", "+79161234567"},
	} {
		if err := run(ctx, append([]string{"publish", "--body", "hello"}, m...), io.Discard, io.Discard); err != nil {
			t.Fatalf("publish %v: %v", m, err)
		}
	}
	blocked := func() []guard.Event {
		var out []guard.Event
		for _, m := range ps.Messages() {
			var ev guard.Event
			if strings.HasSuffix(m.Topic, "/sms-status") && json.Unmarshal(m.Data, &ev) == nil && ev.Status == guard.StatusBlocked {
				out = append(out, ev)
			}
		}
		return out
	}
	client, err := pubsub.NewClient(ctx, "proj") // PUBSUB_EMULATOR_HOST: pstest
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	vpub := client.Publisher("sms-verifications")
	if _, err := vpub.Publish(ctx, &pubsub.Message{Data: []byte(`{"id":"never-sent"}`)}).Get(ctx); err != nil {
		t.Fatal(err)
	}
	vpub.Stop()
	waitFor(t, func() bool {
		return sim.SentCount("login-1") == 1 && sim.SentCount("sale-1") == 1 && len(blocked()) == 1
	})
	if ev := blocked()[0]; ev.ID != "denied-1" || ev.Reason != guard.ReasonGeo || ev.Class != "otp" {
		t.Fatalf("the status event %+v, want denied-1 blocked for geo", ev)
	}
	if n := sim.SentCount("denied-1"); n != 0 {
		t.Fatalf("the denied OTP was sent %d times", n)
	}
	// dispatcher message says it was blocked, and why.
	var told bytes.Buffer
	waitFor(t, func() bool {
		told.Reset()
		return runMessage(ctx, []string{"denied-1"}, &told, io.Discard) == nil
	})
	if want := "denied-1: blocked by the guard (geo), never sent; class otp"; !strings.Contains(told.String(), want) {
		t.Fatalf("dispatcher message: %q, want %q", told.String(), want)
	}
	metrics := func() string {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(body)
	}
	waitFor(t, func() bool { return strings.Contains(metrics(), `sms_verifications_total{result="unknown"} 1`) })
	for _, want := range []string{
		`sms_blocked_total{country="7",reason="geo",sms_class="otp"} 1`,
		`sms_guard_blocks{reason="prefix_rate"} 0`,
	} {
		if !strings.Contains(metrics(), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	sigterm()
	if err := <-served; err != nil {
		t.Fatalf("serve after SIGTERM: %v", err)
	}
}
