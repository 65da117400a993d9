package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/suppress"
)

// clearList deletes the suppression list's keys now and when t ends: a
// flush of them.
func clearList(t *testing.T) {
	t.Helper()
	rdb := redistest.Client(t)
	n := keys.Suppress()
	del := func() { rdb.Del(context.Background(), n.List(), n.Log(), n.Seq()) }
	del()
	t.Cleanup(del)
}

// TestSuppressionsCommands: add, check, list (masked), remove, each change
// published to SUPPRESSIONS_TOPIC, the list's size and changes in status; an export imported into a Redis that
// lost the list restores every entry, and importing it again adds none.
func TestSuppressionsCommands(t *testing.T) {
	h := newDLHarness(t)
	clearList(t)
	const a, b = "+819011112222", "+14155550123"
	mustRun := func(args ...string) string {
		t.Helper()
		out, errs, err := h.cmd(append([]string{"suppressions"}, args...)...)
		if err != nil {
			t.Fatalf("suppressions %v: %v\n%s", args, err, errs)
		}
		return out
	}
	if _, _, err := h.cmd("suppressions", "add", "--reason", "x", "0901112222"); err == nil {
		t.Fatal("add of a number that is not E.164: no error")
	}
	if out := mustRun("add", "--reason", "asked by phone", "--through", "acme", a, b); !strings.Contains(out, "+********2222: added") {
		t.Fatalf("add printed:\n%s", out)
	}
	if out := mustRun("add", "--reason", "again", a); !strings.Contains(out, "already on the list") {
		t.Fatalf("a second add printed:\n%s", out)
	}
	if out := mustRun("check", a); !strings.Contains(out, `suppressed since`) || !strings.Contains(out, `source operator, through acme, reason "asked by phone"`) {
		t.Fatalf("check printed:\n%s", out)
	}
	if out := mustRun("list"); strings.Contains(out, a) || !strings.Contains(out, "+********2222") {
		t.Fatalf("list shows a number in clear, or not masked:\n%s", out)
	}
	if out := mustRun("list", "--show-numbers"); !strings.Contains(out, a) || !strings.Contains(out, b) {
		t.Fatalf("list --show-numbers:\n%s", out)
	}
	if out, errs, err := h.cmd("status"); err != nil || !strings.Contains(out, "suppression list: 2 numbers; changes in the last hour: operator add 2") {
		t.Fatalf("status: %v\n%s%s", err, out, errs)
	}
	pub := h.published("sms-suppressions")
	if len(pub) != 3 {
		t.Fatalf("%d changes published to sms-suppressions, want 3 (the second add, which changed nothing, publishes the first entry again)", len(pub))
	}
	var change map[string]string
	if err := json.Unmarshal(pub[0].Data, &change); err != nil || change["action"] != "add" || change["source"] != "operator" ||
		change["reason"] != "asked by phone" || change["account"] != "acme" || change["at"] == "" || pub[0].Attributes["action"] != "add" {
		t.Fatalf("published change %s %v (%v)", pub[0].Data, pub[0].Attributes, err)
	}
	var again map[string]string
	if err := json.Unmarshal(pub[2].Data, &again); err != nil || again["number"] != a || again["reason"] != "asked by phone" || again["at"] != change["at"] {
		t.Fatalf("the second add published %s (%v); want the first entry again", pub[2].Data, err)
	}

	export := mustRun("export")
	if got := strings.Count(export, "\n"); got != 2 {
		t.Fatalf("export printed %d lines, want 2:\n%s", got, export)
	}
	file := filepath.Join(t.TempDir(), "suppressions.jsonl")
	if err := os.WriteFile(file, []byte(export), 0o600); err != nil {
		t.Fatal(err)
	}
	before := mustRun("check", a)
	clearList(t) // the keys lost: a flush
	if out := mustRun("check", a); !strings.Contains(out, "not suppressed") {
		t.Fatalf("after the flush, check printed:\n%s", out)
	}
	if out := mustRun("import", "--file", file); !strings.HasPrefix(out, "read 2, added 2, already on the list 0") {
		t.Fatalf("import printed:\n%s", out)
	}
	if after := mustRun("check", a); after != before {
		t.Fatalf("after the import, check printed\n%s\nwant as before the flush\n%s", after, before)
	}
	if out := mustRun("import", "--file", file); !strings.HasPrefix(out, "read 2, added 0, already on the list 2") {
		t.Fatalf("a second import printed:\n%s", out)
	}

	if out := mustRun("remove", "--reason", "START", a); !strings.Contains(out, "removed") {
		t.Fatalf("remove printed:\n%s", out)
	}
	if out := mustRun("check", a); !strings.Contains(out, "not suppressed") {
		t.Fatalf("after remove, check printed:\n%s", out)
	}
}

// TestDeadlettersReplaySkipsASuppressedNumber: a dead letter to a number
// on the suppression list is never republished: skipped, left listed.
func TestDeadlettersReplaySkipsASuppressedNumber(t *testing.T) {
	h := newDLHarness(t)
	clearList(t)
	const listed, other = "+819033334444", "+819055556666"
	h.deadLetter(msgJSON("to-listed", listed, "Hello"), dlAttrs("otp", providerReason, "3001"))
	h.deadLetter(msgJSON("to-other", other, "Hello"), dlAttrs("otp", providerReason, "3002"))
	h.refused("to-listed")
	h.refused("to-other")
	if _, err := suppress.NewStore(redistest.Client(t), "", nil).Add(context.Background(),
		suppress.Entry{Number: listed, Source: suppress.SourceInbound, Account: "acme", Reason: "STOP"}); err != nil {
		t.Fatal(err)
	}
	out, errs, err := h.cmd("deadletters", "replay", "--all", "--wait", dlWait)
	t.Logf("deadletters replay --all:\n%s", out)
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, errs)
	}
	for _, want := range []string{
		"replayed 1, skipped 1 (suppressed 1), failed 0",
		"to-listed: suppressed: its number is on the suppression list (source inbound)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("replay output lacks %q:\n%s", want, out)
		}
	}
	if pub := h.published("sms-otp"); len(pub) != 1 || killDataID(pub[0].Data) != "to-other" {
		t.Fatalf("republished %d messages, want to-other alone", len(pub))
	}
}

// TestSuppressionsListGoesOnFromItsCursor: `suppressions list` stops at
// --limit and prints the cursor its next page starts at; following the
// cursors, within a page and across HSCAN's pages, prints every entry
// once, and the last page prints no cursor.
func TestSuppressionsListGoesOnFromItsCursor(t *testing.T) {
	h := newDLHarness(t)
	clearList(t)
	const count = 2500 // more than one HSCAN page
	entries := make([]suppress.Entry, count)
	for i := range entries {
		entries[i] = suppress.Entry{Number: fmt.Sprintf("+1415%07d", i), Source: suppress.SourceOperator}
	}
	if _, err := suppress.NewStore(redistest.Client(t), "", nil).Import(context.Background(), entries); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	cursor, pages := "", 0
	for {
		args := []string{"suppressions", "list", "--show-numbers", "--limit", "700"}
		if cursor != "" {
			args = append(args, "--cursor", cursor)
		}
		out, errs, err := h.cmd(args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errs)
		}
		pages++
		cursor = ""
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if rest, ok := strings.CutPrefix(line, fmt.Sprintf("… %d entries in all; the next page: --cursor ", count)); ok {
				cursor, _, _ = strings.Cut(rest, " ")
				continue
			}
			seen[strings.Fields(line)[0]]++
		}
		if cursor == "" {
			break
		}
		if pages > 10 {
			t.Fatalf("still a next page after %d pages: the cursor does not move", pages)
		}
	}
	if pages != 4 || len(seen) != count {
		t.Fatalf("%d pages printed %d numbers, want 4 pages, all %d", pages, len(seen), count)
	}
	for n, times := range seen {
		if times != 1 {
			t.Fatalf("%s printed %d times, want once", n, times)
		}
	}
	if _, _, err := h.cmd("suppressions", "list", "--cursor", "x:1"); err == nil {
		t.Fatal("a cursor list never printed: no error")
	}
}
