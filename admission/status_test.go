package admission

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/redistest"
)

// TestStatusReadsWhatTheSendsAndProcessesLeft: the call after a send
// counts the units the provider accepted by class and second (a refusal
// or a given-back claim counts nothing), and Status reads them with the
// processes an older process's heartbeat left on the account's keys (a
// rolling deploy), the override, the learned rate and the penalty,
// writing nothing.
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
	// As heartbeat.lua wrote it before the registry.
	tag := "{sms:" + cfg.Account + "}"
	if err := rdb.ZAdd(ctx, tag+":processes", redis.Z{Score: float64(time.Now().UnixMicro()), Member: "pod-a"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, tag+":process-states", "pod-a", "ok pod-a dev").Err(); err != nil {
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

// TestRefreshHealthTellsAProcessTheHealth: a process that sends nothing
// on the account learns the health another process's failures wrote from
// its next RefreshHealth, and again once the key says otherwise; a value
// of another shape reads as healthy, as the admission script reads it.
func TestRefreshHealthTellsAProcessTheHealth(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := testConfig(t)
	sender, idle := newLimiter(t, rdb, cfg), newLimiter(t, rdb, cfg)
	ctx := context.Background()
	if idle.HealthAge() < time.Hour {
		t.Fatalf("health age %v before any reply, want the longest", idle.HealthAge())
	}
	beat := func() Health {
		t.Helper()
		if err := idle.RefreshHealth(ctx); err != nil {
			t.Fatal(err)
		}
		if idle.HealthAge() > time.Minute {
			t.Fatalf("health age %v just after a refresh", idle.HealthAge())
		}
		return idle.Health()
	}
	if h := beat(); h != Healthy {
		t.Fatalf("no health key: %v, want healthy", h)
	}
	for i := range DefaultHealthFailures {
		d, err := sender.Admit(ctx, OTP, 1, time.Second, Claim{})
		if err != nil || !d.Allowed {
			t.Fatalf("send %d: %+v, %v", i, d, err)
		}
		if err := sender.Settle(ctx, d, "", ResultFailed); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if h := beat(); h != Failing {
				t.Fatalf("after one failure: %v, want failing", h)
			}
		}
	}
	if sender.Health() != Degraded {
		t.Fatalf("the sender after %d failures: %v, want degraded", DefaultHealthFailures, sender.Health())
	}
	if h := idle.Health(); h != Failing {
		t.Fatalf("before its next beat: %v, want what its last beat said (failing)", h)
	}
	if h := beat(); h != Degraded {
		t.Fatalf("after its next beat: %v, want degraded", h)
	}
	key := "{sms:" + cfg.Account + "}:health"
	if err := rdb.Set(ctx, key, "d 5 0 1 x 2 3", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if h := beat(); h != Healthy {
		t.Fatalf("a value of another shape: %v, want healthy", h)
	}
	if err := rdb.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if h := beat(); h != Healthy {
		t.Fatalf("the key gone: %v, want healthy", h)
	}
}

// TestStatusReadsTheHealth: Status reads the health key as the admission script does:
// a degraded account with when it became so, the run that made it so and
// its probes that succeeded; a run of failures counted on a healthy one;
// healthy without the key or with a value of another shape.
func TestStatusReadsTheHealth(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := testConfig(t)
	l := newLimiter(t, rdb, cfg)
	ctx := context.Background()
	key := "{sms:" + cfg.Account + "}:health"
	since := time.UnixMicro(1_790_000_000_123_456)
	for _, tt := range []struct {
		value string // "" deletes the key
		want  HealthStatus
	}{
		{"", HealthStatus{}},
		{"h 2 1 1790000000000000 0 0 0", HealthStatus{Health: Failing, Failures: 2}},
		{"d 5 0 1789999999000000 2 1790000001000000 1790000000123456", HealthStatus{Health: Degraded, Since: since, Failures: 5, ProbesOK: 2}},
		{"d 5 0 1 2 3", HealthStatus{}},
		{"x 5 0 1 2 3 4", HealthStatus{}},
		{"d 5 0 1 -2 3 4", HealthStatus{}},
	} {
		if tt.value == "" {
			rdb.Del(ctx, key)
		} else if err := rdb.Set(ctx, key, tt.value, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		st, err := l.Status(ctx, time.Now(), 1)
		if err != nil {
			t.Fatal(err)
		}
		if st.Health != tt.want {
			t.Errorf("%q: %+v, want %+v", tt.value, st.Health, tt.want)
		}
	}
}
