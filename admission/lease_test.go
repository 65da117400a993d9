package admission

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
)

func leaseConfig(t *testing.T, limit int, ttl time.Duration) Config {
	c := testConfig(t)
	c.TargetRPS, c.MarketingRPS, c.Burst = 10000, 10000, 100 // only the in-flight limit binds
	c.MaxInFlight, c.LeaseTTL = limit, ttl
	c.MaxSenders = 4 // so that a fallback decision keeps the bound too: 4 × limit/4
	return c
}

// TestNeverMoreThanTheLimitInFlightAcrossProcesses: 4 processes, 40 senders,
// a limit of 4, each "send" 2ms long while holding its lease.
func TestNeverMoreThanTheLimitInFlightAcrossProcesses(t *testing.T) {
	cfg := leaseConfig(t, 4, 5*time.Second)
	var limiters []*Limiter
	for range 4 {
		limiters = append(limiters, newLimiter(t, redistest.Client(t), cfg))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var inFlight, most, done atomic.Int64
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			l := limiters[i%4]
			for ctx.Err() == nil {
				d, err := l.acquire(ctx, bothClasses[i%2], 500*time.Millisecond)
				if err != nil || !d.Allowed {
					continue
				}
				n := inFlight.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(2 * time.Millisecond) // the send
				inFlight.Add(-1)
				done.Add(1)
				if err := l.Settle(context.Background(), d, "", ResultNone, ledger.Story{}); err != nil {
					t.Errorf("Settle: %v", err)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d sends, at most %d in flight", done.Load(), most.Load())
	if most.Load() > 4 {
		t.Fatalf("%d sends in flight at once across 4 processes, want ≤ 4", most.Load())
	}
	// Released leases free their slot at once; without release only 4
	// sends could complete within the 5s lease lifetime.
	if done.Load() < 30 {
		t.Fatalf("only %d sends completed in 1s with 3 in flight at a time", done.Load())
	}
}

// TestADeadHoldersLeaseComesBackAfterItExpires: a process that died mid-send
// never releases; its lease is reclaimed on the way in once expired.
func TestADeadHoldersLeaseComesBackAfterItExpires(t *testing.T) {
	cfg := leaseConfig(t, 2, 300*time.Millisecond)
	dead := newLimiter(t, redistest.Client(t), cfg)
	for range 2 {
		if d := try(t, dead, OTP); !d.Allowed || d.Lease == "" {
			t.Fatalf("lease: %+v, want allowed with a lease", d)
		}
	}
	alive := newLimiter(t, redistest.Client(t), cfg)
	if d := try(t, alive, OTP); d.Allowed || d.Reason != ReasonInFlight {
		t.Fatalf("with both leases held: %+v, want denied by the in-flight limit", d)
	}
	// Within the lease set's own expiry (lease TTL + 1s): only the reclaim on
	// the way in can free the slots this soon.
	d, err := alive.acquire(context.Background(), OTP, 900*time.Millisecond)
	if err != nil || !d.Allowed {
		t.Fatalf("after the dead holder's leases expire: %+v, %v; want allowed", d, err)
	}
}

func TestLeaseMembersAreUniqueInTheSameMicrosecond(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, leaseConfig(t, 100, time.Minute))
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { try(t, l, Marketing) })
	}
	wg.Wait()
	if n := rdb.ZCard(context.Background(), l.base.Leases).Val(); n != 20 {
		t.Fatalf("%d leases held after 20 admissions, want 20 distinct members", n)
	}
}

// TestALaterLeaseNeverShortensTheLeasesKeysLife: a lease of an hour, then
// one of a second (another process's LeaseTTL, or a slot taken at once
// after one booked ahead): the leases key must still outlive the first,
// or it would vanish with a live lease in it and the in-flight limit
// would forget a send on its way.
func TestALaterLeaseNeverShortensTheLeasesKeysLife(t *testing.T) {
	long := newLimiter(t, redistest.Client(t), leaseConfig(t, 4, time.Hour))
	cfg := long.cfg
	cfg.LeaseTTL = time.Second
	short := newLimiter(t, redistest.Client(t), cfg)
	rdb := redistest.Client(t)
	key := long.call(OTP).Leases
	t.Cleanup(func() { rdb.Del(context.Background(), key) })
	for _, l := range []*Limiter{long, short} {
		if d := try(t, l, OTP); !d.Allowed {
			t.Fatalf("not admitted: %+v", d)
		}
	}
	// An hour less a generous margin: the calls take milliseconds.
	if ttl := rdb.PTTL(context.Background(), key).Val(); ttl < 50*time.Minute {
		t.Fatalf("the leases key lives %v after a lease of an hour, then one of a second", ttl)
	}
	if n := rdb.ZCard(context.Background(), key).Val(); n != 2 {
		t.Fatalf("%d leases in the key, want 2", n)
	}
}
