package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/pubsub/v2/pstest"

	"smsdispatcher/dispatch"
	"smsdispatcher/provider"
	"smsdispatcher/provider/providertest"
	"smsdispatcher/receipts"
	"smsdispatcher/suppress"
)

// inboundPath is the real inbound path: the receipts' handler of one
// Vonage account ("vo", signed webhooks) handing verified messages to
// the suppressions on a real Redis, publishing to pstest.
type inboundPath struct {
	url   string // the account's inbound URL
	sim   *providertest.Simulator
	store *suppress.Store
	ps    *pstest.Server

	mu      sync.Mutex
	counted []string // sms_inbound_total's increments: "account keyword outcome"
}

const inboundSecret = "vonage-S1G"

// noLedger is an account's ledger the inbound path never asks: a call
// panics.
type noLedger struct{ receipts.Ledger }

func newInboundPath(t *testing.T) *inboundPath {
	t.Helper()
	l := newTestList(t, true)
	s, client, store := l.suppressions, l.client, l.store
	p := &inboundPath{sim: providertest.NewVonage(providertest.Config{}, "k"), store: store, ps: l.ps}
	s.counted = func(account, keyword, outcome string) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.counted = append(p.counted, account+" "+keyword+" "+outcome)
	}
	vo, err := provider.NewVonage(provider.VonageConfig{APIKey: "k", APISecret: provider.StaticSecret("s"), From: "Acme", SignatureSecret: provider.StaticSecret(inboundSecret)})
	if err != nil {
		t.Fatal(err)
	}
	var handler http.Handler
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(ts.Close)
	status := client.Publisher("sms-status")
	srv, err := receipts.New(receipts.Config{
		PublicURL: ts.URL, Accounts: []receipts.Account{{Name: "vo", Reader: vo, Ledger: noLedger{}}},
		Status: receipts.TopicPublisher{Publisher: status}, Resend: receipts.TopicPublisher{Publisher: status},
		Inbound: s, Logger: slog.New(slog.DiscardHandler), Deadline: dispatch.PayloadDeadline,
	})
	if err != nil {
		t.Fatal(err)
	}
	handler = srv.Handler()
	p.url = receipts.InboundURL(ts.URL, "vo")
	t.Cleanup(func() {
		status.Stop()
		l.rdb.Del(context.Background(), l.names.Inbound("vo", "MO-1"), l.names.Inbound("vo", "MO-2"))
	})
	return p
}

// post posts m to the account's inbound URL signed with secret and
// returns the answer's status.
func (p *inboundPath) post(t *testing.T, m providertest.Inbound, secret string) int {
	t.Helper()
	status, _, err := p.sim.PostInbound(context.Background(), p.url, m, secret, "")
	if err != nil {
		t.Fatal(err)
	}
	return status
}

// published returns what was published to topic, decoded into a fresh T
// each.
func published[T any](t *testing.T, ps *pstest.Server, topic string) []T {
	t.Helper()
	var out []T
	for _, m := range ps.Messages() {
		if m.Topic != "projects/proj/topics/"+topic {
			continue
		}
		var v T
		if err := json.Unmarshal(m.Data, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// TestAForgedInboundChangesNothing: on the real path (the receipts'
// handler, the list in Redis, Pub/Sub), a STOP signed with another
// secret is answered 403 and changes nothing: the number stays off the
// list, nothing is published to INBOUND_TOPIC or SUPPRESSIONS_TOPIC; the
// same STOP signed right then puts it on the list.
func TestAForgedInboundChangesNothing(t *testing.T) {
	p := newInboundPath(t)
	const from = "+447547232824"
	stop := providertest.Inbound{ID: "MO-1", From: from, To: "+15005550006", Body: "STOP"}
	if status := p.post(t, stop, "forged-"+inboundSecret); status != http.StatusForbidden {
		t.Fatalf("a forged STOP answered %d, want 403", status)
	}
	if _, ok, err := p.store.Get(context.Background(), from); err != nil || ok {
		t.Fatalf("after a forged STOP: on the list %v (%v)", ok, err)
	}
	if n := len(published[inboundEvent](t, p.ps, "sms-inbound")) + len(published[suppress.Entry](t, p.ps, "sms-suppressions")); n != 0 {
		t.Fatalf("a forged STOP published %d messages", n)
	}
	if status := p.post(t, stop, inboundSecret); status != http.StatusOK {
		t.Fatalf("the signed STOP answered %d, want 200", status)
	}
	if e, ok, err := p.store.Get(context.Background(), from); err != nil || !ok || e.Source != suppress.SourceInbound || e.Account != "vo" {
		t.Fatalf("after the signed STOP: %+v, %v (%v); want on the list through vo", e, ok, err)
	}
	if got := published[inboundEvent](t, p.ps, "sms-inbound"); len(got) != 1 || got[0].From != from || !strings.HasPrefix(got[0].To, "+") {
		t.Fatalf("published to sms-inbound: %+v; want the STOP, from and to in E.164", got)
	}
}

// TestEveryInboundPostIsCounted: sms_inbound_total counts every post to
// an account's inbound URL: a forged one, a signed one that does not
// parse and one too large, by their outcome (keyword none: never read),
// as well as a verified STOP.
func TestEveryInboundPostIsCounted(t *testing.T) {
	p := newInboundPath(t)
	stop := providertest.Inbound{ID: "MO-2", From: "+447547232824", To: "+15005550006", Body: "STOP"}
	if status := p.post(t, stop, "forged-"+inboundSecret); status != http.StatusForbidden {
		t.Fatalf("forged: %d, want 403", status)
	}
	noID := stop
	noID.ID = ""
	if status := p.post(t, noID, inboundSecret); status != http.StatusBadRequest {
		t.Fatalf("without an id: %d, want 400", status)
	}
	big := stop
	big.Body = strings.Repeat("x", receipts.MaxBodyBytes)
	if status := p.post(t, big, inboundSecret); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("too large: %d, want 413", status)
	}
	if status := p.post(t, stop, inboundSecret); status != http.StatusOK {
		t.Fatalf("signed: %d, want 200", status)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	want := []string{"vo none forged", "vo none malformed", "vo none too_large", "vo stop changed"}
	if !slices.Equal(p.counted, want) {
		t.Fatalf("sms_inbound_total counted %q, want %q", p.counted, want)
	}
}
