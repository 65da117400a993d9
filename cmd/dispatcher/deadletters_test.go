package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/pstest"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/deadletter"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/internal/topology"
	"smsdispatcher/ledger"
	"smsdispatcher/provider/providertest"
)

const dlProject = "proj"

// dlWait is the commands' --wait in these tests: pstest answers an empty
// Pull after 500 ms, and what is there comes at once.
const dlWait = "700ms"

// dlHarness is pstest with the topology of `dispatcher setup`, the test
// Redis under an account of its own, and the environment the commands
// read.
type dlHarness struct {
	t       *testing.T
	ps      *pstest.Server
	client  *pubsub.Client
	claims  *admission.Claims
	account string
}

func newDLHarness(t *testing.T) *dlHarness {
	t.Helper()
	ps := pstest.NewServer()
	t.Cleanup(func() { ps.Close() })
	h := &dlHarness{t: t, ps: ps, account: redistest.UniqueAccount(t)}
	t.Setenv("PUBSUB_EMULATOR_HOST", ps.Addr)
	t.Setenv("PUBSUB_PROJECT_ID", dlProject)
	t.Setenv("REDIS_URL", "redis://"+redistest.Addr(t))
	t.Setenv("SMS_ACCOUNT", h.account)
	t.Setenv("ACCOUNTS_FILE", "")
	if err := run(context.Background(), []string{"setup"}, io.Discard, io.Discard); err != nil {
		t.Fatalf("setup: %v", err)
	}
	client, err := topology.NewClient(context.Background(), dlProject, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	h.client = client
	h.claims = admission.NewClaims(redistest.Client(t), h.account, 0, 0, 2*time.Second, nil)
	return h
}

// deadLetter publishes a dead letter as a dispatcher does: data, the
// producer's attributes and the dispatcher's.
func (h *dlHarness) deadLetter(data string, attrs map[string]string) string {
	h.t.Helper()
	pub := h.client.Publisher("sms-dead-letter")
	defer pub.Stop()
	id, err := pub.Publish(context.Background(), &pubsub.Message{Data: []byte(data), Attributes: attrs}).Get(context.Background())
	if err != nil {
		h.t.Fatalf("publish dead letter: %v", err)
	}
	return id
}

// cmd runs `dispatcher <args>` in this process.
func (h *dlHarness) cmd(args ...string) (stdout, stderr string, err error) {
	var out, errs bytes.Buffer
	err = run(context.Background(), args, &out, &errs)
	return out.String(), errs.String(), err
}

// list returns `deadletters list --json` by message ID.
func (h *dlHarness) list(args ...string) map[string]deadletter.JSON {
	h.t.Helper()
	out, errs, err := h.cmd(append([]string{"deadletters", "list", "--json", "--wait", dlWait}, args...)...)
	if err != nil {
		h.t.Fatalf("list %v: %v\n%s", args, err, errs)
	}
	got := map[string]deadletter.JSON{}
	for line := range strings.Lines(out) {
		var v deadletter.JSON
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			h.t.Fatalf("list --json printed %q: %v", line, err)
		}
		if _, dup := got[v.MessageID]; dup {
			h.t.Fatalf("list printed %s twice:\n%s", v.MessageID, out)
		}
		got[v.MessageID] = v
	}
	return got
}

// listedIDs returns the ids `deadletters list` shows, sorted.
func (h *dlHarness) listedIDs(args ...string) []string {
	var ids []string
	for _, v := range h.list(args...) {
		ids = append(ids, v.ID)
	}
	sort.Strings(ids)
	return ids
}

// published returns the messages published to topic (an id), in the order
// published.
func (h *dlHarness) published(topic string) []*pstest.Message {
	var out []*pstest.Message
	for _, m := range h.ps.Messages() {
		if m.Topic == "projects/"+dlProject+"/topics/"+topic {
			out = append(out, m)
		}
	}
	return out
}

// record returns id's send-once record as Redis holds it ("" none).
func (h *dlHarness) record(id string) string {
	h.t.Helper()
	v, err := redistest.Client(h.t).Get(context.Background(), h.claims.Key(id)).Result()
	if err != nil {
		return ""
	}
	return v
}

// refused records id as the dispatcher does once it dead-lettered the
// provider's refusal of it.
func (h *dlHarness) refused(id string) {
	h.t.Helper()
	if err := h.claims.Refuse(context.Background(), id, providerReason); err != nil {
		h.t.Fatal(err)
	}
	if err := h.claims.Finish(context.Background(), id, ledger.RecordRejected); err != nil {
		h.t.Fatal(err)
	}
}

func dlAttrs(class, reason, origID string, more ...string) map[string]string {
	a := map[string]string{"class": class, "reject_reason": reason, "original_message_id": origID}
	for i := 0; i+1 < len(more); i += 2 {
		a[more[i]] = more[i+1]
	}
	return a
}

func msgJSON(id, to, body string) string {
	m := map[string]string{"to": to, "body": body}
	if id != "" {
		m["id"] = id
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// dlServe runs the real serve in this process until the returned stop (or
// the test's end) ends it as SIGTERM would; stop returns serve's error.
func dlServe(t *testing.T) (stop func() error) {
	ctx, sigterm := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- run(ctx, []string{"serve"}, io.Discard, io.Discard) }()
	stop = sync.OnceValue(func() error {
		sigterm()
		return <-served
	})
	t.Cleanup(func() { stop() })
	return stop
}

// testDieAfterEnv names a hook of this test binary: `deadletters replay`
// SIGKILLs itself right after its N-th republish, before the ack, so that
// a test can show that such a death loses nothing.
const testDieAfterEnv = "SMS_TEST_DEADLETTERS_DIE_AFTER"

func init() {
	if n, _ := strconv.Atoi(os.Getenv(testDieAfterEnv)); n > 0 {
		afterRepublish = func(republished int) {
			if republished >= n {
				dieForTest()
			}
		}
	}
}

// dieForTest ends the process as SIGKILL does: no deferred call, no
// flush.
func dieForTest() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		p.Kill()
	}
	select {}
}

const providerReason = "provider: status 400: {\"error\":\"injected failure\"}"

// TestDeadlettersListIsRepeatableFiltersAndMasks: list consumes nothing
// (twice the same set, nothing acked), its filters select, the body never
// shows without --show-body and numbers show their last 4 digits only.
func TestDeadlettersListIsRepeatableFiltersAndMasks(t *testing.T) {
	h := newDLHarness(t)
	const phone, code = "+819012345678", "Your code is 482913"
	a := h.deadLetter(msgJSON("login-1", phone, code), dlAttrs("otp", providerReason, "1001", "team", "auth"))
	b := h.deadLetter(msgJSON("promo-2", "12345", "Sale ends today"), dlAttrs("marketing", "invalid: bad_to: to must be E.164: + then 8-15 digits", "1002"))
	c := h.deadLetter(msgJSON("", "+15551234567", "Code 777"), dlAttrs("otp", "max_attempts: 100 deliveries, last transient: provider: status 503", "1003"))
	d := h.deadLetter("not json", dlAttrs("otp", "invalid: bad_json: data is not a JSON object", "1004"))

	first, second := h.list(), h.list()
	if len(first) != 4 || len(second) != 4 {
		t.Fatalf("list twice: %d then %d dead letters, want 4 and 4", len(first), len(second))
	}
	for id, v := range first {
		if second[id] != v {
			t.Errorf("%s: %+v, then %+v", id, v, second[id])
		}
	}
	want := map[string]deadletter.JSON{
		a: {MessageID: a, OriginalMessageID: "1001", ID: "login-1", Class: "otp", RejectReason: providerReason, ToMasked: "+********5678", BodyChars: 19},
		b: {MessageID: b, OriginalMessageID: "1002", ID: "promo-2", Class: "marketing", RejectReason: "invalid: bad_to: to must be E.164: + then 8-15 digits", ToMasked: "*****", BodyChars: 15},
		c: {MessageID: c, OriginalMessageID: "1003", ID: "1003", Class: "otp", RejectReason: "max_attempts: 100 deliveries, last transient: provider: status 503", ToMasked: "+*******4567", BodyChars: 8},
		d: {MessageID: d, OriginalMessageID: "1004", ID: "", Class: "otp", RejectReason: "invalid: bad_json: data is not a JSON object", ToMasked: "", BodyChars: 0},
	}
	for id, w := range want {
		got := first[id]
		if _, err := time.Parse(time.RFC3339Nano, got.PublishTime); err != nil || !strings.HasSuffix(got.PublishTime, "Z") {
			t.Errorf("%s: publish_time %q, want RFC 3339 UTC", id, got.PublishTime)
		}
		got.PublishTime = ""
		if got != w {
			t.Errorf("%s:\n got %+v\nwant %+v", id, got, w)
		}
	}

	for _, f := range []struct {
		args []string
		want []string
	}{
		{[]string{"--reason", "provider"}, []string{"login-1"}},
		{[]string{"--reason", "invalid: bad_to"}, []string{"promo-2"}},
		{[]string{"--reason", "invalid"}, []string{"", "promo-2"}},
		{[]string{"--reason", "max_attempts"}, []string{"1003"}},
		{[]string{"--class", "otp"}, []string{"", "1003", "login-1"}},
		{[]string{"--class", "marketing", "--reason", "provider"}, nil},
		{[]string{"--since", "1h"}, []string{"", "1003", "login-1", "promo-2"}},
		{[]string{"--since", "1ns"}, nil},
		{[]string{"--limit", "1"}, nil}, // one read; which one is Pub/Sub's choice
	} {
		got := h.listedIDs(f.args...)
		if f.args[0] == "--limit" {
			if len(got) != 1 {
				t.Errorf("list %v: %v, want one", f.args, got)
			}
			continue
		}
		if !slices.Equal(got, f.want) {
			t.Errorf("list %v: %v, want %v", f.args, got, f.want)
		}
	}

	table, _, err := h.cmd("deadletters", "list", "--wait", dlWait)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("deadletters list:\n%s", table)
	if lines := strings.Split(strings.TrimSpace(table), "\n"); len(lines) != 5 || !strings.HasPrefix(lines[0], "PUBLISHED") {
		t.Errorf("table: want a header and 4 lines:\n%s", table)
	}
	for _, secret := range []string{phone, "9012345678", "482913", "Sale ends", "5551234567"} {
		if strings.Contains(table, secret) {
			t.Errorf("the table shows %q:\n%s", secret, table)
		}
	}
	if !strings.Contains(table, "+********5678") || !strings.Contains(table, "login-1") {
		t.Errorf("the table lacks the masked number or an id:\n%s", table)
	}
	shown, _, err := h.cmd("deadletters", "list", "--show-body", "--reason", "provider", "--wait", dlWait)
	if err != nil || !strings.Contains(shown, code) || strings.Contains(shown, phone) {
		t.Errorf("--show-body: %v, want the body and never the number:\n%s", err, shown)
	}
	jsonBody := h.list("--show-body", "--reason", "provider")
	if v := jsonBody[a]; v.Body == nil || *v.Body != code {
		t.Errorf("--json --show-body: %+v, want the body", v)
	}
	none, _, err := h.cmd("deadletters", "list", "--reason", "nothing", "--wait", dlWait)
	if err != nil || !strings.Contains(none, "no dead letters") {
		t.Errorf("no match: %v, %q, want a line saying no dead letters", err, none)
	}

	for _, m := range h.published("sms-dead-letter") {
		if m.Acks > 0 {
			t.Errorf("dead letter %s was acked: list must consume nothing", m.ID)
		}
	}
}

// TestDeadlettersListEmpty: an empty subscription says so and exits 0.
func TestDeadlettersListEmpty(t *testing.T) {
	h := newDLHarness(t)
	out, _, err := h.cmd("deadletters", "list", "--wait", dlWait)
	if err != nil || strings.TrimSpace(out) != "no dead letters" {
		t.Fatalf("list: %v, %q; want \"no dead letters\"", err, out)
	}
}

// TestDeadlettersReplayAfterTheProviderIsFixed is the whole story: the
// real serve sends to a provider that refuses every message (400), and
// dead-letters them itself; the provider is fixed; replay --reason
// provider republishes them, and each reaches the provider accepted
// exactly once; nothing is left to list.
func TestDeadlettersReplayAfterTheProviderIsFixed(t *testing.T) {
	h := newDLHarness(t)
	sim := providertest.NewGeneric(providertest.Config{Token: "s3cret"})
	sim.FailFor(400, time.Hour)
	simSrv := httptest.NewServer(sim)
	defer simSrv.Close()
	t.Setenv("SMS_PROVIDER_URL", simSrv.URL)
	t.Setenv("SMS_PROVIDER_TOKEN", "s3cret")
	t.Setenv("HTTP_ADDR", freeAddr(t))
	t.Setenv("REDIS_TIMEOUT", "2s") // a loaded CI machine is not a Redis outage

	stopServe := dlServe(t)

	msgs := []struct{ class, id string }{{"otp", "fix-otp-1"}, {"otp", "fix-otp-2"}, {"marketing", "fix-mkt-1"}}
	for _, m := range msgs {
		if _, errs, err := h.cmd("publish", "--class", m.class, "--to", "+819012345678", "--body", "Hello "+m.id, "--id", m.id); err != nil {
			t.Fatalf("publish %s: %v\n%s", m.id, err, errs)
		}
	}
	// Dead-lettered by the dispatcher itself, and the originals acked (the
	// send-once record says rejected by then).
	waitWithin(t, 30*time.Second, "every message refused and dead-lettered", func() bool {
		acked := 0
		for _, topic := range []string{"sms-otp", "sms-marketing"} {
			for _, m := range h.published(topic) {
				if m.Acks > 0 {
					acked++
				}
			}
		}
		return acked == len(msgs) && len(h.published("sms-dead-letter")) == len(msgs)
	})
	listed := h.list("--reason", "provider")
	if len(listed) != len(msgs) {
		t.Fatalf("list --reason provider: %v, want the %d refused messages", listed, len(msgs))
	}
	for _, m := range msgs {
		if sim.SentCount(m.id) != 0 {
			t.Fatalf("%s sent while the provider refused everything", m.id)
		}
	}

	sim.FailFor(0, 0) // the provider is fixed
	out, errs, err := h.cmd("deadletters", "replay", "--reason", "provider", "--wait", dlWait)
	t.Logf("deadletters replay --reason provider:\n%s", out)
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, errs)
	}
	if !strings.Contains(out, "replayed 3, skipped 0, failed 0") {
		t.Errorf("replay summary: want replayed 3:\n%s", out)
	}
	waitWithin(t, 30*time.Second, "every replayed message sent", func() bool {
		for _, m := range msgs {
			if sim.SentCount(m.id) < 1 {
				return false
			}
		}
		return true
	})
	if got := h.listedIDs(); len(got) != 0 {
		t.Errorf("after the replay, list shows %v, want none", got)
	}
	out, _, err = h.cmd("deadletters", "list", "--wait", dlWait)
	if err != nil || strings.TrimSpace(out) != "no dead letters" {
		t.Errorf("list after the replay: %v, %q", err, out)
	}
	for _, topic := range []string{"sms-otp", "sms-marketing"} {
		for _, m := range h.published(topic) {
			if m.Acks == 0 {
				t.Errorf("%s message %s never acked", topic, m.ID)
			}
			if m.Attributes["replays"] != "" && m.Attributes["replays"] != "1" {
				t.Errorf("replayed message %s: replays=%q, want 1", m.ID, m.Attributes["replays"])
			}
		}
	}
	if err := stopServe(); err != nil {
		t.Errorf("serve: %v", err)
	}
	for _, m := range msgs {
		if n := sim.SentCount(m.id); n != 1 {
			t.Errorf("%s sent %d times, want exactly once", m.id, n)
		}
	}
	if n := len(h.published("sms-dead-letter")); n != len(msgs) {
		t.Errorf("%d dead letters in all, want %d: a replay was refused again", n, len(msgs))
	}
}

// TestDeadlettersReplayNeverResendsASentID: a dead letter whose id's
// record says sent is acked and reported, never republished; one whose id
// is being sent (a live claim) is left listed; a refused one is
// republished with its record cleared. A dry run first changes nothing.
func TestDeadlettersReplayNeverResendsASentID(t *testing.T) {
	h := newDLHarness(t)
	ctx := context.Background()
	h.deadLetter(msgJSON("was-sent", "+819012345678", "Hello"), dlAttrs("otp", providerReason, "2001"))
	if err := h.claims.Finish(ctx, "was-sent", ledger.SentRecord("msg-42")); err != nil {
		t.Fatal(err)
	}
	h.deadLetter(msgJSON("in-flight", "+819012345678", "Hello"), dlAttrs("otp", providerReason, "2002"))
	if rec, err := h.claims.Claim(ctx, "in-flight", "another-process", time.Minute); err != nil || rec.State != ledger.Claimed {
		t.Fatalf("claim: %v %v", rec, err)
	}
	h.deadLetter(msgJSON("was-refused", "+819012345678", "Hello"), dlAttrs("otp", providerReason, "2003", "team", "auth"))
	h.refused("was-refused")

	out, errs, err := h.cmd("deadletters", "replay", "--all", "--dry-run", "--wait", dlWait)
	t.Logf("deadletters replay --all --dry-run:\n%s", out)
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, errs)
	}
	if !strings.Contains(out, "dry run, nothing changed: would replay 1, would skip 2 (held 1, sent 1), failed 0") {
		t.Errorf("dry run summary:\n%s", out)
	}
	if len(h.listedIDs()) != 3 || len(h.published("sms-otp")) != 0 || h.record("was-refused") != ledger.RecordRejected {
		t.Fatalf("the dry run changed something: listed %v, published %d, record %q",
			h.listedIDs(), len(h.published("sms-otp")), h.record("was-refused"))
	}

	out, errs, err = h.cmd("deadletters", "replay", "--all", "--wait", dlWait)
	t.Logf("deadletters replay --all:\n%s", out)
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, errs)
	}
	for _, want := range []string{
		"replayed 1, skipped 2 (held 1, sent 1), failed 0",
		"skipped      otp       was-sent: sent: already sent",
		"skipped      otp       in-flight: held:",
		"replayed     otp       was-refused: to sms-otp as ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("replay output lacks %q:\n%s", want, out)
		}
	}
	pub := h.published("sms-otp")
	if len(pub) != 1 || killDataID(pub[0].Data) != "was-refused" {
		t.Fatalf("republished %d messages, want was-refused alone", len(pub))
	}
	wantAttrs := map[string]string{"team": "auth", "replays": "1"}
	if fmt.Sprint(pub[0].Attributes) != fmt.Sprint(wantAttrs) {
		t.Errorf("republished attributes %v, want the producer's and replays=1: %v", pub[0].Attributes, wantAttrs)
	}
	if rec := h.record("was-refused"); rec != "" {
		t.Errorf("was-refused's record %q after the replay, want it cleared", rec)
	}
	if rec := h.record("was-sent"); rec != ledger.SentRecord("msg-42") {
		t.Errorf("was-sent's record %q, want it kept", rec)
	}
	if got := h.listedIDs(); !slices.Equal(got, []string{"in-flight"}) {
		t.Errorf("listed after the replay: %v, want in-flight alone", got)
	}
}

// TestDeadlettersReplaySkipsMalformedUnlessForced: a malformed dead letter,
// and one whose id cannot be known, are left listed; --force republishes
// them; a truncated one never is.
func TestDeadlettersReplaySkipsMalformedUnlessForced(t *testing.T) {
	h := newDLHarness(t)
	bad := msgJSON("bad-number", "12", "Hello")
	h.deadLetter(bad, dlAttrs("marketing", "invalid: bad_to: to must be E.164: + then 8-15 digits", "3001"))
	h.deadLetter(`{"id":"huge","to":"+8190`, dlAttrs("otp", "invalid: too_large: data is 70000 bytes, the limit is 65536", "3002",
		"original_data_bytes", "70000"))
	// Forwarded by Pub/Sub's own policy: no id in the data, no original's
	// ID: which id the dispatcher recorded is unknown.
	h.deadLetter(msgJSON("", "+819012345678", "Hello"), map[string]string{"class": "otp", "reject_reason": providerReason})

	out, _, err := h.cmd("deadletters", "replay", "--all", "--wait", dlWait)
	if err != nil || !strings.Contains(out, "replayed 0, skipped 3 (malformed 2, no_id 1), failed 0") {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	if len(h.listedIDs()) != 3 || len(h.published("sms-marketing")) != 0 || len(h.published("sms-otp")) != 0 {
		t.Fatalf("a malformed dead letter, or one without an id, was replayed or consumed without --force")
	}

	out, _, err = h.cmd("deadletters", "replay", "--all", "--force", "--wait", dlWait)
	t.Logf("deadletters replay --all --force:\n%s", out)
	if err != nil || !strings.Contains(out, "replayed 2, skipped 1 (truncated 1), failed 0") {
		t.Fatalf("replay --force: %v\n%s", err, out)
	}
	pub := h.published("sms-marketing")
	if len(pub) != 1 || string(pub[0].Data) != bad {
		t.Fatalf("--force republished %d messages, want the malformed one as it was", len(pub))
	}
	if got := h.listedIDs(); !slices.Equal(got, []string{""}) { // the truncated one: its data is no JSON
		t.Errorf("listed after --force: %q, want the truncated one alone", got)
	}
}

// TestDeadlettersReplayStopsAtMaxReplays: a dead letter replayed 3 times
// already is skipped by default; a higher --max-replays replays it and
// counts. A message without an id gets its stand-in id written in.
func TestDeadlettersReplayStopsAtMaxReplays(t *testing.T) {
	h := newDLHarness(t)
	h.deadLetter(msgJSON("", "+819012345678", "Hello"), dlAttrs("otp", providerReason, "4001", "replays", "3"))
	h.refused("4001")

	out, _, err := h.cmd("deadletters", "replay", "--reason", "provider", "--wait", dlWait)
	if err != nil || !strings.Contains(out, "replayed 0, skipped 1 (max_replays 1), failed 0") {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	if len(h.listedIDs()) != 1 || len(h.published("sms-otp")) != 0 || h.record("4001") != ledger.RecordRejected {
		t.Fatal("a dead letter at --max-replays was replayed, consumed or its record cleared")
	}

	out, _, err = h.cmd("deadletters", "replay", "--reason", "provider", "--max-replays", "4", "--wait", dlWait)
	if err != nil || !strings.Contains(out, "replayed 1, skipped 0, failed 0") {
		t.Fatalf("replay --max-replays 4: %v\n%s", err, out)
	}
	pub := h.published("sms-otp")
	if len(pub) != 1 || pub[0].Attributes["replays"] != "4" {
		t.Fatalf("republished %d, want one with replays=4", len(pub))
	}
	if got := killDataID(pub[0].Data); got != "4001" {
		t.Errorf("republished id %q, want the stand-in 4001 written into the data", got)
	}
}

// TestDeadlettersReplayKilledHalfwayLosesNothing: replay SIGKILLed right
// after its first republish, before that dead letter's ack, loses none:
// each is still listed or was republished; a second replay, with the
// dispatcher serving, ends with each message sent exactly once.
func TestDeadlettersReplayKilledHalfwayLosesNothing(t *testing.T) {
	h := newDLHarness(t)
	ids := []string{"kill-0", "kill-1", "kill-2", "kill-3"}
	for i, id := range ids {
		h.deadLetter(msgJSON(id, "+819012345678", "Hello "+id), dlAttrs("otp", providerReason, fmt.Sprint(5000+i)))
		h.refused(id)
	}

	child := exec.Command(os.Args[0], "deadletters", "replay", "--reason", "provider", "--wait", dlWait)
	child.Env = append(os.Environ(), "DISPATCHER_RUN_MAIN=1", testDieAfterEnv+"=1")
	var childOut, childErr bytes.Buffer
	child.Stdout, child.Stderr = &childOut, &childErr
	err := child.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("replay with %s=1: %v, want it killed\n%s%s", testDieAfterEnv, err, childOut.String(), childErr.String())
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("replay ended with %v, want SIGKILL\n%s%s", err, childOut.String(), childErr.String())
	}

	// Right after the kill: one republished, and not acked; every other
	// one still listed (the killed one is leased to the dead process
	// until its lease runs out, then listed again).
	republished := map[string]int{}
	for _, m := range h.published("sms-otp") {
		republished[killDataID(m.Data)]++
	}
	listed := h.listedIDs()
	if len(republished) != 1 {
		t.Fatalf("republished before the kill: %v, want one", republished)
	}
	for _, id := range ids {
		if republished[id] == 0 && !slices.Contains(listed, id) {
			t.Errorf("%s lost: neither listed (%v) nor republished (%v)", id, listed, republished)
		}
	}
	for _, m := range h.published("sms-dead-letter") {
		if m.Acks > 0 {
			t.Errorf("dead letter %s acked: the kill came before any ack", killDataID(m.Data))
		}
	}

	// The dispatcher serves; replay runs again until nothing is listed.
	sim := providertest.NewGeneric(providertest.Config{Token: "s3cret"})
	simSrv := httptest.NewServer(sim)
	defer simSrv.Close()
	t.Setenv("SMS_PROVIDER_URL", simSrv.URL)
	t.Setenv("SMS_PROVIDER_TOKEN", "s3cret")
	t.Setenv("HTTP_ADDR", freeAddr(t))
	t.Setenv("REDIS_TIMEOUT", "2s")
	stopServe := dlServe(t)
	runs := 0
	waitWithin(t, 40*time.Second, "every dead letter replayed", func() bool {
		runs++
		out, errs, err := h.cmd("deadletters", "replay", "--reason", "provider", "--wait", dlWait)
		if err != nil {
			t.Fatalf("replay: %v\n%s%s", err, out, errs)
		}
		t.Logf("replay run %d: %s", runs, strings.TrimSpace(out))
		// Done once every dead letter is acked: the one the killed
		// process held is invisible until its lease runs out.
		for _, m := range h.published("sms-dead-letter") {
			if m.Acks == 0 {
				return false
			}
		}
		return true
	})
	if got := h.listedIDs(); len(got) != 0 {
		t.Errorf("listed after the replays: %v, want none", got)
	}
	waitWithin(t, 30*time.Second, "every message sent", func() bool {
		for _, id := range ids {
			if sim.SentCount(id) == 0 {
				return false
			}
		}
		return true
	})
	if err := stopServe(); err != nil {
		t.Errorf("serve: %v", err)
	}
	for _, id := range ids {
		if n := sim.SentCount(id); n != 1 {
			t.Errorf("%s sent %d times, want exactly once", id, n)
		}
	}
}

// TestDeadlettersReplayNeedsRedisAndOneSelection: replay without REDIS_URL
// is a configuration error naming it; the selection is exactly one of
// --reason, --id and --all.
func TestDeadlettersReplayNeedsRedisAndOneSelection(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	t.Setenv("ACCOUNTS_FILE", "")
	err := run(context.Background(), []string{"deadletters", "replay", "--all"}, io.Discard, io.Discard)
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Env != "REDIS_URL" {
		t.Fatalf("replay without REDIS_URL: %v, want a configuration error naming it", err)
	}
	for _, args := range [][]string{{}, {"--all", "--reason", "provider"}, {"--id", "a", "--all"}, {"--all", "--max-replays", "0"}, {"--all", "--class", "bulk"}} {
		err := run(context.Background(), append([]string{"deadletters", "replay"}, args...), io.Discard, io.Discard)
		if err == nil || errors.As(err, &ce) {
			t.Errorf("replay %v: %v, want a usage error", args, err)
		}
	}
	if err := run(context.Background(), []string{"deadletters", "prune"}, io.Discard, io.Discard); err == nil {
		t.Error("deadletters prune: want an error")
	}
	var ids idList
	ids.Set("a, b")
	ids.Set("c")
	if !slices.Equal(ids, idList{"a", "b", "c"}) {
		t.Errorf("--id a,b --id c: %v", ids)
	}
}

// TestDeadlettersReplayOfAConfiguredClass: with ACCOUNTS_FILE's classes,
// `deadletters replay --class transactional` sends the class's dead
// letters back to its topic, and no other class's.
func TestDeadlettersReplayOfAConfiguredClass(t *testing.T) {
	h := newDLHarness(t)
	t.Setenv("SMS_ACCOUNT", "")
	t.Setenv("ACCOUNTS_FILE", writeFile(t, "accounts.yaml", "classes: [{name: otp}, {name: transactional}, {name: marketing}]\n"+
		"accounts:\n  - {name: "+h.account+", provider: generic, generic: {url: https://a.example, token: t}, classes: [otp, transactional, marketing]}\n"))
	if _, _, err := h.cmd("setup"); err != nil {
		t.Fatalf("setup: %v", err)
	}
	h.refused("cart-1")
	h.deadLetter(msgJSON("cart-1", "+819012345678", "your cart"), dlAttrs("transactional", providerReason, "4001"))
	h.deadLetter(msgJSON("sale-1", "+819012345678", "sale"), dlAttrs("marketing", providerReason, "4002"))
	out, errs, err := h.cmd("deadletters", "replay", "--all", "--class", "transactional", "--wait", dlWait)
	if err != nil || !strings.Contains(out, "replayed 1,") {
		t.Fatalf("replay --class transactional: %v\n%s%s", err, out, errs)
	}
	if pub := h.published("sms-transactional"); len(pub) != 1 || !strings.Contains(string(pub[0].Data), "cart-1") || len(h.published("sms-marketing")) != 0 {
		t.Fatalf("republished %d to sms-transactional, %d to sms-marketing; want cart-1 to sms-transactional alone", len(pub), len(h.published("sms-marketing")))
	}
}
