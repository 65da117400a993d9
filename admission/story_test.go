package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/redisstats"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/internal/scriptop"
	"smsdispatcher/ledger"
)

// TestASentMessageKeepsItsStoryInOneFinishCall: Settle writes the
// record, the story, a key per part and the resend payload in the one
// finish.lua call, with the record's lifetime (the resend's until its
// time); an overflow admission (an id, no claim) keeps the story without a
// record; a Decision without the id settles and says the story is lost.
func TestASentMessageKeepsItsStoryInOneFinishCall(t *testing.T) {
	rdb := redistest.Client(t)
	rec := &redistest.Recorder{}
	rdb.AddHook(rec)
	cfg := testConfig(t)
	cfg.RecordTTL = time.Hour
	l := newLimiter(t, rdb, cfg)
	ctx := context.Background()

	d, err := l.Admit(ctx, OTP, 1, time.Second, Claim{ID: "login-1", Token: "t1", Count: true})
	if err != nil || !d.Allowed || !d.Claimed {
		t.Fatalf("Admit: %+v, %v", d, err)
	}
	rec.Reset()
	s := ledger.Story{Class: "otp", Sender: "Acme", ProviderIDs: []string{"p1", "", "p2", "p3"}, Resend: []byte("data"), ResendUntil: time.Now().Add(time.Minute)}
	if err := l.Settle(ctx, d, ledger.SentRecord("p1"), ResultOK, s); err != nil {
		t.Fatalf("Settle: %v", err)
	}
	var ops []string
	for _, args := range rec.Commands() {
		if op := scriptop.Of(args); len(ops) == 0 || ops[len(ops)-1] != op {
			ops = append(ops, op)
		}
	}
	if len(ops) != 1 || ops[0] != OpFinish {
		t.Fatalf("Settle's calls: %v, want one finish", ops)
	}
	for _, key := range []string{ledger.PIDKey(l.key, "p1"), ledger.PIDKey(l.key, "p2"), ledger.PIDKey(l.key, "p3")} {
		if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > time.Hour {
			t.Errorf("%s lives %v, want the record's hour", key, ttl)
		}
	}
	if n := rdb.Exists(ctx, l.key.Msg("login-1")).Val(); n != 0 {
		t.Error("a send whose record names its story also wrote the id's key")
	}
	if ttl := rdb.PTTL(ctx, l.key.Resend("login-1")).Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("the resend payload lives %v, want at most a minute", ttl)
	}
	fold(t, l, report("p2", "delivered", ""))
	got, ok, err := l.ledger.Story(ctx, "login-1")
	if err != nil || !ok {
		t.Fatalf("Story: %v %v", ok, err)
	}
	if got.Record != ledger.RecordSent || got.Attempts != 1 || got.Class != "otp" || got.Sender != "Acme" || got.Account != cfg.Account ||
		strings.Join(got.ProviderIDs, " ") != "p1 p2 p3" || got.Status != "buffered" || got.Parts["p2"] != "delivered" || got.Parts["p1"] != "" ||
		time.Since(got.SentAt).Abs() > time.Minute || got.Owed || got.Resent {
		t.Fatalf("Story: %+v", got)
	}

	// An overflow account's admission: the id, no claim.
	d, err = l.Admit(ctx, OTP, 1, time.Second, Claim{ID: "login-2"})
	if err != nil || !d.Allowed || d.Claimed {
		t.Fatalf("Admit without a token: %+v, %v", d, err)
	}
	if err := l.Settle(ctx, d, ledger.RecordSent, ResultOK, ledger.Story{Class: "otp", ProviderIDs: []string{"p4"}}); err != nil {
		t.Fatalf("Settle without a claim: %v", err)
	}
	if got, ok, _ := l.ledger.Story(ctx, "login-2"); !ok || got.Record != "" || got.ProviderIDs[0] != "p4" {
		t.Fatalf("Story without a claim: %+v %v, want the story without a record", got, ok)
	}
	if f := fold(t, l, report("p4", "delivered", "")); f.ID != "login-2" || !f.Owed {
		t.Fatalf("a receipt of the overflow's send: %+v", f)
	}

	d = try(t, l, OTP)
	if err := l.Settle(ctx, d, ledger.RecordSent, ResultOK, ledger.Story{Class: "otp", ProviderIDs: []string{"p5"}}); err == nil {
		t.Fatal("Settle without the message's id kept no story and said nothing")
	}
	if n := rdb.Exists(ctx, ledger.PIDKey(l.key, "p5")).Val(); n != 0 {
		t.Fatal("a story without the message's id wrote its part's key")
	}
	if _, ok, err := l.ledger.Story(ctx, "never-sent"); ok || err != nil {
		t.Fatalf("Story of an id never sent: %v %v, want nothing", ok, err)
	}
}

// TestReceiptsCostOneRedisCall measures, on a Redis of its own, what a
// receipt and a story cost as Redis counts them (INFO commandstats): one
// script call each, and the commands the script runs.
func TestReceiptsCostOneRedisCall(t *testing.T) {
	o := redistest.Options(redistest.Private(t))
	o.Network = "unix"
	rdb := redis.NewClient(o)
	t.Cleanup(func() { rdb.Close() })
	l := newLimiter(t, rdb, testConfig(t))
	ctx := context.Background()
	fold(t, l, report("warm", "sent", "")) // the script loaded
	measure := func(what string, run func()) redisstats.CommandStats {
		t.Helper()
		if err := redisstats.Reset(ctx, rdb); err != nil {
			t.Fatal(err)
		}
		run()
		s, err := redisstats.Read(ctx, rdb)
		if err != nil {
			t.Fatal(err)
		}
		if s.Scripts() != 1 {
			t.Fatalf("%s: %d script calls (%v), want 1", what, s.Scripts(), s)
		}
		t.Logf("%s: 1 script call, %d commands executed", what, s.Executed())
		return s
	}
	settle := func(id string, s ledger.Story) {
		record := ledger.RecordSent
		if len(s.ProviderIDs) > 0 {
			record = ledger.SentRecord(s.ProviderIDs[0]) // the record names the story
		}
		// Dated by its admission, as a send is: no TIME of finish.lua's.
		d := Decision{id: id, Claimed: true, claim: Claim{ID: id, Token: "t"}, slotMS: time.Now().UnixMilli()}
		if err := l.Settle(ctx, d, record, ResultNone, s); err != nil {
			t.Fatal(err)
		}
	}
	settle("w", ledger.Story{Class: "otp", ProviderIDs: []string{"w"}})
	bare := measure("a sent record", func() { settle("a", ledger.Story{}) })
	one := measure("a sent record with a story of one part", func() { settle("b", ledger.Story{Class: "otp", ProviderIDs: []string{"pb"}}) })
	if n := one.Executed() - bare.Executed(); n != 1 {
		t.Errorf("the story adds %d commands, want 1: its SET at its provider id's key", n)
	}
	measure("an intermediate receipt", func() { fold(t, l, report("pb", "sent", "")) })
	if s := measure("a final receipt", func() { fold(t, l, report("pb", "delivered", "")) }); s["get"] != 1 {
		t.Errorf("a final receipt of a one-part message ran %d GETs, want 1: its story at its provider id's key", s["get"])
	}
	measure("a duplicate receipt", func() { fold(t, l, report("pb", "delivered", "")) })
	measure("an unknown receipt", func() { fold(t, l, report("nope", "delivered", "")) })
	// A first-class final to a prefix counts in its account's route
	// (route.go) when it failed for the route: the first of a bucket also
	// sets the counts' lifetime. A failure for its recipient counts
	// nowhere.
	for i, what := range []string{"no prefix", "a prefix, the first of its bucket", "a prefix, the next", "a prefix, for its recipient"} {
		pid, s := fmt.Sprint("pf", i), ledger.Story{Class: "otp", Prefix: "+62", To: fmt.Sprint("+6281234567", i)}
		if i == 0 {
			s.Prefix = ""
		}
		s.ProviderIDs = []string{pid}
		settle(fmt.Sprint("f", i), s)
		r := report(pid, "undelivered", "30007")
		r.RouteFailed = i < 3
		measure("a failure's final receipt, "+what, func() { fold(t, l, r) })
	}
	try(t, l, OTP) // the script loaded
	measure("an OTP's admission", func() { try(t, l, OTP) })
	toPrefix := func() {
		if d, err := l.Admit(ctx, OTP, 1, time.Second, Claim{Prefix: "+62", Failover: true}); err != nil || !d.Allowed {
			t.Fatalf("Admit: %+v %v", d, err)
		}
	}
	toPrefix() // its script (with the route's part) loaded
	measure("an OTP's admission to a prefix", toPrefix)
}

// TestReceiptsStayInTheAccountsClusterSlot runs the story, a receipt, the
// sweep, the story's read and the counters' on the real Redis Cluster:
// the keys receipt.lua builds from the provider id's value stay in the
// account's slot, or the cluster refuses them.
func TestReceiptsStayInTheAccountsClusterSlot(t *testing.T) {
	rdb := redistest.ClusterClient(t)
	l := newLimiter(t, rdb, testConfig(t))
	ctx := context.Background()
	d, err := l.Admit(ctx, OTP, 1, time.Second, Claim{ID: "c-1", Token: "t"})
	if err != nil || !d.Allowed {
		t.Fatalf("Admit: %+v %v", d, err)
	}
	resend := ledger.Story{Class: "otp", ProviderIDs: []string{"pc"}, Resend: []byte("x"), ResendUntil: time.Now().Add(time.Minute)}
	if err := l.Settle(ctx, d, ledger.SentRecord("pc"), ResultOK, resend); err != nil {
		t.Fatalf("Settle: %v", err)
	}
	f := fold(t, l, report("pc", "undelivered", "30003"))
	if !f.Known || !f.Owed || string(f.Resend) != "x" {
		t.Fatalf("a receipt on the cluster: %+v", f)
	}
	if got := owedIDs(t, l, 0); got["c-1"].Status != "undelivered" {
		t.Fatalf("the sweep on the cluster: %+v", got)
	}
	l.ledger.EventPublished("c-1")
	if err := l.ledger.FlushPublished(ctx); err != nil {
		t.Fatalf("FlushPublished: %v", err)
	}
	if s, ok, err := l.ledger.Story(ctx, "c-1"); err != nil || !ok || s.Status != "undelivered" || s.Owed {
		t.Fatalf("Story on the cluster: %+v %v %v", s, ok, err)
	}
	if st, err := l.ledger.DeliveryStats(ctx, time.Minute); err != nil || st["otp"].Finals != 1 {
		t.Fatalf("DeliveryStats on the cluster: %+v %v", st, err)
	}
}

// TestStoryLifetimesAreClamped: finish.lua's story takes any lifetime
// without an error (below 1 ms counts as 1, past 2^40 ms as 2^40);
// receipt.lua's side is the ledger's TestReceiptLifetimesAreClamped.
func TestStoryLifetimesAreClamped(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, testConfig(t))
	ctx := context.Background()
	for i, ms := range []string{"0", "-1", fmt.Sprint(int64(math.MinInt64)), fmt.Sprint(int64(math.MaxInt64)), "1e300"} {
		id, pid := fmt.Sprint("id", i), fmt.Sprint("pid", i)
		call := finishCall{Record: l.claims.Key(id), Leases: l.key.Leases(), Health: l.key.Health(), Value: ledger.RecordSent,
			ID: id, Class: "otp", ResendData: "x"}
		call.withStoryKeys(l, id, pid)
		argv := call.argv()
		argv[1], argv[10] = ms, ms // the record's lifetime, the resend's
		if err := finishScript.Run(ctx, rdb, call.keys(), argv...).Err(); err != nil {
			t.Fatalf("finish.lua with lifetimes %s ms: %v", ms, err)
		}
		if ttl := rdb.PTTL(ctx, ledger.PIDKey(l.key, pid)).Val(); ttl > time.Duration(1<<40)*time.Millisecond {
			t.Fatalf("lifetime %s ms: the story lives %v, past 2^40 ms", ms, ttl)
		}
	}
}

// withStoryKeys sets c's story keys for message id of one part pid.
func (c *finishCall) withStoryKeys(l *Limiter, id, pid string) {
	c.Resend, c.Parts = l.key.Resend(id), []string{ledger.PIDKey(l.key, pid)}
}

// TestDeliveryStatsCountTheFinalsOfTheLastMinutes: each message counts
// once as final when it becomes so, once more as delivered when a failure
// turns delivered, by class; duplicates count nothing; counters of the
// form before read the same.
func TestDeliveryStatsCountTheFinalsOfTheLastMinutes(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, testConfig(t))
	ctx := context.Background()
	for i, r := range []struct{ class, pid string }{{"otp", "o1"}, {"otp", "o2"}, {"otp", "o3"}, {"marketing", "m1"}} {
		keepStory(t, l, fmt.Sprint("s", i), ledger.Story{Class: r.class, ProviderIDs: []string{r.pid}})
	}
	for _, r := range []ledger.Report{
		report("o1", "delivered", ""), report("o1", "delivered", ""),
		report("o2", "failed", "1"), report("o2", "delivered", ""),
		report("o3", "sent", ""), report("o3", "undelivered", ""),
		report("m1", "expired", ""),
	} {
		fold(t, l, r)
	}
	// The counts this process kept, written now rather than within the
	// second (TestDeliveryCountsAreWrittenWithinASecondAndAtTheStop).
	if err := l.ledger.FlushPublished(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := l.ledger.DeliveryStats(ctx, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// A minute may have turned between the receipts: five minutes read
	// all of them.
	if o := st["otp"]; o.Finals != 3 || o.Delivered != 2 || o.P50 != ledger.DeliveryBuckets[0] || o.P99 != ledger.DeliveryBuckets[0] {
		t.Fatalf("otp: %+v, want 3 finals, 2 delivered within the first bucket", o)
	}
	if m := st["marketing"]; m.Finals != 1 || m.Delivered != 0 || m.P50 != 0 {
		t.Fatalf("marketing: %+v, want 1 final, none delivered", m)
	}
	if len(st) != 2 {
		t.Fatalf("stats of %d classes, want 2", len(st))
	}

	// Counters of the form before f, t and the delivered read from the
	// b<i> (finals, delivered and their b<i>), in a minute of their own
	// and beside the new form's in the same minute, as a rolling upgrade
	// writes them, read the same.
	minute := time.Now().Unix() / 60
	for _, m := range []int64{minute - 2, minute} {
		if err := rdb.HSet(ctx, l.key.Delivery("marketing", m), "finals", 2, "delivered", 1, "b1", 1).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if st, err = l.ledger.DeliveryStats(ctx, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	if m := st["marketing"]; m.Finals != 5 || m.Delivered != 2 {
		t.Fatalf("marketing with counters of the old form: %+v, want 5 finals, 2 delivered", m)
	}
}

// TestAStoryIsDatedByItsAdmissionsSlot: a sent message's story says it was
// sent when Redis booked its slot to open (the admission's reply), on
// Redis's clock, with no clock read of finish.lua's own; a send Redis did
// not admit (an overflow account's, no claim) is dated by finish.lua's
// clock, Redis's too.
func TestAStoryIsDatedByItsAdmissionsSlot(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, testConfig(t))
	ctx := context.Background()

	before := redisNow(t, rdb) / 1000
	d, err := l.Admit(ctx, OTP, 1, time.Second, Claim{ID: "dated", Token: "t1"})
	if err != nil || !d.Allowed {
		t.Fatalf("Admit: %+v, %v", d, err)
	}
	if d.slotMS < before || d.slotMS > redisNow(t, rdb)/1000+d.RetryAfter.Milliseconds()+1 {
		t.Fatalf("the admission's slot at %d ms, want Redis's clock from %d on", d.slotMS, before)
	}
	time.Sleep(20 * time.Millisecond) // a finish.lua TIME would date it later
	if err := l.Settle(ctx, d, ledger.SentRecord("pd"), ResultOK, ledger.Story{Class: "otp", ProviderIDs: []string{"pd"}}); err != nil {
		t.Fatal(err)
	}
	got, ok, err := l.ledger.Story(ctx, "dated")
	if err != nil || !ok || got.SentAt.UnixMilli() != d.slotMS {
		t.Fatalf("Story: %+v %v %v, want sent at the admission's slot, %d ms", got, ok, err, d.slotMS)
	}

	before = redisNow(t, rdb) / 1000
	keepStory(t, l, "undated", ledger.Story{Class: "otp", ProviderIDs: []string{"pu"}})
	after := redisNow(t, rdb) / 1000
	got, ok, err = l.ledger.Story(ctx, "undated")
	if err != nil || !ok || got.SentAt.UnixMilli() < before || got.SentAt.UnixMilli() > after {
		t.Fatalf("Story without an admission: %+v %v %v, want sent between %d and %d ms", got, ok, err, before, after)
	}
}

// plantStory overwrites the story at key with fields, as finish.lua and
// receipt.lua write one (a JSON object of strings), keeping its lifetime.
func plantStory(t *testing.T, rdb *redis.Client, key string, fields map[string]string) {
	t.Helper()
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.SetArgs(context.Background(), key, b, redis.SetArgs{KeepTTL: true}).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestAStoryIsOneStringReadAndWrittenWhole: finish.lua keeps a story as
// one string with the record's lifetime, and a receipt's fold rewrites it
// whole, its lifetime kept; a story an older version kept as a hash folds
// the same and is written back as the string, its lifetime kept too.
func TestAStoryIsOneStringReadAndWrittenWhole(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, testConfig(t))
	ctx := context.Background()
	keepStory(t, l, "s", ledger.Story{Class: "otp", Sender: "Acme", ProviderIDs: []string{"ps1", "ps2"}})
	story := ledger.PIDKey(l.key, "ps1") // the first part's
	if typ := rdb.Type(ctx, story).Val(); typ != "string" {
		t.Fatalf("the story is a %s, want a string", typ)
	}
	var h map[string]string
	if err := json.Unmarshal([]byte(rdb.Get(ctx, story).Val()), &h); err != nil || h["class"] != "otp" || h["sender"] != "Acme" ||
		h["n"] != "2" || h["p1"] != "ps1" || h["p2"] != "ps2" || h["sent"] == "" || h["id"] != "s" {
		t.Fatalf("the story %v (%v), want id, class, sender, n, p1, p2 and sent", h, err)
	}
	if err := rdb.PExpire(ctx, story, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	fold(t, l, report("ps2", "failed", "30003"))
	if ttl := rdb.PTTL(ctx, story).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("the story lives %v after the fold, want its hour kept", ttl)
	}
	if err := json.Unmarshal([]byte(rdb.Get(ctx, story).Val()), &h); err != nil || h["s2"] != "failed" || h["c2"] != "30003" ||
		h["status"] != "failed" || h["ov"] != "1" || h["class"] != "otp" {
		t.Fatalf("the story after a failure %v (%v), want its part, state and version beside its fields", h, err)
	}

	// An older version's hash, at the id's key, its part's key naming the
	// id.
	if err := rdb.Del(ctx, l.key.Msg("o")).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, l.key.Msg("o"), "class", "otp", "n", "1", "p1", "po", "sent", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Expire(ctx, l.key.Msg("o"), time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, ledger.PIDKey(l.key, "po"), "1:o", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if f := fold(t, l, report("po", "delivered", "")); f.Status != "delivered" || !f.Owed || f.ProviderID != "po" {
		t.Fatalf("a hash story's fold %+v, want delivered and owed", f)
	}
	if typ, ttl := rdb.Type(ctx, l.key.Msg("o")).Val(), rdb.PTTL(ctx, l.key.Msg("o")).Val(); typ != "string" || ttl <= 59*time.Minute {
		t.Fatalf("the hash story after its fold: a %s living %v, want a string living its hour", typ, ttl)
	}
	got, ok, err := l.ledger.Story(ctx, "o")
	if err != nil || !ok || got.Status != "delivered" || !got.Owed || got.Class != "otp" || len(got.ProviderIDs) != 1 {
		t.Fatalf("Story of the rewritten hash: %+v %v %v", got, ok, err)
	}
}

// TestAStoryIsFoundByItsProviderIDsAndByItsID: a story is kept at its
// first part's provider id's key, each later part's key leading to it, so
// that a receipt of any part folds into it; the readers by id (Story, the
// sweep, GiveBackResend through the fold) find it through the id's
// record, or, for a send whose record here is another id's (a resend's)
// or is not here (an overflow's), through the id's key, which only such a
// send writes.
func TestAStoryIsFoundByItsProviderIDsAndByItsID(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, testConfig(t))
	ctx := context.Background()
	settle := func(id, claim, record string, s ledger.Story) {
		t.Helper()
		d, err := l.Admit(ctx, OTP, 1, time.Second, Claim{ID: claim, Token: "t-" + claim})
		if err != nil || !d.Allowed || !d.Claimed {
			t.Fatalf("Admit(%s): %+v %v", claim, d, err)
		}
		s.ID = id
		if err := l.Settle(ctx, d, record, ResultOK, s); err != nil {
			t.Fatalf("Settle(%s): %v", id, err)
		}
	}
	payload := []byte("again")
	soon := time.Now().Add(time.Minute)

	// Three parts, the record naming the second (a provider that refused
	// the first part with an id).
	settle("multi", "multi", ledger.SentRecord("m2"), ledger.Story{Class: "otp", ProviderIDs: []string{"m1", "m2", "m3"}, Resend: payload, ResendUntil: soon})
	if n := rdb.Exists(ctx, l.key.Msg("multi")).Val(); n != 0 {
		t.Fatal("a send whose record names a part wrote the id's key")
	}
	if v := rdb.Get(ctx, ledger.PIDKey(l.key, "m3")).Val(); v != "3\tm1" {
		t.Fatalf("the third part's key holds %q, want the way to the first's", v)
	}
	if f := fold(t, l, report("m3", "delivered", "")); !f.Known || f.ID != "multi" || f.Status != "buffered" || f.Owed {
		t.Fatalf("the third part delivered: %+v", f)
	}
	f := fold(t, l, report("m2", "failed", "30007"))
	if f.ID != "multi" || f.Status != "failed" || !f.Owed || string(f.Resend) != "again" || f.ProviderID != "m1" {
		t.Fatalf("the second part failed: %+v, want the message failed, owed, its resend", f)
	}
	got, ok, err := l.ledger.Story(ctx, "multi")
	if err != nil || !ok || got.Record != ledger.RecordSent || strings.Join(got.ProviderIDs, " ") != "m1 m2 m3" ||
		got.Parts["m2"] != "failed" || got.Parts["m3"] != "delivered" || !got.Owed || !got.Resent {
		t.Fatalf("Story(multi): %+v %v %v", got, ok, err)
	}
	if ok, err := l.ledger.GiveBackResend(ctx, f); !ok || err != nil {
		t.Fatalf("GiveBackResend(multi): %v %v, want given back to its story", ok, err)
	}
	if got := owedIDs(t, l, 0); got["multi"].Status != "failed" || string(got["multi"].Resend) != "again" {
		t.Fatalf("the sweep: %+v, want multi's event with its resend, found through its record", got["multi"])
	}

	// A resend: its record is its own id's, its story the message's.
	settle("again", ledger.ResendID("again"), ledger.SentRecord("r1"), ledger.Story{Class: "otp", ProviderIDs: []string{"r1"}})
	if v := rdb.Get(ctx, l.key.Msg("again")).Val(); v != "1\tr1" {
		t.Fatalf("the resend's id key holds %q, want the way to its story", v)
	}
	if f := fold(t, l, report("r1", "undelivered", "30003")); f.ID != "again" || !f.Owed {
		t.Fatalf("the resend's receipt: %+v", f)
	}
	if got, ok, err := l.ledger.Story(ctx, "again"); err != nil || !ok || got.Record != "" || got.Status != "undelivered" || !got.Owed {
		t.Fatalf("Story(again): %+v %v %v, want its story without a record", got, ok, err)
	}
	if got, ok, err := l.ledger.Story(ctx, ledger.ResendID("again")); err != nil || !ok || got.Record != ledger.RecordSent || got.Status != "" {
		t.Fatalf("Story of the resend's record: %+v %v %v, want its record, no story of its own", got, ok, err)
	}
	if got := owedIDs(t, l, 0); got["again"].Status != "undelivered" {
		t.Fatalf("the sweep: %+v, want the resend's event, found through the id's key", got)
	}

	// A record of the id naming a provider id of another account (an
	// overflow's home is another): the id's key still finds the story.
	if err := rdb.Set(ctx, l.claims.Key("again"), ledger.SentRecord("elsewhere"), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := l.ledger.Story(ctx, "again"); err != nil || !ok || got.Status != "undelivered" || got.Record != ledger.RecordSent {
		t.Fatalf("Story(again) beside a record naming another account's send: %+v %v %v", got, ok, err)
	}
}
