package admission

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
)

// Fixed instants for pure-logic tests.
var (
	t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
)

// fakeClock is a process clock a test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time // guarded by mu
}

var _ Clock = (*fakeClock)(nil)

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// skewedClock is the system clock off by a fixed amount.
type skewedClock time.Duration

func (s skewedClock) Now() time.Time { return time.Now().Add(time.Duration(s)) }

// countingHandler is a slog handler that counts records.
type countingHandler struct {
	slog.Handler
	n atomic.Int64
}

func newCountingLogger() (*slog.Logger, *countingHandler) {
	h := &countingHandler{Handler: slog.NewTextHandler(io.Discard, nil)}
	return slog.New(h), h
}

func (h *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	h.n.Add(1)
	return nil
}

// testConfig is the contract's defaults on an account no other test uses.
// Its Redis timeout is generous: on a loaded CI machine a 100ms call is not
// an outage, and tests that want timeouts set their own.
func testConfig(t *testing.T) Config {
	return Config{Account: redistest.UniqueAccount(t), TargetRPS: 90, MarketingRPS: 70, Burst: 5, MaxSenders: 23, RedisTimeout: 2 * time.Second}
}

// slowConfig is testConfig at one message a second, BURST 5: a test's
// quick calls all fall in one slot however loaded the machine is.
func slowConfig(t *testing.T) Config {
	c := testConfig(t)
	c.TargetRPS, c.MarketingRPS = 1, 1
	return c
}

func newLimiter(t *testing.T, rdb redis.Scripter, cfg Config, opts ...Option) *Limiter {
	t.Helper()
	l, err := New(rdb, cfg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

func try(t *testing.T, l *Limiter, class Class) Decision {
	t.Helper()
	d, err := l.tryOnce(context.Background(), class)
	if err != nil {
		t.Fatalf("TryAcquire(%v): %v", class, err)
	}
	return d
}

// redisNow returns Redis's clock in microseconds.
func redisNow(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	tm, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return tm.UnixMicro()
}

// plantTAT sets a TAT key to redisNow+offset, living ttl.
func plantTAT(t *testing.T, rdb *redis.Client, key string, offset, ttl time.Duration) {
	t.Helper()
	v := redisNow(t, rdb) + offset.Microseconds()
	if err := rdb.Set(context.Background(), key, strconv.FormatInt(v, 10), ttl).Err(); err != nil {
		t.Fatalf("SET %s: %v", key, err)
	}
}

func get(t *testing.T, rdb *redis.Client, key string) string {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	if err == redis.Nil {
		return "<absent>"
	}
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

// call is the admission script's call of class c as New built it.
func (l *Limiter) call(c Class) admitCall { return l.classes[c].admit }

// decideClass is decideAt for a class of the default two.
func (f *fallback) decideClass(now time.Time, c Class) Decision {
	if c == Marketing {
		return f.decideAt(now, []int{0}, true)
	}
	return f.decideAt(now, nil, false)
}

// bothClasses are the default classes, in priority order.
var bothClasses = [2]Class{OTP, Marketing}

// recordedLimiters returns n Limiters of cfg, each on a Redis client of its
// own (a process), and the recorders counting each one's script calls.
func recordedLimiters(t *testing.T, n int, cfg Config) ([]*Limiter, []*redistest.Recorder) {
	var pods []*Limiter
	var recs []*redistest.Recorder
	for range n {
		rdb := redistest.Client(t)
		rec := &redistest.Recorder{}
		rdb.AddHook(rec)
		recs = append(recs, rec)
		pods = append(pods, newLimiter(t, rdb, cfg))
	}
	return pods, recs
}

// fullAdmitLua returns the admission script with every part in.
func fullAdmitLua(t testing.TB) string {
	t.Helper()
	src, ok := admitSource(admitFull.Hash())
	if !ok {
		t.Fatal("the full admission script is not composed")
	}
	return src
}

// finalStatuses are the final delivery statuses, as the fold knows them.
var finalStatuses = map[string]bool{"delivered": true, "undelivered": true, "failed": true, "expired": true, "rejected": true}

// report is a receipt of pid saying status.
func report(pid, status, code string) ledger.Report {
	return ledger.Report{ProviderID: pid, Status: status, Final: finalStatuses[status], Delivered: status == "delivered", ErrorCode: code}
}

// keepStory settles a send of id on l, without a claim, keeping s: the
// story as an overflow account keeps it.
func keepStory(t *testing.T, l *Limiter, id string, s ledger.Story) {
	t.Helper()
	if err := l.Settle(context.Background(), Decision{id: id}, ledger.SentRecord(s.ProviderIDs[0]), ResultNone, s); err != nil {
		t.Fatalf("Settle(%s): %v", id, err)
	}
}

func fold(t *testing.T, l *Limiter, r ledger.Report) ledger.Fold {
	t.Helper()
	f, err := l.ledger.Receipt(context.Background(), r)
	if err != nil {
		t.Fatalf("Receipt(%+v): %v", r, err)
	}
	return f
}

func owedIDs(t *testing.T, l *Limiter, age time.Duration) map[string]ledger.Fold {
	t.Helper()
	folds, err := l.ledger.Owed(context.Background(), age, 100)
	if err != nil {
		t.Fatalf("Owed: %v", err)
	}
	m := map[string]ledger.Fold{}
	for _, f := range folds {
		m[f.ID] = f
	}
	return m
}

// acquire is Admit of one unit without a claim.
func (l *Limiter) acquire(ctx context.Context, class Class, maxWait time.Duration) (Decision, error) {
	return l.Admit(ctx, class, 1, maxWait, Claim{})
}

// acquireN is Admit of cost units without a claim.
func (l *Limiter) acquireN(ctx context.Context, class Class, cost int, maxWait time.Duration) (Decision, error) {
	return l.Admit(ctx, class, cost, maxWait, Claim{})
}

// tryOnce decides at once whether a message of class may be sent now, with
// at most one Redis round trip and no wake ticket.
func (l *Limiter) tryOnce(ctx context.Context, class Class) (Decision, error) {
	return l.tryAcquire(ctx, class, 1, ticketNone, 0, 0, Claim{})
}

// tatKeys returns the Redis keys of the account: global TAT, the last
// class's ceiling TAT (marketing's with the default classes), penalty,
// then the other classes' ceiling TATs in priority order (a class without
// a ceiling names a key never written).
func (l *Limiter) tatKeys() []string {
	last := l.classes[l.order[len(l.order)-1]]
	k := []string{l.base.GlobalTAT, last.admit.CeilingTAT, l.base.Penalty}
	for _, c := range l.order[:len(l.order)-1] {
		k = append(k, l.classes[c].admit.CeilingTAT)
	}
	return k
}

// call returns c's KEYS and ARGV in v's layout, whatever c's values.
func (v *admitVariant) call(c admitCall) ([]string, []any) { return v.send(&c, c.argv()) }
