package admission

import (
	"context"
	"testing"
	"time"

	"smsdispatcher/internal/redistest"
)

// TestStatusReadsWhatTheSendsAndProcessesLeft: the call after a send
// counts the units the provider accepted by class and second (a refusal
// or a given-back claim counts nothing), heartbeats list the processes,
// and Status reads them with the override, the learned rate and the
// penalty, writing nothing.
func TestStatusReadsWhatTheSendsAndProcessesLeft(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := testConfig(t)
	cfg.MaxInFlight = 10
	l := newLimiter(t, rdb, cfg)
	ctx := context.Background()
	settle := func(class Class, cost int, id, record string) {
		t.Helper()
		d, err := l.Admit(ctx, class, cost, time.Second, Claim{ID: id, Token: id + "-t"})
		if err != nil || !d.Allowed {
			t.Fatalf("%+v, %v", d, err)
		}
		if err := l.Settle(ctx, d, record, ResultNone); err != nil {
			t.Fatal(err)
		}
	}
	settle(OTP, 1, "o1", SentRecord("SM1"))
	settle(Marketing, 3, "m1", RecordSent)
	settle(Marketing, 1, "m2", RefusedRecord("provider: 400"))
	settle(Marketing, 1, "m3", "")
	if err := l.Heartbeat(ctx, "pod-a", "ok pod-a dev"); err != nil {
		t.Fatal(err)
	}
	if err := l.Override(ctx, 50, 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := l.ReportThrottled(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	before, _ := rdb.Keys(ctx, "{sms:"+cfg.Account+"}*").Result()
	st, err := l.Status(ctx, time.Now(), 60)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := rdb.Keys(ctx, "{sms:"+cfg.Account+"}*").Result()
	if len(after) != len(before) {
		t.Fatalf("Status wrote keys: %v, then %v", before, after)
	}
	sum := func(c Class) (n int) {
		for _, x := range st.Sent[c] {
			n += x
		}
		return n
	}
	if len(st.Sent[OTP]) != 60 || sum(OTP) != 1 || sum(Marketing) != 3 {
		t.Fatalf("sent %v; want 1 OTP and 3 marketing units in the last 60 s", st.Sent)
	}
	if len(st.Processes) != 1 || st.Processes[0].ID != "pod-a" || st.Processes[0].State != "ok pod-a dev" {
		t.Fatalf("processes %+v", st.Processes)
	}
	if st.Override == nil || st.Override.TargetRPS != 50 || st.Override.Left <= 0 {
		t.Fatalf("override %+v", st.Override)
	}
	if st.PenaltyWhy != "throttled" || st.PenaltyLeft <= 4*time.Second {
		t.Fatalf("penalty %q %v", st.PenaltyWhy, st.PenaltyLeft)
	}
	if st.InFlight != 0 {
		t.Fatalf("in flight %d after every send settled", st.InFlight)
	}
}
