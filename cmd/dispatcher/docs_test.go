package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"smsdispatcher/internal/redistest"
)

// TestTheOperatingGuidesStatusUserOnlyReads runs the ACL line of
// docs/observing.md ("Status") on the test Redis: a user made by it can
// run `dispatcher status`, and cannot set an override.
func TestTheOperatingGuidesStatusUserOnlyReads(t *testing.T) {
	b, err := os.ReadFile("../../docs/observing.md")
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
		t.Fatal("docs/observing.md has no line ACL SETUSER sms-status ...")
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
