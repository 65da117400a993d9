package ledger_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"

	"github.com/redis/go-redis/v9"
)

// The ledger's tests keep stories as a send does, through a Limiter's
// Settle (finish.lua), and fold receipts into them through its Ledger.

// testConfig is the contract's defaults on an account no other test uses.
// Its Redis timeout is generous: on a loaded CI machine a 100ms call is not
// an outage, and tests that want timeouts set their own.
func testConfig(t *testing.T) admission.Config {
	return admission.Config{Account: redistest.UniqueAccount(t), TargetRPS: 90, MarketingRPS: 70, Burst: 5, MaxSenders: 23, RedisTimeout: 2 * time.Second}
}

func newLimiter(t *testing.T, rdb redis.Scripter, cfg admission.Config, opts ...admission.Option) *admission.Limiter {
	t.Helper()
	l, err := admission.New(rdb, cfg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

// key is l's account's key names.
func key(l *admission.Limiter) keys.Account { return keys.For(l.Account()) }

// pidKey is the key of provider id pid on l's account.
func pidKey(l *admission.Limiter, pid string) string { return ledger.PIDKey(key(l), pid) }

// report is a receipt of pid saying status.
func report(pid, status, code string) ledger.Report {
	return ledger.Report{ProviderID: pid, Status: status, Final: ledger.DeliveryStatuses[status], Delivered: status == "delivered", ErrorCode: code}
}

// keepStory settles a send of id on l, without a claim, keeping s: the
// story as an overflow account keeps it.
func keepStory(t *testing.T, l *admission.Limiter, id string, s ledger.Story) {
	t.Helper()
	if s.ID == "" {
		s.ID = id
	}
	if err := l.Settle(context.Background(), admission.Decision{}, ledger.SentRecord(s.ProviderIDs[0]), admission.ResultNone, s); err != nil {
		t.Fatalf("Settle(%s): %v", id, err)
	}
}

func fold(t *testing.T, l *admission.Limiter, r ledger.Report) ledger.Fold {
	t.Helper()
	f, err := l.Ledger().Receipt(context.Background(), r)
	if err != nil {
		t.Fatalf("Receipt(%+v): %v", r, err)
	}
	return f
}

func owedIDs(t *testing.T, l *admission.Limiter, age time.Duration) map[string]ledger.Fold {
	t.Helper()
	folds, err := l.Ledger().Owed(context.Background(), age, 100)
	if err != nil {
		t.Fatalf("Owed: %v", err)
	}
	m := map[string]ledger.Fold{}
	for _, f := range folds {
		m[f.ID] = f
	}
	return m
}

func isFailure(status string) bool { return ledger.DeliveryStatuses[status] && status != "delivered" }

// t0 is a fixed instant for fake clocks.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// fakeClock is a process clock a test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time // guarded by mu
}

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
