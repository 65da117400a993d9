package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/dispatch"
	"smsdispatcher/internal/redistest"
)

// TestTheOperatingGuidesAccountsExampleLoads: the complete ACCOUNTS_FILE
// example of docs/operating.md is a file the dispatcher accepts, and means
// what the guide says of it.
func TestTheOperatingGuidesAccountsExampleLoads(t *testing.T) {
	b, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, after, ok := strings.Cut(doc, "## Accounts\n")
	if !ok {
		t.Fatal("docs/operating.md has no Accounts section")
	}
	_, block, ok := strings.Cut(after, "```yaml\n")
	if !ok {
		t.Fatal("the Accounts section has no yaml block")
	}
	block, _, _ = strings.Cut(block, "```")
	block = strings.NewReplacer(
		"/var/run/secrets/otp/token", writeFile(t, "otp-token", "otp-auth-token\n"),
		"/var/run/secrets/bulk/token", writeFile(t, "bulk-token", "bulk-token\n"),
	).Replace(block)
	base, err := loadConfig(map[string]string{"ACCOUNTS_FILE": writeFile(t, "accounts.yaml", block)})
	if err != nil {
		t.Fatal(err)
	}
	setups, err := base.Accounts()
	if err != nil {
		t.Fatalf("the guide's example: %v", err)
	}
	if len(setups) != 2 || setups[0].Name != "otp" || setups[1].Name != "bulk" {
		t.Fatalf("accounts %+v, want otp then bulk", setups)
	}
	r := [2][]int{dispatch.Route(config.Served(setups), admission.OTP), dispatch.Route(config.Served(setups), admission.Marketing)}
	if len(r[admission.OTP]) != 2 || r[admission.OTP][0] != 0 || len(r[admission.Marketing]) != 1 || r[admission.Marketing][0] != 1 {
		t.Fatalf("routes %v: want OTP on otp then bulk, marketing on bulk", r)
	}
	bulk := setups[1]
	if len(bulk.Senders) != 3 || !bulk.Adaptive.Enabled || bulk.Adaptive.MinRPS != 10 || bulk.MarketingRPS != 70 {
		t.Fatalf("bulk: %+v", bulk)
	}
}

// TestTheOperatingGuidesStatusUserOnlyReads runs the ACL line of
// docs/operating.md ("Status") on the test Redis: a user made by it can
// run `dispatcher status`, and cannot set an override.
func TestTheOperatingGuidesStatusUserOnlyReads(t *testing.T) {
	b, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for l := range strings.Lines(string(b)) {
		if strings.HasPrefix(l, "ACL SETUSER sms-status ") {
			line = strings.TrimSpace(l)
		}
	}
	if line == "" {
		t.Fatal("docs/operating.md has no line ACL SETUSER sms-status ...")
	}
	user := "sms-status-" + redistest.UniqueAccount(t)
	line = strings.NewReplacer("sms-status ", user+" ", "STATUS-PASSWORD", "st4tus").Replace(line)
	rdb := redistest.Client(t)
	ctx := context.Background()
	var args []any
	for _, f := range strings.Fields(line) {
		args = append(args, f)
	}
	if err := rdb.Do(ctx, args...).Err(); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	t.Cleanup(func() { rdb.Do(context.Background(), "ACL", "DELUSER", user) })

	t.Setenv("REDIS_URL", "redis://"+user+":st4tus@"+redistest.Addr(t))
	account := redistest.UniqueAccount(t)
	t.Setenv("SMS_ACCOUNT", account)
	var out bytes.Buffer
	if err := run(ctx, []string{"status"}, &out, io.Discard); err != nil {
		t.Fatalf("status as %s: %v", user, err)
	}
	if !strings.Contains(out.String(), "account "+account+": ") {
		t.Fatalf("status as %s printed:\n%s", user, out.String())
	}
	err = run(ctx, []string{"override", "--set-target-rps", "50", "--ttl", "1m"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("override as %s: %v, want NOPERM", user, err)
	}
}
