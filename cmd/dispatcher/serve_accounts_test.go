package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"cloud.google.com/go/pubsub/v2/pstest"

	"smsdispatcher/internal/redistest"
	"smsdispatcher/provider/providertest"
)

// TestServeWithAnAccountsFile runs the real serve with ACCOUNTS_FILE: OTP
// goes out on its own account, marketing on the bulk account From a sender
// of its pool, the start-up log lists both accounts with the learned rate
// of the one that learns, and the metrics carry each account's name.
func TestServeWithAnAccountsFile(t *testing.T) {
	ps := pstest.NewServer()
	defer ps.Close()
	otpSim := providertest.NewGeneric(providertest.Config{Token: "otp-s3cret"})
	bulkSim := providertest.NewGeneric(providertest.Config{Token: "bulk-s3cret", SenderLimit: 5})
	otpSrv, bulkSrv := httptest.NewServer(otpSim), httptest.NewServer(bulkSim)
	defer otpSrv.Close()
	defer bulkSrv.Close()
	otpName, bulkName := redistest.UniqueAccount(t)+"-otp", redistest.UniqueAccount(t)+"-bulk"
	file := writeFile(t, "accounts.yaml", fmt.Sprintf(`accounts:
  - name: %s
    provider: generic
    generic: {url: %s, token_file: %s}
    classes: [otp]
  - name: %s
    provider: generic
    generic: {url: %s, token_file: %s}
    classes: [marketing, otp]
    senders:
      - {from: "+15550000001", rps: 5}
      - {from: "+15550000002", rps: 5}
    adaptive: {enabled: true}
`, otpName, otpSrv.URL, writeFile(t, "otp-token", "otp-s3cret\n"), bulkName, bulkSrv.URL, writeFile(t, "bulk-token", "bulk-s3cret\n")))
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
		{"--class", "otp", "--id", "login-1"},
		{"--class", "marketing", "--id", "sale-1"},
		{"--class", "marketing", "--id", "sale-2"},
	} {
		if err := run(ctx, append([]string{"publish", "--to", "+819012345678", "--body", "hello"}, m...), io.Discard, io.Discard); err != nil {
			t.Fatalf("publish %v: %v", m, err)
		}
	}
	waitFor(t, func() bool {
		return otpSim.SentCount("login-1") == 1 && bulkSim.SentCount("sale-1") == 1 && bulkSim.SentCount("sale-2") == 1
	})
	if n := otpSim.Stats().Accepted; n != 1 {
		t.Fatalf("the otp account sent %d, want only the OTP", n)
	}
	froms := map[string]bool{}
	for _, a := range bulkSim.Arrivals() {
		froms[a.From] = true
	}
	if len(froms) != 2 || !froms["+15550000001"] || !froms["+15550000002"] {
		t.Fatalf("marketing went from %v, want each sender of the pool once (the one whose slot opens first)", froms)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		fmt.Sprintf(`sms_learned_rate{sms_account=%q} 90`, bulkName),
		fmt.Sprintf(`sms_account=%q,sms_action="ack",sms_class="otp",sms_outcome="sent"`, otpName),
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	sigterm()
	if err := <-served; err != nil {
		t.Fatalf("serve after SIGTERM: %v", err)
	}
	l := logs.String()
	if !strings.Contains(l, `"msg":"account","account":"`+otpName) || !strings.Contains(l, `"learned_rps":"none: the target holds"`) {
		t.Fatalf("the start-up log does not list the accounts with the learned rate:\n%s", l)
	}
	if strings.Contains(l, "s3cret") {
		t.Fatal("the log holds a token")
	}
}
