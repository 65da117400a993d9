package main

import (
	"bytes"
	"context"
	"encoding/json"
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
	"smsdispatcher/internal/redistest"
	"smsdispatcher/provider/providertest"
	"smsdispatcher/status"
)

// TestServeTakesReceipts: with RECEIPTS_ADDR, serve asks the provider for
// receipts at RECEIPTS_PUBLIC_URL, takes the simulator's signed receipt on
// its own listener, folds it (message says delivered), publishes the
// final state on STATUS_TOPIC, refuses a forged receipt with 403, and
// logs neither the secret nor the number.
func TestServeTakesReceipts(t *testing.T) {
	ps := pstest.NewServer()
	defer ps.Close()
	sim := providertest.NewGeneric(providertest.Config{Token: "s3cret", Receipts: providertest.ReceiptConfig{Secret: "r3ceipt"}})
	defer sim.Close()
	simSrv := httptest.NewServer(sim)
	defer simSrv.Close()
	account := redistest.UniqueAccount(t)
	receipts := freeAddr(t)
	t.Setenv("PUBSUB_EMULATOR_HOST", ps.Addr)
	t.Setenv("PUBSUB_PROJECT_ID", "proj")
	t.Setenv("REDIS_URL", "redis://"+redistest.Addr(t))
	t.Setenv("SMS_ACCOUNT", account)
	t.Setenv("SMS_PROVIDER_URL", simSrv.URL)
	t.Setenv("SMS_PROVIDER_TOKEN", "s3cret")
	t.Setenv("SMS_RECEIPT_SECRET_FILE", writeFile(t, "receipt-secret", "r3ceipt\n"))
	httpAddr := freeAddr(t)
	t.Setenv("HTTP_ADDR", httpAddr)
	t.Setenv("RECEIPTS_ADDR", receipts)
	t.Setenv("RECEIPTS_PUBLIC_URL", "http://"+receipts+"/")
	ctx := context.Background()
	if err := run(ctx, []string{"setup"}, io.Discard, io.Discard); err != nil {
		t.Fatalf("setup: %v", err)
	}
	serveCtx, sigterm := context.WithCancel(ctx)
	var logs bytes.Buffer
	served := make(chan error, 1)
	go func() { served <- run(serveCtx, []string{"serve"}, io.Discard, &logs) }()

	id := "login-" + account
	if err := run(ctx, []string{"publish", "--class", "otp", "--to", "+819012345678", "--body", "Your code is 482913", "--id", id}, io.Discard, io.Discard); err != nil {
		t.Fatalf("publish: %v", err)
	}
	waitFor(t, func() bool {
		var out bytes.Buffer
		if run(ctx, []string{"message", "--json", id}, &out, io.Discard) != nil {
			return false
		}
		var m status.Message
		return json.Unmarshal(out.Bytes(), &m) == nil && len(m.Accounts) == 1 && m.Accounts[0].Status == "delivered"
	})
	waitFor(t, func() bool {
		for _, m := range ps.Messages() {
			if m.Attributes["id"] == id && m.Attributes["status"] == "delivered" && m.Attributes["class"] == "otp" {
				var ev map[string]string
				return json.Unmarshal(m.Data, &ev) == nil && ev["account"] == account && ev["status"] == "delivered"
			}
		}
		return false
	})

	forged := `{"id":"x","client_ref":"` + id + `","status":"failed","timestamp":"2026-12-02T12:00:00Z"}`
	req, _ := http.NewRequest(http.MethodPost, "http://"+receipts+"/v1/receipts/"+account, strings.NewReader(forged))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Signature", "sha256=00")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("forged receipt answered %d, want 403", resp.StatusCode)
	}

	// SMSReceiptsMissing fires only on an account that says it asks for
	// receipts.
	metrics, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(metrics.Body)
	metrics.Body.Close()
	if want := `sms_receipts_enabled{sms_account="` + account + `"} 1`; !strings.Contains(string(body), want) {
		t.Fatalf("/metrics lacks %s", want)
	}

	sigterm()
	if err := <-served; err != nil {
		t.Fatalf("serve after SIGTERM: %v, want nil (exit 0)", err)
	}
	if strings.Contains(logs.String(), "r3ceipt") || strings.Contains(logs.String(), "9012345678") {
		t.Fatal("logs hold the receipt secret or a phone number")
	}
}

// TestServeChecksTheTopicsItsReceiptsPublishTo: with RECEIPTS_ADDR, a
// status topic or a resend topic serve cannot publish to (missing, or a
// denied role) stops it at start, with one line naming the variable, the
// topic and the project: without the check every status event would stay
// owed.
func TestServeChecksTheTopicsItsReceiptsPublishTo(t *testing.T) {
	setVar(t, &subscriptionCheckTimeout, 2*time.Second)
	tests := []struct {
		name, env, topic string
		server           func(t *testing.T) string
		want             string
	}{
		{"a missing status topic", "STATUS_TOPIC", "sms-status-typo", setUpPubsub(), "not found"},
		{"a status topic this identity may not publish to", "STATUS_TOPIC", "sms-status",
			setUpPubsub(pstest.WithErrorInjection("GetTopic", codes.PermissionDenied, "User not authorized to perform this action.")), "may not publish to it"},
		{"a missing resend topic (otp's)", "OTP_TOPIC", "sms-otp-typo", setUpPubsub(), "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.server(t)
			serveEnv(t, "http://127.0.0.1:1")
			receipts := freeAddr(t)
			t.Setenv("SMS_RECEIPT_SECRET_FILE", writeFile(t, "receipt-secret", "r3ceipt\n"))
			t.Setenv("RECEIPTS_ADDR", receipts)
			t.Setenv("RECEIPTS_PUBLIC_URL", "http://"+receipts+"/")
			t.Setenv(tt.env, tt.topic)
			var logs killBuffer
			serveCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang bound
			defer cancel()
			err := run(serveCtx, []string{"serve"}, io.Discard, &logs)
			var ce *config.Error
			if !errors.As(err, &ce) || ce.Env != tt.env {
				t.Fatalf("serve: %v; want a configuration error naming %s", err, tt.env)
			}
			line := err.Error()
			for _, w := range []string{`"` + tt.topic + `"`, `project "proj"`, tt.want} {
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
