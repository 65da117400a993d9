package providertest_test

// Each simulator's receipts read by the real adapter's ReadReceipt: the
// two sides were written apart (the simulators sign from the providers'
// documents, package provider verifies from its SDKs' validators), so a
// disagreement between them shows here.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"smsdispatcher/provider"
	"smsdispatcher/provider/providertest"
)

// The credentials both sides are given.
const (
	xToken         = "tok-CROSS-0123456789"
	xTwilioSID     = "AC00112233445566778899aabbccddeeff"
	xTwilioFrom    = "+15005550006"
	xVonageKey     = "k3y0c0ss"
	xVonageFrom    = "AcmeInc"
	xReceiptSecret = "receipt-S3CRET-abc=&def"
	xCallbackPath  = "/v1/receipts/acct"
)

// xAt is the simulators' clock: the time their receipts say.
var xAt = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// The destinations: one delivered, one whose messages all fail.
const (
	xDelivered = "+819012345678"
	xFailing   = "+6281234567890"
)

// receiptAdapter is an adapter that sends and reads its receipts.
type receiptAdapter interface {
	provider.Sender
	provider.ReceiptReader
}

// readResult is one receipt the receiver took and what ReadReceipt made
// of it.
type readResult struct {
	req    provider.ReceiptRequest
	report provider.DeliveryReport
	err    error
}

// crossReceiver is the dispatcher's receipts endpoint reduced to the
// adapter's ReadReceipt, called with the exact callback URL the adapter
// was told.
type crossReceiver struct {
	url string // the callback URL

	mu     sync.Mutex
	reader provider.ReceiptReader // guarded by mu; set before the first send
	got    []readResult           // guarded by mu
}

func newCrossReceiver(t *testing.T) *crossReceiver {
	t.Helper()
	rc := &crossReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		req := provider.ReceiptRequest{URL: rc.url, Header: r.Header.Clone(), Body: body}
		rc.mu.Lock()
		reader := rc.reader
		rc.mu.Unlock()
		d, err := reader.ReadReceipt(req)
		rc.mu.Lock()
		rc.got = append(rc.got, readResult{req: req, report: d, err: err})
		rc.mu.Unlock()
		switch {
		case errors.Is(err, provider.ErrForged):
			w.WriteHeader(http.StatusForbidden)
		case errors.Is(err, provider.ErrMalformed):
			w.WriteHeader(http.StatusBadRequest)
		case err != nil:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(srv.Close)
	rc.url = srv.URL + xCallbackPath
	return rc
}

func (rc *crossReceiver) setReader(r provider.ReceiptReader) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.reader = r
}

func (rc *crossReceiver) results() []readResult {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// crossCase is one simulator against its adapter.
type crossCase struct {
	name string
	// receipts is the simulator's receipt configuration (latency, retries
	// and clock are set by the test).
	receipts providertest.ReceiptConfig
	newSim   func(providertest.Config) *providertest.Simulator
	// newAdapter returns the adapter for the simulator at base, asking for
	// receipts at callback.
	newAdapter func(t *testing.T, base, callback string) receiptAdapter
	body       string
	parts      int    // each message's parts
	failStatus string // the final status of a message to xFailing
	failCode   string // set with SetDelivered
	echoesRef  bool   // the receipt carries the message's ID
	saysWhen   bool   // the receipt says when: DeliveryReport.At is xAt
}

func genericCase() crossCase {
	return crossCase{
		name:     "generic",
		receipts: providertest.ReceiptConfig{Secret: xReceiptSecret, Intermediate: []string{"sent"}},
		newSim: func(cfg providertest.Config) *providertest.Simulator {
			return providertest.NewGeneric(cfg, providertest.WithClock(func() time.Time { return xAt }))
		},
		newAdapter: func(t *testing.T, base, callback string) receiptAdapter {
			t.Helper()
			c, err := provider.NewClient(base, xToken, provider.WithStatusCallback(callback),
				provider.WithReceiptSecret(provider.StaticSecret(xReceiptSecret)))
			if err != nil {
				t.Fatalf("NewClient: %v", err)
			}
			return c
		},
		body: "Your code is 482913", parts: 1,
		failStatus: "undelivered", failCode: "E62", echoesRef: true, saysWhen: true,
	}
}

func twilioCase(token *provider.Secret) crossCase {
	return crossCase{
		name:     "twilio",
		receipts: providertest.ReceiptConfig{Intermediate: []string{"sent"}},
		newSim: func(cfg providertest.Config) *providertest.Simulator {
			return providertest.NewTwilio(cfg, xTwilioSID, providertest.WithClock(func() time.Time { return xAt }))
		},
		newAdapter: func(t *testing.T, base, callback string) receiptAdapter {
			t.Helper()
			tw, err := provider.NewTwilio(provider.TwilioConfig{
				AccountSID: xTwilioSID, AuthToken: token, From: xTwilioFrom, BaseURL: base,
			}, provider.WithStatusCallback(callback))
			if err != nil {
				t.Fatalf("NewTwilio: %v", err)
			}
			return tw
		},
		body: "Your code is 482913", parts: 1,
		failStatus: "undelivered", failCode: "30003",
	}
}

func vonageCase(name, method string, json bool, body string, parts int) crossCase {
	rc := providertest.ReceiptConfig{
		Secret: xReceiptSecret, SignatureMethod: method, JSON: json, Intermediate: []string{"accepted"},
	}
	failStatus := "rejected"
	if json {
		rc.FailStatus, failStatus = "expired", "expired"
	}
	return crossCase{
		name:     name,
		receipts: rc,
		newSim: func(cfg providertest.Config) *providertest.Simulator {
			return providertest.NewVonage(cfg, xVonageKey, providertest.WithClock(func() time.Time { return xAt }))
		},
		newAdapter: func(t *testing.T, base, callback string) receiptAdapter {
			t.Helper()
			v, err := provider.NewVonage(provider.VonageConfig{
				APIKey: xVonageKey, APISecret: provider.StaticSecret(xToken), From: xVonageFrom, BaseURL: base,
				SignatureSecret: provider.StaticSecret(xReceiptSecret), SignatureMethod: method,
			}, provider.WithStatusCallback(callback))
			if err != nil {
				t.Fatalf("NewVonage: %v", err)
			}
			return v
		},
		body: body, parts: parts,
		failStatus: failStatus, failCode: "2", echoesRef: true, saysWhen: true,
	}
}

// crossSetup starts c's simulator and receiver and returns the adapter.
// Receipts are posted at once and never retried, so that each receipt is
// read exactly once.
func crossSetup(t *testing.T, c crossCase) (*providertest.Simulator, *crossReceiver, receiptAdapter) {
	t.Helper()
	rc := newCrossReceiver(t)
	cfg := providertest.Config{Token: xToken, Receipts: c.receipts}
	cfg.Receipts.MaxLatency, cfg.Receipts.Retries = -1, -1
	sim := c.newSim(cfg)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close) // before the servers: it stops posting
	a := c.newAdapter(t, srv.URL, rc.url)
	t.Cleanup(a.CloseIdleConnections)
	rc.setReader(a)
	sim.SetDelivered(xFailing, 0, c.failCode)
	return sim, rc, a
}

// sent is one accepted message: its ID, where it went and the provider's
// ids the send's Receipt named.
type sent struct {
	id, to string
	pids   []string
}

// crossSend sends one message per destination in tos and waits for every
// receipt.
func crossSend(t *testing.T, sim *providertest.Simulator, a receiptAdapter, c crossCase, prefix string, tos ...string) []sent {
	t.Helper()
	planned := sim.ReceiptStats().Messages + len(tos)
	var out []sent
	for i, to := range tos {
		// The ID has a space, an '=' and an '&': Vonage signs them replaced.
		m := provider.Message{ID: fmt.Sprintf("%s-%s-%d a=b&c", c.name, prefix, i), To: to, Body: c.body}
		r, err := a.Send(context.Background(), m)
		if err != nil {
			t.Fatalf("Send %s: %v", m.ID, err)
		}
		pids := r.Parts
		if pids == nil {
			pids = []string{r.ID}
		}
		if len(pids) != c.parts || pids[0] != r.ID {
			t.Fatalf("Send %s: Receipt %+v, want %d parts starting with ID", m.ID, r, c.parts)
		}
		out = append(out, sent{id: m.ID, to: to, pids: pids})
	}
	// The simulator plans a message's receipts just after its answer has
	// left, so the last send may return before they are planned, and
	// WaitReceipts waits only for planned ones.
	deadline := time.Now().Add(time.Second)
	for sim.ReceiptStats().Messages < planned {
		if time.Now().After(deadline) {
			t.Fatalf("receipts of %d messages planned, want %d", sim.ReceiptStats().Messages, planned)
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := sim.WaitReceipts(ctx); err != nil {
		t.Fatalf("WaitReceipts: %v (stats %+v)", err, sim.ReceiptStats())
	}
	return out
}

// checkEveryReceipt checks every receipt the simulator posted against
// what the adapter read of it: the forged ones (and only they) are
// ErrForged and answered 403, every other one verifies, is answered 200
// and reads as posted (provider id, ref, status, error code, time), and
// names a provider id a send's Receipt returned, with the Ref of that
// send where the provider echoes it.
func checkEveryReceipt(t *testing.T, sim *providertest.Simulator, rc *crossReceiver, c crossCase, msgs []sent) {
	t.Helper()
	byPID := map[string]sent{}
	for _, m := range msgs {
		for _, p := range m.pids {
			byPID[p] = m
		}
	}
	got, posted := rc.results(), sim.PostedReceipts()
	if len(got) != len(posted) {
		t.Fatalf("the receiver read %d receipts, the simulator posted %d", len(got), len(posted))
	}
	var read, want []string
	forged := 0
	for _, g := range got {
		switch {
		case errors.Is(g.err, provider.ErrForged):
			forged++
			continue
		case g.err != nil:
			t.Errorf("ReadReceipt: %v", g.err)
			continue
		}
		d := g.report
		m, ok := byPID[d.ProviderID]
		if !ok {
			t.Errorf("receipt for %q, which no send's Receipt named", d.ProviderID)
		}
		switch {
		case c.echoesRef && d.Ref != m.id:
			t.Errorf("receipt for %q: Ref %q, want %q", d.ProviderID, d.Ref, m.id)
		case !c.echoesRef && d.Ref != "":
			t.Errorf("receipt for %q: Ref %q, want none", d.ProviderID, d.Ref)
		}
		wantAt := time.Time{}
		if c.saysWhen {
			wantAt = xAt
		}
		if !d.At.Equal(wantAt) {
			t.Errorf("receipt for %q: At %v, want %v", d.ProviderID, d.At, wantAt)
		}
		read = append(read, fmt.Sprintf("%s|%s|%s|%s", d.ProviderID, d.Ref, d.Status, d.ErrorCode))
	}
	postedForged := 0
	for _, p := range posted {
		wantAnswer := http.StatusOK
		if p.Forged {
			postedForged++
			wantAnswer = http.StatusForbidden
		} else {
			// The simulators' words coincide with the dispatcher's names
			// for every status these tests post.
			status, ok := provider.ParseDeliveryStatus(p.Status)
			if !ok {
				t.Errorf("posted status %q has no DeliveryStatus", p.Status)
			}
			want = append(want, fmt.Sprintf("%s|%s|%s|%s", p.ProviderID, p.Ref, status, p.ErrorCode))
		}
		if p.Answer != wantAnswer {
			t.Errorf("posted %+v: answered %d, want %d", p, p.Answer, wantAnswer)
		}
	}
	if forged != postedForged {
		t.Errorf("%d receipts ErrForged, the simulator forged %d", forged, postedForged)
	}
	slices.Sort(read)
	slices.Sort(want)
	if !slices.Equal(read, want) {
		t.Errorf("read receipts\n%s\nwant (as posted)\n%s", strings.Join(read, "\n"), strings.Join(want, "\n"))
	}
}

// checkFinals checks, from the verified receipts alone, that each part of
// msgs got a final status: delivered, but for the last part of a message
// to xFailing, which has c's failure and error code.
func checkFinals(t *testing.T, rc *crossReceiver, c crossCase, msgs []sent) {
	t.Helper()
	finals := map[string]map[string]bool{} // pid -> "status|code" seen
	for _, g := range rc.results() {
		if g.err == nil && g.report.Status.Final() {
			k := string(g.report.Status) + "|" + g.report.ErrorCode
			if finals[g.report.ProviderID] == nil {
				finals[g.report.ProviderID] = map[string]bool{}
			}
			finals[g.report.ProviderID][k] = true
		}
	}
	for _, m := range msgs {
		for i, p := range m.pids {
			want := "delivered|"
			if m.to == xFailing && i == len(m.pids)-1 {
				want = c.failStatus + "|" + c.failCode
			}
			if seen := finals[p]; len(seen) != 1 || !seen[want] {
				t.Errorf("%s part %d (%s): finals %v, want only %s", m.id, i, p, seen, want)
			}
		}
	}
}

func crossCases() []crossCase {
	long := strings.Repeat("Your code is 482913. ", 10) // 210 GSM-7 characters: 2 parts
	return []crossCase{
		genericCase(),
		twilioCase(provider.StaticSecret(xToken)),
		vonageCase("vonage-md5hash", "", false, "Your code is 482913", 1),
		vonageCase("vonage-md5", "md5", false, "Your code is 482913", 1),
		vonageCase("vonage-sha1", "sha1", false, "Your code is 482913", 1),
		vonageCase("vonage-sha256", "sha256", false, "Your code is 482913", 1),
		vonageCase("vonage-sha512", "sha512", false, "Your code is 482913", 1),
		vonageCase("vonage-json", "sha256", true, "Your code is 482913", 1),
		vonageCase("vonage-multipart", "md5hash", false, long, 2),
	}
}

// TestReceiptsCrossAdapters sends real messages through each adapter to
// its simulator and reads every receipt posted back with the adapter's
// ReadReceipt: first honest ones (intermediate, final, duplicated and out
// of order), then forged and replayed ones.
func TestReceiptsCrossAdapters(t *testing.T) {
	for _, c := range crossCases() {
		t.Run(c.name, func(t *testing.T) {
			sim, rc, a := crossSetup(t, c)
			sim.UpdateReceipts(func(r *providertest.ReceiptConfig) { r.Duplicates, r.OutOfOrder = 0.5, 0.5 })
			msgs := crossSend(t, sim, a, c, "honest", xDelivered, xFailing, xDelivered, xFailing)
			checkEveryReceipt(t, sim, rc, c, msgs)
			checkFinals(t, rc, c, msgs)
			if st := sim.ReceiptStats(); st.Duplicated == 0 || st.Reordered == 0 || st.Forged != 0 {
				t.Errorf("stats %+v: want duplicates and reordering, nothing forged", st)
			}

			// Forged receipts are ErrForged; a replayed one (the same
			// bytes again) verifies: the fold downstream is idempotent.
			sim.UpdateReceipts(func(r *providertest.ReceiptConfig) {
				r.Duplicates, r.OutOfOrder, r.Forged, r.Replayed = 0, 0, 0.5, 1
			})
			msgs = append(msgs, crossSend(t, sim, a, c, "attacked", xDelivered, xFailing, xDelivered)...)
			checkEveryReceipt(t, sim, rc, c, msgs)
			st := sim.ReceiptStats()
			if st.Forged == 0 || st.Replayed == 0 {
				t.Fatalf("stats %+v: want forged and replayed receipts", st)
			}
			bodies := map[string]int{}
			for _, g := range rc.results() {
				if g.err == nil {
					bodies[string(g.req.Body)]++
				}
			}
			replays := 0
			for _, n := range bodies {
				replays += n - 1
			}
			if replays == 0 {
				t.Errorf("no receipt verified twice byte for byte")
			}
		})
	}
}

// TestReceiptsCrossTwilioRotatedToken rotates the auth token on both
// sides: receipts the simulator signs with the new token verify once the
// adapter's Secret has reloaded it, and the old token's no longer do.
func TestReceiptsCrossTwilioRotatedToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth-token")
	if err := os.WriteFile(path, []byte(xToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	token, err := provider.FileSecret(path)
	if err != nil {
		t.Fatalf("FileSecret: %v", err)
	}
	c := twilioCase(token)
	sim, rc, a := crossSetup(t, c)
	before := crossSend(t, sim, a, c, "old", xDelivered)
	checkEveryReceipt(t, sim, rc, c, before)
	oldReceipt := rc.results()[0].req

	const rotated = "tok-ROTATED-9876543210"
	sim.SetToken(rotated)
	if err := os.WriteFile(path, []byte(rotated+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := token.Reload(); !changed || err != nil {
		t.Fatalf("Reload: %v, %v", changed, err)
	}
	after := crossSend(t, sim, a, c, "new", xDelivered, xFailing)
	checkEveryReceipt(t, sim, rc, c, append(before, after...))
	checkFinals(t, rc, c, after)
	if _, err := a.ReadReceipt(oldReceipt); !errors.Is(err, provider.ErrForged) {
		t.Errorf("a receipt signed with the old token, read after the rotation: %v, want ErrForged", err)
	}
}
