package oldlimiters

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/redistest"
)

// Fixed instants: t0 is the start of a Unix second.
var (
	t0 = time.Unix(1_800_000_000, 0)
	t1 = t0.Add(999 * time.Millisecond) // same second as t0
	t2 = t0.Add(time.Second)            // the next second
)

// allowAter is what the Redis-backed limiters have in common.
type allowAter interface {
	AllowAt(ctx context.Context, now time.Time) (bool, error)
	Key(now time.Time) string
}

var (
	_ allowAter = (*GetIncr)(nil)
	_ allowAter = (*AtomicIncr)(nil)
)

// newLimiter builds the named limiter on rdb with a key prefix no other
// test uses.
func newLimiter(t *testing.T, name string, rdb *redis.Client, limit int) allowAter {
	t.Helper()
	prefix := "sms:" + redistest.UniqueAccount(t) + ":"
	switch name {
	case "v2":
		return NewGetIncr(rdb, prefix, limit)
	case "planA":
		return NewAtomicIncr(rdb, prefix, limit)
	}
	t.Fatalf("unknown limiter %q", name)
	return nil
}

func TestStaticSplitCountsPerSecondOfItsOwnClock(t *testing.T) {
	var s StaticSplit // zero value: PerPod
	for i := range PerPod {
		if !s.AllowAt(t0) {
			t.Fatalf("message %d of the second denied; want %d allowed", i+1, PerPod)
		}
	}
	if s.AllowAt(t1) {
		t.Fatalf("message %d of the second allowed; want denied", PerPod+1)
	}
	if !s.AllowAt(t2) {
		t.Fatal("first message of the next second denied")
	}

	// Two processes know nothing of each other: together they allow twice
	// the per-process limit in the same second.
	a, b := StaticSplit{Limit: 3}, StaticSplit{Limit: 3}
	n := 0
	for range 10 {
		if a.AllowAt(t0) {
			n++
		}
		if b.AllowAt(t0) {
			n++
		}
	}
	if n != 6 {
		t.Fatalf("two processes with Limit 3 allowed %d in one second, want 6", n)
	}
}

func TestLimitersCountInTheWindowOfTheCallersClock(t *testing.T) {
	rdb := redistest.Client(t)
	ctx := context.Background()
	for _, name := range []string{"v2", "planA"} {
		t.Run(name, func(t *testing.T) {
			l := newLimiter(t, name, rdb, 3)
			for i := range 3 {
				if ok, err := l.AllowAt(ctx, t0); !ok || err != nil {
					t.Fatalf("ask %d = %v, %v; want allowed", i+1, ok, err)
				}
			}
			if ok, err := l.AllowAt(ctx, t1); ok || err != nil {
				t.Fatalf("ask 4 in the same second = %v, %v; want denied", ok, err)
			}
			// A process whose clock reads one second later counts in a
			// fresh key: the window belongs to the clock, not to Redis.
			if ok, err := l.AllowAt(ctx, t2); !ok || err != nil {
				t.Fatalf("ask in the next second = %v, %v; want allowed", ok, err)
			}
			ttl, err := rdb.TTL(ctx, l.Key(t0)).Result()
			if err != nil {
				t.Fatalf("ttl: %v", err)
			}
			if ttl <= 0 || ttl > KeyTTL {
				t.Fatalf("TTL of %s = %v, want in (0, %v]", l.Key(t0), ttl, KeyTTL)
			}
		})
	}
}

func TestLimitersFailOpenWhenRedisIsDown(t *testing.T) {
	p := redistest.NewProxy(t, redistest.Addr(t))
	rdb := redistest.ClientOf(t, p.Addr())
	p.SetMode(redistest.Refuse)
	ctx := context.Background()
	for _, name := range []string{"v2", "planA"} {
		t.Run(name, func(t *testing.T) {
			l := newLimiter(t, name, rdb, 1)
			for i := range 3 { // far past the limit of 1
				ok, err := l.AllowAt(ctx, t0)
				if !ok || err == nil {
					t.Fatalf("ask %d with Redis down = %v, %v; want allowed with an error", i+1, ok, err)
				}
			}
		})
	}
}

// barrierClient holds every caller of one command until n callers have had
// their answer from Redis, so that n read-then-write sequences interleave
// the worst way: all reads before any write.
type barrierClient struct {
	*redis.Client
	cmd  string // "get" or "incr"
	wait sync.WaitGroup
}

func newBarrierClient(rdb *redis.Client, cmd string, n int) *barrierClient {
	b := &barrierClient{Client: rdb, cmd: cmd}
	b.wait.Add(n)
	return b
}

func (b *barrierClient) Get(ctx context.Context, key string) *redis.StringCmd {
	c := b.Client.Get(ctx, key)
	if b.cmd == "get" {
		b.wait.Done()
		b.wait.Wait()
	}
	return c
}

func (b *barrierClient) Incr(ctx context.Context, key string) *redis.IntCmd {
	c := b.Client.Incr(ctx, key)
	if b.cmd == "incr" {
		b.wait.Done()
		b.wait.Wait()
	}
	return c
}

// TestOneSlotLeftConcurrentAsks leaves one slot in a window and lets n
// processes ask for it at once, with the worst interleaving forced: v2's
// GET-then-INCR admits all n, plan A's INCR exactly one.
func TestOneSlotLeftConcurrentAsks(t *testing.T) {
	const limit, n = 10, 8
	rdb := redistest.Client(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name, barrierOn string
		want            int
	}{
		{"v2", "get", n},
		{"planA", "incr", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := "sms:" + redistest.UniqueAccount(t) + ":"
			bc := newBarrierClient(rdb, tc.barrierOn, n)
			var l allowAter
			if tc.name == "v2" {
				l = NewGetIncr(bc, prefix, limit)
			} else {
				l = NewAtomicIncr(bc, prefix, limit)
			}
			if err := rdb.Set(ctx, l.Key(t0), limit-1, KeyTTL).Err(); err != nil {
				t.Fatalf("set: %v", err)
			}
			var allowed atomic.Int64
			errs := make(chan error, n)
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() {
					ok, err := l.AllowAt(ctx, t0)
					if ok {
						allowed.Add(1)
					}
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("AllowAt: %v", err)
				}
			}
			if got := int(allowed.Load()); got != tc.want {
				t.Fatalf("%d concurrent asks for the last slot: %d allowed, want %d", n, got, tc.want)
			}
		})
	}
}

// TestConcurrentAsksInOneWindow lets many goroutines, each with its own
// client (as pods would), ask in one window until each is denied. Plan A
// admits exactly the limit, however the asks interleave; v2 admits at least
// the limit and, on a real Redis under load, usually more.
func TestConcurrentAsksInOneWindow(t *testing.T) {
	const limit, workers = 100, 32
	addr := redistest.Addr(t)
	ctx := context.Background()
	clients := make([]*redis.Client, workers)
	for i := range clients {
		clients[i] = redistest.ClientOf(t, addr)
	}
	prefix := "sms:" + redistest.UniqueAccount(t) + ":"
	for _, name := range []string{"v2", "planA"} {
		t.Run(name, func(t *testing.T) {
			var allowed atomic.Int64
			errs := make(chan error, workers)
			var wg sync.WaitGroup
			for i := range workers {
				var l allowAter
				if name == "v2" {
					l = NewGetIncr(clients[i], prefix+name+":", limit)
				} else {
					l = NewAtomicIncr(clients[i], prefix+name+":", limit)
				}
				wg.Go(func() {
					for {
						ok, err := l.AllowAt(ctx, t0)
						if err != nil {
							errs <- err
							return
						}
						if !ok {
							return
						}
						allowed.Add(1)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("AllowAt: %v", err)
			}
			got := int(allowed.Load())
			t.Logf("%s: %d goroutines admitted %d in one window of limit %d", name, workers, got, limit)
			switch {
			case name == "planA" && got != limit:
				t.Fatalf("plan A admitted %d in one window, want exactly %d", got, limit)
			case name == "v2" && got < limit:
				t.Fatalf("v2 admitted %d in one window, want at least %d", got, limit)
			}
		})
	}
}
