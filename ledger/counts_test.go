package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/redisstats"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
)

// TestDeliveryCountsAreWrittenWithinASecondAndAtTheStop: the folds' counts
// are kept by the process and written by one HINCRBY per counter's field,
// whatever the finals they add up: carried by a call once a second has
// passed since the last write, by a timer's flush within the second
// without any call, and at once by FlushPublished (the stop); another
// process reads them then.
func TestDeliveryCountsAreWrittenWithinASecondAndAtTheStop(t *testing.T) {
	o := redistest.Options(redistest.Private(t))
	o.Network = "unix"
	rdb := redis.NewClient(o)
	t.Cleanup(func() { rdb.Close() })
	cfg := testConfig(t)
	l, reader := newLimiter(t, rdb, cfg), newLimiter(t, rdb, cfg)
	ctx := context.Background()
	finals := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			pid := fmt.Sprint("c", i)
			keepStory(t, l, fmt.Sprint("count-", i), ledger.Story{Class: "otp", ProviderIDs: []string{pid}})
			fold(t, l, report(pid, "delivered", ""))
		}
	}
	read := func() int64 {
		t.Helper()
		st, err := reader.Ledger().DeliveryStats(ctx, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return st["otp"].Finals
	}

	if err := redisstats.Reset(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	finals(0, 20)
	deadline := time.Now().Add(ledger.CountsEvery + 2*time.Second)
	for read() != 20 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 20 finals counted %v after them, want all within a second of the last, by the timer's flush", read(), ledger.CountsEvery+2*time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stats, err := redisstats.Read(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	// At most one write of the first final and one of the rest, each one
	// HINCRBY of the one field (a minute may turn: twice that).
	if n := stats["hincrby"]; n < 1 || n > 4 {
		t.Fatalf("20 finals of one bucket written by %d HINCRBYs, want one a write", n)
	}

	finals(20, 25)
	if err := l.Ledger().FlushPublished(ctx); err != nil {
		t.Fatal(err)
	}
	if n := read(); n != 25 {
		t.Fatalf("%d finals counted after the stop's flush, want 25", n)
	}
	left := ledger.CountsKept(l.Ledger())
	if left != 0 {
		t.Fatalf("%d counts kept after the stop's flush, want none", left)
	}
}
