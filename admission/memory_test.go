package admission

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
)

// privateClient is a client of a redis-server of the test's own, whose
// configuration the test may change.
func privateClient(t *testing.T) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: redistest.Private(t), MaxRetries: -1,
		DisableIdentity: true, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func configSet(t *testing.T, rdb *redis.Client, param, value string) {
	t.Helper()
	if err := rdb.ConfigSet(context.Background(), param, value).Err(); err != nil {
		t.Fatalf("CONFIG SET %s %s: %v", param, value, err)
	}
}

// snapshot is every key of rdb and its DUMP.
func snapshot(t *testing.T, rdb *redis.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, k := range keys {
		v, err := rdb.Dump(ctx, k).Result()
		if err != nil {
			t.Fatalf("DUMP %s: %v", k, err)
		}
		m[k] = v
	}
	return m
}

// TestAFullRedisAdmitsNothingAndSettlesWhatItAdmitted: on a Redis at its
// maxmemory under noeviction, the admission script is refused whole (OOM) and writes
// nothing, with in-flight leases on (its first write, the trim of expired
// leases, does not grow memory and would let the rest through): the
// Limiter decides in its fallback, marketing with a claim waits for Redis
// (nacked, not sent) and OTP goes at the process's share without a claim.
// finish.lua still records the send Redis admitted before it filled and
// ends its lease. Once Redis has room, the marketing message is admitted
// with its claim.
func TestAFullRedisAdmitsNothingAndSettlesWhatItAdmitted(t *testing.T) {
	ctx := context.Background()
	rdb := privateClient(t)
	clock := &fakeClock{t: t0}
	cfg := testConfig(t)
	cfg.MaxInFlight = 10
	l := newLimiter(t, rdb, cfg, WithClock(clock))

	before, err := l.Admit(ctx, OTP, 1, time.Second, Claim{ID: "before", Token: "tok-before"})
	if err != nil || !before.Allowed || before.Source != SourceRedis || !before.Claimed || before.Lease == "" {
		t.Fatalf("admission before Redis is full: %+v, %v; want allowed by Redis with a claim and a lease", before, err)
	}

	configSet(t, rdb, "maxmemory-policy", NoEviction)
	configSet(t, rdb, "maxmemory", "1")
	held := snapshot(t, rdb)

	d, err := l.Admit(ctx, Marketing, 1, 50*time.Millisecond, Claim{ID: "mkt", Token: "tok-mkt"})
	if err != nil || d.Allowed || d.Source != SourceFallback || d.Reason != ReasonNoRecord {
		t.Fatalf("marketing on a full Redis: %+v, %v; want denied by the fallback, %s (nacked until Redis has room)", d, err, ReasonNoRecord)
	}
	// OTP: the fallback's first slot is within one interval of its start.
	var otp Decision
	for range 3 {
		otp, err = l.tryAcquire(ctx, OTP, 1, ticketNone, 0, 0, Claim{ID: "otp", Token: "tok-otp"})
		if err != nil || otp.Allowed {
			break
		}
		clock.Add(otp.RetryAfter)
	}
	if err != nil || !otp.Allowed || otp.Source != SourceFallback || otp.Claimed {
		t.Fatalf("OTP on a full Redis: %+v, %v; want allowed by the fallback, without a claim", otp, err)
	}
	if got := snapshot(t, rdb); !maps.Equal(got, held) {
		t.Errorf("a full Redis changed: %d keys before, %d after; the scripts must write nothing", len(held), len(got))
	}

	clock.Add(cfg.withDefaults().RedisRetryAfter)
	if err := l.Settle(ctx, before, ledger.SentRecord("SM1"), ResultNone, ledger.Story{}); err != nil {
		t.Fatalf("settling the send admitted before Redis filled: %v", err)
	}
	if v := get(t, rdb, l.Claims().Key("before")); v != "sent:SM1" {
		t.Errorf("record of the send admitted before Redis filled = %q, want sent:SM1", v)
	}
	if _, err := rdb.ZScore(ctx, l.base.Leases, before.Lease).Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("lease of the settled send: %v, want ended", err)
	}

	configSet(t, rdb, "maxmemory", "0")
	clock.Add(cfg.withDefaults().RedisRetryAfter)
	d, err = l.Admit(ctx, Marketing, 1, time.Second, Claim{ID: "mkt", Token: "tok-mkt-2"})
	if err != nil || !d.Allowed || d.Source != SourceRedis || !d.Claimed {
		t.Fatalf("marketing once Redis has room: %+v, %v; want allowed by Redis with its claim", d, err)
	}
}

// refuseConfig is a go-redis hook that refuses CONFIG as Memorystore does.
type refuseConfig struct{}

func (refuseConfig) DialHook(next redis.DialHook) redis.DialHook { return next }
func (refuseConfig) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (refuseConfig) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.EqualFold(cmd.Name(), "config") {
			cmd.SetErr(errors.New("ERR unknown command 'CONFIG'"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

// TestMaxmemoryPolicyIsReadWhereConfigIsRefused: the policy is CONFIG
// GET's, or INFO memory's where CONFIG is refused; every policy but
// noeviction evicts; of a Redis Cluster, an evicting master's.
func TestMaxmemoryPolicyIsReadWhereConfigIsRefused(t *testing.T) {
	ctx := context.Background()
	rdb := privateClient(t)
	refused := redis.NewClient(rdb.Options())
	refused.AddHook(refuseConfig{})
	t.Cleanup(func() { refused.Close() })
	for _, policy := range []string{"volatile-lru", "allkeys-lfu", NoEviction} {
		configSet(t, rdb, "maxmemory-policy", policy)
		for name, c := range map[string]*redis.Client{"config": rdb, "info": refused} {
			got, err := MaxmemoryPolicy(ctx, c)
			if err != nil || got != policy {
				t.Errorf("%s: MaxmemoryPolicy = %q, %v; want %q", name, got, err, policy)
			}
		}
		if Evicts(policy) != (policy != NoEviction) {
			t.Errorf("Evicts(%q) = %v", policy, Evicts(policy))
		}
	}

	cluster := redistest.ClusterClient(t)
	if got, err := MaxmemoryPolicy(ctx, cluster); err != nil || got != NoEviction {
		t.Fatalf("cluster: MaxmemoryPolicy = %q, %v; want %q", got, err, NoEviction)
	}
	one, err := cluster.MasterForKey(ctx, "{sms:policy}")
	if err != nil {
		t.Fatal(err)
	}
	if err := one.ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { one.ConfigSet(context.Background(), "maxmemory-policy", NoEviction) })
	if got, err := MaxmemoryPolicy(ctx, cluster); err != nil || got != "volatile-lru" {
		t.Errorf("cluster with one master at volatile-lru: MaxmemoryPolicy = %q, %v", got, err)
	}
}
