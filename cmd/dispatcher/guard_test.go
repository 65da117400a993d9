package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"smsdispatcher/internal/redistest"
)

// TestGuardBlocksListsAndUnblocksARange: `dispatcher guard` blocks a
// range of the guarded class for a while (reason operator), lists it with
// its end (and `dispatcher status` shows it), and lifts it; a missing or
// bad prefix, and a class without guard rules, are refused.
func TestGuardBlocksListsAndUnblocksARange(t *testing.T) {
	class := strings.ToLower(strings.NewReplacer("_", "-").Replace(redistest.UniqueAccount(t)))
	if len(class) > 32 {
		class = class[len(class)-32:]
	}
	path := writeFile(t, "accounts.yaml", "classes:\n"+
		"  - {name: otp}\n"+
		"  - {name: "+class+", countries: [\"+44\"]}\n"+
		"accounts:\n  - {name: main, provider: generic, generic: {url: https://a.example, token: t1}, classes: [otp, "+class+"]}\n")
	env := map[string]string{"ACCOUNTS_FILE": path, "REDIS_URL": "redis://" + redistest.Addr(t)}
	old := environ
	environ = func(k string) string { return env[k] }
	t.Cleanup(func() { environ = old })
	guardRun := func(args ...string) (string, error) {
		var out, errs bytes.Buffer
		if args[0] == "status" { // dispatcher status shows the blocks too
			err := runStatus(context.Background(), nil, &out, &errs)
			return out.String(), err
		}
		err := runGuard(context.Background(), args, &out, &errs)
		return out.String(), err
	}
	for _, step := range []struct {
		args []string
		want string
	}{
		{[]string{"list"}, class + ": no range blocked"},
		{[]string{"block", "--prefix", "+447700", "--for", "30m"}, class + ": +447700 blocked (operator) until"},
		{[]string{"list"}, class + ": +447700          operator    until"},
		{[]string{"list"}, "(30m0s left)  sends 0  verified 0"},
		{[]string{"status"}, "guard:\n" + class + ": +447700          operator"},
		{[]string{"unblock", "--prefix", "+447700"}, class + ": +447700 unblocked"},
		{[]string{"list"}, class + ": no range blocked"},
	} {
		out, err := guardRun(step.args...)
		if err != nil || !strings.Contains(out, step.want) {
			t.Fatalf("guard %v: %q, %v; want %q", step.args, out, err, step.want)
		}
	}
	if _, err := guardRun("block"); err == nil || !strings.Contains(err.Error(), "--prefix is required") {
		t.Fatalf("a block without --prefix: %v", err)
	}
	if _, err := guardRun("block", "--prefix", "447700"); err == nil || !strings.Contains(err.Error(), "want a prefix such as +447700") {
		t.Fatalf("a prefix without +: %v", err)
	}
	// otp has no guard rules: its processes never read blocks, so a block
	// of it would be written and never enforced.
	if _, err := guardRun("block", "--class", "otp", "--prefix", "+447700"); err == nil || !strings.Contains(err.Error(), `class "otp" has no guard rules`) {
		t.Fatalf("a block of an unguarded class: %v", err)
	}
	if _, err := guardRun("block", "--class", "opt", "--prefix", "+447700"); err == nil || !strings.Contains(err.Error(), "the guarded classes: "+class) {
		t.Fatalf("a block of an unknown class: %v", err)
	}
	if _, err := guardRun("drop"); err == nil {
		t.Fatal("an unknown verb accepted")
	}
}
