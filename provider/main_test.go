package provider

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// t0 is the fixed instant the tests count from: a whole second, so fixed
// windows with Phase 0 start on it.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// fakeClock is a clock the test moves by hand. It is safe for concurrent
// use because handlers may read it on server goroutines.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time // guarded by mu
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}
