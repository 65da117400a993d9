package ledger_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
)

// TestTheFoldEndsTheSameWhateverTheOrder: a message's receipts (1 part, 3
// parts), shuffled and duplicated, always fold into the same final state
// when each part has a final one;
// on the way an intermediate never replaces a final, a later failure never
// replaces delivered nor another failure, a delivered replaces a failure
// once, and an event is owed (a new version) exactly when the state
// becomes final or a failure turns delivered.
func TestTheFoldEndsTheSameWhateverTheOrder(t *testing.T) {
	l := newLimiter(t, redistest.Client(t), testConfig(t))
	ledger.SetHandOutAfter(l.Ledger(), time.Hour) // no event is handed out again
	rng := rand.New(rand.NewPCG(29, 1))
	intermediates := []string{"queued", "accepted", "sending", "sent", "buffered", "unknown"}
	failures := []string{"undelivered", "failed", "expired", "rejected"}
	for trial := range 40 {
		parts := []int{1, 3}[trial%2]
		fail, code := failures[rng.IntN(len(failures))], fmt.Sprint(30000+rng.IntN(10))
		var receipts []ledger.Report
		var pids []string
		delivered, failed, complete := 0, false, true
		for p := range parts {
			pid := fmt.Sprintf("SM%d-%d", trial, p)
			pids = append(pids, pid)
			for range rng.IntN(4) {
				receipts = append(receipts, report(pid, intermediates[rng.IntN(len(intermediates))], ""))
			}
			switch rng.IntN(4) {
			case 0:
				receipts = append(receipts, report(pid, "delivered", ""))
				delivered++
			case 1:
				receipts = append(receipts, report(pid, fail, code))
				failed = true
			case 2: // a failure, and a delivered after or before it
				receipts = append(receipts, report(pid, fail, code), report(pid, "delivered", ""))
				delivered++
			default:
				// No final: the message's end may hang on the order (a
				// failure made it final, or this part's recovery came first).
				complete = false
			}
		}
		for range 1 + rng.IntN(3) {
			if len(receipts) > 0 {
				receipts = append(receipts, receipts[rng.IntN(len(receipts))])
			}
		}
		want := ""
		switch {
		case delivered == parts:
			want = "delivered"
		case failed:
			want = fail + " " + code
		case complete:
			t.Fatalf("trial %d: a complete story neither delivered nor failed", trial)
		}
		var ends []string
		for order := range 4 {
			id := fmt.Sprintf("m%d-%d", trial, order)
			keepStory(t, l, id, ledger.Story{Class: "otp", ProviderIDs: pids})
			rng.Shuffle(len(receipts), func(i, j int) { receipts[i], receipts[j] = receipts[j], receipts[i] })
			prev, version := "", int64(0)
			for _, r := range receipts {
				f := fold(t, l, r)
				if !f.Known || f.ID != id {
					t.Fatalf("trial %d: %+v folded into %+v, want message %s", trial, r, f, id)
				}
				switch {
				case ledger.DeliveryStatuses[prev] && !f.Final:
					t.Fatalf("trial %d: %s after final %s: the intermediate %s replaced it", trial, r.Status, prev, f.Status)
				case prev == "delivered" && f.Status != "delivered":
					t.Fatalf("trial %d: %s after delivered replaced it", trial, f.Status)
				case isFailure(prev) && isFailure(f.Status) && f.Status != prev:
					t.Fatalf("trial %d: a later failure %s replaced %s", trial, f.Status, prev)
				}
				owed := (f.Final && !ledger.DeliveryStatuses[prev]) || (isFailure(prev) && f.Status == "delivered")
				if f.Owed != owed || (f.Version() != version) != owed {
					t.Fatalf("trial %d: %s -> %s: owed %t at version %d (was %d), want owed %t", trial, prev, f.Status, f.Owed, f.Version(), version, owed)
				}
				version = f.Version()
				if f.Changed != (f.Status != prev) {
					t.Fatalf("trial %d: %s -> %s: changed %t", trial, prev, f.Status, f.Changed)
				}
				prev = f.Status
			}
			s, ok, err := l.Ledger().Story(context.Background(), id)
			if err != nil || !ok {
				t.Fatalf("Story(%s): %v %v", id, ok, err)
			}
			end := s.Status
			if s.ErrorCode != "" {
				end += " " + s.ErrorCode
			}
			ends = append(ends, end)
			if complete && end != want {
				t.Fatalf("trial %d (%d parts), order %d: ended %q, want %q", trial, parts, order, end, want)
			}
		}
		if complete && len(slices.Compact(slices.Clone(ends))) != 1 {
			t.Fatalf("trial %d (%d parts): the orders ended in %q", trial, parts, ends)
		}
	}
}

// TestAnOwedEventStaysOwedUntilItIsPublished: a final state owes its event
// until EventPublished and the next call clear it; a failure turned
// delivered before the failure's event is out owes a new event that the
// failure's publication does not clear; the sweep returns only events owed
// for longer than its age, and drops those whose story expired.
func TestAnOwedEventStaysOwedUntilItIsPublished(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := testConfig(t)
	l := newLimiter(t, rdb, cfg)
	ctx := context.Background()
	keepStory(t, l, "a", ledger.Story{Class: "otp", ProviderIDs: []string{"pa"}})
	keepStory(t, l, "b", ledger.Story{Class: "marketing", ProviderIDs: []string{"pb1", "pb2"}})

	if f := fold(t, l, report("pa", "undelivered", "30003")); !f.Owed || !f.Final || f.Status != "undelivered" || f.ErrorCode != "30003" {
		t.Fatalf("a final failure: %+v, want owed", f)
	}
	if f := fold(t, l, report("pb1", "delivered", "")); f.Owed || f.Final {
		t.Fatalf("one part of two delivered: %+v, want neither final nor owed", f)
	}
	if got := owedIDs(t, l, time.Hour); len(got) != 0 {
		t.Fatalf("owed for over an hour: %v, want none", got)
	}
	// The publish failed: nothing noted, the sweep returns it.
	if got := owedIDs(t, l, 0); len(got) != 1 || got["a"].Status != "undelivered" || !got["a"].Owed {
		t.Fatalf("the sweep: %+v, want a's failure", got)
	}
	// Delivered after all, before the failure's event is out.
	if f := fold(t, l, report("pa", "delivered", "")); !f.Owed || f.Status != "delivered" || !f.Changed {
		t.Fatalf("a failure turned delivered: %+v, want owed again", f)
	}
	l.Ledger().EventPublished("a") // the failure's event
	if err := l.Ledger().FlushPublished(ctx); err != nil {
		t.Fatal(err)
	}
	if got := owedIDs(t, l, 0); got["a"].Status != "delivered" {
		t.Fatalf("after the failure's event was published: %+v, want a's delivered still owed", got)
	}
	l.Ledger().EventPublished("a") // the delivered's
	l.Ledger().EventPublished("a") // nothing more owed: nothing noted
	l.Ledger().EventPublished("never-returned")
	if err := l.Ledger().FlushPublished(ctx); err != nil {
		t.Fatal(err)
	}
	if got := owedIDs(t, l, 0); len(got) != 0 {
		t.Fatalf("after both events were published: %+v, want none owed", got)
	}

	// An owed id whose story expired is dropped by the sweep.
	owedKey := key(l).Owed()
	if err := rdb.ZAdd(ctx, owedKey, redis.Z{Score: 1, Member: "gone"}).Err(); err != nil {
		t.Fatal(err)
	}
	if got := owedIDs(t, l, 0); len(got) != 0 {
		t.Fatalf("an owed id without its story: %+v, want nothing returned", got)
	}
	if n := rdb.ZCard(ctx, owedKey).Val(); n != 0 {
		t.Fatalf("the owed set holds %d after the sweep, want 0", n)
	}
	if ttl := rdb.PTTL(ctx, owedKey).Val(); ttl > cmp.Or(cfg.RecordTTL, admission.DefaultRecordTTL) {
		t.Fatalf("the owed set lives %v, want at most the record's %v", ttl, cmp.Or(cfg.RecordTTL, admission.DefaultRecordTTL))
	}
}

// TestAReceiptOfAnOwedStateHandsItsEventOutAgain: a final receipt that
// changes nothing (a duplicate, the retry of a fold answered 503 after
// Redis ran it, another part's failure) of a message whose final event is
// still owed returns it owed, with its version, so that its handler
// publishes it at once rather than leaving it to the sweep; an
// intermediate one does not, nor one within handOutAfter of the event
// being owed (its fold is publishing it); once the event is published and
// cleared, a duplicate owes nothing.
func TestAReceiptOfAnOwedStateHandsItsEventOutAgain(t *testing.T) {
	l := newLimiter(t, redistest.Client(t), testConfig(t))
	ledger.SetHandOutAfter(l.Ledger(), 0) // the receipts below come as soon as they may
	ctx := context.Background()
	keepStory(t, l, "d", ledger.Story{Class: "marketing", ProviderIDs: []string{"pd1", "pd2"}})
	first := fold(t, l, report("pd1", "failed", "30008"))
	if !first.Owed || !first.Changed {
		t.Fatalf("a part failed: %+v, want the message final and owed", first)
	}
	// Its publish failed, or the answer never reached the provider.
	for _, r := range []ledger.Report{report("pd1", "failed", "30008"), report("pd2", "undelivered", "30003")} {
		if f := fold(t, l, r); !f.Owed || f.Changed || f.Status != "failed" || f.Version() != first.Version() {
			t.Fatalf("%s %s while the event is owed: %+v, want failed, owed again at version %d", r.ProviderID, r.Status, f, first.Version())
		}
	}
	// Intermediates come out of order around the final, while its fold
	// publishes: they hand nothing out.
	if f := fold(t, l, report("pd1", "sent", "")); f.Owed {
		t.Fatalf("an intermediate after the final: %+v, want nothing owed", f)
	}
	ledger.SetHandOutAfter(l.Ledger(), time.Hour)
	if f := fold(t, l, report("pd1", "failed", "30008")); f.Owed {
		t.Fatalf("a duplicate within handOutAfter of the event owed: %+v, want nothing owed", f)
	}
	l.Ledger().EventPublished("d")
	if err := l.Ledger().FlushPublished(ctx); err != nil {
		t.Fatal(err)
	}
	if f := fold(t, l, report("pd1", "failed", "30008")); f.Owed {
		t.Fatalf("a duplicate once the event is out: %+v, want nothing owed", f)
	}
}

// TestAResendIsHandedOutOnceWhateverBecomesOfItsEvent: the receipt that
// makes a failure final hands the resend payload out once, taking it from
// its key; sweeps while its event stays owed do not hand it out again; a
// payload given back (its publish failed) is handed out by the next sweep
// only, once; giving back is moot once the event is published, the
// message delivered or its story gone; a delivered message, or one whose
// resend ran out, hands out none.
func TestAResendIsHandedOutOnceWhateverBecomesOfItsEvent(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, testConfig(t))
	ctx := context.Background()
	payload := []byte(`{"id":"r","to":"+6281234567"}`)
	soon := time.Now().Add(time.Minute)
	keepStory(t, l, "r", ledger.Story{Class: "otp", ProviderIDs: []string{"pr"}, Resend: payload, ResendUntil: soon})
	keepStory(t, l, "s", ledger.Story{Class: "otp", ProviderIDs: []string{"ps"}, Resend: payload, ResendUntil: soon})
	keepStory(t, l, "u", ledger.Story{Class: "otp", ProviderIDs: []string{"pu"}, Resend: payload, ResendUntil: time.Now().Add(-time.Second)})
	giveBack := func(f ledger.Fold) bool {
		t.Helper()
		ok, err := l.Ledger().GiveBackResend(ctx, f)
		if err != nil {
			t.Fatalf("GiveBackResend(%s): %v", f.ID, err)
		}
		return ok
	}

	f := fold(t, l, report("pr", "failed", "30007"))
	if !f.Owed || string(f.Resend) != string(payload) {
		t.Fatalf("the failure made final: %+v, want owed with the resend", f)
	}
	if n := rdb.Exists(ctx, key(l).Resend("r")).Val(); n != 0 {
		t.Fatal("the resend key outlived its handing out")
	}
	if f := fold(t, l, report("pr", "undelivered", "30003")); f.Owed || f.Resend != nil || f.Status != "failed" {
		t.Fatalf("a later failure: %+v, want failed, no event, no resend", f)
	}
	for i := range 3 {
		if got := owedIDs(t, l, 0); !got["r"].Owed || got["r"].Resend != nil {
			t.Fatalf("sweep %d while r's event is owed: %+v, want its event without the resend handed out before", i, got["r"])
		}
	}
	if !giveBack(f) {
		t.Fatal("a resend whose event is owed was not given back")
	}
	if got := owedIDs(t, l, 0); string(got["r"].Resend) != string(payload) {
		t.Fatalf("the sweep after the give-back: %+v, want its resend", got["r"])
	}
	if got := owedIDs(t, l, 0); got["r"].Resend != nil {
		t.Fatalf("the next sweep: %+v, want the resend handed out once", got["r"])
	}
	l.Ledger().EventPublished("r")
	if err := l.Ledger().FlushPublished(ctx); err != nil {
		t.Fatal(err)
	}
	if got := owedIDs(t, l, 0); len(got) != 0 {
		t.Fatalf("after r's event was published: %+v, want none owed", got)
	}
	if giveBack(f) {
		t.Fatal("a resend given back after its event was published: no sweep would hand it out")
	}
	if s, _, _ := l.Ledger().Story(ctx, "r"); !s.Resent || s.Owed {
		t.Fatalf("r's story: %+v, want resent, not owed", s)
	}

	delivered := fold(t, l, report("ps", "delivered", ""))
	if delivered.Resend != nil {
		t.Fatalf("delivered: %+v, want no resend", delivered)
	}
	if f := fold(t, l, report("ps", "failed", "")); f.Resend != nil || f.Status != "delivered" {
		t.Fatalf("a failure after delivered: %+v, want delivered, no resend", f)
	}
	delivered.Resend = payload
	if giveBack(delivered) || giveBack(ledger.FoldOf("gone", payload, pidKey(l, "gone"))) {
		t.Fatal("a resend given back to a delivered message, or to a story that is gone")
	}
	if f := fold(t, l, report("pu", "failed", "")); !f.Owed || f.Resend != nil {
		t.Fatalf("a failure past the resend's time: %+v, want owed, no resend", f)
	}
}

// TestASuppressedFailureIsNeverResent: a receipt that settles a message
// suppressed (its provider refused it for the recipient's opt-out) makes
// it final and owes its event, but drops its resend payload instead of
// handing it out: no sweep hands it out later, and its story says it was
// not resent.
func TestASuppressedFailureIsNeverResent(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, testConfig(t))
	ctx := context.Background()
	payload := []byte(`{"id":"v","to":"+447547232824"}`)
	keepStory(t, l, "v", ledger.Story{Class: "otp", ProviderIDs: []string{"pv"}, Resend: payload, ResendUntil: time.Now().Add(time.Minute)})

	f := fold(t, l, report("pv", ledger.StatusSuppressed, "9"))
	if !f.Owed || !f.Final || f.Status != ledger.StatusSuppressed || f.ErrorCode != "9" || f.Resend != nil {
		t.Fatalf("the opt-out's receipt: %+v, want final suppressed (code 9), owed, no resend", f)
	}
	if n := rdb.Exists(ctx, key(l).Resend("v")).Val(); n != 0 {
		t.Fatal("a suppressed message's resend payload was kept")
	}
	if got := owedIDs(t, l, 0); !got["v"].Owed || got["v"].Resend != nil || got["v"].Status != ledger.StatusSuppressed {
		t.Fatalf("the sweep: %+v, want its event owed, suppressed, without a resend", got["v"])
	}
	if s, _, _ := l.Ledger().Story(ctx, "v"); s.Resent || s.Status != ledger.StatusSuppressed {
		t.Fatalf("v's story: %+v, want suppressed, not resent", s)
	}
}

// TestAnUnknownReceiptWritesNothing: a provider id the account never kept
// is not Known and leaves no key; a status the fold does not know, or
// flags that disagree with it, are refused before Redis is asked, and
// receipt.lua refuses an unknown status before it writes.
func TestAnUnknownReceiptWritesNothing(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, testConfig(t))
	ctx := context.Background()
	if f := fold(t, l, report("SMnever", "delivered", "")); f.Known || f.Account != l.Account() {
		t.Fatalf("an unknown provider id: %+v, want not known", f)
	}
	if f := fold(t, l, report("", "delivered", "")); f.Known {
		t.Fatalf("no provider id: %+v, want not known", f)
	}
	for _, r := range []ledger.Report{{ProviderID: "x", Status: "read"}, {ProviderID: "x", Status: "delivered"}, {ProviderID: "x", Status: "sent", Final: true}} {
		if _, err := l.Ledger().Receipt(ctx, r); !errors.Is(err, ledger.ErrBadReport) {
			t.Errorf("Receipt(%+v): %v, want ErrBadReport", r, err)
		}
	}
	keepStory(t, l, "k", ledger.Story{Class: "otp", ProviderIDs: []string{"pk"}})
	if err := ledger.RunReceipt(ctx, l.Ledger(), "pk", "read"); err == nil {
		t.Fatal("receipt.lua took the status \"read\"")
	}
	keys, err := rdb.Keys(ctx, key(l).Tag()+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	want := []string{key(l).Msg("k"), pidKey(l, "pk")}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys %v, want only k's story %v", keys, want)
	}
	if s, _, _ := l.Ledger().Story(ctx, "k"); s.Status != "" || s.Parts["pk"] != "" {
		t.Fatalf("k's story after a refused receipt: %+v, want no status", s)
	}
}

// TestAPublishedEventOutlivesAFailedCall: the publications noted for a
// call that fails (Redis down) are carried by the next one, so the events
// they cover leave the owed set once Redis answers, rather than being
// published again by the sweep.
func TestAPublishedEventOutlivesAFailedCall(t *testing.T) {
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	clock := &fakeClock{t: t0}
	cfg := testConfig(t)
	cfg.RedisTimeout, cfg.RedisRetryAfter = 500*time.Millisecond, time.Second
	l := newLimiter(t, redistest.ClientOf(t, proxy.Addr()), cfg, admission.WithClock(clock))
	ctx := context.Background()
	keepStory(t, l, "p", ledger.Story{Class: "otp", ProviderIDs: []string{"pp"}})
	if f := fold(t, l, report("pp", "delivered", "")); !f.Owed {
		t.Fatalf("delivered: %+v, want owed", f)
	}
	l.Ledger().EventPublished("p")
	proxy.SetMode(redistest.Refuse)
	if err := l.Ledger().FlushPublished(ctx); err == nil {
		t.Fatal("FlushPublished with Redis down: no error")
	}
	proxy.SetMode(redistest.Up)
	clock.Add(cfg.RedisRetryAfter + time.Millisecond)
	if err := l.Ledger().FlushPublished(ctx); err != nil {
		t.Fatalf("FlushPublished with Redis back: %v", err)
	}
	if got := owedIDs(t, l, 0); len(got) != 0 {
		t.Fatalf("owed after the publication was carried: %+v, want none", got)
	}
}

// TestAnOwedEventIsClearedByItsVersionsMember: the owed set holds one
// member per event owed, the id alone for a message's first and the id and
// its version for a later one; a failure turned delivered replaces its
// failure's member with its own, publishing the failure's event then
// leaves the delivered's owed, and the events published are cleared
// together. A member of an older version's form (the id alone) for a
// later event is moved to its version's member by the sweep, and cleared
// by its publication.
func TestAnOwedEventIsClearedByItsVersionsMember(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, testConfig(t))
	ctx := context.Background()
	owedKey := key(l).Owed()
	members := func() []string {
		t.Helper()
		m, err := rdb.ZRange(ctx, owedKey, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(m)
		return m
	}
	for _, id := range []string{"a", "b", "c"} {
		keepStory(t, l, id, ledger.Story{Class: "otp", ProviderIDs: []string{"p" + id}})
	}
	fold(t, l, report("pa", "failed", "30003"))
	fold(t, l, report("pb", "delivered", ""))
	if got := members(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("owed %q, want the ids alone", got)
	}
	if f := fold(t, l, report("pa", "delivered", "")); !f.Owed || f.Version() != 2 {
		t.Fatalf("a failure turned delivered: %+v, want version 2 owed", f)
	}
	if got := members(); !slices.Equal(got, []string{"a\t2", "b"}) {
		t.Fatalf("owed %q, want a's delivered in place of its failure", got)
	}
	l.Ledger().EventPublished("a") // the failure's event: the delivered's stays owed
	if err := l.Ledger().FlushPublished(ctx); err != nil {
		t.Fatal(err)
	}
	if got := members(); !slices.Equal(got, []string{"a\t2", "b"}) {
		t.Fatalf("owed %q after a's failure was published, want its delivered still", got)
	}
	l.Ledger().EventPublished("a")
	l.Ledger().EventPublished("b")
	if err := l.Ledger().FlushPublished(ctx); err != nil {
		t.Fatal(err)
	}
	if got := members(); len(got) != 0 {
		t.Fatalf("owed %q after both events were published, want none", got)
	}

	// An id alone owed for c's second event, as an older version wrote it.
	fold(t, l, report("pc", "failed", ""))
	fold(t, l, report("pc", "delivered", ""))
	if err := rdb.ZRem(ctx, owedKey, "c\t2").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(ctx, owedKey, redis.Z{Score: 1, Member: "c"}).Err(); err != nil {
		t.Fatal(err)
	}
	if got := owedIDs(t, l, 0); len(got) != 1 || got["c"].Status != "delivered" || got["c"].Version() != 2 {
		t.Fatalf("the sweep: %+v, want c's delivered, version 2", got)
	}
	if got := members(); !slices.Equal(got, []string{"c\t2"}) {
		t.Fatalf("owed %q after the sweep, want c's version's member", got)
	}
	for range 3 { // the fold's two versions, the sweep's
		l.Ledger().EventPublished("c")
	}
	if err := l.Ledger().FlushPublished(ctx); err != nil {
		t.Fatal(err)
	}
	if got := members(); len(got) != 0 {
		t.Fatalf("owed %q after c's event was published, want none", got)
	}
}

// TestAReceiptCarriesThePublishedEventsAtMostEveryClearEvery: a receipt's
// call clears the events published since the last clearing only once
// clearEvery has passed since it; until then they stay owed in Redis (a
// duplicate at worst, after a crash), and a sweep's call clears them
// whenever it runs.
func TestAReceiptCarriesThePublishedEventsAtMostEveryClearEvery(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, testConfig(t))
	ctx := context.Background()
	owed := func(id string) bool {
		t.Helper()
		err := rdb.ZScore(ctx, key(l).Owed(), id).Err()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		return err == nil
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		keepStory(t, l, id, ledger.Story{Class: "otp", ProviderIDs: []string{"p" + id}})
	}
	fold(t, l, report("pa", "delivered", ""))
	l.Ledger().EventPublished("a")
	fold(t, l, report("pb", "delivered", "")) // none cleared for ledger.ClearEvery before: it carries a's
	if owed("a") || !owed("b") {
		t.Fatalf("a owed %t, b owed %t: want a cleared by the next receipt, b owed", owed("a"), owed("b"))
	}
	l.Ledger().EventPublished("b")
	ledger.SetCleared(l.Ledger(), time.Now()) // a clearing just now, as a receipt's a moment ago
	fold(t, l, report("pc", "delivered", ""))
	if !owed("b") {
		t.Fatal("a receipt within clearEvery of the last clearing cleared b's published event")
	}
	ledger.SetCleared(l.Ledger(), time.Now().Add(-ledger.ClearEvery))
	fold(t, l, report("pd", "sent", ""))
	if owed("b") {
		t.Fatal("a receipt clearEvery after the last clearing left b's published event owed")
	}
	l.Ledger().EventPublished("c")
	ledger.SetCleared(l.Ledger(), time.Now())
	if _, err := l.Ledger().Owed(ctx, time.Hour, 10); err != nil {
		t.Fatal(err)
	}
	if owed("c") {
		t.Fatal("a sweep left c's published event owed")
	}
}
