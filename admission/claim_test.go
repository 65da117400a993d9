package admission

import (
	"context"
	"errors"
	"testing"
	"time"

	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
)

func TestClaims(t *testing.T) {
	rdb := redistest.Client(t)
	ctx := context.Background()
	c := NewClaims(rdb, redistest.UniqueAccount(t), time.Minute, time.Hour, 0, nil)
	other := NewClaims(redistest.Client(t), "", 0, 0, 0, nil)
	other.key = c.key // a second process on the same account

	step := func(name string, got ledger.Record, err error, want ledger.ClaimState) {
		t.Helper()
		if err != nil || got.State != want {
			t.Fatalf("%s: %v, %v; want %v", name, got, err, want)
		}
	}
	s, err := c.Claim(ctx, "login-1", "a", 0)
	step("first claim", s, err, ledger.Claimed)
	s, err = c.Claim(ctx, "login-1", "a", 0)
	step("same attempt again", s, err, ledger.Claimed)
	s, err = other.Claim(ctx, "login-1", "b", 0)
	step("another attempt while held", s, err, ledger.Held)

	if err := other.Release(ctx, "login-1", "b"); err != nil {
		t.Fatal(err)
	}
	s, err = other.Claim(ctx, "login-1", "b", 0)
	step("a release by a non-holder is a no-op", s, err, ledger.Held)

	if err := c.Release(ctx, "login-1", "a"); err != nil {
		t.Fatal(err)
	}
	s, err = other.Claim(ctx, "login-1", "b", 0)
	step("after the holder released", s, err, ledger.Claimed)

	if err := other.Finish(ctx, "login-1", ledger.RecordSent); err != nil {
		t.Fatal(err)
	}
	s, err = c.Claim(ctx, "login-1", "c", 0)
	step("after sent", s, err, ledger.Finished)
	if ttl := rdb.PTTL(ctx, c.Key("login-1")).Val(); ttl < 59*time.Minute {
		t.Fatalf("sent record PTTL = %v, want the record lifetime (1h)", ttl)
	}

	// A refusal is kept, with its reason, until its dead letter is out.
	s, err = c.Claim(ctx, "promo-9", "d", 0)
	step("promo claim", s, err, ledger.Claimed)
	const reason = "status 400: code 21211: invalid 'To' number"
	if err := c.Refuse(ctx, "promo-9", reason); err != nil {
		t.Fatal(err)
	}
	s, err = other.Claim(ctx, "promo-9", "e", 0)
	step("after refused, dead letter pending", s, err, ledger.Refused)
	if s.RejectReason != reason {
		t.Fatalf("refused record reason = %q, want %q", s.RejectReason, reason)
	}
	if ttl := rdb.PTTL(ctx, c.Key("promo-9")).Val(); ttl < 59*time.Minute {
		t.Fatalf("refused record PTTL = %v, want the record lifetime (1h)", ttl)
	}
	if err := other.Finish(ctx, "promo-9", ledger.RecordRejected); err != nil {
		t.Fatal(err)
	}
	s, err = c.Claim(ctx, "promo-9", "f", 0)
	step("after dead-lettered", s, err, ledger.Finished)
}

func TestClaimExpiresWhenItsHolderDies(t *testing.T) {
	rdb := redistest.Client(t)
	ctx := context.Background()
	c := NewClaims(rdb, redistest.UniqueAccount(t), 0, 0, 0, nil)
	if _, err := c.Claim(ctx, "x", "dead-holder", 0); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, c.Key("x")).Val(); ttl <= 0 || ttl > DefaultClaimTTL {
		t.Fatalf("claim PTTL = %v, want within the claim lifetime %v", ttl, DefaultClaimTTL)
	}
}

// TestForgetClearsOnlyARefusal: a replay may clear a refusal's record, and
// never a send's or a live claim; its dry run clears nothing.
func TestForgetClearsOnlyARefusal(t *testing.T) {
	rdb := redistest.Client(t)
	c := NewClaims(rdb, redistest.UniqueAccount(t), 0, 0, 0, nil)
	ctx := context.Background()
	if err := c.Finish(ctx, "sent-1", ledger.SentRecord("SM1")); err != nil {
		t.Fatal(err)
	}
	if err := c.Refuse(ctx, "refused-1", "provider: 400 bad number"); err != nil {
		t.Fatal(err)
	}
	if err := c.Refuse(ctx, "rejected-1", "provider: 400 bad number"); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(ctx, "rejected-1", ledger.RecordRejected); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Claim(ctx, "held-1", "tok", time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		id, was string
		cleared bool
	}{
		{"sent-1", "sent:SM1", false},
		{"refused-1", "refused:provider: 400 bad number", true},
		{"rejected-1", "rejected", true},
		{"held-1", "held", false},
		{"none-1", "", false},
	} {
		// A dry run reads the same and clears nothing.
		if was, err := c.Recorded(ctx, tt.id); err != nil || was.String() != tt.was {
			t.Errorf("Recorded(%s) = %q, %v; want %q", tt.id, was, err, tt.was)
		}
		was, cleared, err := c.Forget(ctx, tt.id)
		if err != nil || was.String() != tt.was || cleared != tt.cleared {
			t.Errorf("Forget(%s) = %q, %v, %v; want %q, %v", tt.id, was, cleared, err, tt.was, tt.cleared)
		}
	}
	for id, wantClaimed := range map[string]bool{"sent-1": false, "refused-1": true, "rejected-1": true} {
		rec, err := c.Claim(ctx, id, "again", time.Minute)
		if err != nil || (rec.State == ledger.Claimed) != wantClaimed {
			t.Errorf("Claim(%s) after Forget = %+v, %v; claimable %v", id, rec, err, wantClaimed)
		}
	}
}

// TestALateRejectedNeverOverwritesAReplay: the dispatcher writes
// RecordRejected once a refusal's dead letter is out, and by then an
// operator may have replayed that dead letter: Forget cleared the refusal,
// and the replay claimed the id and maybe sent it. RecordRejected is
// written over the refusal only; a replay's send, its claim, or no record
// at all (the replay on its way) are left as they are.
func TestALateRejectedNeverOverwritesAReplay(t *testing.T) {
	rdb := redistest.Client(t)
	ctx := context.Background()
	c := NewClaims(rdb, redistest.UniqueAccount(t), time.Minute, time.Hour, 0, nil)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name   string
		replay func(id string) // after Refuse, before the late Finish
		want   string
	}{
		{"no replay", func(string) {}, ledger.RecordRejected},
		{"a refusal counted twice", func(id string) { must(rdb.Set(ctx, c.Key(id), "2#refused:x", time.Hour).Err()) }, "2#" + ledger.RecordRejected},
		{"replayed and sent", func(id string) {
			_, _, err := c.Forget(ctx, id)
			must(err)
			_, err = c.Claim(ctx, id, "replay", time.Minute)
			must(err)
			must(c.Finish(ctx, id, ledger.SentRecord("SM2")))
		}, "sent:SM2"},
		{"replayed, its send under way", func(id string) {
			_, _, err := c.Forget(ctx, id)
			must(err)
			_, err = c.Claim(ctx, id, "replay", time.Minute)
			must(err)
		}, "claim:replay"},
		{"replayed, not pulled yet", func(id string) {
			_, _, err := c.Forget(ctx, id)
			must(err)
		}, "<absent>"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id := "promo-" + tt.name
			must(c.Refuse(ctx, id, "provider: 400 bad number"))
			tt.replay(id)
			must(c.Finish(ctx, id, ledger.RecordRejected))
			if got := get(t, rdb, c.Key(id)); got != tt.want {
				t.Fatalf("record after the late RecordRejected: %q, want %q", got, tt.want)
			}
		})
	}
}

// TestARecordReadsAsWritten: every record the scripts answer parses into
// a Record whose String is that record again.
func TestARecordReadsAsWritten(t *testing.T) {
	for _, v := range []string{"held", ledger.RecordSent, ledger.SentRecord("SM1"), ledger.RecordRejected, "refused:provider: 400 bad number"} {
		rec, err := ledger.ParseRecord(v)
		if err != nil || rec.String() != v {
			t.Errorf("ledger.ParseRecord(%q) = %+v, %v; reads back as %q", v, rec, err, rec.String())
		}
	}
	if rec, err := ledger.ParseRecord("archived"); !errors.Is(err, ErrBadReply) {
		t.Errorf("ledger.ParseRecord(archived) = %+v, %v; want ErrBadReply", rec, err)
	}
}
