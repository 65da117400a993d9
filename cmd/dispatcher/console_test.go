package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/bcrypt"

	"smsdispatcher/console"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/provider/providertest"
)

// chromiumEnv names the browser the console's test drives. .ci/run sets
// it: there the test fails without the browser; elsewhere, unset, the
// test looks for chromium on PATH and skips without it.
const chromiumEnv = "SMS_TEST_CHROMIUM"

// screenshotsEnv names a directory the console's test writes a PNG of each
// page to (docs/console/ holds those of docs/console.md).
const screenshotsEnv = "SMS_CONSOLE_SCREENSHOTS"

// chromium is the browser's path.
func chromium(t *testing.T) string {
	if path := os.Getenv(chromiumEnv); path != "" {
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("%s=%s: %v", chromiumEnv, path, err)
		}
		return path
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	t.Skipf("no chromium on PATH and %s unset: the console's browser test needs one (apt-get install chromium)", chromiumEnv)
	return ""
}

// usersFile writes a CONSOLE_USERS_FILE of name → role, each password
// its name's, and returns its path.
func usersFile(t *testing.T, roles map[string]string) string {
	var b strings.Builder
	for name, role := range roles {
		hash, err := bcrypt.GenerateFromPassword([]byte(name+"-pw"), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s %s\n", name, role, hash)
	}
	path := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConsoleInABrowser is the console as a person uses it, in a real
// headless Chromium, over the real serve (a pool of one), Redis and
// pstest: the overview's chart moves as messages are sent and denied; a
// message's story is found by its id; a dead letter the provider refused
// is dry-run, then replayed, and sent; an opt-out is removed; a viewer is
// refused the replay.
func TestConsoleInABrowser(t *testing.T) {
	browser := chromium(t)
	h := newDLHarness(t)
	sim := providertest.NewGeneric(providertest.Config{Token: "s3cret"})
	sim.FailFor(400, time.Hour)
	simSrv := httptest.NewServer(sim)
	defer simSrv.Close()
	t.Setenv("SMS_PROVIDER_URL", simSrv.URL)
	t.Setenv("SMS_PROVIDER_TOKEN", "s3cret")
	t.Setenv("HTTP_ADDR", freeAddr(t))
	t.Setenv("REDIS_TIMEOUT", "2s")
	t.Setenv("MARKETING_MAX_WAIT", "1s") // a marketing message denied is nacked within a second
	addr := freeAddr(t)
	t.Setenv("CONSOLE_ADDR", addr)
	metricsAddr := freeAddr(t)
	t.Setenv("CONSOLE_METRICS_ADDR", metricsAddr)
	t.Setenv("CONSOLE_AUTH", "basic")
	t.Setenv("CONSOLE_USERS_FILE", usersFile(t, map[string]string{"olga": "operator", "vic": "viewer"}))
	dlServe(t)
	publish := func(class, id string) {
		t.Helper()
		if _, errs, err := h.cmd("publish", "--class", class, "--to", "+819012345678", "--body", "Hello "+id, "--id", id); err != nil {
			t.Fatalf("publish %s: %v\n%s", id, err, errs)
		}
	}

	// A message the provider refuses: dead-lettered by serve.
	publish("otp", "refused-1")
	waitWithin(t, 30*time.Second, "the refused message dead-lettered", func() bool { return len(h.published("sms-dead-letter")) == 1 })
	sim.FailFor(0, 0) // the provider is fixed
	publish("marketing", "hello-1")
	waitWithin(t, 30*time.Second, "hello-1 sent", func() bool { return sim.SentCount("hello-1") == 1 })

	ctx, stopConsole := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- run(ctx, []string{"console"}, io.Discard, io.Discard) }()
	t.Cleanup(func() {
		stopConsole()
		if err := <-served; err != nil {
			t.Errorf("console: %v", err)
		}
	})
	base := "http://" + addr
	waitWithin(t, 10*time.Second, "the console listening", func() bool { return get(t, base+"/assets/console.css") == 401 })

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1100, 760))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	// as makes every request of the tab authenticate as user.
	as := func(user string) chromedp.Action[chromedp.Void] {
		auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + user + "-pw"))
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
				return err
			}
			_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": "Basic " + auth}})
			return err
		})
	}
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// text reads the element's text in one evaluation: a node id found by
	// one call may be stale by the next once the page settles under load.
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector(`+strconv.Quote(sel)+`).innerText`))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return v
	}
	visible := func(sel string) chromedp.Action[chromedp.Void] { return chromedp.WaitVisible(chromedp.CSS(sel)) }
	click := func(sel string) chromedp.Action[chromedp.Void] { return chromedp.Click(chromedp.CSS(sel)) }
	shots := os.Getenv(screenshotsEnv)
	screenshot := func(name string) {
		t.Helper()
		if shots == "" {
			return
		}
		png, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The overview: the chart is fetched again every few seconds, and
	// shows the sends made since the page loaded.
	do("the overview", as("olga"), chromedp.Navigate(base+"/"), visible("#chart-summary"))
	// chart reads the chart's readings and marketing's sends in the last
	// 60 s in one evaluation: the page's script replaces the chart while
	// the test reads it.
	chart := func() (readings, sent int) {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`(() => {
			const s = document.querySelector("#chart-summary");
			return [s.dataset.readings, s.querySelector(".sent-marketing").textContent];
		})()`))
		if err != nil || len(v) != 2 {
			t.Fatalf("reading the chart: %v, %v", v, err)
		}
		readings, _ = strconv.Atoi(v[0])
		sent, _ = strconv.Atoi(v[1])
		return readings, sent
	}
	first, before := chart()
	if accounts := text("#accounts"); !strings.Contains(accounts, h.account) || !strings.Contains(accounts, "healthy") {
		t.Errorf("the overview's accounts lack %s, healthy:\n%s", h.account, accounts)
	}
	for i := range 3 {
		publish("marketing", fmt.Sprintf("live-%d", i))
	}
	waitWithin(t, 30*time.Second, "the chart updated with the new sends", func() bool {
		readings, sent := chart()
		return readings > first && sent >= before+3
	})
	// Each class has its series of denials: with marketing's ceiling
	// overridden to nearly nothing, marketing beyond its burst is denied
	// and nacked, and the chart shows it.
	denied := func() (classes string, marketing int) {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`(() => {
			const classes = [...document.querySelectorAll("#chart polyline.denied")].map(p => p.dataset.class);
			return [classes.join(" "), document.querySelector("#chart-summary .denied-marketing").textContent];
		})()`))
		if err != nil || len(v) != 2 {
			t.Fatalf("reading the chart's denials: %v, %v", v, err)
		}
		marketing, _ = strconv.Atoi(v[1])
		return v[0], marketing
	}
	if classes, _ := denied(); classes != "otp marketing" {
		t.Errorf("the chart's denied series: %q, want otp's and marketing's", classes)
	}
	if _, errs, err := h.cmd("override", "--set-marketing-rps", "0.01", "--ttl", "2m"); err != nil {
		t.Fatalf("override: %v\n%s", err, errs)
	}
	for i := range 8 {
		publish("marketing", fmt.Sprintf("held-%d", i))
	}
	waitWithin(t, 30*time.Second, "the chart showing marketing denied", func() bool {
		_, marketing := denied()
		return marketing > 0
	})
	screenshot("overview")
	if _, errs, err := h.cmd("override", "--clear"); err != nil {
		t.Fatalf("override --clear: %v\n%s", err, errs)
	}

	// A message's story, by its id.
	do("a message's story", chromedp.Navigate(base+"/message"),
		chromedp.SendKeys(chromedp.CSS("#message-id"), "hello-1"), click("#message-search"), visible(".story"))
	if story := text(".story"); !strings.Contains(story, "admitted on "+h.account+": sent") {
		t.Errorf("hello-1's story:\n%s", story)
	}

	// The refused message: a dry run, then the replay; it is sent. A read
	// of the inspect subscription right after another's end finds, now and
	// then on pstest, nothing within its wait (the letter comes back within
	// the reader's lease); an operator would look again, and so does the
	// test, a few times.
	exists := func(sel string) bool {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.querySelector(`+strconv.Quote(sel)+`) !== null`))
		if err != nil {
			t.Fatalf("looking for %s: %v", sel, err)
		}
		return v
	}
	// letters shows the dead letters page, with a letter listed.
	letters := func() {
		t.Helper()
		for range 5 {
			if do("the dead letters", chromedp.Navigate(base+"/deadletters"), visible("main p")); exists("#letters") {
				return
			}
		}
		t.Fatal("the dead letters page lists none")
	}
	replayed := false
	for try := 0; try < 5 && !replayed; try++ {
		letters()
		screenshot("deadletters")
		do("a dry run", click("#letters input[type=checkbox]"), click("#dry-run-selected"), visible("#replay-summary.dry-run"))
		summary := text("#replay-summary")
		if strings.Contains(summary, "would replay 0, would skip 0,") {
			continue // read nothing: look again
		}
		if !strings.Contains(summary, "dry run, nothing changed: would replay 1") {
			t.Fatalf("dry run: %q", summary)
		}
		screenshot("dryrun")
		if sim.SentCount("refused-1") != 0 {
			t.Fatal("the dry run sent refused-1")
		}
		do("the replay", click("#replay-now"), visible("#replay-summary.replayed"))
		if summary = text("#replay-summary"); strings.Contains(summary, "replayed 0, skipped 0,") {
			continue
		}
		if !strings.Contains(summary, "replayed 1, skipped 0") {
			t.Fatalf("replay: %q", summary)
		}
		replayed = true
	}
	if !replayed {
		t.Fatal("the dry runs and replays read no dead letter")
	}
	waitWithin(t, 30*time.Second, "the replayed message sent", func() bool { return sim.SentCount("refused-1") == 1 })
	do("the replayed message's story", chromedp.Navigate(base+"/message?id=refused-1"), visible(".story"))
	if story := text(".story"); !strings.Contains(story, "admitted on "+h.account+": sent") {
		t.Errorf("refused-1's story after the replay:\n%s", story)
	}
	screenshot("message") // an OTP's story: its send and receipt have their times
	do("the configuration", chromedp.Navigate(base+"/config"), visible("#routes"))
	screenshot("config")
	// An opt-out `suppressions add` put on the list: the operator finds
	// it on the lists page, its number masked, and removes it (the row's
	// token), with a reason; it is gone.
	const optedOut = "+447700900777"
	if _, errs, err := h.cmd("suppressions", "add", "--reason", "STOP by phone", optedOut); err != nil {
		t.Fatalf("suppressions add: %v\n%s", err, errs)
	}
	do("the lists", chromedp.Navigate(base+"/lists?optouts=900777"), visible("#list-optouts table"))
	if row := text("#list-optouts table"); strings.Contains(row, optedOut) || !strings.Contains(row, "+********0777") || !strings.Contains(row, "STOP by phone") {
		t.Errorf("the opt-out's row, want the number masked:\n%s", row)
	}
	screenshot("lists")
	do("an opt-out removed", chromedp.SendKeys(chromedp.CSS("#list-optouts input[name=reason]"), "opted in again"),
		click("#list-optouts .act-remove"), visible("#list-optouts p.empty"))
	if out, _, err := h.cmd("suppressions", "check", optedOut); err != nil || !strings.Contains(out, "not suppressed") {
		t.Errorf("suppressions check after the removal: %q %v", out, err)
	}

	// A viewer sees the dead letters, masked, and is refused the replay.
	h.deadLetter(msgJSON("viewer-1", "+819012345678", "Hi"), dlAttrs("otp", providerReason, "2001"))
	do("the viewer", as("vic"))
	letters()
	if table := text("#letters"); strings.Contains(table, "9012345678") || !strings.Contains(table, "5678") || strings.Contains(table, "Show number") {
		t.Errorf("a viewer's dead letters: want the number masked, and no Show number:\n%s", table)
	}
	do("a viewer's dry run", click("#letters input[type=checkbox]"), click("#dry-run-selected"), visible("#forbidden"))
	if refused := text("#forbidden"); !strings.Contains(refused, "needs the operator role") {
		t.Errorf("a viewer's replay: %q", refused)
	}
	if n := len(h.published("sms-otp")); n != 2 {
		t.Errorf("%d messages on sms-otp, want 2 (refused-1 and its replay): the viewer's action went through", n)
	}

	// Each action counted, on the metrics port.
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	scrape, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`sms_console_actions_total{action="dry_run",outcome="ok"} 1`, `sms_console_actions_total{action="replay",outcome="ok"} 1`,
		`sms_console_actions_total{action="dry_run",outcome="forbidden"} 1`,
		`sms_console_actions_total{action="optouts.remove",outcome="ok"} 1`} {
		if !strings.Contains(string(scrape), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(string(scrape), "sms_console"))
		}
	}
}

// grepLines are the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out strings.Builder
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out.WriteString(line)
		}
	}
	return out.String()
}

// TestConsoleConfigErrors: a wrong console setting stops the start with
// one line naming its variable, and exit status 2.
func TestConsoleConfigErrors(t *testing.T) {
	t.Setenv("PUBSUB_PROJECT_ID", "proj")
	t.Setenv("REDIS_URL", "redis://"+redistest.Addr(t))
	users := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(users, []byte("olga admin x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"CONSOLE_ADDR": "8090"}, "CONSOLE_ADDR"},
		{map[string]string{"CONSOLE_ADDR": "0.0.0.0:8090"}, "CONSOLE_AUTH"},
		{map[string]string{"CONSOLE_AUTH": "oauth"}, "CONSOLE_AUTH"},
		{map[string]string{"CONSOLE_AUTH": "basic"}, "CONSOLE_USERS_FILE"},
		{map[string]string{"CONSOLE_AUTH": "basic", "CONSOLE_USERS_FILE": users}, "CONSOLE_USERS_FILE"},
		{map[string]string{"CONSOLE_AUTH": "iap"}, "CONSOLE_IAP_AUDIENCE"},
	} {
		t.Run(tt.want, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			err := run(context.Background(), []string{"console"}, io.Discard, io.Discard)
			var se *console.SettingError
			if !errors.As(err, &se) || se.Env != tt.want || se.ExitCode() != 2 || strings.Contains(err.Error(), "\n") {
				t.Fatalf("console with %v: %v, want one line naming %s", tt.env, err, tt.want)
			}
		})
	}
}

// lockedBuffer is a bytes.Buffer a command writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDemoServesTheConsole: `demo --console` prints the console's URL and
// serves the overview of its own stack while the campaign runs, logs its
// actions' audit lines, and stops it with the run.
func TestDemoServesTheConsole(t *testing.T) {
	t.Setenv("CONSOLE_ADDR", freeAddr(t))
	var out, errs lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), []string{"demo", "--console", "--campaign", "300", "--otp-rate", "10", "--instances", "2",
			"--progress", "off", "--redis-timeout", "2s"}, &out, &errs)
	}()
	url := ""
	waitWithin(t, 30*time.Second, "the console's URL printed", func() bool {
		_, after, ok := strings.Cut(out.String(), "console: ")
		url, _, _ = strings.Cut(after, " ")
		return ok && strings.HasSuffix(url, "/")
	})
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "local (operator)") || !strings.Contains(string(page), `id="chart-summary"`) {
		t.Errorf("the demo's console: %d\n%s", resp.StatusCode, page)
	}
	// A replay without a dry run: refused, and its audit line logged.
	req, _ := http.NewRequest("POST", url+"deadletters/replay", strings.NewReader("letter=x"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 400 {
		t.Errorf("the demo's console, a replay without a dry run: %v %v, want 400", resp, err)
	} else {
		resp.Body.Close()
	}
	if !strings.Contains(errs.String(), `"msg":"audit","user":"local","role":"operator","action":"replay"`) {
		t.Errorf("the demo logged no audit line for the refused replay:\n%s", errs.String())
	}
	if err := <-done; err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	if _, err := http.Get(url); err == nil {
		t.Errorf("the console still answers once the demo ended")
	}
}
