package main

import (
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"cloud.google.com/go/pubsub/v2/pstest"

	"smsdispatcher/internal/redistest"
	"smsdispatcher/provider/providertest"
)

// TestServeWithTheDefaultsInSegments runs the real serve with the rates at
// their defaults and rates in segments, as RATE_UNIT=segment asks and as
// SMS_PROVIDER=twilio implies: the process starts, sends, and says at
// start that the account counts segments, and the longest body it takes.
func TestServeWithTheDefaultsInSegments(t *testing.T) {
	const sid = "AC0123456789abcdef0123456789abcdef"
	tests := []struct {
		name string
		sim  *providertest.Simulator
		env  func(url string) map[string]string
	}{
		{"RATE_UNIT=segment", providertest.NewGeneric(providertest.Config{Token: "s3cret"}), func(url string) map[string]string {
			return map[string]string{"RATE_UNIT": "segment", "SMS_PROVIDER_URL": url, "SMS_PROVIDER_TOKEN": "s3cret"}
		}},
		{"SMS_PROVIDER=twilio", providertest.NewTwilio(providertest.Config{Token: "s3cret"}, sid), func(url string) map[string]string {
			return map[string]string{"SMS_PROVIDER": "twilio", "TWILIO_ACCOUNT_SID": sid, "TWILIO_AUTH_TOKEN": "s3cret",
				"TWILIO_FROM": "+15005550006", "TWILIO_API_URL": url}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := pstest.NewServer()
			defer ps.Close()
			simSrv := httptest.NewServer(tt.sim)
			defer simSrv.Close()
			t.Setenv("PUBSUB_EMULATOR_HOST", ps.Addr)
			t.Setenv("PUBSUB_PROJECT_ID", "proj")
			t.Setenv("REDIS_URL", "redis://"+redistest.Addr(t))
			t.Setenv("SMS_ACCOUNT", redistest.UniqueAccount(t))
			t.Setenv("HTTP_ADDR", freeAddr(t))
			for k, v := range tt.env(simSrv.URL) {
				t.Setenv(k, v)
			}
			ctx := context.Background()
			if err := run(ctx, []string{"setup"}, io.Discard, io.Discard); err != nil {
				t.Fatalf("setup: %v", err)
			}
			serveCtx, sigterm := context.WithCancel(ctx)
			var logs bytes.Buffer
			served := make(chan error, 1)
			go func() { served <- run(serveCtx, []string{"serve"}, io.Discard, &logs) }()
			if err := run(ctx, []string{"publish", "--class", "otp", "--to", "+819012345678", "--body", "Your code is 482913"}, io.Discard, io.Discard); err != nil {
				sigterm()
				<-served
				t.Fatalf("publish: %v", err)
			}
			waitFor(t, func() bool { return tt.sim.Stats().Accepted == 1 })
			sigterm()
			if err := <-served; err != nil {
				t.Fatalf("serve: %v\n%s", err, logs.String())
			}
			if l := logs.String(); !strings.Contains(l, `"rate_unit":"segment"`) || !strings.Contains(l, `"max_segments":4`) {
				t.Fatalf("the start-up log does not say the account counts segments, 4 at most:\n%s", l)
			}
		})
	}
}
