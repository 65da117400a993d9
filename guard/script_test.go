package guard

import (
	"context"
	"fmt"
	"testing"
	"time"

	"smsdispatcher/config/policy"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redistest"
)

// clock is a settable instant for a Guard's Options.Now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// newTestGuard returns a guard of rules for a class of the test's own
// (its keys in Redis are the test's), at c's instants.
func newTestGuard(t *testing.T, rules *policy.Guard, c *clock) (*Guard, string) {
	t.Helper()
	class := redistest.UniqueAccount(t)
	return New(redistest.Client(t), map[string]*policy.Guard{class: rules}, "p1", Options{Now: c.now}), class
}

// count counts n sends to numbers of to's range (to, then numbers after
// it) at c's instant, each in a call of its own.
func count(t *testing.T, g *Guard, class, to string, n int) {
	t.Helper()
	c := g.classes[class]
	for i := range n {
		num := fmt.Sprintf("%s%03d", to, i)
		rate, conv := counted(c.rules, num)
		id := fmt.Sprintf("%s-%d-%d", to, g.opts.Now().UnixNano(), i)
		if err := g.countBatch(context.Background(), c, []sent{{id: id, member: id, rate: rate, conv: conv}}); err != nil {
			t.Fatal(err)
		}
	}
}

func blockOf(t *testing.T, g *Guard, class, r string) (Block, bool) {
	t.Helper()
	bs, err := List(context.Background(), g.rdb, class, g.opts.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.Range == r {
			return b, true
		}
	}
	return Block{}, false
}

// max_per_prefix at fixed instants: count sends in a window of per block
// the range for block_for; sends spread over more than per do not.
func TestARangeBrake(t *testing.T) {
	c := &clock{time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	rules := &policy.Guard{MaxPerPrefix: policy.PrefixRate{Digits: 6, Count: 5, Per: time.Minute, BlockFor: time.Hour}}
	g, class := newTestGuard(t, rules, c)

	count(t, g, class, "+4477001", 4)
	c.t = c.t.Add(61 * time.Second) // the first four leave the window
	count(t, g, class, "+4477002", 4)
	if b, ok := blockOf(t, g, class, "447700"); ok {
		t.Fatalf("8 sends over 61 s, 4 in any minute: blocked %+v", b)
	}
	count(t, g, class, "+4477003", 1)
	b, ok := blockOf(t, g, class, "447700")
	if !ok || b.Reason != ReasonPrefixRate || b.Sends != 5 || !b.Until.Equal(c.t.Add(time.Hour)) {
		t.Fatalf("the fifth send in a minute: %+v %v, want a prefix_rate block of 5 sends until an hour on", b, ok)
	}
	if got := decide(rules, g.classes[class].blocks, "+447700999999", c.t); got != ReasonPrefixRate {
		t.Fatalf("the process that counted holds %q, want the block", got)
	}
	// More sends in flight do not extend it; its end releases it.
	c.t = c.t.Add(30 * time.Minute)
	count(t, g, class, "+4477004", 10)
	if b2, _ := blockOf(t, g, class, "447700"); !b2.Until.Equal(b.Until) {
		t.Fatalf("a block in force was replaced: until %v, want %v", b2.Until, b.Until)
	}
	c.t = b.Until
	if _, ok := blockOf(t, g, class, "447700"); ok {
		t.Fatal("the block holds at its end")
	}
}

// min_conversion at fixed instants: only sends older than the grace are
// judged; a range under the ratio is blocked, one at or over it not.
func TestAConversionRule(t *testing.T) {
	c := &clock{time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	rules := &policy.Guard{MinConversion: policy.Conversion{Ratio: 0.2, MinSends: 10, Digits: 5, Per: 30 * time.Minute, Grace: time.Minute, BlockFor: time.Hour}}
	g, class := newTestGuard(t, rules, c)
	ctx := context.Background()
	start := c.t

	// Range 44701: 10 sends, 2 verified (the ratio exactly); 44702: 10
	// sends, 1 verified.
	for _, r := range []struct {
		to       string
		verified int
	}{{"+4470100", 2}, {"+4470200", 1}} {
		count(t, g, class, r.to, 10)
		for i := range r.verified {
			known, err := g.Verified(ctx, fmt.Sprintf("%s-%d-%d", r.to, c.t.UnixNano(), i))
			if err != nil || !known {
				t.Fatalf("verifying a send: %v %v", known, err)
			}
		}
	}
	if known, err := g.Verified(ctx, "never-sent"); err != nil || known {
		t.Fatalf("an unknown id: known %v, %v", known, err)
	}
	// Within the grace: nothing judged.
	c.t = c.t.Add(59 * time.Second)
	count(t, g, class, "+4470201", 1)
	if b, ok := blockOf(t, g, class, "44702"); ok {
		t.Fatalf("judged within the grace: %+v", b)
	}
	c.t = c.t.Add(2 * time.Second)
	count(t, g, class, "+4470101", 1)
	count(t, g, class, "+4470202", 1)
	if b, ok := blockOf(t, g, class, "44701"); ok {
		t.Fatalf("a range at the ratio (2 of 10) blocked: %+v", b)
	}
	b, ok := blockOf(t, g, class, "44702")
	if !ok || b.Reason != ReasonConversion || b.Sends != 10 || b.Verified != 1 {
		t.Fatalf("a range under the ratio (1 of 10): %+v %v, want a conversion block of 10 sends, 1 verified", b, ok)
	}
	// Past per the sends leave the window: a verification of one is old.
	c.t = c.t.Add(31 * time.Minute)
	count(t, g, class, "+4470102", 1)
	if known, _ := g.Verified(ctx, fmt.Sprintf("+4470100-%d-3", start.UnixNano())); known {
		t.Fatal("a verification past per counted")
	}
}

// An operator's block and unblock: the block holds until its end, the
// unblock forgets the range's counts, and Held counts by reason.
func TestAnOperatorsBlock(t *testing.T) {
	c := &clock{time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	rules := &policy.Guard{MaxPerPrefix: policy.PrefixRate{Digits: 6, Count: 3, Per: time.Minute, BlockFor: time.Hour}}
	g, class := newTestGuard(t, rules, c)
	ctx := context.Background()
	if err := BlockRange(ctx, g.rdb, class, "+44780", 10*time.Minute, c.t); err != nil {
		t.Fatal(err)
	}
	if err := BlockRange(ctx, g.rdb, class, "44780", time.Minute, c.t); err == nil {
		t.Fatal("a prefix without + accepted")
	}
	count(t, g, class, "+4477001", 3)
	g.refresh(ctx)
	if h := g.Held(); h[ReasonOperator] != 1 || h[ReasonPrefixRate] != 1 {
		t.Fatalf("held %v, want an operator's and a prefix_rate block", h)
	}
	if removed, err := UnblockRange(ctx, g.rdb, class, "+447700"); err != nil || !removed {
		t.Fatalf("unblock: %v %v", removed, err)
	}
	count(t, g, class, "+4477002", 2)
	if b, ok := blockOf(t, g, class, "447700"); ok {
		t.Fatalf("2 sends after an unblock blocked again: %+v (its counts kept)", b)
	}
	c.t = c.t.Add(10 * time.Minute)
	g.refresh(ctx)
	if got := decide(rules, g.classes[class].blocks, "+447801234567", c.t); got != "" {
		t.Fatalf("an operator's block at its end: %q", got)
	}
}

// Counted hears each send Sent queues for counting, and none of a number
// the automatic rules leave alone (allow_prefixes): sms_guard_sends_total
// counts what the ranges count.
func TestCountedHearsTheCountedSends(t *testing.T) {
	rules := &policy.Guard{MaxPerPrefix: policy.PrefixRate{Digits: 6, Count: 5, Per: time.Minute, BlockFor: time.Hour},
		AllowPrefixes: []string{"+4477009"}}
	class := redistest.UniqueAccount(t)
	var heard []string
	g := New(redistest.Client(t), map[string]*policy.Guard{class: rules}, "p1",
		Options{Counted: func(c, to string) { heard = append(heard, c+" "+to) }})
	g.Sent(class, "a", "+447700100001")
	g.Sent(class, "b", "+447700900001") // allowed
	g.Sent("another", "c", "+447700100002")
	if want := []string{class + " +447700100001"}; fmt.Sprint(heard) != fmt.Sprint(want) {
		t.Errorf("Counted heard %q, want %q", heard, want)
	}
}

// Sends that queue within the linger are counted in one call of
// sent.lua, however far apart they come: a message that passes costs a
// share of a call, not one.
func TestSendsWithinTheLingerAreCountedInOneCall(t *testing.T) {
	ctx := context.Background()
	rules := &policy.Guard{MaxPerPrefix: policy.PrefixRate{Digits: 6, Count: 100, Per: time.Minute, BlockFor: time.Hour}}
	class := redistest.UniqueAccount(t)
	rdb := redistest.Client(t)
	if err := sentScript.Load(ctx, rdb).Err(); err != nil { // no NOSCRIPT retry to count
		t.Fatal(err)
	}
	rec := &redistest.Recorder{}
	rdb.AddHook(rec)
	g := New(rdb, map[string]*policy.Guard{class: rules}, "p1", Options{Linger: 3 * time.Second})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); g.Run(rctx) }()
	defer func() { cancel(); <-done }()

	const n = 10
	for i := range n { // 20 ms apart: each its own call without the linger
		g.Sent(class, fmt.Sprintf("s%d", i), fmt.Sprintf("+447700100%03d", i))
		time.Sleep(20 * time.Millisecond)
	}
	window := keys.GuardOf(class).Prefix() + "rate:447700"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got, err := rdb.ZCard(ctx, window).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the %d sends counted after 10 s", got, n)
		}
	}
	calls := 0
	for _, args := range rec.Commands() {
		if name, _ := args[0].(string); name == "evalsha" || name == "eval" {
			calls++
		}
	}
	if calls != 1 {
		t.Fatalf("%d sends within the linger took %d calls of sent.lua, want 1", n, calls)
	}
}
