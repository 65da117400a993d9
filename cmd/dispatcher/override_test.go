package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redistest"
)

// TestOverrideShowsPinsAndResetsTheLearnedRate: `dispatcher override`
// acts on the account it is given by name (several in the file: one must
// be named), pins the learned rate, shows it, and resets it; a pin above
// the account's target is refused.
func TestOverrideShowsPinsAndResetsTheLearnedRate(t *testing.T) {
	bulk := redistest.UniqueAccount(t)
	path := writeFile(t, "accounts.yaml", "accounts:\n"+
		"  - {name: otp, provider: generic, generic: {url: https://a.example, token: t1}, classes: [otp]}\n"+
		"  - {name: "+bulk+", provider: generic, generic: {url: https://b.example, token: t2}, target_rps: 90, classes: [marketing], adaptive: {enabled: true}}\n")
	env := map[string]string{"ACCOUNTS_FILE": path, "REDIS_URL": "redis://" + redistest.Addr(t)}
	old := environ
	environ = func(k string) string { return env[k] }
	t.Cleanup(func() { environ = old })

	run := func(args ...string) (string, error) {
		var out, errs bytes.Buffer
		err := runOverride(context.Background(), args, &out, &errs)
		return out.String(), err
	}
	if _, err := run("--show"); err == nil || !strings.Contains(err.Error(), "name one with --on") {
		t.Fatalf("no account named among several: %v", err)
	}
	for _, step := range []struct {
		args []string
		want string
	}{
		{[]string{"--on", bulk, "--show"}, "learned rate: none; the target 90/s holds until a 429"},
		{[]string{"--on", bulk, "--pin-learned-rps", "40"}, "learned rate: 40/s pinned (target 90/s)"},
		{[]string{"--on", bulk, "--show"}, "learned rate: 40/s pinned"},
		{[]string{"--on", bulk, "--reset-learned"}, "learned rate: none"},
	} {
		out, err := run(step.args...)
		if err != nil || !strings.Contains(out, bulk+": "+step.want) {
			t.Fatalf("override %v: %q, %v; want %q", step.args, out, err, step.want)
		}
	}
	if _, err := run("--on", bulk, "--pin-learned-rps", "95"); err == nil {
		t.Fatal("a pin above the target was accepted")
	}
	if _, err := run("--on", "nobody", "--show"); err == nil || !strings.Contains(err.Error(), `no account "nobody"`) {
		t.Fatalf("an unknown account: %v", err)
	}
}

// TestOverrideRefusesRatesBelowTheMinimumAndANegativeTTL: `dispatcher
// override` refuses, in one line naming the flag and before it reads any
// configuration or touches Redis, a rate that is not a finite number of at
// least admission.MinRPS (a smaller one would not lower the rate) and a
// negative --ttl (it would make the override permanent).
func TestOverrideRefusesRatesBelowTheMinimumAndANegativeTTL(t *testing.T) {
	// No REDIS_URL: a command that got past the flags would fail on it
	// instead.
	old := environ
	environ = func(string) string { return "" }
	t.Cleanup(func() { environ = old })
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--set-target-rps", "1e-14"}, "--set-target-rps must be 0 (not overridden) or a finite number of at least 0.01/s, got 1e-14"},
		{[]string{"--set-target-rps", "0.009"}, "--set-target-rps must be"},
		{[]string{"--set-target-rps", "-1"}, "--set-target-rps must be"},
		{[]string{"--set-target-rps", "NaN"}, "--set-target-rps must be"},
		{[]string{"--set-marketing-rps", "+Inf"}, "--set-marketing-rps must be"},
		{[]string{"--set-marketing-rps", "1e-300"}, "--set-marketing-rps must be"},
		{[]string{"--set-target-rps", "1", "--ttl", "-1s"}, "--ttl must not be negative (0: until cleared), got -1s"},
	} {
		var out, errs bytes.Buffer
		err := runOverride(context.Background(), tt.args, &out, &errs)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("override %v: %v; want one line with %q", tt.args, err, tt.want)
		}
	}
}

// TestOverrideClearPenaltyEndsA429NotAPause: `dispatcher override
// --clear-penalty` ends a live 429 penalty in Redis and says so; it leaves
// an account-level pause alone, and says that too.
func TestOverrideClearPenaltyEndsA429NotAPause(t *testing.T) {
	ctx := context.Background()
	account := redistest.UniqueAccount(t)
	env := map[string]string{"SMS_ACCOUNT": account, "REDIS_URL": "redis://" + redistest.Addr(t)}
	old := environ
	environ = func(k string) string { return env[k] }
	t.Cleanup(func() { environ = old })
	rdb := redistest.Client(t)
	lim, err := admission.New(rdb, admission.Config{Account: account, RedisTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	penalty := keys.For(lim.Account()).Penalty()
	run := func() string {
		t.Helper()
		var out, errs bytes.Buffer
		if err := runOverride(ctx, []string{"--clear-penalty"}, &out, &errs); err != nil {
			t.Fatalf("override --clear-penalty: %v (%s)", err, errs.String())
		}
		return out.String()
	}

	if err := lim.ReportThrottled(ctx, 4*time.Minute); err != nil {
		t.Fatal(err)
	}
	if out := run(); !strings.Contains(out, account+": 429 penalty ended") {
		t.Fatalf("override --clear-penalty during a 429 penalty: %q", out)
	}
	if ttl := rdb.PTTL(ctx, penalty).Val(); ttl > 0 {
		t.Fatalf("the penalty lives %v after --clear-penalty", ttl)
	}

	if err := lim.ReportAccountFailure(ctx, time.Minute, "twilio 20003"); err != nil {
		t.Fatal(err)
	}
	if out := run(); !strings.Contains(out, account+": no 429 penalty was live") {
		t.Fatalf("override --clear-penalty during an account pause: %q", out)
	}
	if ttl := rdb.PTTL(ctx, penalty).Val(); ttl < 50*time.Second {
		t.Fatalf("the account pause lives %v after --clear-penalty, want its minute", ttl)
	}
}
