package console

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/pstest"
	"golang.org/x/crypto/bcrypt"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/config/policy"
	"smsdispatcher/deferral"
	"smsdispatcher/guard"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/operator"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/internal/topology"
	"smsdispatcher/ledger"
	"smsdispatcher/suppress"
)

// syncBuffer is a bytes.Buffer the handler's logger and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// audits are the audit lines logged so far.
func (s *syncBuffer) audits(t *testing.T) []map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]string
	for line := range strings.Lines(s.b.String()) {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if v["msg"] != "audit" {
			continue
		}
		m := map[string]string{}
		for k, x := range v {
			if s, ok := x.(string); ok {
				m[k] = s
			}
		}
		out = append(out, m)
	}
	return out
}

// harness is a console over the test Redis (an account of its own) and
// pstest with the topology `dispatcher setup` creates.
type harness struct {
	t      *testing.T
	h      *Handler
	srv    *httptest.Server
	ps     *pubsub.Client
	psSrv  *pstest.Server // what was published, for a test to read
	cfg    config.Settings
	log    *syncBuffer
	client *http.Client
}

// settings are the dispatcher's settings of env, as the commands read them.
func settings(t *testing.T, env map[string]string) config.Settings {
	t.Helper()
	fs := flag.NewFlagSet("console", flag.ContinueOnError)
	load := config.Flags(fs, config.Pubsub|config.Subscriptions|config.Topics|config.DeadLetters|config.Redis|config.Accounts,
		func(k string) string { return env[k] })
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := load()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func newHarness(t *testing.T, auth Auth, lists Lists) *harness {
	t.Helper()
	return newHarnessOf(t, auth, lists, map[string]string{"SMS_ACCOUNT": redistest.UniqueAccount(t)})
}

// newHarnessOf is newHarness with the settings of env besides Pub/Sub's
// and Redis's.
func newHarnessOf(t *testing.T, auth Auth, lists Lists, env map[string]string) *harness {
	t.Helper()
	return newHarnessBefore(t, auth, lists, env, nil)
}

// newHarnessBefore is newHarnessOf calling before, if not nil, with the
// settings before the handler starts (and its sampler's first reading).
func newHarnessBefore(t *testing.T, auth Auth, lists Lists, env map[string]string, before func(config.Settings)) *harness {
	t.Helper()
	return newHarnessMounted(t, auth, lists, env, before, "")
}

// newHarnessMounted is newHarnessBefore with the handler mounted at path
// ("" the root) as docs/console.md shows: Options.Path and
// http.StripPrefix.
func newHarnessMounted(t *testing.T, auth Auth, lists Lists, env map[string]string, before func(config.Settings), path string) *harness {
	t.Helper()
	psSrv := pstest.NewServer()
	t.Cleanup(func() { psSrv.Close() })
	t.Setenv("PUBSUB_EMULATOR_HOST", psSrv.Addr)
	env["PUBSUB_PROJECT_ID"], env["REDIS_URL"] = "proj", "redis://"+redistest.Addr(t)
	cfg := settings(t, env)
	ps, err := topology.NewClient(context.Background(), "proj", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	if err := topology.Setup(context.Background(), ps, cfg.Topology(), func(string, string, string) {}); err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(cfg)
	}
	log := &syncBuffer{}
	h, err := NewHandler(Options{Settings: cfg, Redis: redistest.Client(t), PubSub: ps, Auth: auth, Lists: lists,
		Logger: slog.New(slog.NewJSONHandler(log, nil)), DeadLetterWait: 700 * time.Millisecond, SampleEvery: 250 * time.Millisecond, Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	var served http.Handler = h
	if path != "" {
		mux := http.NewServeMux()
		mux.Handle(path+"/", http.StripPrefix(path, h))
		served = mux
	}
	srv := httptest.NewServer(served)
	t.Cleanup(srv.Close)
	return &harness{t: t, h: h, srv: srv, ps: ps, psSrv: psSrv, cfg: cfg, log: log, client: srv.Client()}
}

// deadLetter publishes a dead letter as a dispatcher does.
func (h *harness) deadLetter(id, to string) {
	h.t.Helper()
	pub := h.ps.Publisher(h.cfg.DeadLetterTopic)
	defer pub.Stop()
	data, _ := json.Marshal(map[string]string{"id": id, "to": to, "body": "Your code is 482913"})
	attrs := map[string]string{"class": "otp", "reject_reason": "provider: status 400", "original_message_id": "9" + id}
	if _, err := pub.Publish(context.Background(), &pubsub.Message{Data: data, Attributes: attrs}).Get(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

// request sends method path as user (password user+"-pw"; "" none), a
// same-origin request as a browser sends it, and returns the status and
// body.
func (h *harness) request(user, method, path string, form url.Values) (int, string) {
	h.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, h.srv.URL+path, body)
	if err != nil {
		h.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if user != "" {
		req.SetBasicAuth(user, user+"-pw")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, html.UnescapeString(string(b))
}

// basicAuth is a Basic of users name → role, each password name+"-pw".
func basicAuth(t *testing.T, roles map[string]string) Auth {
	t.Helper()
	var b strings.Builder
	for name, role := range roles {
		hash, err := bcrypt.GenerateFromPassword([]byte(name+"-pw"), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(name + " " + role + " " + string(hash) + "\n")
	}
	path := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := AuthFromEnv(env{"CONSOLE_AUTH": "basic", "CONSOLE_USERS_FILE": path}.get, "0.0.0.0:8090")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

type env map[string]string

func (e env) get(k string) string { return e[k] }

// TestBasicAuth: nobody reads a page without a user of the file and its
// password; a user reads with its role.
func TestBasicAuth(t *testing.T) {
	h := newHarness(t, basicAuth(t, map[string]string{"vic": "viewer"}), Lists{})
	req, _ := http.NewRequest("GET", h.srv.URL+"/config", nil)
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
		t.Errorf("no credentials: %d %q, want 401 and a Basic challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	for _, bad := range []*url.Userinfo{url.UserPassword("vic", "wrong"), url.UserPassword("eve", "eve-pw"), url.UserPassword("vic", "")} {
		req, _ := http.NewRequest("GET", h.srv.URL+"/config", nil)
		p, _ := bad.Password()
		req.SetBasicAuth(bad.Username(), p)
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("%s: %d, want 401", bad, resp.StatusCode)
		}
	}
	code, body := h.request("vic", "GET", "/config", nil)
	if code != 200 || !strings.Contains(body, "vic (viewer)") || !strings.Contains(body, "sms-otp") {
		t.Errorf("vic's /config: %d\n%s", code, body)
	}
	if strings.Contains(body, "redis://") {
		t.Errorf("/config shows the Redis URL:\n%s", body)
	}
}

// TestRolesMaskingAndAudit: a viewer sees numbers masked and is refused
// every write (403, audited); support reads one dead letter's number
// (audited); an operator's dry run changes nothing and is audited.
func TestRolesMaskingAndAudit(t *testing.T) {
	h := newHarness(t, basicAuth(t, map[string]string{"vic": "viewer", "sue": "support", "olga": "operator"}), Lists{})
	const number = "+819012345678"
	h.deadLetter("login-1", number)

	code, body := h.request("vic", "GET", "/deadletters", nil)
	if code != 200 || !strings.Contains(body, "login-1") || !strings.Contains(body, "5678") {
		t.Fatalf("vic's dead letters: %d\n%s", code, body)
	}
	if strings.Contains(body, "9012345678") || strings.Contains(body, "482913") || strings.Contains(body, "Show number") {
		t.Errorf("a viewer's dead letters show the number, the body or Show number:\n%s", body)
	}
	letter := between(body, `name="id" value="`, `"`)
	for _, w := range []struct{ path, action string }{
		{"/deadletters/replay", "dry_run"}, {"/deadletters/number", "reveal_number"}, {"/lists/optouts/add", "optouts.add"},
	} {
		form := url.Values{"mode": {"selected"}, "id": {letter}, "dry_run": {"1"}, "message_id": {letter}, "key": {number}}
		if code, body := h.request("vic", "POST", w.path, form); code != 403 || !strings.Contains(body, "Forbidden") {
			t.Errorf("vic's POST %s: %d, want 403\n%s", w.path, code, body)
		}
		if a := last(h.log.audits(t)); a["user"] != "vic" || a["action"] != w.action || a["outcome"] != "forbidden" {
			t.Errorf("vic's POST %s: audit %v", w.path, a)
		}
	}

	code, body = h.request("sue", "POST", "/deadletters/number", url.Values{"message_id": {letter}})
	if code != 200 || !strings.Contains(body, number) {
		t.Errorf("sue's number of %s: %d\n%s", letter, code, body)
	}
	if a := last(h.log.audits(t)); a["user"] != "sue" || a["role"] != "support" || a["action"] != "reveal_number" || a["target"] != letter || a["outcome"] != "ok" {
		t.Errorf("sue's number: audit %v", a)
	}
	if code, _ := h.request("sue", "POST", "/deadletters/replay", url.Values{"mode": {"all"}, "dry_run": {"1"}}); code != 403 {
		t.Errorf("sue's replay: %d, want 403", code)
	}

	code, body = h.request("olga", "POST", "/deadletters/replay", url.Values{"mode": {"all"}, "dry_run": {"1"}})
	if code != 200 || !strings.Contains(body, "dry run, nothing changed: would replay 1") || !strings.Contains(body, "Replay these now") {
		t.Errorf("olga's dry run: %d\n%s", code, body)
	}
	if a := last(h.log.audits(t)); a["user"] != "olga" || a["action"] != "dry_run" || a["target"] != "all" || a["outcome"] != "ok" || !strings.Contains(a["detail"], "would replay 1") {
		t.Errorf("olga's dry run: audit %v", a)
	}
	if code, body := h.request("olga", "GET", "/deadletters", nil); !strings.Contains(body, "login-1") {
		t.Errorf("after the dry run, the dead letter is gone: %d\n%s", code, body)
	}
}

// TestCrossOriginWritesAreRefused: a write another site's page makes the
// browser send is refused before any role is looked at.
func TestCrossOriginWritesAreRefused(t *testing.T) {
	h := newHarness(t, basicAuth(t, map[string]string{"olga": "operator"}), Lists{})
	for _, hdr := range []map[string]string{{"Sec-Fetch-Site": "cross-site"}, {"Origin": "https://evil.example"}} {
		req, _ := http.NewRequest("POST", h.srv.URL+"/deadletters/replay", strings.NewReader("mode=all"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth("olga", "olga-pw")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 403 {
			t.Errorf("POST with %v: %d, want 403", hdr, resp.StatusCode)
		}
		if a := last(h.log.audits(t)); a["action"] != "cross_origin" || a["outcome"] != "forbidden" {
			t.Errorf("POST with %v: audit %v", hdr, a)
		}
	}
	// The same request from the console's own page goes on (400: it
	// selects nothing).
	if code, _ := h.request("olga", "POST", "/deadletters/replay", url.Values{"mode": {"selected"}}); code != 400 {
		t.Errorf("same-origin POST selecting nothing: %d, want 400", code)
	}
}

// fixedWindow opens at one instant.
type fixedWindow time.Time

func (f fixedWindow) Next(_, _ string, t time.Time) time.Time {
	if t.Before(time.Time(f)) {
		return time.Time(f)
	}
	return t
}

// TestListsNotConfigured: the lists of settings without send windows or
// guard rules: the suppression list alone, the others saying what is
// missing; an action on one of them is 404.
func TestListsNotConfigured(t *testing.T) {
	h := newHarness(t, basicAuth(t, map[string]string{"olga": "operator"}), Lists{})
	lists, stop, err := FeatureLists(h.cfg, redistest.Client(t), h.ps)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if lists.OptOuts == nil || lists.Deferred != nil || lists.Blocks != nil {
		t.Fatalf("FeatureLists: %+v, want the opt-outs alone", lists)
	}
	h = newHarness(t, basicAuth(t, map[string]string{"olga": "operator"}), Lists{Deferred: lists.Deferred})
	code, body := h.request("olga", "GET", "/lists", nil)
	for _, want := range []string{"The suppression list is not wired in", "No class has send windows or a cap", "No class has guard rules"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/lists lacks %q: %d\n%s", want, code, body)
		}
	}
	if code, _ := h.request("olga", "POST", "/lists/blocks/unblock", url.Values{"key": {"x"}}); code != 404 {
		t.Errorf("an action on a list not configured: %d, want 404", code)
	}
}

// TestListsAndTheirActions: each list over the test Redis, as the
// dispatcher's commands change it: a viewer sees numbers masked and no
// action, and is refused each (403, audited); support and operators see
// numbers masked too; an operator adds opt-outs by typing the number and
// removes them by the row's token (a reason required, source operator),
// releases and drops deferred messages, unblocks and blocks a range, each
// audited with what it did, a number masked.
func TestListsAndTheirActions(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	tag := redistest.UniqueAccount(t)
	store := suppress.NewStore(rdb, keys.Suppressions("{"+tag+"}"), nil)
	const optedOut, another = "+447700900123", "+447700900456"
	if _, err := operator.ChangeSuppression(ctx, store, suppress.ActionAdd, optedOut, "", "STOP by phone"); err != nil {
		t.Fatal(err)
	}
	class := "c" + tag
	deferrals := deferral.New(rdb, nil, nil)
	for _, id := range []string{"early-1", "dropped-1"} {
		m := deferral.Message{Class: class, ID: id, To: "+33612345678", Data: []byte(`{"id":"` + id + `"}`)}
		if j, err := deferrals.Judge(ctx, m, policy.Sending{Window: fixedWindow(time.Now().Add(time.Hour))}); err != nil || j.Verdict != deferral.Deferred {
			t.Fatalf("deferring %s: %+v %v", id, j, err)
		}
	}
	if err := guard.BlockRange(ctx, rdb, class, "+447700", time.Hour, time.Now()); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, basicAuth(t, map[string]string{"vic": "viewer", "sue": "support", "olga": "operator"}), Lists{
		OptOuts:  operator.OptOuts{Store: store},
		Deferred: operator.Deferred{Store: deferrals, Classes: []string{class}},
		Blocks:   operator.Blocks{Redis: rdb, Classes: []string{class}},
	})

	code, body := h.request("vic", "GET", "/lists", nil)
	for _, want := range []string{"+********0123", "STOP by phone", class + "/early-1", class + "/dropped-1", class + "/+447700"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("vic's /lists lacks %q: %d\n%s", want, code, body)
		}
	}
	if strings.Contains(body, optedOut) || strings.Contains(body, "<button type=\"submit\" class=\"act-") {
		t.Errorf("a viewer's lists show a number in clear or an action:\n%s", body)
	}
	for _, w := range []struct{ list, action, key string }{
		{"optouts", "add", another}, {"optouts", "remove", optedOut}, {"deferred", "release", class + "/early-1"},
		{"deferred", "drop", class + "/dropped-1"}, {"blocks", "unblock", class + "/+447700"}, {"blocks", "block", class + "/+4477"},
	} {
		path := "/lists/" + w.list + "/" + w.action
		if code, _ := h.request("vic", "POST", path, url.Values{"key": {w.key}, "reason": {"r"}}); code != 403 {
			t.Errorf("vic's POST %s: %d, want 403", path, code)
		}
		if a := last(h.log.audits(t)); a["user"] != "vic" || a["action"] != w.list+"."+w.action || a["outcome"] != "forbidden" {
			t.Errorf("vic's POST %s: audit %v", path, a)
		}
	}
	if _, ok, _ := store.Get(ctx, optedOut); !ok {
		t.Fatal("the viewer's remove went through")
	}
	// Numbers are masked to every role, support's and the operator's
	// searches too; the operator's rows carry tokens, not numbers.
	for _, user := range []string{"sue", "olga"} {
		for _, q := range []string{"900123", url.QueryEscape(optedOut)} {
			if code, body := h.request(user, "GET", "/lists?optouts="+q, nil); code != 200 || !strings.Contains(body, "+********0123") || strings.Contains(body, optedOut) {
				t.Errorf("%s's search of %s: %d, want %s masked\n%s", user, q, code, optedOut, body)
			}
		}
	}

	act := func(list, action, key string, form url.Values, detail string) {
		t.Helper()
		if key != "" {
			form.Set("key", key)
		}
		if code, body := h.request("olga", "POST", "/lists/"+list+"/"+action, form); code != 200 {
			t.Errorf("olga's %s %s: %d (after the redirect), want 200\n%s", action, key, code, body)
		}
		if a := last(h.log.audits(t)); a["user"] != "olga" || a["action"] != list+"."+action || (key != "" && a["target"] != shownKey(list, key)) || a["outcome"] != "ok" || a["detail"] != detail {
			t.Errorf("olga's %s %s: audit %v, want detail %q", action, key, a, detail)
		}
	}
	if code, _ := h.request("olga", "POST", "/lists/optouts/add", url.Values{"key": {another}}); code != 400 {
		t.Errorf("an add without a reason: %d, want 400", code)
	}
	act("optouts", "add", another, url.Values{"reason": {"asked by e-mail"}}, "added")
	if e, ok, err := store.Get(ctx, another); !ok || err != nil || e.Source != suppress.SourceOperator || e.Reason != "asked by e-mail" {
		t.Errorf("after the add: %+v %v %v, want source operator and the reason", e, ok, err)
	}
	// The remove of a row: its token, from the page.
	_, page := h.request("olga", "GET", "/lists?optouts=900123", nil)
	token := between(between(page, `id="list-optouts"`, "</section>"), `name="token" value="`, `"`)
	if code, body := h.request("olga", "POST", "/lists/optouts/remove", url.Values{"token": {token + "x"}, "reason": {"r"}}); code != 400 {
		t.Errorf("a remove with a token changed: %d, want 400\n%s", code, body)
	}
	act("optouts", "remove", "", url.Values{"token": {token}, "reason": {"opted in again"}}, "removed")
	if _, ok, _ := store.Get(ctx, optedOut); ok {
		t.Errorf("%s still on the list after the remove", optedOut)
	}
	if a := last(h.log.audits(t)); a["target"] != "+********0123" {
		t.Errorf("the remove's audit target %q, want the number masked", a["target"])
	}
	act("deferred", "release", class+"/early-1", url.Values{}, "released")
	if e, found, err := deferrals.Get(ctx, class, "early-1"); !found || err != nil || e.Due.After(time.Now()) {
		t.Errorf("early-1 after the release: %+v %v %v, want due now", e, found, err)
	}
	act("deferred", "drop", class+"/dropped-1", url.Values{}, "dropped")
	if _, found, _ := deferrals.Get(ctx, class, "dropped-1"); found {
		t.Error("dropped-1 still deferred after the drop")
	}
	act("blocks", "unblock", class+"/+447700", url.Values{}, "unblocked; its counts forgotten")
	h.request("olga", "POST", "/lists/blocks/block", url.Values{"key": {class + "/+4477"}, "for": {"2h"}})
	blocks, err := guard.List(ctx, rdb, class, time.Now())
	if err != nil || len(blocks) != 1 || blocks[0].Range != "4477" || blocks[0].Reason != guard.ReasonOperator || time.Until(blocks[0].Until) < 119*time.Minute {
		t.Errorf("blocks after the unblock and the block for 2h: %+v %v", blocks, err)
	}
}

// TestMessageByProviderID: a provider id, of the first part or a later
// one, finds the message whose story it names; an unknown one finds none.
func TestMessageByProviderID(t *testing.T) {
	h := newHarness(t, Local{}, Lists{})
	routing, err := h.cfg.Routing()
	if err != nil {
		t.Fatal(err)
	}
	k, rdb := keys.For(routing.Accounts[0].Name), redistest.Client(t)
	rdb.Set(context.Background(), ledger.PIDKey(k, "prov-1"), `{"id":"login-7","class":"otp","n":"2","p1":"prov-1","p2":"prov-2"}`, time.Minute)
	rdb.Set(context.Background(), ledger.PIDKey(k, "prov-2"), "2\tprov-1", time.Minute)
	for _, pid := range []string{"prov-1", "prov-2"} {
		if code, body := h.request("", "GET", "/message?id="+pid, nil); code != 200 || !strings.Contains(body, "Provider id "+pid+" is message login-7") {
			t.Errorf("/message?id=%s: %d\n%s", pid, code, body)
		}
	}
	if code, body := h.request("", "GET", "/message?id=prov-9", nil); code != 200 || !strings.Contains(body, "No record of prov-9") || strings.Contains(body, "is message") {
		t.Errorf("/message?id=prov-9: %d\n%s", code, body)
	}
}

// TestMessageShowsItsDeferral: a message deferred by its class's send
// windows is found, its deferral said as `dispatcher message` says it; the
// lists page lists it.
func TestMessageShowsItsDeferral(t *testing.T) {
	class := "w" + strings.ToLower(strings.NewReplacer("_", "-").Replace(redistest.UniqueAccount(t)))
	class = class[:min(len(class), 32)]
	file := filepath.Join(t.TempDir(), "accounts.yaml")
	if err := os.WriteFile(file, []byte("classes:\n  - name: otp\n  - name: "+class+"\n    send_hours: \"08:00-21:00\"\n"+
		"accounts:\n  - name: "+class+"\n    provider: generic\n    generic: {url: https://a.example, token: t1}\n    classes: [otp, "+class+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := deferral.Message{Class: class, ID: "promo-1", To: "+33612345678", Data: []byte(`{"id":"promo-1"}`)}
	if j, err := deferral.New(redistest.Client(t), nil, nil).Judge(context.Background(), m, policy.Sending{Window: fixedWindow(time.Now().Add(time.Hour))}); err != nil || j.Verdict != deferral.Deferred {
		t.Fatalf("deferring promo-1: %+v %v", j, err)
	}
	h := newHarnessOf(t, Local{}, Lists{}, map[string]string{"ACCOUNTS_FILE": file})
	lists, stop, err := FeatureLists(h.cfg, redistest.Client(t), h.ps)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if lists.Deferred == nil {
		t.Fatal("FeatureLists: no deferred list for a class with send windows")
	}
	if rows, err := lists.Deferred.Search(context.Background(), "promo-1", 10, false); err != nil || len(rows) != 1 || rows[0][0] != class+"/promo-1" {
		t.Errorf("the deferred list's search: %v %v", rows, err)
	}
	if code, body := h.request("", "GET", "/message?id=promo-1", nil); code != 200 || !strings.Contains(body, "deferred (window): class "+class) || strings.Contains(body, "No record") {
		t.Errorf("/message?id=promo-1: %d\n%s", code, body)
	}

	// A drop from the lists page publishes the message's final status
	// event, as `dispatcher deferred drop` does: its producer learns its end.
	if got, err := lists.Deferred.Act(context.Background(), Action{Name: "drop", Key: class + "/promo-1"}); err != nil || got != "dropped" {
		t.Fatalf("drop promo-1: %q, %v", got, err)
	}
	var ev map[string]string
	for _, m := range h.psSrv.Messages() {
		var e map[string]string
		if json.Unmarshal(m.Data, &e) == nil && e["id"] == "promo-1" && strings.HasSuffix(m.Topic, "/"+h.cfg.StatusTopic) {
			ev = e
		}
	}
	if ev["status"] != "dropped" || ev["reason"] != "operator" || ev["class"] != class {
		t.Fatalf("the drop's status event on %s: %v; want promo-1 dropped by an operator", h.cfg.StatusTopic, ev)
	}
	// Dropped, its deferral is still told, at the time it was deferred.
	if code, body := h.request("", "GET", "/message?id=promo-1", nil); code != 200 || !regexp.MustCompile(`<time>[^<]+</time>deferred \(window\): class `+regexp.QuoteMeta(class)+`[^<]*dropped at`).MatchString(body) {
		t.Errorf("/message?id=promo-1 after its drop: %d\n%s", code, body)
	}
}

func last(audits []map[string]string) map[string]string {
	if len(audits) == 0 {
		return nil
	}
	return audits[len(audits)-1]
}

// between is the text of s between the first from and the to after it.
func between(s, from, to string) string {
	_, after, _ := strings.Cut(s, from)
	v, _, _ := strings.Cut(after, to)
	return v
}

// dryRunForm is the replay form of a dry run's page: its letters, at and
// proof.
func dryRunForm(body string) url.Values {
	form := url.Values{}
	for _, f := range strings.Split(body, `<input type="hidden" name="`)[1:] {
		name, rest, _ := strings.Cut(f, `" value="`)
		value, _, _ := strings.Cut(rest, `"`)
		form.Add(name, value)
	}
	return form
}

// TestReplayReplaysWhatItsDryRunListed: a replay without a dry run's list
// is refused; with one, it replays those letters and not one that arrived
// since, even by "all"; a list changed by hand, or another user's, is
// refused; the same list replayed again says its letter is gone.
func TestReplayReplaysWhatItsDryRunListed(t *testing.T) {
	h := newHarness(t, basicAuth(t, map[string]string{"olga": "operator", "otto": "operator"}), Lists{})
	h.deadLetter("early-1", "+819012345678")

	for _, form := range []url.Values{{"mode": {"all"}}, {"letter": {"early-1"}}, {"letter": {"early-1"}, "at": {"1"}, "proof": {"x"}}} {
		code, body := h.request("olga", "POST", "/deadletters/replay", form)
		if code != 400 || !strings.Contains(body, "dry-run first") {
			t.Errorf("replay of %v without a dry run: %d, want 400\n%s", form, code, body)
		}
		if a := last(h.log.audits(t)); a["action"] != "replay" || a["outcome"] != "refused" {
			t.Errorf("replay of %v without a dry run: audit %v", form, a)
		}
	}

	var form url.Values
	for range 5 { // pstest now and then reads nothing right after a read
		code, body := h.request("olga", "POST", "/deadletters/replay", url.Values{"mode": {"all"}, "dry_run": {"1"}})
		if code != 200 {
			t.Fatalf("dry run: %d\n%s", code, body)
		}
		if form = dryRunForm(body); len(form["letter"]) > 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !slices.Equal(form["letter"], []string{"early-1"}) || form.Get("proof") == "" {
		t.Fatalf("the dry run's form: %v", form)
	}
	h.deadLetter("late-2", "+819012340000") // arrives after the dry run

	forged := url.Values{"letter": {"early-1", "late-2"}, "at": form["at"], "proof": form["proof"]}
	if code, _ := h.request("olga", "POST", "/deadletters/replay", forged); code != 400 {
		t.Errorf("a dry run's list with a letter added: %d, want 400", code)
	}
	if code, _ := h.request("otto", "POST", "/deadletters/replay", form); code != 400 {
		t.Errorf("olga's dry run replayed by otto: %d, want 400", code)
	}

	var body string
	for range 5 {
		var code int
		code, body = h.request("olga", "POST", "/deadletters/replay", form)
		if code != 200 {
			t.Fatalf("replay: %d\n%s", code, body)
		}
		if !strings.Contains(body, "replayed 0, skipped 0") {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	// late-2 is skipped, filtered, if the replay's pull brought it too.
	if !strings.Contains(body, "replayed 1,") || strings.Contains(body, "late-2") {
		t.Errorf("the replay of the dry run's list:\n%s", body)
	}
	if a := last(h.log.audits(t)); a["action"] != "replay" || a["target"] != "ids=early-1" || a["outcome"] != "ok" {
		t.Errorf("the replay: audit %v", a)
	}
	for range 5 {
		if _, body = h.request("olga", "GET", "/deadletters", nil); strings.Contains(body, "late-2") {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(body, "late-2") || strings.Contains(body, "early-1") {
		t.Errorf("after the replay, want late-2 listed and early-1 gone:\n%s", body)
	}
	_, body = h.request("olga", "POST", "/deadletters/replay", form)
	if !strings.Contains(body, "replayed 0,") || !strings.Contains(between(body, `class="gone"`, "</tr>"), "early-1") {
		t.Errorf("the same list replayed again: want early-1 gone\n%s", body)
	}
}

// TestTheOverrideAction: an operator sets an account's override from the
// overview and clears it, as `dispatcher override` does, each audited; a
// viewer is refused (403) and changes nothing; a rate that would not
// lower is refused.
func TestTheOverrideAction(t *testing.T) {
	h := newHarness(t, basicAuth(t, map[string]string{"vic": "viewer", "olga": "operator"}), Lists{})
	account := h.h.setups[0].Name
	path := "/accounts/" + account + "/override"

	if _, body := h.request("vic", "GET", "/", nil); strings.Contains(body, `name="target_rps"`) {
		t.Errorf("a viewer's overview offers the override")
	}
	if code, _ := h.request("vic", "POST", path, url.Values{"action": {"set"}, "target_rps": {"5"}}); code != 403 {
		t.Errorf("vic's override: %d, want 403", code)
	}
	if a := last(h.log.audits(t)); a["user"] != "vic" || a["action"] != "override.set" || a["target"] != account || a["outcome"] != "forbidden" {
		t.Errorf("vic's override: audit %v", a)
	}
	if _, body := h.request("olga", "GET", "/", nil); strings.Contains(body, "overridden:") || !strings.Contains(body, `name="target_rps"`) {
		t.Fatalf("before olga's override, the overview shows one, or no form:\n%s", body)
	}

	code, body := h.request("olga", "POST", path, url.Values{"action": {"set"}, "target_rps": {"5"}, "ttl": {"10m"}})
	if code != 200 || !strings.Contains(body, "overridden: target 5") || !strings.Contains(body, "Clear override") {
		t.Errorf("olga's override: %d, want the overview showing it\n%s", code, body)
	}
	if a := last(h.log.audits(t)); a["user"] != "olga" || a["action"] != "override.set" || a["outcome"] != "ok" || !strings.Contains(a["detail"], "override set for 10m0s: target 5/s") {
		t.Errorf("olga's override: audit %v", a)
	}
	if code, body := h.request("olga", "POST", path, url.Values{"action": {"set"}, "target_rps": {"0.001"}}); code != 400 || !strings.Contains(body, "target_rps must be") {
		t.Errorf("an override below the minimum rate: %d, want 400\n%s", code, body)
	}
	if code, _ := h.request("olga", "POST", "/accounts/nobody/override", url.Values{"action": {"clear"}}); code != 404 {
		t.Errorf("an unknown account's override: %d, want 404", code)
	}

	code, body = h.request("olga", "POST", path, url.Values{"action": {"clear"}})
	if code != 200 || strings.Contains(body, "overridden:") {
		t.Errorf("olga's clear: %d, want the overview without the override\n%s", code, body)
	}
	if a := last(h.log.audits(t)); a["action"] != "override.clear" || a["outcome"] != "ok" || !strings.Contains(a["detail"], "override cleared") {
		t.Errorf("olga's clear: audit %v", a)
	}
}

// TestSupportRevealsOneMessagesNumber: the Message page shows a number
// masked to everyone; support (not a viewer) reads one message's number
// with a POST, audited with where it was read; a message whose number the
// console cannot read says so.
func TestSupportRevealsOneMessagesNumber(t *testing.T) {
	h := newHarness(t, basicAuth(t, map[string]string{"vic": "viewer", "sue": "support"}), Lists{})
	ctx, id := context.Background(), "stopped-"+redistest.UniqueAccount(t)
	const number = "+819012345678"
	store := suppress.NewStore(redistest.Client(t), "", nil)
	if err := store.Refused(ctx, id, time.Now(), suppress.Entry{Number: number, Source: suppress.SourceInbound, At: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"vic", "sue"} {
		code, body := h.request(user, "GET", "/message?id="+id, nil)
		if code != 200 || !strings.Contains(body, "+********5678") || strings.Contains(body, number) {
			t.Errorf("%s's message page: %d, want the number masked\n%s", user, code, body)
		}
		if strings.Contains(body, "Show number") != (user == "sue") {
			t.Errorf("%s's message page: Show number offered %v", user, user == "vic")
		}
	}
	if code, body := h.request("vic", "POST", "/message/number", url.Values{"message_id": {id}}); code != 403 || strings.Contains(body, number) {
		t.Errorf("vic's reveal: %d, want 403", code)
	}
	if a := last(h.log.audits(t)); a["user"] != "vic" || a["action"] != "reveal_number" || a["outcome"] != "forbidden" {
		t.Errorf("vic's reveal: audit %v", a)
	}
	code, body := h.request("sue", "POST", "/message/number", url.Values{"message_id": {id}})
	if code != 200 || !strings.Contains(body, number) {
		t.Errorf("sue's reveal: %d, want %s\n%s", code, number, body)
	}
	if a := last(h.log.audits(t)); a["user"] != "sue" || a["target"] != id || a["outcome"] != "ok" || a["detail"] != "its refusal by the suppression list" {
		t.Errorf("sue's reveal: audit %v", a)
	}
	if code, body := h.request("sue", "POST", "/message/number", url.Values{"message_id": {"never-" + id}}); code != 200 || !strings.Contains(body, "no number found") {
		t.Errorf("sue's reveal of an unknown message: %d\n%s", code, body)
	}
	if a := last(h.log.audits(t)); a["outcome"] != "not_found" {
		t.Errorf("sue's reveal of an unknown message: audit %v", a)
	}
}

// TestConfigurationShowsTheRulesInForce: /config shows each class's send
// windows and cap, guard rules and suppression, and each account's
// reserve, from ACCOUNTS_FILE; the token never.
func TestConfigurationShowsTheRulesInForce(t *testing.T) {
	file := filepath.Join(t.TempDir(), "accounts.yaml")
	if err := os.WriteFile(file, []byte(`classes:
  - name: otp
    countries: ["+44", "+81"]
    max_per_prefix: {digits: 6, count: 300, per: 10m, block_for: 1h}
  - name: marketing
    suppression: false
    send_hours: "08:00-21:00 mon-fri"
    default_zone: Europe/Paris
    max_per_recipient: {count: 2, per: 24h}
accounts:
  - name: main
    provider: generic
    generic: {url: "https://sms.example.com", token: tok-secret-1}
    contract_rps: 100
    target_rps: 90
    classes: [otp, marketing]
    class_rps: {marketing: 70}
    reserve_rps: {otp: 20}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarnessOf(t, Local{}, Lists{}, map[string]string{"ACCOUNTS_FILE": file})
	code, body := h.request("", "GET", "/config", nil)
	rules := between(body, `id="class-rules"`, "</table>")
	for _, want := range []string{
		"only to +44, +81", "at most 300 sends in 10m0s to a range of 6 digits; the next blocks it for 1h0m0s",
		"off (suppression: false)", "hours mon-fri 08:00-21:00; sat-sun closed in the recipient's zone (Europe/Paris when unknown)",
		"at most 2 to one number in any 24h0m0s; over it, deferred",
	} {
		if code != 200 || !strings.Contains(rules, want) {
			t.Errorf("/config's rules lack %q: %d\n%s", want, code, rules)
		}
	}
	if otp := between(rules, "<td>otp</td>", "</tr>"); !strings.Contains(otp, "on: a number on the list is refused") || !strings.Contains(otp, "none: any time") {
		t.Errorf("otp's rules: want suppression on and no send windows\n%s", otp)
	}
	if reserve := between(body, `class="reserve">`, "</td>"); !strings.Contains(reserve, "otp 20") {
		t.Errorf("main's reserve: %q, want otp 20", reserve)
	}
	if strings.Contains(body, "tok-secret-1") {
		t.Errorf("/config shows the account's token")
	}
}

// TestTheTimelineInTimeOrder: a message's suppression by the list and its
// block by the guard show on the Message page's timeline, each at its
// time, in time order with the ledger's events (the send at its start).
func TestTheTimelineInTimeOrder(t *testing.T) {
	name := "t" + strings.ToLower(strings.NewReplacer("_", "-").Replace(redistest.UniqueAccount(t)))
	name = name[:min(len(name), 32)]
	file := filepath.Join(t.TempDir(), "accounts.yaml")
	if err := os.WriteFile(file, []byte("classes:\n  - name: otp\n    countries: [\"+44\"]\n  - name: marketing\n"+
		"accounts:\n  - name: "+name+"\n    provider: generic\n    generic: {url: https://a.example, token: t1}\n    classes: [otp, marketing]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarnessOf(t, Local{}, Lists{}, map[string]string{"ACCOUNTS_FILE": file})
	ctx, rdb, id := context.Background(), redistest.Client(t), "timeline-"+name
	now := time.Now()
	// The send, now.
	lim := h.h.setups[0].Limiter
	d, err := lim.Admit(ctx, "otp", 1, time.Second, admission.Claim{ID: id, Token: "t-" + id})
	if err != nil || !d.Allowed {
		t.Fatalf("admit: %+v %v", d, err)
	}
	if err := lim.Settle(ctx, d, ledger.SentRecord("prov-"+id), admission.ResultNone, ledger.Story{ID: id, Class: "otp", ProviderIDs: []string{"prov-" + id}}); err != nil {
		t.Fatal(err)
	}
	// Its suppression an hour before and its block a minute after, as the
	// list and the guard record them (no message is all three: the order
	// is what is tested).
	stoppedAt, blockedAt := now.Add(-time.Hour), now.Add(time.Minute)
	if err := suppress.NewStore(rdb, "", nil).Refused(ctx, id, stoppedAt, suppress.Entry{Number: "+447700900123", Source: suppress.SourceInbound, At: stoppedAt.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, keys.GuardOf("otp").Blocked(id), "country "+name+" "+strconv.FormatInt(blockedAt.UnixMilli(), 10), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}

	code, body := h.request("", "GET", "/message?id="+id, nil)
	items := strings.Split(between(body, `<ol class="timeline">`, "</ol>"), "<li>")[1:]
	var order []string
	for _, it := range items {
		switch {
		case strings.Contains(it, "suppressed at"):
			order = append(order, "suppressed")
			if !strings.Contains(it, "<time>"+stoppedAt.UTC().Format("2006-01-02T15:04:05")) {
				t.Errorf("the suppression's line has not its time:\n%s", it)
			}
		case strings.Contains(it, "blocked by the guard (country)"):
			order = append(order, "blocked")
			if !strings.Contains(it, "<time>"+blockedAt.UTC().Format("2006-01-02T15:04:05")) {
				t.Errorf("the block's line has not its time:\n%s", it)
			}
		case strings.Contains(it, "sent on "+name):
			order = append(order, "sent")
			if !strings.Contains(it, "<time>"+now.UTC().Format("2006-01-02T")) {
				t.Errorf("the send's line has not its time:\n%s", it)
			}
		}
	}
	if code != 200 || !slices.Equal(order, []string{"suppressed", "sent", "blocked"}) {
		t.Errorf("/message?id=%s: %d, timeline order %v, want suppressed, sent, blocked\n%s", id, code, order, body)
	}
	if strings.Contains(body, "+447700900123") {
		t.Errorf("the timeline shows the number in clear")
	}
}

// TestMountedUnderAPrefix: the handler mounted under /console, as
// docs/console.md shows: every link, form, asset and the chart's fetch of
// every page is under the prefix and answers; the actions' redirects
// stay under it.
func TestMountedUnderAPrefix(t *testing.T) {
	tag := redistest.UniqueAccount(t)
	store := suppress.NewStore(redistest.Client(t), keys.Suppressions("{"+tag+"}"), nil)
	h := newHarnessMounted(t, Local{}, Lists{OptOuts: operator.OptOuts{Store: store}}, map[string]string{"SMS_ACCOUNT": tag}, nil, "/console")
	if code, _ := h.request("", "GET", "/config", nil); code != 404 {
		t.Errorf("/config outside the prefix: %d, want 404", code)
	}
	urls := regexp.MustCompile(`(?:href|src|action|data-src)="([^"#]*)`)
	checked := map[string]bool{}
	for _, page := range []string{"/console/", "/console/message?id=nobody", "/console/deadletters", "/console/lists?optouts=0999", "/console/config"} {
		code, body := h.request("", "GET", page, nil)
		if code != 200 {
			t.Fatalf("%s: %d\n%s", page, code, body)
		}
		for _, m := range urls.FindAllStringSubmatch(body, -1) {
			u := m[1]
			if !strings.HasPrefix(u, "/console/") {
				t.Errorf("%s links to %q, outside /console/", page, u)
				continue
			}
			if checked[u] || strings.Contains(m[0], "action=") {
				continue
			}
			checked[u] = true
			if code, body := h.request("", "GET", u, nil); code != 200 {
				t.Errorf("%s's %q: %d\n%s", page, u, code, body)
			}
		}
	}
	for _, u := range []string{"/console/assets/console.css", "/console/assets/console.js", "/console/chart"} {
		if !checked[u] {
			t.Errorf("no page fetched %s", u)
		}
	}
	noFollow := *h.client
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, w := range []struct{ path, form, want string }{
		{"/console/lists/optouts/add", "key=%2B447700900999&reason=r", "/console/lists?optouts=0999#list-optouts"},
		{"/console/accounts/" + h.h.setups[0].Name + "/override", "action=clear", "/console/#account-" + h.h.setups[0].Name},
	} {
		req, _ := http.NewRequest("POST", h.srv.URL+w.path, strings.NewReader(w.form))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 303 || resp.Header.Get("Location") != w.want {
			t.Errorf("POST %s: %d to %q, want 303 to %q", w.path, resp.StatusCode, resp.Header.Get("Location"), w.want)
		}
	}
}

// TestTheOverviewShowsAnAccountPause: an account paused for the
// provider's reason shows on the overview as `dispatcher status` says it:
// the pause, its time left and the reason.
func TestTheOverviewShowsAnAccountPause(t *testing.T) {
	h := newHarness(t, Local{}, Lists{})
	if err := h.h.setups[0].Limiter.ReportAccountFailure(context.Background(), time.Minute, "provider 401: bad token"); err != nil {
		t.Fatal(err)
	}
	code, body := h.request("", "GET", "/", nil)
	cell := between(body, `<td class="penalty">`, "</td>")
	if code != 200 || !strings.Contains(cell, "account paused, ") || !strings.Contains(cell, "s left (provider 401: bad token)") {
		t.Errorf("the overview's pause: %d %q, want the account pause, its time left and its reason", code, cell)
	}
}
