package status

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/luapart"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
)

// limiterOn is a limiter of an account of the test's own on rdb, as
// admission's tests configure one, with mutate changing its config.
func limiterOn(t *testing.T, rdb redis.Scripter, mutate func(*admission.Config)) *admission.Limiter {
	t.Helper()
	cfg := admission.Config{Account: redistest.UniqueAccount(t), TargetRPS: 90, MarketingRPS: 70, Burst: 5, MaxSenders: 23, RedisTimeout: 2 * time.Second}
	if mutate != nil {
		mutate(&cfg)
	}
	l, err := admission.New(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// readAccount is Redis.readAccount on rdb.
func readAccount(t *testing.T, rdb redis.Scripter, l *admission.Limiter, from time.Time, seconds int) (accountState, error) {
	t.Helper()
	return Redis{Client: rdb}.readAccount(context.Background(), l, from, seconds)
}

// TestStatusReadsWhatTheSendsAndProcessesLeft: the call after a send
// counts the units the provider accepted by class and second (a refusal
// or a given-back claim counts nothing), and readAccount reads them with the
// processes an older process's heartbeat left on the account's keys (a
// rolling deploy), the override, the learned rate and the penalty,
// writing nothing.
func TestStatusReadsWhatTheSendsAndProcessesLeft(t *testing.T) {
	rdb := redistest.Client(t)
	l := limiterOn(t, rdb, func(c *admission.Config) { c.MaxInFlight = 10 })
	ctx := context.Background()
	settle := func(class admission.Class, cost int, id, record string) {
		t.Helper()
		d, err := l.Admit(ctx, class, cost, time.Second, admission.Claim{ID: id, Token: id + "-t"})
		if err != nil || !d.Allowed {
			t.Fatalf("%+v, %v", d, err)
		}
		if err := l.Settle(ctx, d, record, admission.ResultNone, ledger.Story{}); err != nil {
			t.Fatal(err)
		}
	}
	settle(admission.OTP, 1, "o1", ledger.SentRecord("SM1"))
	settle(admission.Marketing, 3, "m1", ledger.RecordSent)
	settle(admission.Marketing, 1, "m2", ledger.RefusedRecord("provider: 400"))
	settle(admission.Marketing, 1, "m3", "")
	// As heartbeat.lua wrote it before the registry.
	key := keys.For(l.Account())
	if err := rdb.ZAdd(ctx, key.LegacyProcesses(), redis.Z{Score: float64(time.Now().UnixMicro()), Member: "pod-a"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, key.LegacyProcessStates(), "pod-a", "ok pod-a dev").Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Override(ctx, 50, 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := l.ReportThrottled(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	before, _ := rdb.Keys(ctx, key.Tag()+"*").Result()
	st, err := readAccount(t, rdb, l, time.Now(), 60)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := rdb.Keys(ctx, key.Tag()+"*").Result()
	if len(after) != len(before) {
		t.Fatalf("the read wrote keys: %v, then %v", before, after)
	}
	sum := func(c admission.Class) (n int) {
		for _, x := range st.Sent[c] {
			n += x
		}
		return n
	}
	if len(st.Sent[admission.OTP]) != 60 || sum(admission.OTP) != 1 || sum(admission.Marketing) != 3 {
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

// TestStatusReadsTheHealth: readAccount reads the health key as the admission script does:
// a degraded account with when it became so, the run that made it so and
// its probes that succeeded; a run of failures counted on a healthy one;
// healthy without the key or with a value of another shape.
func TestStatusReadsTheHealth(t *testing.T) {
	rdb := redistest.Client(t)
	l := limiterOn(t, rdb, nil)
	ctx := context.Background()
	key := keys.For(l.Account()).Health()
	since := time.UnixMicro(1_790_000_000_123_456)
	for _, tt := range []struct {
		value string // "" deletes the key
		want  healthState
	}{
		{"", healthState{}},
		{"h 2 1 1790000000000000 0 0 0", healthState{Health: admission.Failing, Failures: 2}},
		{"d 5 0 1789999999000000 2 1790000001000000 1790000000123456", healthState{Health: admission.Degraded, Since: since, Failures: 5, ProbesOK: 2}},
		{"d 5 0 1 2 3", healthState{}},
		{"x 5 0 1 2 3 4", healthState{}},
		{"d 5 0 1 -2 3 4", healthState{}},
	} {
		if tt.value == "" {
			rdb.Del(ctx, key)
		} else if err := rdb.Set(ctx, key, tt.value, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		st, err := readAccount(t, rdb, l, time.Now(), 1)
		if err != nil {
			t.Fatal(err)
		}
		if st.Health != tt.want {
			t.Errorf("%q: %+v, want %+v", tt.value, st.Health, tt.want)
		}
	}
}

// TestStatusReportsTheRatesInRedisItIgnores: readAccount reads an
// override's rate and a learned rate as the admission script does: one below
// admission.MinRPS, or one it
// cannot read, is not in force and is handed back as ignored, instead of
// showing a rate of 1e-14/s in force or failing the whole read.
func TestStatusReportsTheRatesInRedisItIgnores(t *testing.T) {
	rdb := redistest.Client(t)
	ctx := context.Background()
	l := limiterOn(t, rdb, nil)
	override, learned := keys.For(l.Account()).RateOverride(), keys.For(l.Account()).Learned()
	t.Cleanup(func() { rdb.Del(ctx, override, learned) })
	for _, tt := range []struct {
		override, learned string
		target, marketing float64
		ignored           string
		learnedRPS        float64
		learnedIgnored    string
	}{
		{"1e-14 0.5", "1e-14 0 0 0 P 0 0", 0, 0.5, "1e-14 0.5", 0, "1e-14 0 0 0 P 0 0"},
		{"50 nan", "garbage", 50, 0, "50 nan", 0, "garbage"},
		{"0.5", "-3 0 0 0 P 0 0", 0, 0, "0.5", 0, "-3 0 0 0 P 0 0"},
		{"50 20", "40.000 0 0 0 P 0 0", 50, 20, "", 40, ""},
		{"50 20", "40.000 0 0 0 P 1e300 0", 50, 20, "", 0, "40.000 0 0 0 P 1e300 0"},
		{"50 20", "40.000 -1 0 0 s 0 0", 50, 20, "", 0, "40.000 -1 0 0 s 0 0"},
	} {
		if err := rdb.MSet(ctx, override, tt.override, learned, tt.learned).Err(); err != nil {
			t.Fatal(err)
		}
		st, err := readAccount(t, rdb, l, time.Now(), 1)
		if err != nil {
			t.Fatalf("override %q, learned %q: %v", tt.override, tt.learned, err)
		}
		o := st.Override
		if o == nil || o.TargetRPS != tt.target || o.MarketingRPS != tt.marketing || o.Ignored != tt.ignored {
			t.Errorf("override %q: %+v, want target %v, marketing %v, ignored %q", tt.override, o, tt.target, tt.marketing, tt.ignored)
		}
		if st.Learned.RPS != tt.learnedRPS || st.LearnedIgnored != tt.learnedIgnored {
			t.Errorf("learned %q: %+v, ignored %q; want %v/s, ignored %q", tt.learned, st.Learned, st.LearnedIgnored, tt.learnedRPS, tt.learnedIgnored)
		}
	}
}

// TestStatusReadsNumbersWithTheAdmissionScriptsHelper: status.lua reads a
// count with the same helper as admission's scripts, the same text (a
// script cannot call another's): the shared num (internal/luapart) that
// the admission script's prelude marks too.
func TestStatusReadsNumbersWithTheAdmissionScriptsHelper(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "admission", "admit", "prelude.lua"))
	if err != nil {
		t.Fatal(err)
	}
	prelude := luapart.Shared(string(b))
	i := strings.Index(prelude, "local function num(v)\n")
	j := strings.Index(prelude[max(i, 0):], "\nend\n")
	if i < 0 || j < 0 {
		t.Fatal("admit/prelude.lua defines no num(v)")
	}
	if num := prelude[i : i+j+5]; !strings.Contains(statusLua, num) {
		t.Errorf("status.lua does not define the prelude's num:\n%s", num)
	}
}
