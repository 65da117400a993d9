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
	"time"

	"cloud.google.com/go/pubsub/v2/pstest"

	"smsdispatcher/internal/attr"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/provider/providertest"
	"smsdispatcher/status"
	"smsdispatcher/suppress"
)

// TestServeSettlesAVonageOptOutSuppressed runs the real serve with a
// Vonage account and a generic one: an OTP through Vonage to a number on
// the simulator's own opt-out list is accepted, and its receipt (failed,
// err-code 9) puts the number on the list (source provider, through the
// Vonage account), settles the message suppressed (its story and its
// status event, source provider; dispatcher message says by which
// change; sms_suppressed_total counts it) and hands out no resend; a later message
// to the number through the generic account is stopped before it is sent.
func TestServeSettlesAVonageOptOutSuppressed(t *testing.T) {
	clearList(t)
	ps := pstest.NewServer()
	defer ps.Close()
	const vonageKey, vonageSecret, vonageSig = "k", "v-s3cret", "v-s1g"
	vo := providertest.NewVonage(providertest.Config{Token: vonageSecret,
		Receipts: providertest.ReceiptConfig{Secret: vonageSig, SignatureMethod: "sha256"}}, vonageKey)
	defer vo.Close()
	ge := providertest.NewGeneric(providertest.Config{Token: "g-s3cret", Receipts: providertest.ReceiptConfig{Secret: "g-r3ceipt"}})
	defer ge.Close()
	voSrv, geSrv := httptest.NewServer(vo), httptest.NewServer(ge)
	defer voSrv.Close()
	defer geSrv.Close()
	const number = "+447547232824"
	vo.OptOut(number)

	voName, geName := redistest.UniqueAccount(t)+"-vo", redistest.UniqueAccount(t)+"-ge"
	file := writeFile(t, "accounts.yaml", fmt.Sprintf(`accounts:
  - name: %s
    provider: vonage
    vonage: {api_key: %s, api_secret: %s, from: Acme, signature_secret_file: %s, signature_method: sha256, api_url: %s}
    classes: [otp]
  - name: %s
    provider: generic
    generic: {url: %s, token_file: %s, receipt_secret_file: %s}
    classes: [marketing]
`, voName, vonageKey, vonageSecret, writeFile(t, "vonage-sig", vonageSig+"\n"), voSrv.URL,
		geName, geSrv.URL, writeFile(t, "generic-token", "g-s3cret\n"), writeFile(t, "generic-receipt", "g-r3ceipt\n")))
	receipts, httpAddr := freeAddr(t), freeAddr(t)
	t.Setenv("PUBSUB_EMULATOR_HOST", ps.Addr)
	t.Setenv("PUBSUB_PROJECT_ID", "proj")
	t.Setenv("REDIS_URL", "redis://"+redistest.Addr(t))
	t.Setenv("ACCOUNTS_FILE", file)
	t.Setenv("HTTP_ADDR", httpAddr)
	t.Setenv("RECEIPTS_ADDR", receipts)
	t.Setenv("RECEIPTS_PUBLIC_URL", "http://"+receipts+"/")
	ctx := context.Background()
	if err := run(ctx, []string{"setup"}, io.Discard, io.Discard); err != nil {
		t.Fatalf("setup: %v", err)
	}
	serveCtx, sigterm := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- run(serveCtx, []string{"serve"}, io.Discard, io.Discard) }()
	defer func() {
		sigterm()
		if err := <-served; err != nil {
			t.Errorf("serve after SIGTERM: %v", err)
		}
	}()

	const otp = "login-optout"
	if err := run(ctx, []string{"publish", "--class", "otp", "--to", number, "--body", "Your code is 482913", "--id", otp}, io.Discard, io.Discard); err != nil {
		t.Fatalf("publish: %v", err)
	}
	waitFor(t, func() bool {
		var out bytes.Buffer
		if run(ctx, []string{"message", "--json", otp}, &out, io.Discard) != nil {
			return false
		}
		var m status.Message
		return json.Unmarshal(out.Bytes(), &m) == nil && len(m.Accounts) == 1 && m.Accounts[0].Status == "suppressed"
	})
	waitWithin(t, 30*time.Second, "dispatcher message says when and by which change the OTP was suppressed", func() bool {
		// Written just after the fold the story shows.
		var story bytes.Buffer
		return run(ctx, []string{"message", otp}, &story, io.Discard) == nil && strings.Contains(story.String(), "suppressed at ") &&
			strings.Contains(story.String(), "source provider, through "+voName)
	})
	if st := vo.Stats(); st.Accepted != 1 || st.OptedOut != 1 {
		t.Fatalf("the Vonage simulator accepted %d, %d of them opted out; want the OTP accepted, its receipt saying err-code 9", st.Accepted, st.OptedOut)
	}
	e, ok, err := suppress.NewStore(redistest.Client(t), "", nil).Get(ctx, number)
	if err != nil || !ok || e.Source != suppress.SourceProvider || e.Account != voName {
		t.Fatalf("the list's entry: %+v, %v, %v; want source provider through %s", e, ok, err, voName)
	}
	waitFor(t, func() bool {
		for _, m := range ps.Messages() {
			if m.Attributes["id"] == otp && m.Attributes["status"] != "" {
				var ev map[string]string
				if json.Unmarshal(m.Data, &ev) != nil || ev["status"] != "suppressed" || ev["source"] != suppress.SourceProvider || ev["account"] != voName {
					t.Fatalf("the OTP's status event: %s; want suppressed, source provider, on %s", m.Data, voName)
				}
				return true
			}
		}
		return false
	})

	// Counted as a message the list stopped, as a 21610 is.
	waitWithin(t, 10*time.Second, "sms_suppressed_total counts the OTP the receipt settled", func() bool {
		resp, err := http.Get("http://" + httpAddr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(body), `sms_suppressed_total{sms_class="otp",source="provider"} 1`)
	})

	const sale = "sale-optout"
	if err := run(ctx, []string{"publish", "--class", "marketing", "--to", number, "--body", "sale", "--id", sale}, io.Discard, io.Discard); err != nil {
		t.Fatalf("publish: %v", err)
	}
	waitFor(t, func() bool {
		for _, m := range ps.Messages() {
			if m.Attributes["id"] == sale && m.Attributes["status"] == "suppressed" {
				return true
			}
		}
		return false
	})
	if n := ge.Stats().Accepted + ge.Stats().Rejected; n != 0 {
		t.Fatalf("the generic account was asked %d times for a number the Vonage receipt suppressed", n)
	}
	for _, m := range ps.Messages() {
		if m.Attributes[attr.ResendAvoid] != "" {
			t.Fatalf("a resend was handed out (%v): a suppressed message is never resent", m.Attributes)
		}
	}
}
