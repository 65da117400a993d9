package suppress

import (
	"context"
	"fmt"
	"testing"
	"time"

	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redistest"
)

// testStore is a Store under names of t's own on the shared test Redis,
// whose keys are deleted when t ends.
func testStore(t *testing.T) *Store {
	t.Helper()
	rdb := redistest.Client(t)
	names := keys.Suppressions("{sms:suppress:" + redistest.UniqueAccount(t) + "}")
	t.Cleanup(func() { rdb.Del(context.Background(), names.List(), names.Log(), names.Seq()) })
	return NewStore(rdb, names, nil)
}

// runList starts a List of its own Redis client on store's names (one
// process's), waits for its first load, and stops it when t ends.
func runList(t *testing.T, store *Store) *List {
	t.Helper()
	l := NewList(NewStore(redistest.Client(t), store.names, nil), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-l.Loaded():
	case <-time.After(10 * time.Second):
		t.Fatal("the list did not load")
	}
	return l
}

// waitFor waits up to within for every list to say want of number, and
// returns how long after start the last one did.
func waitFor(t *testing.T, lists []*List, number string, want bool, start time.Time, within time.Duration) time.Duration {
	t.Helper()
	for _, l := range lists {
		for {
			if _, ok := l.Suppressed(number); ok == want {
				break
			}
			if time.Since(start) > within {
				t.Fatalf("a list still says suppressed=%v of %s %v after the change was answered", !want, number, within)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return time.Since(start)
}

// TestChangeReachesThreeProcessesWithinASecond: a STOP answered at t is in
// every process's copy by t + 1 s, and so is a START lifting it
// (docs/suppressions.md, the promise of one second).
func TestChangeReachesThreeProcessesWithinASecond(t *testing.T) {
	store := testStore(t)
	lists := []*List{runList(t, store), runList(t, store), runList(t, store)}
	const n = "+14155550100"
	ctx := context.Background()
	if _, ok := lists[0].Suppressed(n); ok {
		t.Fatal("suppressed before any change")
	}
	if changed, err := store.Add(ctx, Entry{Number: n, Source: SourceInbound, Account: "acme-otp", Reason: "STOP"}); err != nil || !changed {
		t.Fatalf("Add = %v, %v", changed, err)
	}
	took := waitFor(t, lists, n, true, time.Now(), time.Second)
	t.Logf("add reached 3 processes in %v", took)
	for _, l := range lists {
		if src, _ := l.Suppressed(n); src != SourceInbound {
			t.Errorf("source = %q, want %q", src, SourceInbound)
		}
	}
	if changed, err := store.Remove(ctx, Entry{Number: n, Source: SourceInbound, Account: "acme-bulk", Reason: "START"}); err != nil || !changed {
		t.Fatalf("Remove = %v, %v", changed, err)
	}
	took = waitFor(t, lists, n, false, time.Now(), time.Second)
	t.Logf("remove reached 3 processes in %v", took)
}

// TestAddKeepsTheFirstEntry: the list is a record of when a number was
// first suppressed; a second add changes nothing and is not logged.
func TestAddKeepsTheFirstEntry(t *testing.T) {
	store := testStore(t)
	ctx := context.Background()
	first := time.UnixMilli(1_790_000_000_000).UTC()
	const n = "+447700900123"
	if changed, err := store.Add(ctx, Entry{Number: n, Source: SourceProvider, Account: "a", Reason: "21610", At: first}); err != nil || !changed {
		t.Fatalf("Add = %v, %v", changed, err)
	}
	if changed, err := store.Add(ctx, Entry{Number: n, Source: SourceOperator, Reason: "again"}); err != nil || changed {
		t.Fatalf("second Add = %v, %v; want unchanged", changed, err)
	}
	e, ok, err := store.Get(ctx, n)
	if err != nil || !ok {
		t.Fatalf("Get = %v, %v", ok, err)
	}
	want := Entry{Number: n, Source: SourceProvider, Account: "a", Reason: "21610", At: first}
	if e != want {
		t.Errorf("entry = %+v, want %+v", e, want)
	}
	if got, _ := store.rdb.XLen(ctx, store.names.Log()).Result(); got != 1 {
		t.Errorf("log holds %d changes, want 1", got)
	}
}

// TestAGapLoadsTheListAgain: a process whose log lost changes (Redis lost
// the keys, then changes came again) loads the whole list again rather
// than keep numbers removed meanwhile or miss those added.
func TestAGapLoadsTheListAgain(t *testing.T) {
	store := testStore(t)
	ctx := context.Background()
	const gone, kept = "+14155550101", "+14155550102"
	if _, err := store.Add(ctx, Entry{Number: gone, Source: SourceOperator}); err != nil {
		t.Fatal(err)
	}
	l := runList(t, store)
	if _, ok := l.Suppressed(gone); !ok {
		t.Fatal("the load missed a number")
	}
	// The keys vanish (a flush) and a change comes after it: its number
	// in the log starts again at 1.
	if err := store.rdb.Del(ctx, store.names.List(), store.names.Log(), store.names.Seq()).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Add(ctx, Entry{Number: kept, Source: SourceOperator}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, []*List{l}, kept, true, time.Now(), 5*time.Second)
	waitFor(t, []*List{l}, gone, false, time.Now(), 5*time.Second)
}

// TestFlushThenImportRestoresEveryNumber: the export of the list, imported
// into a Redis that lost it, puts every number back with its entry, and a
// second import changes nothing.
func TestFlushThenImportRestoresEveryNumber(t *testing.T) {
	store := testStore(t)
	ctx := context.Background()
	const count = 2500 // more than a page and a pipeline
	for i := range count {
		src := []string{SourceInbound, SourceProvider, SourceOperator}[i%3]
		if _, err := store.Add(ctx, Entry{Number: fmt.Sprintf("+1415%07d", i), Source: src, Account: "acme", Reason: "STOP"}); err != nil {
			t.Fatal(err)
		}
	}
	var export []Entry
	for e, err := range store.All(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		export = append(export, e)
	}
	n := 0
	for _, err := range store.All(ctx) { // a caller that stops early stops the pages
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == ScanPage+1 {
			break
		}
	}
	before := map[string]Entry{}
	for _, e := range export {
		before[e.Number] = e
	}
	if len(before) != count {
		t.Fatalf("export holds %d numbers, want %d", len(before), count)
	}
	if err := store.rdb.Del(ctx, store.names.List(), store.names.Log(), store.names.Seq()).Err(); err != nil {
		t.Fatal(err)
	}
	added, err := store.Import(ctx, export)
	if err != nil || added != count {
		t.Fatalf("Import = %d, %v; want %d", added, err, count)
	}
	for n, want := range before {
		e, ok, err := store.Get(ctx, n)
		want.Action = ""
		if err != nil || !ok || e != want {
			t.Fatalf("after import %s = %+v, %v, %v; want %+v", n, e, ok, err, want)
		}
	}
	if again, err := store.Import(ctx, export); err != nil || again != 0 {
		t.Errorf("second Import = %d, %v; want 0 (idempotent)", again, err)
	}
}

func TestKey(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"+14155550100", 14155550100, true},
		{"+123456789012345", 123456789012345, true},
		{"+12345678", 12345678, true},
		{"+1234567", 0, false},
		{"+1234567890123456", 0, false},
		{"+04155550100", 0, false},
		{"14155550100", 0, false},
		{"+1415555010a", 0, false},
	} {
		k, err := Key(tt.in)
		if (err == nil) != tt.ok || k != tt.want {
			t.Errorf("Key(%q) = %d, %v; want %d, ok %v", tt.in, k, err, tt.want, tt.ok)
		}
	}
}
